import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

/// Token syntax is checked before a token is stored (RFC 6749 App. A.12, A.17; RFC 6750 §2.1;
/// RFC 7515 §7.1) and again when an entry is loaded, so no server can put CR LF into a header
/// line or an escape sequence onto a terminal through `authflow token`.
@Suite("Token syntax and token_type (RFC 6749 App. A, RFC 6750)", .timeLimit(.minutes(1)))
struct TokenSyntaxTests {
    let mock = MockProvider()
    let clock = TestClock()

    struct Bad: Sendable, CustomTestStringConvertible {
        var name: String
        var body: String
        var member: String
        var testDescription: String { name }
    }

    /// Each body holds the marker SECRETVALUE inside the bad token: it must never appear in an error.
    static let refused: [Bad] = [
        Bad(name: "access_token with CR LF (header injection)", body: #"{"access_token":"SECRETVALUE\r\nX-Evil: 1","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with LF", body: #"{"access_token":"SECRETVALUE\n","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with ESC", body: #"{"access_token":"SECRETVALUE\u001b[2J","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with NUL", body: #"{"access_token":"SECRETVALUE\u0000","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with DEL", body: #"{"access_token":"SECRETVALUE\u007f","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with a space", body: #"{"access_token":"SECRETVALUE more","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with a tab", body: #"{"access_token":"SECRETVALUE\t","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token non-ASCII", body: #"{"access_token":"SECRETVALUEé","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with C1 CSI", body: #"{"access_token":"SECRETVALUE\u009b2J","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "access_token with a bidi override", body: #"{"access_token":"SECRETVALUE\u202e","token_type":"Bearer"}"#, member: "access_token"),
        Bad(name: "refresh_token with CR LF", body: #"{"access_token":"AT","token_type":"Bearer","refresh_token":"SECRETVALUE\r\n"}"#, member: "refresh_token"),
        Bad(name: "refresh_token with ESC", body: #"{"access_token":"AT","token_type":"Bearer","refresh_token":"SECRETVALUE\u001b"}"#, member: "refresh_token"),
        Bad(name: "id_token outside the JWS alphabet", body: #"{"access_token":"AT","token_type":"Bearer","id_token":"SECRETVALUE.a$b.c"}"#, member: "id_token"),
        Bad(name: "id_token with a newline", body: #"{"access_token":"AT","token_type":"Bearer","id_token":"SECRETVALUE.a\nb.c"}"#, member: "id_token"),
        Bad(name: "token_type mac", body: #"{"access_token":"SECRETVALUE","token_type":"mac"}"#, member: "token_type"),
        Bad(name: "token_type DPoP", body: #"{"access_token":"SECRETVALUE","token_type":"DPoP"}"#, member: "token_type"),
        Bad(name: "token_type N_A (token exchange)", body: #"{"access_token":"SECRETVALUE","token_type":"N_A"}"#, member: "token_type"),
        Bad(name: "token_type Bearer with a trailing space", body: #"{"access_token":"SECRETVALUE","token_type":"Bearer "}"#, member: "token_type"),
        Bad(name: "token_type with ESC", body: #"{"access_token":"SECRETVALUE","token_type":"\u001b[31mBearer"}"#, member: "token_type"),
    ]

    @Test("a token with characters outside its syntax, or a non-Bearer token_type, is .invalidResponse naming the member",
          arguments: refused)
    func refusesBadTokens(_ example: Bad) async throws {
        mock.script(.token, [.json(example.body)])
        let store = MemorySecretStore()
        let flow = try await AuthFlow(providers: [mock.provider(id: "svc", clientSecret: "s")], store: store,
                                      transport: mock.transport(), options: options(clock))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .token)
        #expect(error.message?.contains(example.member) == true)
        for text in [error.description, String(reflecting: error), error.message ?? ""] {
            #expect(!text.contains("SECRETVALUE"))
            #expect(!text.unicodeScalars.contains { DisplayText.isUnsafe($0) })
        }
        #expect(try await store.keys().isEmpty, "nothing is stored")
    }

    @Test("visible ASCII tokens are accepted, including | (Facebook) and b64token characters", arguments: [
        "EAAB|abc.def", "ya29.a0Af-_~+/=", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "!#$%&'()*,:;<>?@[]^`{}\"\\",
    ])
    func acceptsVisibleASCII(token: String) async throws {
        mock.script(.token, [.token(access: token, type: "bearer", refresh: "r t with spaces", idToken: "eyJ.eyJ-_.sig")])
        let flow = try await AuthFlow(providers: [mock.provider(id: "svc", clientSecret: "s")], transport: mock.transport(),
                                      options: options(clock))
        try await flow.clientCredentials(provider: "svc")
        #expect(try await flow.accessToken(for: "svc").reveal() == token)
    }

    static func entry(access: String, type: String = "Bearer", refresh: String? = nil) -> Data {
        var tokens: [String: Any] = [
            "accessToken": access, "grant": "client_credentials", "issuedAt": 1_800_000_000, "needsReauthorization": false,
            "providerID": "svc", "scopes": ["read"], "tokenType": type, "expiresAt": 1_900_000_000,
        ]
        if let refresh { tokens["refreshToken"] = refresh }
        return try! JSONSerialization.data(withJSONObject: ["version": 1, "tokens": tokens], options: [.sortedKeys])
    }

    @Test("an entry stored before tokens were checked is refused on load with .storage, never handed out", arguments: [
        entry(access: "SECRETVALUE\r\nX-Evil: 1"), entry(access: "SECRETVALUE\u{1B}[2J"), entry(access: "SECRETVALUE x"),
        entry(access: "SECRETVALUE", type: "mac"), entry(access: "AT", refresh: "SECRETVALUE\n"),
    ])
    func refusesBadStoredEntry(data: Data) async throws {
        let store = MemorySecretStore(["svc": data])
        let flow = try await AuthFlow(providers: [mock.provider(id: "svc", clientSecret: "s")], store: store,
                                      transport: mock.transport(), options: options(clock))
        #expect(await flow.authorization(for: "svc") == nil, "not restored")
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.tokenSet(for: "svc") })
        #expect(error.code == .storage)
        for text in [error.description, String(reflecting: error)] { #expect(!text.contains("SECRETVALUE")) }
        #expect(try await store.load("svc") == data, "the entry is left as it was")
        #expect(mock.requests(.token).isEmpty)
    }
}
