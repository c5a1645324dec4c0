public import Foundation
import Glibc
import Synchronization

/// The built `authflow` executable, found beside the test bundle.
///
/// SwiftPM puts test bundles and executables in the same products directory
/// (`<scratch>/debug/`), and the test target depends on `authflow`, so `swift test` builds it
/// first. The directory comes from `/proc/self/exe` (the running test bundle), then
/// `Bundle.main`, then `<package>/.build/debug`; `AUTHFLOW_BINARY` overrides all of them.
public enum Binary {
    /// The executable, or nil when none was found.
    public static let url: URL? = {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["AUTHFLOW_BINARY"], !path.isEmpty { return URL(fileURLWithPath: path) }
        var directories: [URL] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        directories.append(Bundle.main.bundleURL)
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        directories.append(packageRoot.appendingPathComponent(".build/debug"))
        for directory in directories {
            let candidate = directory.appendingPathComponent("authflow")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }()
}

/// One run of the binary: its output is read on threads as it comes, so tests can wait for a line.
public final class RunningBinary: Sendable {
    private let process: ChildProcess
    private let out = Mutex([UInt8]())
    private let err = Mutex([UInt8]())
    private let done = Mutex(0)

    /// Starts `authflow arguments` with exactly `environment` (nothing inherited) and stdin closed.
    public init(_ arguments: [String], environment: [String: String]) throws {
        guard let url = Binary.url else { throw POSIXError(.ENOENT) }
        process = ChildProcess()
        process.executableURL = url
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        let outPipe = Pipe()
        let errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        try process.run()
        for (pipe, isStdout) in [(outPipe, true), (errPipe, false)] {
            let fd = pipe.fileHandleForReading.fileDescriptor
            let thread = Thread { [self] in
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = read(fd, &chunk, chunk.count)
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    self.append(chunk[0..<count], to: isStdout)
                }
                self.done.withLock { $0 += 1 }
            }
            thread.start()
        }
    }

    private func append(_ bytes: ArraySlice<UInt8>, to stdout: Bool) {
        if stdout { out.withLock { $0 += bytes } } else { err.withLock { $0 += bytes } }
    }

    /// Everything read from stdout so far.
    public var stdout: String { String(decoding: out.withLock { $0 }, as: UTF8.self) }
    /// Everything read from stderr so far.
    public var stderr: String { String(decoding: err.withLock { $0 }, as: UTF8.self) }
    /// The process id.
    public var pid: Int32 { process.processIdentifier }

    /// Waits until stdout has a line containing `text`; nil after `timeout`.
    public func waitForLine(containing text: String, timeout: Duration = .seconds(60)) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = stdout.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Sends SIGINT, as Ctrl-C does.
    public func interrupt() { kill(process.processIdentifier, SIGINT) }

    /// Waits for the exit (killing the process after `timeout`) and for its output to be read.
    public func wait(timeout: Duration = .seconds(60)) async -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        process.waitUntilExit()
        let drained = ContinuousClock.now + .seconds(30)
        while done.withLock({ $0 }) < 2, ContinuousClock.now < drained { try? await Task.sleep(for: .milliseconds(5)) }
        return process.terminationStatus
    }
}

/// Runs the binary to completion.
public func runBinary(_ arguments: [String], environment: [String: String], timeout: Duration = .seconds(60)) async throws
    -> (status: Int32, stdout: String, stderr: String)
{
    let running = try RunningBinary(arguments, environment: environment)
    let status = await running.wait(timeout: timeout)
    return (status, running.stdout, running.stderr)
}
