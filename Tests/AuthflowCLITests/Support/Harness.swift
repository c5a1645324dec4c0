import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport

/// An in-process `authflow` against a `MockProvider`, a test clock and a temporary directory.
struct Harness {
    let mock = MockProvider()
    let directory: TemporaryDirectory
    let clock: TestClock

    init(clockStart: Date = Date()) throws {
        directory = try TemporaryDirectory()
        clock = TestClock(start: clockStart)
    }

    var base: String { mock.baseURL.absoluteString }

    func catalog(_ entries: String...) throws { try directory.writeCatalog(entries) }

    var environment: [String: String] {
        ["HOME": directory.url.appendingPathComponent("home").path, "AUTHFLOW_CONFIG": directory.config.path,
         "AUTHFLOW_STORE": directory.store.path]
    }

    /// The services of an in-process run: the mock, the test clock, `standardInput` as stdin, and
    /// `replaceProcess` for `exec`, which by default refuses (ENOSYS): nothing in-process may replace the test runner.
    func services(transport: (any HTTPTransport)? = nil, clock: (any Clock<Duration>)? = nil,
                  openURL: @escaping @Sendable (URL) -> Void = { _ in }, standardInput: String = "",
                  replaceProcess: @escaping @Sendable (ProcessImage) -> Int32 = { _ in ENOSYS }) -> Authflow.Services {
        Authflow.Services(transport: transport ?? mock.transport(), clock: clock ?? self.clock, now: { [clock = self.clock] in clock.date },
                          openURL: openURL, lockTimeout: .seconds(5), standardInput: { standardInput }, replaceProcess: replaceProcess)
    }

    /// Runs `authflow arguments`; returns the exit status and both streams.
    func run(
        _ arguments: [String], environment extra: [String: String] = [:], terminal: Bool = false,
        services: Authflow.Services? = nil
    ) async -> (status: ExitCode, stdout: String, stderr: String) {
        let (output, stdout, stderr) = Output.capture(stderrIsTerminal: terminal)
        let status = await Authflow.run(arguments: arguments, output: output, environment: environment.merging(extra) { _, new in new },
                                        services: services ?? self.services())
        return (status, stdout.text, stderr.text)
    }

    /// Logs `id` in with the device grant (scripted: one pending, then tokens).
    func deviceLogin(_ id: String, access: String, refresh: String?, expiresIn: Int = 3600) async -> ExitCode {
        mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
        mock.script(.token, [.oauthError("authorization_pending"), .token(access: access, expiresIn: expiresIn, refresh: refresh, scope: "read")])
        return await run(["login", id, "--device"]).status
    }
}

/// A transport that never reaches anything.
struct UnreachableTransport: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        throw OAuthError(.transport, message: "no response from \(request.url.host ?? "?")")
    }
}
