import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow login PROVIDER --ciba` in-process against `MockProvider` (OpenID Connect CIBA Core 1.0).
@Suite("authflow login --ciba, in-process")
struct CIBALoginTests {
    static func entry(_ base: String, hint: String? = nil, extra: String = "") -> String {
        var fields = [#""id": "phone""#, #""clientID": "client-phone""#, #""clientSecret": "s3cret-value""#, #""tokenURL": "\#(base)/token""#,
                      #""backchannelAuthenticationURL": "\#(base)/ciba""#, #""scopes": ["openid", "api"]"#]
        if let hint { fields.append(#""cibaLoginHint": "\#(hint)""#) }
        if !extra.isEmpty { fields.append(extra) }
        return "{ " + fields.joined(separator: ", ") + " }"
    }

    /// An ID token shape: CIBA answers carry one when `openid` is granted (CIBA Core §10.1.1); these
    /// providers have no issuer to validate it against, so the flow drops it, as for the code flow.
    static let unvalidatedIDToken = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"

    static func ack(id: String = "ari-SECRET-0123456789", expiresIn: Int = 600, interval: Int = 5) -> MockResponse {
        .json(#"{"auth_req_id":"\#(id)","expires_in":\#(expiresIn),"interval":\#(interval)}"#)
    }

    @Test("login --ciba --login-hint --binding-message: whom the provider asks, the binding message on a line of its own, a countdown; the request on the wire; the tokens stored")
    func human() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base))
        h.mock.script(path: "/ciba", [Self.ack()])
        h.mock.script(.token, [.oauthError("authorization_pending"), .oauthError("slow_down"),
                               .token(access: "at-secret-1", refresh: "rt-secret-1", scope: "openid api", idToken: Self.unvalidatedIDToken)])
        let result = await h.run(["login", "phone", "--ciba", "--login-hint", "alice@example.com", "--binding-message", "Deploy 4711",
                                  "--requested-expiry", "300"])
        #expect(result.status == .success, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "phone is asking alice@example.com to approve this login on their own device.")
        #expect(lines.contains("Deploy 4711"))
        #expect(lines.contains { $0.hasPrefix("It expires in ") })
        #expect(lines.last?.hasPrefix("Logged in to phone with scopes openid api") == true)
        #expect(result.stderr.contains("Waiting for approval; the request expires in 9:5"), "the countdown of the 600 s the provider gave")
        #expect(result.stderr.contains("note: phone asked to slow down (slow_down); polling every 10 s now."))
        #expect(h.mock.requests(path: "/ciba").count == 1)
        let sent = try #require(h.mock.requests(path: "/ciba").first)
        #expect(sent.formPairs.map(\.0) == ["scope", "login_hint", "binding_message", "requested_expiry"])
        #expect(sent.form["login_hint"] == "alice@example.com" && sent.form["binding_message"] == "Deploy 4711")
        #expect(h.mock.requests(.token).allSatisfy { $0.form["grant_type"] == "urn:openid:params:grant-type:ciba" })
        #expect(h.clock.sleeps == [.seconds(5), .seconds(5), .seconds(10)])
        #expect(h.directory.storedKeys == ["phone"])
        for secret in ["ari-SECRET", "at-secret-1", "rt-secret-1", "s3cret-value"] {
            #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
        }
        let status = await h.run(["status", "phone", "--json"])
        #expect(status.stdout.contains(#""grant":"urn:openid:params:grant-type:ciba""#))
    }

    @Test("login --ciba --json: authorizing (binding message, expiry, interval, mode), requestingAccessToken, authorized; never the auth_req_id")
    func json() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base, hint: "alice"))
        h.mock.script(path: "/ciba", [Self.ack(expiresIn: 120, interval: 2)])
        h.mock.script(.token, [.token(access: "at-secret-2", refresh: "rt-secret-2", scope: "openid api", idToken: Self.unvalidatedIDToken)])
        let result = await h.run(["login", "phone", "--binding-message", "Ticket 4711", "--json"])
        #expect(result.status == .success)
        let records = result.stdout.split(separator: "\n").map(record)
        #expect(records.map { $0["state"] as? String } == ["authorizing", "requestingAccessToken", "authorized"])
        #expect(records[0]["grant"] as? String == "urn:openid:params:grant-type:ciba")
        #expect(records[0]["binding_message"] as? String == "Ticket 4711")
        #expect(records[0]["expires_in"] as? Int == 120)
        #expect(records[0]["interval"] as? Int == 2)
        #expect(records[0]["delivery_mode"] as? String == "poll")
        #expect(records[2]["grant"] as? String == "urn:openid:params:grant-type:ciba")
        #expect(h.mock.requests(path: "/ciba").map { $0.form["login_hint"] } == ["alice"], "the catalog's cibaLoginHint")
        #expect(!result.stdout.contains("ari-SECRET") && !result.stderr.contains("ari-SECRET"))
    }

    @Test("a binding message with a control character is refused before anything is sent (exit 65), and shown escaped",
          arguments: ["Deploy\u{1B}[2J", "Line\nbreak", "bell\u{07}", "bidi\u{202E}txt"])
    func refusedBindingMessage(message: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base))
        let result = await h.run(["login", "phone", "--login-hint", "alice", "--binding-message", message])
        #expect(result.status == .dataError)
        #expect(result.stderr.contains("binding message holds a control character"))
        #expect(!result.stderr.contains("\u{1B}[") && !result.stderr.contains("\u{07}") && !result.stderr.contains("\u{202E}"))
        #expect(h.mock.requests().isEmpty)
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("a hostile acknowledgement (an auth_req_id with an escape sequence, a huge interval string) is a clear error; nothing drawn, nothing stored",
          arguments: [#"{"auth_req_id":"a\u001b]0;pwned\u0007","expires_in":60}"#, #"{"auth_req_id":"a","expires_in":60,"interval":"1e999"}"#])
    func hostileAcknowledgement(body: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base))
        h.mock.script(path: "/ciba", [.json(body)])
        let result = await h.run(["login", "phone", "--login-hint", "alice"])
        #expect(result.status == .dataError)
        #expect(!result.stderr.contains("\u{1B}") && !result.stdout.contains("\u{1B}") && !result.stderr.contains("pwned"))
        #expect(h.mock.requests(.token).isEmpty)
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("the person says no: access_denied exits 77 with nothing stored")
    func denied() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base))
        h.mock.script(path: "/ciba", [Self.ack()])
        h.mock.script(.token, [.oauthError("authorization_pending"), .oauthError("access_denied")])
        let result = await h.run(["login", "phone", "--ciba", "--login-hint", "alice"])
        #expect(result.status == .denied)
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("parsing: a CIBA option implies --ciba; it does not mix with another method, nor two hints; --requested-expiry is a positive number")
    func parsing() throws {
        let implied = try Authflow.parse(["login", "phone", "--login-hint", "alice"])
        #expect(implied.command == .login(LoginOptions(provider: "phone", method: .ciba, ciba: CIBALoginOptions(loginHint: "alice"))))
        let full = try Authflow.parse(["login", "phone", "--ciba", "--id-token-hint", "eyJ.x.y", "--binding-message", "B 1", "--user-code", "1234",
                                       "--requested-expiry", "90"])
        #expect(full.command == .login(LoginOptions(provider: "phone", method: .ciba, ciba: CIBALoginOptions(
            idTokenHint: "eyJ.x.y", bindingMessage: "B 1", userCode: "1234", requestedExpiry: 90))))
        for bad in [["--device", "--login-hint", "alice"], ["--login-hint", "a", "--login-hint-token", "t"], ["--ciba", "--browser"],
                    ["--requested-expiry", "0"], ["--requested-expiry", "soon"]] {
            #expect(throws: UsageError.self, "\(bad)") { try Authflow.parse(["login", "phone"] + bad) }
        }
    }

    @Test("providers: a confidential provider with a backchannel endpoint lists ciba; with cibaLoginHint and no other way in, it is the default")
    func providers() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base, hint: "alice"))
        let result = await h.run(["providers", "--json"])
        let line = record(try #require(result.stdout.split(separator: "\n").first))
        #expect(line["grants"] as? [String] == ["client-credentials", "ciba"])
        #expect(line["login"] as? String == "ciba")
        #expect(line["on_demand"] is NSNull, "a person's provider: token never fetches it with client credentials")
    }
}
