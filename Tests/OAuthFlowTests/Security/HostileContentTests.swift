import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// Well-framed answers with hostile content, over real loopback HTTP (the default transport):
/// wrong types, numbers past 2^63, control characters, duplicate members, HTML, and the RFC 8628
/// polling abuses (`slow_down` for ever, `interval` beyond `expires_in`).
extension HostileServerTests {
    /// One hostile body for one endpoint.
    struct ContentCase: Sendable, CustomTestStringConvertible {
        var target: HostileTarget
        var name: String
        var status: Int = 200
        var contentType: String = "application/json"
        var body: [UInt8]
        var code: OAuthError.Code
        /// A word the error's message must contain (the member at fault), when there is one.
        var mentions: String?

        var testDescription: String { "\(target.rawValue) \(name)" }

        init(_ target: HostileTarget, _ name: String, status: Int = 200, contentType: String = "application/json", _ body: String,
             _ code: OAuthError.Code = .invalidResponse, mentions: String? = nil) {
            self.target = target
            self.name = name
            self.status = status
            self.contentType = contentType
            self.body = Array(body.utf8)
            self.code = code
            self.mentions = mentions
        }

        init(_ target: HostileTarget, _ name: String, bytes: [UInt8], _ code: OAuthError.Code = .invalidResponse) {
            self.target = target
            self.name = name
            self.body = bytes
            self.code = code
        }
    }

    /// A token response with `member` replaced by (or added as) `raw`.
    static func token(_ replacing: [String: String], extra: String = "") -> String {
        var members = [
            "access_token": #""new-at""#, "token_type": #""Bearer""#, "expires_in": "3600", "refresh_token": #""new-rt""#,
        ]
        for (key, value) in replacing { members[key] = value }
        return "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + extra + "}"
    }

    static func tokenBodies(_ target: HostileTarget) -> [ContentCase] {
        [
            ContentCase(target, "expires_in 2^63", token(["expires_in": "9223372036854775808"]), mentions: "expires_in"),
            ContentCase(target, "expires_in 2^63 as a string", token(["expires_in": #""9223372036854775808""#]), mentions: "expires_in"),
            ContentCase(target, "expires_in 2^64", token(["expires_in": "18446744073709551616"]), mentions: "expires_in"),
            ContentCase(target, "expires_in 1e300", token(["expires_in": "1e300"]), mentions: "expires_in"),
            ContentCase(target, "expires_in negative", token(["expires_in": "-1"]), mentions: "expires_in"),
            ContentCase(target, "expires_in an object", token(["expires_in": "{}"]), mentions: "expires_in"),
            ContentCase(target, "access_token a number", token(["access_token": "12345"]), mentions: "access_token"),
            ContentCase(target, "access_token null", token(["access_token": "null"]), mentions: "access_token"),
            ContentCase(target, "access_token with CR LF", token(["access_token": #""at\r\nX-Injected: 1""#]), mentions: "access_token"),
            ContentCase(target, "access_token with ESC", token(["access_token": #""\u001b[31mred""#]), mentions: "access_token"),
            ContentCase(target, "access_token with NUL", token(["access_token": #""at\u0000x""#]), mentions: "access_token"),
            ContentCase(target, "access_token empty", token(["access_token": #""""#]), mentions: "access_token"),
            ContentCase(target, "refresh_token with ESC", token(["refresh_token": #""rt\u001b]0;x\u0007""#]), mentions: "refresh_token"),
            ContentCase(target, "token_type mac", token(["token_type": #""mac""#]), mentions: "token_type"),
            ContentCase(target, "token_type DPoP", token(["token_type": #""DPoP""#]), mentions: "token_type"),
            ContentCase(target, "scope a number", token(["scope": "42"]), mentions: "scope"),
            ContentCase(target, "a duplicate access_token", token([:], extra: #","access_token":"other-at""#), mentions: "access_token"),
            ContentCase(target, "a top-level array", #"[{"access_token":"new-at","token_type":"Bearer"}]"#),
            ContentCase(target, "nested 100 deep", token(["scope": String(repeating: "[", count: 100) + String(repeating: "]", count: 100)])),
            ContentCase(target, "an HTML page", contentType: "text/html", "<html><body>Sign in</body></html>"),
            ContentCase(target, "an empty body", ""),
            ContentCase(target, "broken JSON", #"{"access_token":"new-at","#),
            ContentCase(target, "invalid UTF-8", bytes: Array(#"{"access_token":"a"#.utf8) + [0xFF, 0xFE] + Array(#"","token_type":"Bearer"}"#.utf8)),
            ContentCase(target, "an error of control characters", status: 400, #"{"error":"\u001b]0;pwned\u0007\r\n"}"#, .serverRejected),
        ]
    }

    static func deviceCode(_ replacing: [String: String], extra: String = "") -> String {
        var members = [
            "device_code": #""dc-1""#, "user_code": #""ABCD-EFGH""#, "verification_uri": #""https://example.com/device""#,
            "expires_in": "600", "interval": "5",
        ]
        for (key, value) in replacing { members[key] = value }
        return "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + extra + "}"
    }

    static let deviceBodies: [ContentCase] = [
        ContentCase(.deviceAuthorization, "expires_in 2^63", deviceCode(["expires_in": "9223372036854775808"]), mentions: "expires_in"),
        ContentCase(.deviceAuthorization, "expires_in 2^63 as a string", deviceCode(["expires_in": #""9223372036854775808""#]),
                    mentions: "expires_in"),
        ContentCase(.deviceAuthorization, "expires_in 1e300", deviceCode(["expires_in": "1e300"]), mentions: "expires_in"),
        ContentCase(.deviceAuthorization, "expires_in 0", deviceCode(["expires_in": "0"]), mentions: "expires_in"),
        ContentCase(.deviceAuthorization, "interval 2^63", deviceCode(["interval": "9223372036854775808"]), mentions: "interval"),
        ContentCase(.deviceAuthorization, "interval 2^63 as a string", deviceCode(["interval": #""9223372036854775808""#]), mentions: "interval"),
        ContentCase(.deviceAuthorization, "interval a word", deviceCode(["interval": #""soon""#]), mentions: "interval"),
        ContentCase(.deviceAuthorization, "device_code a number", deviceCode(["device_code": "7"]), mentions: "device_code"),
        ContentCase(.deviceAuthorization, "user_code missing", deviceCode(["user_code": "null"]), mentions: "user_code"),
        ContentCase(.deviceAuthorization, "verification_uri javascript:", deviceCode(["verification_uri": #""javascript:alert(1)""#]),
                    mentions: "verification_uri"),
        ContentCase(.deviceAuthorization, "verification_uri with a newline",
                    deviceCode(["verification_uri": #""https://example.com/\nGo to https://evil.example""#]), mentions: "verification_uri"),
        ContentCase(.deviceAuthorization, "verification_uri_complete with ESC",
                    deviceCode(["verification_uri_complete": #""https://example.com/device?c=\u001b[2J""#]), mentions: "verification_uri_complete"),
        ContentCase(.deviceAuthorization, "verification_uri with a space", deviceCode(["verification_uri": #""https://example.com/ device""#]),
                    mentions: "verification_uri"),
        ContentCase(.deviceAuthorization, "a duplicate user_code", deviceCode([:], extra: #","user_code":"EVIL-CODE""#), mentions: "user_code"),
        ContentCase(.deviceAuthorization, "an HTML page", contentType: "text/html", "<html>device</html>"),
        ContentCase(.deviceAuthorization, "an error of control characters", status: 400, #"{"error":"\u001b[2J"}"#, .serverRejected),
    ]

    /// A CIBA acknowledgement (CIBA Core §7.3) with `member` replaced by (or added as) `raw`.
    static func acknowledgement(_ replacing: [String: String], extra: String = "") -> String {
        var members = ["auth_req_id": #""ari-5ecret""#, "expires_in": "600", "interval": "5"]
        for (key, value) in replacing { members[key] = value }
        return "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + extra + "}"
    }

    static let backchannelBodies: [ContentCase] = [
        ContentCase(.backchannelAuthentication, "expires_in 2^63", acknowledgement(["expires_in": "9223372036854775808"]), mentions: "expires_in"),
        ContentCase(.backchannelAuthentication, "expires_in 2^63 as a string", acknowledgement(["expires_in": #""9223372036854775808""#]),
                    mentions: "expires_in"),
        ContentCase(.backchannelAuthentication, "expires_in 1e300", acknowledgement(["expires_in": "1e300"]), mentions: "expires_in"),
        ContentCase(.backchannelAuthentication, "expires_in 0", acknowledgement(["expires_in": "0"]), mentions: "expires_in"),
        ContentCase(.backchannelAuthentication, "expires_in a word", acknowledgement(["expires_in": #""soon""#]), mentions: "expires_in"),
        ContentCase(.backchannelAuthentication, "expires_in missing", acknowledgement(["expires_in": "null"]), mentions: "expires_in"),
        ContentCase(.backchannelAuthentication, "interval 2^63", acknowledgement(["interval": "9223372036854775808"]), mentions: "interval"),
        ContentCase(.backchannelAuthentication, "interval 2^63 as a string", acknowledgement(["interval": #""9223372036854775808""#]),
                    mentions: "interval"),
        ContentCase(.backchannelAuthentication, "interval negative", acknowledgement(["interval": "-5"]), mentions: "interval"),
        ContentCase(.backchannelAuthentication, "auth_req_id a number", acknowledgement(["auth_req_id": "7"]), mentions: "auth_req_id"),
        ContentCase(.backchannelAuthentication, "auth_req_id missing", acknowledgement(["auth_req_id": "null"]), mentions: "auth_req_id"),
        ContentCase(.backchannelAuthentication, "auth_req_id with ESC", acknowledgement(["auth_req_id": #""ari\u001b]0;pwned\u0007""#]),
                    mentions: "auth_req_id"),
        ContentCase(.backchannelAuthentication, "auth_req_id with CR LF", acknowledgement(["auth_req_id": #""ari\r\nX-Injected: 1""#]),
                    mentions: "auth_req_id"),
        ContentCase(.backchannelAuthentication, "auth_req_id of 100000 bytes",
                    acknowledgement(["auth_req_id": "\"" + String(repeating: "A", count: 100_000) + "\""]), mentions: "auth_req_id"),
        ContentCase(.backchannelAuthentication, "a duplicate auth_req_id", acknowledgement([:], extra: #","auth_req_id":"other""#),
                    mentions: "auth_req_id"),
        ContentCase(.backchannelAuthentication, "an HTML page", contentType: "text/html", "<html>ciba</html>"),
        ContentCase(.backchannelAuthentication, "an error of control characters", status: 400, #"{"error":"\u001b[2J"}"#, .serverRejected),
    ]

    static func discovery(_ replacing: [String: String], extra: String = "") -> @Sendable (HostileServer) -> String {
        { server in
            let base = server.baseURL
            var members = [
                "issuer": "\"\(base)\"", "token_endpoint": "\"\(base)/token\"", "jwks_uri": "\"\(base)/jwks\"",
                "authorization_endpoint": "\"\(base)/authorize\"", "response_types_supported": #"["code"]"#,
            ]
            for (key, value) in replacing { members[key] = value.replacingOccurrences(of: "BASE", with: base) }
            return "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + extra + "}"
        }
    }

    /// Bodies that depend on the server's address (discovery documents).
    struct DocumentCase: Sendable, CustomTestStringConvertible {
        var target: HostileTarget
        var name: String
        var body: @Sendable (HostileServer) -> String
        var code: OAuthError.Code = .invalidResponse
        var testDescription: String { "\(target.rawValue) \(name)" }
    }

    static let documentCases: [DocumentCase] = [
        DocumentCase(target: .discovery, name: "another issuer", body: discovery(["issuer": #""https://evil.example""#])),
        DocumentCase(target: .discovery, name: "an issuer with control characters", body: discovery(["issuer": #""BASE\u001b[2J""#])),
        DocumentCase(target: .discovery, name: "a plain-http token endpoint elsewhere", body: discovery(["token_endpoint": #""http://evil.example/token""#])),
        DocumentCase(target: .discovery, name: "a javascript: token endpoint", body: discovery(["token_endpoint": #""javascript:alert(1)""#])),
        DocumentCase(target: .discovery, name: "a token endpoint with a newline", body: discovery(["token_endpoint": #""BASE/to\nken""#])),
        DocumentCase(target: .discovery, name: "token_endpoint a number", body: discovery(["token_endpoint": "1"])),
        DocumentCase(target: .discovery, name: "a duplicate issuer", body: discovery([:], extra: #","issuer":"https://evil.example""#)),
        DocumentCase(target: .discovery, name: "a top-level array", body: { _ in "[]" }),
        DocumentCase(target: .discovery, name: "an HTML page", body: { _ in "<html>discovery</html>" }),
        DocumentCase(target: .discovery, name: "nested 100 deep", body: discovery(["scopes_supported": String(repeating: "[", count: 100) + String(repeating: "]", count: 100)])),
        DocumentCase(target: .jwks, name: "keys an object", body: { _ in #"{"keys":{}}"# }),
        DocumentCase(target: .jwks, name: "a duplicate keys member", body: { _ in #"{"keys":[],"keys":[]}"# }),
        DocumentCase(target: .jwks, name: "no key with the token's kid", body: { _ in #"{"keys":[]}"# }, code: .idTokenRejected),
        DocumentCase(target: .jwks, name: "a key with a number for kty", body: { _ in #"{"keys":[{"kty":7,"kid":"k1","n":"AQAB","e":"AQAB"}]}"# }),
        DocumentCase(target: .jwks, name: "an HTML page", body: { _ in "<html>jwks</html>" }),
        DocumentCase(target: .userinfo, name: "sub a number", body: { _ in #"{"sub":42}"# }),
        DocumentCase(target: .userinfo, name: "sub missing", body: { _ in #"{"name":"x"}"# }),
        DocumentCase(target: .userinfo, name: "a duplicate sub", body: { _ in #"{"sub":"user-1","sub":"admin"}"# }),
        DocumentCase(target: .userinfo, name: "a top-level array", body: { _ in #"[{"sub":"user-1"}]"# }),
        DocumentCase(target: .userinfo, name: "nested 100 deep", body: { _ in #"{"sub":"u","x":"# + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}" }),
        DocumentCase(target: .introspection, name: "active a string", body: { _ in #"{"active":"true"}"# }),
        DocumentCase(target: .introspection, name: "active missing", body: { _ in #"{"scope":"read"}"# }),
        DocumentCase(target: .introspection, name: "exp 1e300", body: { _ in #"{"active":true,"exp":1e300}"# }),
        DocumentCase(target: .introspection, name: "exp 2^63 as a string", body: { _ in #"{"active":true,"exp":"9223372036854775808"}"# }),
        DocumentCase(target: .introspection, name: "a duplicate active", body: { _ in #"{"active":false,"active":true}"# }),
    ]

    static let contentCases: [ContentCase] =
        [HostileTarget.clientCredentials, .refresh, .authorizationCode, .devicePolling, .backchannelPolling].flatMap(tokenBodies)
            + deviceBodies + backchannelBodies

    @Test("a hostile body from a token, device or CIBA endpoint is a typed error naming the member; nothing stored changes",
          arguments: HostileServer.selected(contentCases))
    func hostileContent(_ test: ContentCase) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        let behaviour = HostileServer.Behaviour([.write(
            HostileServer.head(test.status, contentType: test.contentType, headers: [("Content-Length", "\(test.body.count)")]) + test.body)])
        for path in test.target.hostilePaths { server.script(path, behaviour) }

        let run = try await Hostile.run(test.target, server: server, transport: Hostile.transport(.curl, timeout: Hostile.longDeadline))

        Hostile.check(run, code: test.code, endpoint: test.target.endpoint, recovery: .fixConfiguration, status: test.status, stored: .unchanged)
        if let word = test.mentions {
            #expect(run.error?.message?.contains(word) == true, "\(String(describing: run.error?.message))")
        }
        #expect(run.requests.count == 1, "a hostile answer is final: not retried")
    }

    @Test("a hostile discovery, JWKS, userinfo or introspection document is a typed error; nothing stored changes",
          arguments: HostileServer.selected(documentCases))
    func hostileDocument(_ test: DocumentCase) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        let body = test.body(server)
        for path in test.target.hostilePaths { server.script(path, .reply(200, body)) }

        let run = try await Hostile.run(test.target, server: server, transport: Hostile.transport(.curl, timeout: Hostile.longDeadline))

        let endpoint = test.code == .idTokenRejected ? OAuthError.Endpoint.token : test.target.endpoint
        Hostile.check(run, code: test.code, endpoint: endpoint, stored: .unchanged)
    }
}

// MARK: RFC 8628 and CIBA polling abuse

extension HostileServerTests {
    /// A device flow whose token endpoint abuses RFC 8628 §3.5.
    struct PollingCase: Sendable, CustomTestStringConvertible {
        var name: String
        var expiresIn: Int
        var interval: Int
        var answers: String
        var status: Int = 400
        var code: OAuthError.Code
        var testDescription: String { name }
    }

    static let pollingCases: [PollingCase] = [
        PollingCase(name: "slow_down for ever", expiresIn: 60, interval: 5, answers: #"{"error":"slow_down"}"#, code: .expired),
        PollingCase(name: "slow_down for ever from interval 1", expiresIn: 30, interval: 1, answers: #"{"error":"slow_down"}"#, code: .expired),
        PollingCase(name: "authorization_pending for ever", expiresIn: 20, interval: 1, answers: #"{"error":"authorization_pending"}"#, code: .expired),
        PollingCase(name: "interval 100000 with expires_in 3", expiresIn: 3, interval: 100_000, answers: #"{"error":"authorization_pending"}"#,
                    code: .expired),
        PollingCase(name: "interval larger than expires_in, then slow_down", expiresIn: 12, interval: 10, answers: #"{"error":"slow_down"}"#,
                    code: .expired),
        PollingCase(name: "interval Int32.max with expires_in 5", expiresIn: 5, interval: Int(Int32.max), answers: #"{"error":"slow_down"}"#,
                    code: .expired),
        PollingCase(name: "a 503 without an OAuth body", expiresIn: 60, interval: 1, answers: "<html>busy</html>", status: 503, code: .httpStatus),
    ]

    @Test("device and CIBA polling never sleep past expires_in, whatever the server asks (RFC 8628 §3.5, CIBA Core §7.3, §11)",
          arguments: HostileServer.selected(pollingCases), [HostileTarget.devicePolling, .backchannelPolling])
    func pollingAbuse(_ test: PollingCase, grant: HostileTarget) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        let lifetime = ["expires_in": "\(test.expiresIn)", "interval": "\(test.interval)"]
        if grant == .devicePolling {
            server.script("/device", .reply(200, Self.deviceCode(lifetime)))
        } else {
            server.script("/ciba", .reply(200, Self.acknowledgement(lifetime)))
        }
        server.script("/token", .reply(test.status, test.answers, contentType: test.status == 503 ? "text/html" : "application/json"))
        let clock = TestClock()

        let run = try await Hostile.run(grant, server: server, transport: Hostile.transport(.curl, timeout: Hostile.longDeadline), clock: clock)

        Hostile.check(run, code: test.code, endpoint: .token, stored: .unchanged)
        let slept = run.sleeps.reduce(Duration.zero, +)
        #expect(slept <= .seconds(test.expiresIn), "slept \(slept) of a \(test.expiresIn) s code")
        if test.code == .expired {
            #expect(slept == .seconds(test.expiresIn), "polling stops at expiry, not before")
        }
        #expect(run.requests.count <= test.expiresIn / max(1, min(test.interval, test.expiresIn)) + 1)
    }
}
