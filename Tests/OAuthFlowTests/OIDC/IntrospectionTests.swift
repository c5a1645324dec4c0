import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Introspection (RFC 7662)", .timeLimit(.minutes(1)))
struct IntrospectionTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = MemorySecretStore()

    /// A flow whose provider "app" holds at-1 / rt-1 from a device login.
    func authorizedFlow(_ provider: Provider? = nil) async throws -> AuthFlow {
        let flow = try await AuthFlow(providers: [provider ?? mock.provider(id: "app", clientID: "cli-1", clientSecret: "s3cret")],
                                      store: store, transport: mock.transport(), options: options(clock))
        try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: "rt-1")
        return flow
    }

    @Test("an active token: POST token + token_type_hint with client_secret_basic; every member read (RFC 7662 §2.1, §2.2)")
    func active() async throws {
        let flow = try await authorizedFlow()
        mock.script(.introspection, [.json("""
            {"active":true,"scope":"read write","client_id":"cli-1","username":"alice","token_type":"Bearer",
             "exp":1800003600,"iat":1800000000,"nbf":1800000000.5,"sub":"user-1","aud":["api","web"],
             "iss":"https://issuer.example","ext":{"k":1}}
            """)])

        let result = try await flow.introspect(provider: "app", token: .accessToken)

        let sent = try #require(mock.requests(.introspection).only)
        #expect(sent.method == "POST")
        #expect(sent.url == mock.url(.introspection))
        #expect(sent.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(sent.header("Accept") == "application/json")
        #expect(sent.basicCredentials?.id == "cli-1")
        #expect(sent.basicCredentials?.secret == "s3cret")
        #expect(uniqueForm(sent) == ["token": "at-1", "token_type_hint": "access_token"])
        #expect(result.active)
        #expect(result.scopes == ["read", "write"])
        #expect(result.clientID == "cli-1")
        #expect(result.username == "alice")
        #expect(result.tokenType == "Bearer")
        #expect(result.expiresAt == Date(timeIntervalSince1970: 1_800_003_600))
        #expect(result.issuedAt == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(result.notBefore == Date(timeIntervalSince1970: 1_800_000_000.5))
        #expect(result.subject == "user-1")
        #expect(result.audience == ["api", "web"])
        #expect(result.issuer == "https://issuer.example")
        #expect(result.claims["ext"]?["k"]?.integerValue == 1)
        #expect(result.claims.count == 12)
        // username and other claims stay out of descriptions.
        #expect(!String(describing: result).contains("alice"))
        #expect(!String(reflecting: result).contains("alice"))
        var dumped = ""
        dump(result, to: &dumped)
        #expect(!dumped.contains("alice"))
        #expect(String(describing: result).contains("sub: user-1"))
        // Nothing changed locally.
        #expect(flow.state.name == "authorized")
        #expect(mock.requests(.token).count == 1)
    }

    @Test("the refresh token with client_secret_post: token_type_hint=refresh_token, credentials in the body (RFC 7662 §2.1)")
    func refreshTokenWithPost() async throws {
        let flow = try await authorizedFlow(mock.provider(id: "app", clientID: "cli-1", clientSecret: "s3cret",
                                                          clientAuthentication: .clientSecretPost))
        mock.script(.introspection, [.json(#"{"active":true,"aud":"api"}"#)])
        let result = try await flow.introspect(provider: "app", token: .refreshToken)
        let sent = try #require(mock.requests(.introspection).only)
        #expect(uniqueForm(sent) == ["token": "rt-1", "token_type_hint": "refresh_token", "client_id": "cli-1", "client_secret": "s3cret"])
        #expect(sent.header("Authorization") == nil)
        #expect(result.active && result.audience == ["api"] && result.scopes.isEmpty)
    }

    @Test("an inactive token: active=false, nothing else read, even members of the wrong type (RFC 7662 §2.2)", arguments: [
        #"{"active":false}"#, #"{"active":false,"exp":"soon","scope":7}"#,
    ])
    func inactive(body: String) async throws {
        let flow = try await authorizedFlow()
        mock.script(.introspection, [.json(body)])
        let result = try await flow.introspect(provider: "app")
        #expect(!result.active)
        #expect(result.scopes.isEmpty && result.expiresAt == nil && result.clientID == nil)
        #expect(uniqueForm(try #require(mock.requests(.introspection).only))?["token_type_hint"] == "access_token")
    }

    @Test("active missing or not a boolean is .invalidResponse (RFC 7662 §2.2)", arguments: [
        #"{}"#, #"{"active":"true"}"#, #"{"active":1}"#, #"{"active":null}"#, #"["active"]"#, #"{"active":true"#,
        #"{"active":true,"active":false}"#,
    ])
    func malformed(body: String) async throws {
        let flow = try await authorizedFlow()
        mock.script(.introspection, [.json(body)])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.introspect(provider: "app") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .introspection)
        #expect(flow.state == .error(provider: "app", error))
    }

    @Test("hostile numbers and types in an active answer are .invalidResponse, never a trap (RFC 7519 §2 NumericDate)", arguments: [
        #"{"active":true,"exp":1e308}"#, #"{"active":true,"exp":9223372036854775808}"#, #"{"active":true,"exp":-1}"#,
        #"{"active":true,"exp":"1800000000"}"#, #"{"active":true,"iat":253402300800}"#, #"{"active":true,"nbf":true}"#,
        #"{"active":true,"scope":["read",1]}"#, #"{"active":true,"client_id":5}"#, #"{"active":true,"aud":[1]}"#,
    ])
    func hostile(body: String) async throws {
        let flow = try await authorizedFlow()
        mock.script(.introspection, [.json(body)])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.introspect(provider: "app") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .introspection)
    }

    @Test("an unauthenticated caller's 403 is .httpStatus; invalid_client is .serverRejected (RFC 7662 §2.3)")
    func refusals() async throws {
        let flow = try await authorizedFlow()
        mock.script(.introspection, [MockResponse(status: 403), .oauthError("invalid_client", status: 401)])
        let forbidden = try #require(await #expect(throws: OAuthError.self) { try await flow.introspect(provider: "app") })
        #expect(forbidden.code == .httpStatus && forbidden.httpStatus == 403 && forbidden.endpoint == .introspection)
        let rejected = try #require(await #expect(throws: OAuthError.self) { try await flow.introspect(provider: "app") })
        #expect(rejected.code == .serverRejected && rejected.response?.code == .invalidClient)
    }

    @Test("no endpoint or no refresh token is .configuration; nothing stored is .reauthorizationRequired; none sends a request")
    func preconditions() async throws {
        var provider = mock.provider(id: "app")
        provider.introspectionURL = nil
        let withoutEndpoint = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))
        let noEndpoint = try #require(await #expect(throws: OAuthError.self) { try await withoutEndpoint.introspect(provider: "app") })
        #expect(noEndpoint.code == .configuration && noEndpoint.message?.contains("introspectionURL") == true)

        let empty = try await AuthFlow(providers: [mock.provider(id: "app")], transport: mock.transport(), options: options(clock))
        let nothing = try #require(await #expect(throws: OAuthError.self) { try await empty.introspect(provider: "app") })
        #expect(nothing.code == .reauthorizationRequired)
        #expect(empty.state == .error(provider: "app", nothing))

        let flow = try await AuthFlow(providers: [mock.provider(id: "other")], store: MemorySecretStore(), transport: mock.transport(),
                                      options: options(clock))
        try await authorizeByDevice(flow, mock: mock, provider: "other", refresh: nil)
        let noRefresh = try #require(await #expect(throws: OAuthError.self) {
            try await flow.introspect(provider: "other", token: .refreshToken)
        })
        #expect(noRefresh.code == .configuration)
        #expect(mock.requests(.introspection).isEmpty)
    }
}
