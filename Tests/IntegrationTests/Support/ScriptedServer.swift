import Foundation
import Glibc
import Testing

/// A loopback server of its own directory under `Server/` (credentials, exchange, dpop, authgent, par), driven by
/// that directory's start.sh and stop.sh: the suite traits of those servers use it to run their suite
/// once against one server on a free port.
struct ScriptedServer: Sendable {
    /// The directory under `Server/`; also names the server in error messages.
    let directory: String
    /// The prefix of the run's log directory under the temporary directory (`<prefix>-run-PID-XXXXXXXX`).
    let logPrefix: String
    /// The environment variable start.sh and stop.sh read the port from.
    let portVariable: String
    /// More environment for both scripts.
    var environment: [String: String] = [:]

    /// Runs start.sh on a free port (setup.sh first, from start.sh), then `body` with that port, then
    /// stop.sh, whether `body` returned or threw. When start.sh fails, runs stop.sh and throws
    /// ``ServerLaunchError`` naming the run's fixture.log (kept for diagnosis; removed after a clean run).
    func run(_ body: (_ port: Int) async throws -> Void) async throws {
        let scripts = ServerLauncher.serverDirectory.appendingPathComponent(directory, isDirectory: true)
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("\(logPrefix)-run-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: log, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let port = try ServerLauncher.freePort()
        var environment = self.environment
        environment[portVariable] = String(port)
        let status = try await ServerLauncher.run("/bin/bash", [scripts.appendingPathComponent("start.sh").path],
                                                  environment: environment, log: log, timeout: .seconds(180))
        func stop() async {
            _ = try? await ServerLauncher.run("/bin/bash", [scripts.appendingPathComponent("stop.sh").path],
                                              environment: environment, log: log, timeout: .seconds(30))
        }
        guard status == 0 else {
            await stop()
            throw ServerLaunchError(description: "\(directory) start.sh exited with \(status); see \(log.path)/fixture.log")
        }
        do {
            try await body(port)
        } catch {
            await stop()
            throw error
        }
        await stop()
        try? FileManager.default.removeItem(at: log)
    }
}

/// The suite trait of a ``ScriptedServer``: starts it once for the suite (not once per test) and runs
/// the suite inside `scope`, which publishes the server to the tests (its type's `current`).
struct ScriptedServerTrait: SuiteTrait, TestScoping {
    let server: ScriptedServer
    let scope: @Sendable (_ port: Int, _ suite: @Sendable () async throws -> Void) async throws -> Void

    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        try await server.run { port in try await scope(port, function) }
    }
}
