import Foundation
import Glibc
import Synchronization
import TestSupport

/// A program of the system (git, kubectl, bash, groff, zbarimg, python3) run to its end with
/// exactly the environment given, stdin from a string, and a deadline after which it is killed.
struct Tool {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The first of `names` (paths, or names looked up on `PATH`) that is an executable file.
    static func find(_ names: String...) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for name in names {
            if name.contains("/") {
                if FileManager.default.isExecutableFile(atPath: name) { return name }
                continue
            }
            for directory in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
                return "\(directory)/\(name)"
            }
        }
        return nil
    }

    /// Runs `program arguments`; the run is killed after `timeout` (status -1 then). It waits with
    /// `Task.sleep`, never blocking a thread of the pool (the in-process test servers need them).
    static func run(
        _ program: String, _ arguments: [String], environment: [String: String], stdin: String = "", directory: URL? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> Run {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program.contains("/") ? program : (find(program) ?? program))
        process.arguments = arguments
        process.environment = environment
        if let directory { process.currentDirectoryURL = directory }
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = Collected()
        let err = Collected()
        for (fd, sink) in [(output.fileHandleForReading.fileDescriptor, out), (errors.fileHandleForReading.fileDescriptor, err)] {
            DispatchQueue.global().async {
                var chunk = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = read(fd, &chunk, chunk.count)
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    sink.bytes.withLock { $0 += chunk[0..<count] }
                }
                sink.open.withLock { $0 = false }
            }
        }
        signal(SIGPIPE, SIG_IGN)  // a program that exits without reading its input must not end the test process
        if !stdin.isEmpty { try? input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8)) }
        try? input.fileHandleForWriting.close()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        var status: Int32 = -1
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        } else {
            process.waitUntilExit()
            status = process.terminationStatus
        }
        // Bounded: a grandchild that keeps a pipe open past the deadline is not waited for.
        let drained = ContinuousClock.now + .seconds(30)
        while out.open.withLock({ $0 }) || err.open.withLock({ $0 }), ContinuousClock.now < drained {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return Run(status: status, stdout: out.text, stderr: err.text)
    }

    /// Runs the built `authflow` (see `Binary`) like ``run(_:_:environment:stdin:directory:timeout:)``.
    static func authflow(_ arguments: [String], environment: [String: String], stdin: String = "") async throws -> Run {
        guard let url = Binary.url else { throw POSIXError(.ENOENT) }
        return try await run(url.path, arguments, environment: environment, stdin: stdin)
    }
}

/// Bytes read from a pipe on another thread.
private final class Collected: Sendable {
    let bytes = Mutex([UInt8]())
    let open = Mutex(true)
    var text: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }
}

/// A program started in the background that prints its port as its first line (the loopback
/// git server, the stand-in API server); killed by ``stop()``.
final class BackgroundServer {
    private let process: ChildProcess
    /// The port it printed.
    let port: Int

    init(_ program: String, _ arguments: [String], environment: [String: String]) async throws {
        process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // The first line is the port, read on another thread; a server that dies first ends the read with nothing.
        let first = Collected()
        let fd = output.fileHandleForReading.fileDescriptor
        DispatchQueue.global().async {
            var byte: UInt8 = 0
            while first.bytes.withLock({ $0.count }) < 16 {
                let count = read(fd, &byte, 1)
                if count < 0, errno == EINTR { continue }
                guard count == 1, byte != UInt8(ascii: "\n") else { break }
                first.bytes.withLock { $0.append(byte) }
            }
            first.open.withLock { $0 = false }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while first.open.withLock({ $0 }), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        guard let port = Int(first.text) else {
            kill(process.processIdentifier, SIGKILL)
            throw POSIXError(.ECONNREFUSED)
        }
        self.port = port
    }

    /// SIGKILL: a child started from a thread of the pool may inherit a mask that blocks SIGTERM.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
