import Foundation
import Glibc
import Testing
import TestSupport

/// The tests' `posix_spawn` child (TestSupport/ChildProcess.swift), which replaces Foundation's
/// `Process` (its `run()` can crash the test process: Testing.md, "After the fix").
@Suite("ChildProcess: the tests' posix_spawn child", .timeLimit(.minutes(1)))
struct ChildProcessTests {
    @Test("output through a Pipe, the exit status, the working directory, and no descriptor of the parent's but 0, 1 and 2 in the child")
    func pipeStatusDirectoryDescriptors() throws {
        // A descriptor without close-on-exec, which a plain posix_spawn would hand to the child.
        let inherited = open("/dev/null", O_RDONLY)
        try #require(inherited > 2)
        defer { close(inherited) }
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        child.arguments = ["-c", "pwd; ls /proc/$$/fd; exit 7"]
        child.currentDirectoryURL = URL(fileURLWithPath: "/tmp")
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.nullDevice
        child.standardInput = FileHandle.nullDevice
        try child.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        #expect(child.terminationStatus == 7)
        #expect(!child.isRunning)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "/tmp")
        #expect(Set(lines.dropFirst()) == ["0", "1", "2"], "the child held \(lines.dropFirst())")
    }

    @Test("terminate() ends a running child; its status is the signal's number")
    func terminate() throws {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["30"]
        try child.run()
        #expect(child.isRunning)
        child.terminate()
        child.waitUntilExit()
        #expect(child.terminationStatus == SIGTERM)
    }
}
