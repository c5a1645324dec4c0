import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// A compact JWS-shaped string with `claims` as its payload (unsigned: only its `sub` is read
/// from a held token, which was validated before it was stored).
func compactJWT(_ claims: String) -> String {
    let header = Base64URL.encode(Array(#"{"alg":"RS256","typ":"JWT"}"#.utf8))
    return "\(header).\(Base64URL.encode(Array(claims.utf8))).c2lnbmF0dXJl"
}

/// A store entry as the flow writes it, so a test can start from tokens it did not obtain itself.
func storedEntry(
    provider: String, access: String = "at-1", type: String = "Bearer", refresh: String? = "rt-1", idToken: String? = nil,
    issuedAt: Date, lifetime: TimeInterval = 3600
) -> Data {
    StoredEntry.encode(TokenSet(
        providerID: provider, accessToken: Secret(access), tokenType: type, refreshToken: refresh.map(Secret.init),
        idToken: idToken.map(Secret.init), scopes: ["openid"], issuedAt: issuedAt, expiresAt: issuedAt.addingTimeInterval(lifetime),
        grant: .authorizationCode))
}

@Suite("Userinfo (OpenID Connect Core §5.3, RFC 6750)", .timeLimit(.minutes(1)))
struct UserInfoTests {
    let mock = MockProvider()
    let clock = TestClock()

    func flow(_ provider: Provider? = nil, store: MemorySecretStore = MemorySecretStore()) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider ?? mock.provider(id: "app")], store: store, transport: mock.transport(),
                           options: options(clock))
    }

    /// A flow holding tokens for "app" whose ID token has `sub`.
    func flowHoldingIDToken(sub: String = "user-1", provider: Provider? = nil) async throws -> AuthFlow {
        let entry = storedEntry(provider: "app", idToken: compactJWT(#"{"iss":"https://issuer.example","sub":"\#(sub)","aud":"c"}"#),
                                issuedAt: clock.date)
        return try await flow(provider, store: MemorySecretStore(["app": entry]))
    }

    @Test("GET with Authorization: Bearer even when the server's token_type was lowercase bearer; JSON claims read (RFC 6750 §2.1)")
    func jsonClaims() async throws {
        let flow = try await flow()
        mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        mock.script(.token, [.token(access: "at-lower", type: "bearer", refresh: "rt-1")])
        try await flow.authorizeWithDeviceCode(provider: "app")
        mock.script(.userinfo, [.json(#"{"sub":"user-1","email":"alice@example.com","email_verified":true,"age":33}"#)])

        let info = try await flow.userInfo(provider: "app")

        #expect(info.subject == "user-1")
        #expect(info.claims["email"]?.stringValue == "alice@example.com")
        #expect(info.claims["email_verified"]?.boolValue == true)
        #expect(info.claims["age"]?.integerValue == 33)
        #expect(info.claims.count == 4)
        let sent = try #require(mock.requests(.userinfo).only)
        #expect(sent.method == "GET")
        #expect(sent.url == mock.url(.userinfo))
        #expect(sent.url.query == nil)
        #expect(sent.header("Authorization") == "Bearer at-lower")
        #expect(sent.header("Accept") == "application/json, application/jwt")
        #expect(sent.body.isEmpty)
        // Only sub is shown; the other claims are personal data.
        #expect(String(describing: info) == "UserInfo(sub: user-1, 4 claims)")
        #expect(!String(reflecting: info).contains("alice@example.com"))
        var dumped = ""
        dump(info, to: &dumped)
        #expect(!dumped.contains("alice@example.com"))
        #expect(flow.state.name == "authorized")
    }

    @Test("an expired access token is refreshed first and the new one is sent (RFC 6749 §6)")
    func refreshesFirst() async throws {
        let entry = storedEntry(provider: "app", access: "at-old", refresh: "rt-1", issuedAt: clock.date.addingTimeInterval(-7200))
        let flow = try await flow(store: MemorySecretStore(["app": entry]))
        mock.script(.token, [.token(access: "at-new", refresh: "rt-2")])
        mock.script(.userinfo, [.json(#"{"sub":"user-1"}"#)])

        #expect(try await flow.userInfo(provider: "app").subject == "user-1")

        #expect(mock.requests().map(\.url.path) == ["/token", "/userinfo"])
        #expect(uniqueForm(try #require(mock.requests(.token).only))?["refresh_token"] == "rt-1")
        #expect(mock.requests(.userinfo).only?.header("Authorization") == "Bearer at-new")
    }

    @Test("sub equal to the held ID token's sub is accepted (OpenID Connect Core §5.3.4)")
    func subMatchesIDToken() async throws {
        let flow = try await flowHoldingIDToken(sub: "user-1")
        mock.script(.userinfo, [.json(#"{"sub":"user-1","name":"Alice"}"#)])
        let info = try await flow.userInfo(provider: "app")
        #expect(info.subject == "user-1")
        #expect(info.claims["name"]?.stringValue == "Alice")
    }

    @Test("sub different from the held ID token's sub is .invalidResponse and publishes .error (OpenID Connect Core §5.3.4)")
    func subMismatch() async throws {
        let flow = try await flowHoldingIDToken(sub: "user-1")
        mock.script(.userinfo, [.json(#"{"sub":"user-2","email":"mallory@example.com"}"#)])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .userinfo)
        #expect(error.providerID == "app")
        #expect(error.message?.contains("§5.3.4") == true)
        #expect(!error.description.contains("mallory"))
        #expect(flow.state == .error(provider: "app", error))
    }

    @Test("401 with WWW-Authenticate: Bearer error=\"invalid_token\" is .serverRejected invalid_token, next step reauthorize (RFC 6750 §3.1)")
    func invalidToken() async throws {
        let flow = try await flowHoldingIDToken()
        mock.script(.userinfo, [MockResponse(status: 401, headers: [
            "WWW-Authenticate": #"Bearer realm="example", error="invalid_token", error_description="The access token expired""#,
        ])])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(error.code == .serverRejected)
        #expect(error.response?.code == .invalidToken)
        #expect(error.response?.errorDescription == "The access token expired")
        #expect(error.httpStatus == 401)
        #expect(error.endpoint == .userinfo)
        #expect(error.recovery == .reauthorize)
        #expect(error.message?.contains("refresh(provider:)") == true)
        #expect(flow.state == .error(provider: "app", error))
    }

    @Test("a §5.2-style JSON body carries the error when the challenge has none; no error at all is .httpStatus")
    func errorBodies() async throws {
        let flow = try await flowHoldingIDToken()
        mock.script(.userinfo, [
            .json(#"{"error":"invalid_token"}"#, status: 401),
            MockResponse(status: 403, headers: ["WWW-Authenticate": #"Bearer error="insufficient_scope", scope="openid email""#]),
            .html(status: 502),
        ])
        let first = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(first.code == .serverRejected && first.response?.code == .invalidToken)
        let second = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(second.code == .serverRejected && second.response?.code == .insufficientScope && second.httpStatus == 403)
        let third = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(third.code == .httpStatus && third.httpStatus == 502 && third.recovery == .retryLater)
    }

    @Test("a signed userinfo answer (application/jwt) is refused with .invalidResponse: not supported yet (OpenID Connect Core §5.3.2)")
    func signedJWTRefused() async throws {
        let flow = try await flowHoldingIDToken()
        mock.script(.userinfo, [MockResponse(status: 200, headers: ["Content-Type": "application/jwt"],
                                             body: Data(compactJWT(#"{"sub":"user-1"}"#).utf8))])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .userinfo)
        #expect(error.message?.contains("application/jwt") == true)
    }

    @Test("malformed answers are .invalidResponse, never a trap", arguments: [
        MockResponse.json(#"{"name":"no sub"}"#), .json(#"{"sub":42}"#), .json(#"{"sub":""}"#), .json(#"["sub"]"#),
        .json(#"{"sub":"a","sub":"b"}"#), .json(#"{"sub":"a""#), .html("<html>ok</html>", status: 200),
        MockResponse(status: 200, headers: ["Content-Type": "text/plain"], body: Data("sub=user-1".utf8)),
    ])
    func malformed(response: MockResponse) async throws {
        let flow = try await flowHoldingIDToken()
        mock.script(.userinfo, [response])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .userinfo)
    }

    @Test("a JSON object without Content-Type or under another media type is still read")
    func lenientMediaType() async throws {
        let flow = try await flowHoldingIDToken()
        mock.script(.userinfo, [
            MockResponse(status: 200, body: Data(#" {"sub":"user-1"}"#.utf8)),
            MockResponse(status: 200, headers: ["Content-Type": "application/json; charset=utf-8"], body: Data(#"{"sub":"user-1"}"#.utf8)),
        ])
        #expect(try await flow.userInfo(provider: "app").subject == "user-1")
        #expect(try await flow.userInfo(provider: "app").subject == "user-1")
    }

    @Test("no userinfo endpoint is .configuration, nothing stored is .reauthorizationRequired; neither sends a request")
    func preconditions() async throws {
        var provider = mock.provider(id: "app")
        provider.userinfoURL = nil
        let withoutEndpoint = try await flowHoldingIDToken(provider: provider)
        let missing = try #require(await #expect(throws: OAuthError.self) { try await withoutEndpoint.userInfo(provider: "app") })
        #expect(missing.code == .configuration)
        #expect(missing.message?.contains("userinfoURL") == true)
        #expect(withoutEndpoint.state == .error(provider: "app", missing))

        let empty = try await flow()
        let nothing = try #require(await #expect(throws: OAuthError.self) { try await empty.userInfo(provider: "app") })
        #expect(nothing.code == .reauthorizationRequired)
        #expect(mock.requests().isEmpty)
    }

    @Test("a token_type other than Bearer is not sent as a bearer token")
    func notBearer() async throws {
        let entry = storedEntry(provider: "app", type: "DPoP", issuedAt: clock.date)
        let flow = try await flow(store: MemorySecretStore(["app": entry]))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        // Tokens are checked on the way out of the store too: a non-Bearer entry is refused there.
        #expect(error.code == .storage)
        #expect(mock.requests().isEmpty)
    }

    @Test("WWW-Authenticate Bearer challenges are parsed (RFC 6750 §3, RFC 9110 §11.2)", arguments: [
        (#"Bearer error="invalid_token""#, "invalid_token", nil),
        (#"bearer realm="a, b", error = "invalid_token" , error_description="say \"hi\"""#, "invalid_token", #"say "hi""#),
        (#"Bearer error=insufficient_scope, scope="read""#, "insufficient_scope", nil),
        (#"Bearer realm="example""#, nil, nil),
        (#"Basic realm="x", error="invalid_token""#, nil, nil),
        (#"Bearer error="unterminated"#, nil, nil),
        ("Bearer", nil, nil),
    ] as [(String, String?, String?)])
    func challenge(header: String, code: String?, description: String?) {
        let parsed = BearerChallenge.parse(header)
        #expect(parsed?.code.rawValue == code)
        #expect(parsed?.errorDescription == description)
    }
}
