import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import TestSupport
import Testing

/// `LoopbackReceiver` (RFC 8252 §7.3) with scripted HTTP requests over real loopback sockets.
@Suite("Loopback receiver", .timeLimit(.minutes(1)))
struct LoopbackReceiverTests {
    /// Starts `receive` in a task; the handler records the URL and returns it (or throws `failure`).
    private func start(_ receiver: LoopbackReceiver, timeout: Duration = .seconds(60), failure: OAuthError? = nil)
        -> Task<Result<URL, OAuthError>, Never>
    {
        Task {
            await capture { () async throws(OAuthError) -> URL in
                try await receiver.receive(timeout: timeout) { url async throws(OAuthError) -> URL in
                    if let failure { throw failure }
                    return url
                }
            }
        }
    }

    private func capture<T>(_ body: () async throws(OAuthError) -> T) async -> Result<T, OAuthError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    private func url(_ receiver: LoopbackReceiver, _ pathAndQuery: String) -> URL {
        URL(string: "http://127.0.0.1:\(receiver.redirectURI.port!)\(pathAndQuery)")!
    }

    @Test("a non-loopback or missing redirect URI gives 127.0.0.1, an ephemeral port and /callback")
    func defaultAddress() throws {
        for uri in [nil, URL(string: "https://app.example.com/callback"), URL(string: "http://example.com/cb")] {
            let receiver = try LoopbackReceiver(redirectURI: uri)
            #expect(receiver.redirectURI.scheme == "http")
            #expect(receiver.redirectURI.host == "127.0.0.1")
            #expect(receiver.redirectURI.path == "/callback")
            #expect((receiver.redirectURI.port ?? 0) > 0)
            receiver.close()
        }
    }

    @Test("a loopback http redirect URI is used exactly: host, port and path")
    func exactAddress() throws {
        let probe = try LoopbackReceiver()
        let port = probe.redirectURI.port!
        probe.close()
        let receiver = try LoopbackReceiver(redirectURI: URL(string: "http://127.0.0.1:\(port)/oauth/done"))
        #expect(receiver.redirectURI.absoluteString == "http://127.0.0.1:\(port)/oauth/done")
        receiver.close()
        let ephemeral = try LoopbackReceiver(redirectURI: URL(string: "http://localhost/cb"))
        #expect(ephemeral.redirectURI.host == "localhost" && ephemeral.redirectURI.path == "/cb" && ephemeral.redirectURI.port != nil)
        ephemeral.close()
    }

    @Test("only loopback hosts are accepted", arguments: ["0.0.0.0", "192.168.1.10", "example.com", "::"])
    func loopbackOnly(host: String) {
        let error = #expect(throws: OAuthError.self) { try LoopbackReceiver(host: host) }
        #expect(error?.code == .configuration)
    }

    @Test("the callback on the exact path ends the wait with the full URL and a success page")
    func callback() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        let answer = try await httpGET(url(receiver, "/callback?code=abc&state=xyz&iss=https%3A%2F%2Fidp"))
        #expect(answer.status == 200)
        #expect(answer.body.contains("signed in"))
        let received = try await task.value.get()
        #expect(received.absoluteString == "\(receiver.redirectURI.absoluteString)?code=abc&state=xyz&iss=https%3A%2F%2Fidp")
    }

    @Test("stray requests get 404 (or 400 without a query) and the wait goes on")
    func strayRequests() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        #expect(try await httpGET(url(receiver, "/favicon.ico")).status == 404)
        #expect(try await httpGET(url(receiver, "/callback/extra?code=1")).status == 404)
        #expect(try await httpGET(url(receiver, "/")).status == 404)
        #expect(try await httpGET(url(receiver, "/callback")).status == 400)
        #expect(try await httpGET(url(receiver, "/callback?code=1&state=2")).status == 200)
        #expect(try await task.value.get().query == "code=1&state=2")
    }

    @Test("an oversized request gets 431 and the wait goes on")
    func oversized() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        let huge = String(repeating: "a", count: LoopbackReceiver.maximumRequestSize + 100)
        #expect(try await httpGET(url(receiver, "/callback?x=\(huge)")).status == 431)
        #expect(try await httpGET(url(receiver, "/callback?code=ok")).status == 200)
        _ = try await task.value.get()
    }

    @Test("a connection that sends nothing does not block the callback")
    func silentConnection() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        let idle = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(idle) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(receiver.redirectURI.port!).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(idle, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(connected == 0)
        #expect(try await httpGET(url(receiver, "/callback?code=1")).status == 200)
        _ = try await task.value.get()
    }

    @Test("when the handler throws, the browser gets an escaped error page and receive rethrows")
    func handlerError() async throws {
        let receiver = try LoopbackReceiver()
        let failure = OAuthError(.accessDenied, response: ErrorResponse(code: .accessDenied, errorDescription: "user said <no>"))
        let task = start(receiver, failure: failure)
        let answer = try await httpGET(url(receiver, "/callback?error=access_denied&state=s"))
        #expect(answer.status == 400)
        #expect(answer.body.contains("access_denied"))
        #expect(answer.body.contains("user said &lt;no&gt;"))
        #expect(!answer.body.contains("<no>"))
        guard case .failure(let error) = await task.value else { Issue.record("expected a failure"); return }
        #expect(error == failure)
    }

    @Test("no callback in time: .timedOut")
    func timeout() async throws {
        let receiver = try LoopbackReceiver()
        guard case .failure(let error) = await start(receiver, timeout: .milliseconds(300)).value else {
            Issue.record("expected a timeout")
            return
        }
        // No wall-clock bound (issue 21): the code says the wait's own timeout ended it; a wait that
        // never ends is caught by the suite's time limit.
        #expect(error.code == .timedOut)
    }

    @Test("cancelling the waiting task ends the wait promptly with .cancelled and stops listening")
    func cancellation() async throws {
        let receiver = try LoopbackReceiver()
        // A wait far beyond the suite's time limit: a missed cancellation fails there (and would end in
        // .timedOut, not .cancelled), with no wall-clock bound that a busy machine could exceed (issue 21).
        let task = start(receiver, timeout: .seconds(600))
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        guard case .failure(let error) = await task.value else { Issue.record("expected cancellation"); return }
        #expect(error.code == .cancelled)
        await #expect(throws: (any Error).self) { try await httpGET(url(receiver, "/callback?code=late")) }
    }

    @Test("a receiver is single use")
    func singleUse() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        _ = try await httpGET(url(receiver, "/callback?code=1"))
        _ = try await task.value.get()
        guard case .failure(let error) = await start(receiver).value else { Issue.record("expected a failure"); return }
        #expect(error.code == .configuration)
    }
}

/// `authflow login --browser` in-process: the receiver, the library's state check, the code exchange.
@Suite("Browser login, in-process")
struct BrowserLoginTests {
    /// Runs `login gh --browser --json` and, once the authorization URL is printed, calls `callback`
    /// with the URL, the redirect URI and the `state`; returns the run's result.
    private func login(
        _ h: Harness, arguments: [String] = [], environment: [String: String] = [:], opened: OpenedURLs = OpenedURLs(),
        callback: @escaping @Sendable (URL, URL, String) async throws -> Void
    ) async throws -> (status: ExitCode, stdout: String, stderr: String) {
        let (output, stdout, stderr) = Output.capture()
        let services = h.services(openURL: { url in opened.append(url) })
        let env = h.environment.merging(environment) { _, new in new }
        let task = Task { await Authflow.run(arguments: ["login", "gh", "--browser", "--json"] + arguments, output: output, environment: env, services: services) }
        let deadline = ContinuousClock.now + .seconds(60)   // generous: a loaded CI machine; the line comes at once when idle
        var line: [String: Any] = [:]
        while ContinuousClock.now < deadline {
            if let found = stdout.text.split(separator: "\n").first(where: { $0.contains("\"authorizing\"") }) {
                line = record(found)
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let authorizationURL = try #require((line["authorization_url"] as? String).flatMap(URL.init(string:)))
        let redirectURI = try #require((line["redirect_uri"] as? String).flatMap(URL.init(string:)))
        let query = try #require(URLComponents(url: authorizationURL, resolvingAgainstBaseURL: false)?.queryItems)
        let state = try #require(query.first { $0.name == "state" }?.value)
        #expect(query.first { $0.name == "redirect_uri" }?.value == redirectURI.absoluteString)
        try await callback(authorizationURL, redirectURI, state)
        return (await task.value, stdout.text, stderr.text)
    }

    private func harness() throws -> Harness {
        let h = try Harness()
        try h.catalog(catalogEntry(id: "gh", base: h.base, device: false, browser: true, redirectURI: "http://127.0.0.1/callback"))
        return h
    }

    @Test("right state after a stray request: 404, then success page, tokens stored, exchange with the actual redirect_uri")
    func success() async throws {
        let h = try harness()
        defer { h.directory.remove() }
        h.mock.script(.token, [.token(access: "at-browser", refresh: "rt-browser")])
        let opened = OpenedURLs()
        let result = try await login(h, environment: ["DISPLAY": ":0"], opened: opened) { authorizationURL, redirect, state in
            #expect(try await httpGET(URL(string: "http://127.0.0.1:\(redirect.port!)/favicon.ico")!).status == 404)
            let answer = try await httpGET(URL(string: "\(redirect.absoluteString)?code=the-code&state=\(state)")!)
            #expect(answer.status == 200)
            #expect(answer.body.contains("signed in"))
        }
        #expect(result.status == .success)
        #expect(result.stdout.split(separator: "\n").map { record($0)["state"] as? String } == ["authorizing", "requestingAccessToken", "authorized"])
        #expect(opened.urls.count == 1)
        let sent = try #require(h.mock.requests(.token).first)
        #expect(sent.form["grant_type"] == "authorization_code")
        #expect(sent.form["code"] == "the-code")
        #expect(sent.form["redirect_uri"]?.hasPrefix("http://127.0.0.1:") == true)
        #expect(sent.form["redirect_uri"] != "http://127.0.0.1/callback")
        #expect(sent.form["code_verifier"]?.count == 43)
        #expect(h.directory.storedKeys == ["gh"])
        #expect(!result.stdout.contains("at-browser"))
    }

    @Test("a wrong state is refused by the library before any exchange: error page, exit 77, nothing stored")
    func wrongState() async throws {
        let h = try harness()
        defer { h.directory.remove() }
        let opened = OpenedURLs()
        let result = try await login(h, opened: opened) { _, redirect, _ in
            let answer = try await httpGET(URL(string: "\(redirect.absoluteString)?code=c&state=forged")!)
            #expect(answer.status == 400)
            #expect(answer.body.contains("stateMismatch"))
        }
        #expect(result.status == .denied)
        #expect(opened.urls.isEmpty)  // no display: nothing opened
        let last = record(try #require(result.stdout.split(separator: "\n").last))
        #expect(last["state"] as? String == "error" && last["code"] as? String == "stateMismatch")
        #expect(h.mock.requests(.token).isEmpty)
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("an error callback (access_denied) exits 77 and the page names it")
    func errorCallback() async throws {
        let h = try harness()
        defer { h.directory.remove() }
        let result = try await login(h) { _, redirect, state in
            let answer = try await httpGET(URL(string: "\(redirect.absoluteString)?error=access_denied&error_description=nope&state=\(state)")!)
            #expect(answer.status == 400)
            #expect(answer.body.contains("access_denied"))
        }
        #expect(result.status == .denied)
        #expect(record(try #require(result.stdout.split(separator: "\n").last))["error"] as? String == "access_denied")
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("--timeout bounds the wait: exit 75")
    func timeout() async throws {
        let h = try harness()
        defer { h.directory.remove() }
        let result = try await login(h, arguments: ["--timeout", "1"]) { _, _, _ in }
        #expect(result.status == .temporaryFailure)
        let last = record(try #require(result.stdout.split(separator: "\n").last))
        #expect(last["code"] as? String == "timedOut")
    }
}

/// The URLs `login` asked to open in a browser.
final class OpenedURLs: Sendable {
    private let list = Mutex<[URL]>([])
    func append(_ url: URL) { list.withLock { $0.append(url) } }
    var urls: [URL] { list.withLock { $0 } }
}
