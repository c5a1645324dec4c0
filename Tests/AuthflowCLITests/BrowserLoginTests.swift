import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import TestSupport
import Testing

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
