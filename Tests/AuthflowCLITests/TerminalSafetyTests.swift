@testable import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// Nothing a server sends reaches the terminal as a control sequence; `token` prints only a
/// validated token; hostile numbers and flags never trap.
@Suite("authflow terminal and header safety", .timeLimit(.minutes(1)))
struct TerminalSafetyTests {
    static func hasControl(_ text: String) -> Bool {
        // The CLI's own output here is uncoloured (not a terminal): any control other than LF is foreign.
        text.unicodeScalars.contains { $0 != "\n" && DisplayText.isUnsafe($0) }
    }

    @Test("an HTTP status is named once: appended when the message lacks it, not again when it has it", arguments: [
        (OAuthError(.httpStatus, providerID: "gh", endpoint: .token, httpStatus: 302,
                    message: "HTTP 302 with an empty body for https://as.test/token"),
         "gh: HTTP 302 with an empty body for https://as.test/token [httpStatus]"),
        (OAuthError(.httpStatus, providerID: "gh", endpoint: .token, httpStatus: 503, message: "the endpoint is down"),
         "gh: the endpoint is down [HTTP 503] [httpStatus]"),
    ])
    func statusNamedOnce(error: OAuthError, expected: String) {
        #expect(Context.explain(error) == expected)
    }

    @Test("server text with ESC or BEL (here a scope) is printed escaped, never raw")
    func deviceInstructionsEscaped() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.json(
            #"{"device_code":"dc","user_code":"WDJB-MJHT","verification_uri":"https://example.com/device","expires_in":900,"interval":5}"#)])
        h.mock.script(.token, [.token(access: "at", scope: "read \u{1B}]0;pwned\u{7}")])
        let result = await h.run(["login", "gh"])
        #expect(result.status == .success)
        #expect(!Self.hasControl(result.stdout) && !Self.hasControl(result.stderr))
        #expect(result.stdout.contains("\\u{1B}]0;pwned\\u{7}"))
    }

    @Test("a user_code with ESC, a line break, C1 or bidi controls, or over 64 characters is refused: exit 65, nothing of it shown", arguments: [
        #"\u001b[2J\u001b[HFAKE\nOpen https://evil.example"#, #"ABCD\rEFGH"#, #"A\u009b31m\u202eB"#, #"ABCD\u2028Open https://evil.example"#,
        String(repeating: "W", count: 65),
    ])
    func hostileUserCodeRefused(userCode: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.json(
            #"{"device_code":"dc","user_code":"\#(userCode)","verification_uri":"https://example.com/device","expires_in":900,"interval":5}"#)])
        for arguments in [["login", "gh"], ["login", "gh", "--json"]] {
            let result = await h.run(arguments)
            #expect(result.status == .dataError, "\(result.stderr)")
            #expect(!Self.hasControl(result.stdout) && !Self.hasControl(result.stderr))
            #expect(!result.stdout.contains("evil") && !result.stderr.contains("evil"))
            #expect(!result.stdout.contains("WWWWWWWW") && result.stderr.contains("user_code"), "\(result.stderr)")
        }
        #expect(h.mock.requests(.token).isEmpty, "nothing is polled for a refused code")
    }

    @Test("--json escapes C1 and bidi characters as well as C0")
    func jsonEscaped() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.json(
            #"{"device_code":"dc","user_code":"WDJB-MJHT","verification_uri":"https://example.com/device","expires_in":900}"#)])
        h.mock.script(.token, [.token(access: "at", scope: "A\u{9B}31m\u{202E}B\u{1B}")])
        let result = await h.run(["login", "gh", "--json"])
        #expect(result.status == .success)
        #expect(!Self.hasControl(result.stdout))
        #expect(result.stdout.contains(#""A\u009b31m\u202eB\u001b""#))
    }

    @Test("an error made only of control characters prints as something visible, with exit code 65")
    func controlOnlyError() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "svc", base: h.base, device: false, secret: "s"))
        h.mock.script(.token, [.json(#"{"error":"\u001b\u0007","error_description":"\r\n\u001b[31mFAKE PROMPT"}"#, status: 400)])
        let result = await h.run(["login", "svc", "--client-credentials"])
        #expect(result.status != .success)
        #expect(!Self.hasControl(result.stderr))
        #expect(result.stderr.contains("the provider answered \\u{1B}\\u{7}"))
        #expect(result.stderr.contains("\\u{D}\\u{A}\\u{1B}[31mFAKE PROMPT"))
    }

    @Test("token refuses a stored entry whose access token holds CR LF: a typed storage error, nothing on stdout")
    func tokenRefusesStoredCRLF() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-good", refresh: "rt") == .success)
        let file = h.directory.store.appendingPathComponent("gh.json")
        let text = try String(contentsOf: file, encoding: .utf8).replacingOccurrences(of: "\"at-good\"", with: #""INJECT\r\nX-Evil: 1""#)
        try Data(text.utf8).write(to: file)
        let result = await h.run(["token", "gh"])
        #expect(result.status == ExitCode(OAuthError(.storage)))
        #expect(result.stdout.isEmpty)
        #expect(!result.stderr.contains("INJECT"))
        #expect(result.stderr.contains("accessToken"))
    }

    @Test("a token response with CR LF in access_token is refused at login and nothing is stored")
    func loginRefusesCRLF() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "svc", base: h.base, device: false, secret: "s"))
        h.mock.script(.token, [.json(#"{"access_token":"INJECT\r\nX-Evil: 1","token_type":"Bearer"}"#)])
        let result = await h.run(["login", "svc", "--client-credentials"])
        #expect(result.status == ExitCode(OAuthError(.invalidResponse)))
        #expect(h.directory.storedKeys.isEmpty)
        #expect(!(result.stdout + result.stderr).contains("INJECT"))
    }

    @Test("times far away never trap the countdown or relative dates", arguments: [1e300, -1e300, .nan, .infinity, 9.3e18])
    func hugeIntervals(seconds: Double) {
        let now = Date(timeIntervalSince1970: 0)
        let clamped = Timestamps.wholeSeconds(seconds)
        #expect(abs(clamped) <= 1_000_000_000_000_000)
        _ = Timestamps.clock(clamped)
        _ = Timestamps.relative(Date(timeIntervalSince1970: seconds.isFinite ? min(max(seconds, -1e17), 1e17) : 0), now: now)
    }

    @Test("--timeout above Int.max/1000 parses and the browser login waits without trapping")
    func hugeTimeout() async throws {
        let invocation = try Authflow.parse(["login", "p", "--browser", "--timeout", String(Int.max)])
        guard case .login(let options) = invocation.command else { Issue.record("not a login"); return }
        #expect(options.timeout == Int.max)
        let receiver = try LoopbackReceiver(redirectURI: URL(string: "http://127.0.0.1:0/callback"))
        let waiting = Task { try await receiver.waitForCallback(timeout: .seconds(options.timeout)) }
        try await Task.sleep(for: .milliseconds(100))
        receiver.close()
        let outcome = await waiting.result
        #expect(throws: OAuthError.self) { try outcome.get() }
    }
}

@Suite("authflow catalog strictness and --scope validation")
struct CLIStrictnessTests {
    @Test("the CLI loads the catalog strictly: a typo is an error naming the closest key (exit 65); AUTHFLOW_CATALOG_STRICT=0 relaxes it")
    func strictByDefault() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(#"{ "id": "svc", "clientID": "c", "tokenURL": "\#(h.base)/token", "clientSecrett": "s3cret-typo-value" }"#)
        let strict = await h.run(["providers"])
        #expect(strict.status == .dataError)
        #expect(strict.stderr.contains(#"clientSecrett: is not a known key; did you mean "clientSecret"?"#))
        #expect(!strict.stderr.contains("s3cret-typo-value"))
        let lenient = await h.run(["providers"], environment: ["AUTHFLOW_CATALOG_STRICT": "0"])
        #expect(lenient.status == .success)
    }

    @Test("login --scope applies the catalog's scope rule: usage error 64, escaped", arguments: ["a\"b", "x\u{1B}[2J", "é", "a\\b"])
    func scopeValidated(scope: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        let result = await h.run(["login", "gh", "--scope", scope])
        #expect(result.status == .usage)
        #expect(result.stderr.contains("is not a valid scope token"))
        #expect(!result.stderr.unicodeScalars.contains { $0 != "\n" && DisplayText.isUnsafe($0) })
        #expect(h.mock.requests(.deviceAuthorization).isEmpty)
    }
}
