import TestSupport
import Dispatch
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

/// Several `authflow` processes on one file store: `authflow logout` in one process while
/// `authflow token` in another is refreshing (the logout waits for the refresh's store lock, then
/// revokes and deletes what the refresh stored: it stays final), and concurrent refreshes of one
/// rotating refresh token (one request).
///
/// The interleaving is forced, not timed: the loopback token endpoint holds the refresh's answer
/// until the logout process is seen waiting for the lock (it has `<store>/app.lock` open, per
/// `/proc/<pid>/fd`) or has exited (which only a logout that did not wait can do).
@Suite("Store races between authflow processes", .serialized, .timeLimit(.minutes(2)))
struct LogoutRaceCLITests {
    @Test("logout while another process's refresh is in flight: the refresh's tokens are revoked and deleted; the logout stays final")
    func logoutDuringRefresh() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try HeldTokenServer()
        defer { server.stop() }
        try directory.writeCatalog([catalogEntry(id: "app", base: server.baseURL, device: false)])
        try await storeExpiredEntry(in: directory)
        let base = ["--config", directory.config.path, "--store", directory.store.path]
        let environment = cleanEnvironment(directory)

        let refresher = try RunningBinary(base + ["token", "app"], environment: environment)
        #expect(await server.waitForRefresh(), "the refresh never reached the token endpoint")
        let logout = try RunningBinary(base + ["logout", "app"], environment: environment)
        let lock = directory.store.appendingPathComponent("app.lock").path
        let deadline = ContinuousClock.now + .seconds(30)
        var waiting = false
        while ContinuousClock.now < deadline {
            let descriptors = Self.openFiles(of: logout.pid)
            if descriptors == nil { break }                   // exited without waiting: the old race
            if descriptors?.contains(lock) == true {
                waiting = true
                break
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(waiting, "the logout did not wait for the store lock")
        server.releaseRefresh()

        let refreshed = await refresher.wait()
        let loggedOut = await logout.wait()
        #expect(refreshed == 0, "\(refresher.stderr)")
        #expect(refresher.stdout == "at-2\n")
        #expect(loggedOut == 0, "\(logout.stderr)")
        #expect(logout.stdout.contains("Revoked the tokens of app"))
        // The logout revoked what the refresh stored (rotated), and the copy it had read at start.
        #expect(server.revokedTokens == ["rt-2", "rt-1", "at-2", "at-1"])
        #expect(directory.storedKeys.isEmpty)
        let status = try await runBinary(base + ["status", "app"], environment: environment)
        #expect(status.status == 77)
        #expect(status.stdout.contains("not logged in"))
        #expect(server.tokenRequests == 1)
    }

    @Test("6 processes find one expired login: exactly one refresh request, all print the rotated token (RFC 9700 §4.14.2)")
    func concurrentRefreshes() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try HeldTokenServer(holding: false)
        defer { server.stop() }
        try directory.writeCatalog([catalogEntry(id: "app", base: server.baseURL, device: false)])
        try await storeExpiredEntry(in: directory)
        let base = ["--config", directory.config.path, "--store", directory.store.path]
        let environment = cleanEnvironment(directory)

        let runs = try (0..<6).map { _ in try RunningBinary(base + ["token", "app"], environment: environment) }
        for run in runs {
            let status = await run.wait()
            #expect(status == 0, "\(run.stderr)")
            #expect(run.stdout == "at-2\n")
        }
        // A second refresh would have reused rt-1 and been refused (invalid_grant) by this server.
        #expect(server.tokenRequests == 1)
        #expect(directory.storedKeys == ["app"])
    }

    /// Stores at-1 / rt-1 for "app", expired an hour ago by the wall clock, with the library itself.
    private func storeExpiredEntry(in directory: TemporaryDirectory) async throws {
        let mock = MockProvider()
        mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        mock.script(.token, [.token(access: "at-1", expiresIn: 3600, refresh: "rt-1", scope: "read")])
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "app", clientID: "client-app")], store: try FileSecretStore(directory: directory.store),
            transport: mock.transport(), options: AuthFlow.Options(clock: TestClock(), now: { Date().addingTimeInterval(-7200) }))
        try await flow.authorizeWithDeviceCode(provider: "app")
        #expect(directory.storedKeys == ["app"])
    }

    /// The targets of `/proc/<pid>/fd`, or nil once the process is gone.
    static func openFiles(of pid: Int32) -> [String]? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
    }
}

/// A loopback authorization server that rotates refresh tokens and refuses reuse (RFC 9700
/// §4.14.2): `rt-1` once gives at-2 / rt-2, again `invalid_grant`. With `holding`, the first
/// token request is answered only after ``releaseRefresh()``. Revocations are answered at once
/// and their tokens recorded. A thread per connection, so a held answer blocks nothing else.
final class HeldTokenServer: Sendable {
    private struct Seen {
        var tokenRequests = 0
        var revoked: [String] = []
    }
    /// What the connection threads share with the test.
    private final class Shared: Sendable {
        let seen = Mutex(Seen())
        let release = DispatchSemaphore(value: 0)
    }
    private let shared = Shared()
    private let server: LoopbackServer

    init(holding: Bool = true) throws {
        let shared = self.shared
        server = try LoopbackServer { connection in
            let (path, form) = HeldTokenServer.read(connection)
            var status = "200 OK"
            var body = "{}"
            if path == "/token" {
                let first = shared.seen.withLock { seen -> Bool in
                    seen.tokenRequests += 1
                    return seen.tokenRequests == 1
                }
                if first, holding { _ = shared.release.wait(timeout: .now() + 60) }  // bounded: the test releases it well before
                if first, form["refresh_token"] == "rt-1" {
                    body = #"{"access_token":"at-2","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-2","scope":"read"}"#
                } else {
                    status = "400 Bad Request"
                    body = #"{"error":"invalid_grant"}"#
                }
            } else if path == "/revoke" {
                shared.seen.withLock { $0.revoked.append(form["token"] ?? "") }
            }
            connection.write("HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        }
    }

    var baseURL: String { "http://127.0.0.1:\(server.port)" }
    var tokenRequests: Int { shared.seen.withLock { $0.tokenRequests } }
    var revokedTokens: [String] { shared.seen.withLock { $0.revoked } }

    /// Waits (at most 30 s) until the refresh request arrived.
    func waitForRefresh() async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if tokenRequests > 0 { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    func releaseRefresh() { shared.release.signal() }

    func stop() {
        shared.release.signal()
        server.stop()
    }

    /// The request's path and form body (first value of each field wins).
    static func read(_ connection: LoopbackServer.Connection) -> (String, [String: String]) {
        let head = connection.readHead()
        let requestLine = head.split(separator: "\r\n").first.map(String.init) ?? ""
        let path = requestLine.split(separator: " ").dropFirst().first.map { String($0.split(separator: "?")[0]) } ?? "/"
        var length = 0
        for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        var body = [UInt8]()
        var byte = [UInt8](repeating: 0, count: 4096)
        while body.count < min(length, 1 << 16) {
            let count = recv(connection.fd, &byte, min(byte.count, length - body.count), 0)
            guard count > 0 else { break }
            body += byte[0..<count]
        }
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if parts.count == 2, form[parts[0]] == nil { form[parts[0]] = parts[1] }
        }
        return (path, form)
    }
}
