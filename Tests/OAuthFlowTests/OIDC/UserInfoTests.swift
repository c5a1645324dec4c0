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
/// An `idToken` is marked validated (as the flow marks one that passed every check) unless
/// `validated` is false (as an older version stored unvalidated ones).
func storedEntry(
    provider: String, access: String = "at-1", type: String = "Bearer", refresh: String? = "rt-1", idToken: String? = nil,
    validated: Bool = true, issuedAt: Date, lifetime: TimeInterval = 3600
) -> Data {
    let claims = validated ? idToken.flatMap { try? IDToken(storedToken: Secret($0)) } : nil
    return StoredEntry.encode(TokenSet(
        providerID: provider, accessToken: Secret(access), tokenType: type, refreshToken: refresh.map(Secret.init),
        idToken: idToken.map(Secret.init), validatedIDToken: claims, scopes: ["openid"], issuedAt: issuedAt,
        expiresAt: issuedAt.addingTimeInterval(lifetime), grant: .authorizationCode))
}

/// The claims of a held ID token for issuer `iss` and client `c`, valid around 2026.
func heldIDTokenClaims(sub: String, iss: String = "https://issuer.example", aud: String = "c") -> String {
    #"{"iss":"\#(iss)","sub":"\#(sub)","aud":"\#(aud)","exp":1900000000,"iat":1700000000}"#
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
        let entry = storedEntry(provider: "app", idToken: compactJWT(heldIDTokenClaims(sub: sub)), issuedAt: clock.date)
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
        let entry = storedEntry(provider: "app", type: "MAC", issuedAt: clock.date)
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

extension UserInfoTests {
    @Test("a held ID token that was never validated is not used for the sub check: there is nothing trustworthy to compare")
    func unvalidatedHeldTokenIgnored() async throws {
        let entry = storedEntry(provider: "app", idToken: compactJWT(heldIDTokenClaims(sub: "user-1")), validated: false, issuedAt: clock.date)
        let flow = try await flow(store: MemorySecretStore(["app": entry]))
        mock.script(.userinfo, [.json(#"{"sub":"user-2"}"#)])
        #expect(try await flow.userInfo(provider: "app").subject == "user-2")
        #expect(try await flow.tokenSet(for: "app").idToken == nil)
    }
}

// MARK: - Signed answers (application/jwt, OpenID Connect Core §5.3.2)

extension UserInfoTests {
    static let keyA = Minter(TestKeys.rsa, .rs256, kid: "key-a")
    static let keyB = Minter(TestKeys.rsaOther, .rs256, kid: "key-b")

    /// A flow for the discovered provider "app" holding a validated ID token of `user-1` from the mock's issuer.
    func signedFlow(jwks: [MockResponse]? = nil, provider: Provider? = nil) async throws -> AuthFlow {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, try jwks ?? [MockProvider.jwks([Self.keyA.jwk()])])
        let held = compactJWT(heldIDTokenClaims(sub: "user-1", iss: mock.issuer, aud: "mock-client"))
        let entry = storedEntry(provider: "app", idToken: held, issuedAt: clock.date)
        return try await flow(provider ?? mock.discoveredProvider(id: "app"), store: MemorySecretStore(["app": entry]))
    }

    /// Userinfo claims for `user-1` from the mock's issuer to `mock-client`, changed by `changes`, without `removing`.
    func signedClaims(_ changes: [String: JSONValue] = [:], removing: [String] = []) -> [String: JSONValue] {
        var claims: [String: JSONValue] = [
            "iss": .string(mock.issuer), "aud": .string("mock-client"), "sub": .string("user-1"), "email": .string("alice@example.com"),
        ]
        claims.merge(changes) { $1 }
        for name in removing { claims[name] = nil }
        return claims
    }

    static func jwt(_ token: String) -> MockResponse {
        MockResponse(status: 200, headers: ["Content-Type": "application/jwt"], body: Data((token + "\n").utf8))
    }

    /// Runs userinfo against `answer` and expects `.invalidResponse` with `reason`, published as `.error`.
    @discardableResult
    func expectSignedRefusal(
        _ flow: AuthFlow, _ answer: String, reason: TokenRejection?, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> OAuthError {
        mock.script(.userinfo, [Self.jwt(answer)])
        let error = try #require(await #expect(throws: OAuthError.self, sourceLocation: sourceLocation) {
            try await flow.userInfo(provider: "app")
        }, sourceLocation: sourceLocation)
        #expect(error.code == .invalidResponse, sourceLocation: sourceLocation)
        #expect(error.endpoint == .userinfo, sourceLocation: sourceLocation)
        #expect(error.tokenRejection == reason, "\(error)", sourceLocation: sourceLocation)
        #expect(flow.state == .error(provider: "app", error), sourceLocation: sourceLocation)
        #expect(!String(reflecting: error).contains(answer.split(separator: ".")[2]), sourceLocation: sourceLocation)
        #expect(!String(reflecting: error).contains("alice@example.com"), sourceLocation: sourceLocation)
        return error
    }

    enum SignedVariant: String, CaseIterable, Sendable { case issAndAud, audienceArray, neitherIssNorAud }

    @Test("a signed answer verified with the discovered JWKS is read; iss and aud are checked only when present (Core §5.3.2 says SHOULD)",
          arguments: SignedVariant.allCases)
    func signedAccepted(variant: SignedVariant) async throws {
        let flow = try await signedFlow()
        let claims: [String: JSONValue]
        switch variant {
        case .issAndAud: claims = signedClaims()
        case .audienceArray: claims = signedClaims(["aud": .array([.string("other-client"), .string("mock-client")])])
        case .neitherIssNorAud: claims = signedClaims(removing: ["iss", "aud"])
        }
        mock.script(.userinfo, [Self.jwt(try Self.keyA.token(claims: claims))])

        let info = try await flow.userInfo(provider: "app")

        #expect(info.subject == "user-1")
        #expect(info.claims["email"]?.stringValue == "alice@example.com")
        #expect(info.claims.count == claims.count)
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration", "/userinfo", "/jwks"])
        #expect(mock.requests(.userinfo).only?.header("Accept") == "application/json, application/jwt")
        #expect(flow.state.name == "authorized", "a successful call publishes nothing new")
    }

    @Test("a signed answer whose signature does not verify is .invalidResponse (badSignature), published as .error")
    func signedBadSignature() async throws {
        let flow = try await signedFlow()
        var parts = try Self.keyA.token(claims: signedClaims()).split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(JSONValue.object(signedClaims(["sub": .string("user-1"), "email": .string("mallory@example.com")])).jsonText.utf8))
        try await expectSignedRefusal(flow, parts.joined(separator: "."), reason: .badSignature)
    }

    @Test("a signed answer from another issuer is .invalidResponse (issuer)")
    func signedWrongIssuer() async throws {
        let flow = try await signedFlow()
        let error = try await expectSignedRefusal(flow, try Self.keyA.token(claims: signedClaims(["iss": .string("https://evil.example")])),
                                                  reason: .issuer)
        #expect(error.message?.contains("https://evil.example") == true)
    }

    @Test("a signed answer for another audience is .invalidResponse (audience)", arguments: [
        JSONValue.string("other-client"), .array([.string("other-client")]),
    ])
    func signedWrongAudience(audience: JSONValue) async throws {
        let flow = try await signedFlow()
        try await expectSignedRefusal(flow, try Self.keyA.token(claims: signedClaims(["aud": audience])), reason: .audience)
    }

    @Test("a signed answer whose exp has passed (beyond the clock skew) is .invalidResponse (expired)")
    func signedExpired() async throws {
        let flow = try await signedFlow()
        let exp = JSONValue.number(String(Int(clock.date.timeIntervalSince1970) - 120))
        try await expectSignedRefusal(flow, try Self.keyA.token(claims: signedClaims(["exp": exp])), reason: .expired)
    }

    @Test("a signed answer in an algorithm outside the allowed list is refused before any key is used")
    func signedAlgorithmNotAllowed() async throws {
        let flow = try await signedFlow()
        let token = try Minter(TestKeys.p256, .es256, kid: "key-a").token(claims: signedClaims())
        try await expectSignedRefusal(flow, token, reason: .algorithmNotAllowed)
    }

    @Test("a validly signed answer whose sub differs from the ID token's is .invalidResponse (Core §5.3.4)")
    func signedSubMismatch() async throws {
        let flow = try await signedFlow()
        let error = try await expectSignedRefusal(flow, try Self.keyA.token(claims: signedClaims(["sub": .string("user-2")])), reason: nil)
        #expect(error.message?.contains("§5.3.4") == true)
    }

    @Test("a signed answer under an unknown kid refetches the JWKS once, and the rotated key verifies it")
    func signedUnknownKidRefetches() async throws {
        let flow = try await signedFlow(jwks: [MockProvider.jwks([try Self.keyA.jwk()]), MockProvider.jwks([try Self.keyA.jwk(), try Self.keyB.jwk()])])
        mock.script(.userinfo, [Self.jwt(try Self.keyB.token(claims: signedClaims()))])
        #expect(try await flow.userInfo(provider: "app").subject == "user-1")
        #expect(mock.requests(.jwks).count == 2)
    }

    @Test("a kid still unknown after the one refetch is .invalidResponse (unknownKey); no further JWKS request")
    func signedUnknownKidAfterRefetch() async throws {
        let flow = try await signedFlow()
        try await expectSignedRefusal(flow, try Self.keyB.token(claims: signedClaims()), reason: .unknownKey)
        #expect(mock.requests(.jwks).count == 2, "the first fetch and one refetch")
    }

    @Test("an encrypted answer (a JWE, five segments) is .invalidResponse (encrypted): OAuthFlow does not decrypt")
    func encryptedRefused() async throws {
        let flow = try await signedFlow()
        let jwe = "eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ.a2V5.aXY.Y2lwaGVydGV4dA.dGFn"
        let error = try await expectSignedRefusal(flow, jwe, reason: .encrypted)
        #expect(error.message?.contains("JWE") == true)
        #expect(mock.requests(.jwks).isEmpty)
    }

    @Test("HS256 named in idTokenSigningAlgorithms verifies a signed answer with the client secret, without a JWKS")
    func signedWithClientSecret() async throws {
        let secret = "hmac-client-secret-0123456789abcdef"
        let flow = try await signedFlow(provider: mock.discoveredProvider(id: "app", clientSecret: secret, idTokenSigningAlgorithms: ["HS256"]))
        let token = try hmacToken(.hs256, header: #"{"alg":"HS256"}"#, payload: JSONValue.object(signedClaims()).jsonText, key: Array(secret.utf8))
        mock.script(.userinfo, [Self.jwt(token)])
        #expect(try await flow.userInfo(provider: "app").subject == "user-1")
        #expect(mock.requests(.jwks).isEmpty)
    }

    @Test("a signed answer with iss, for a provider with a jwksURL but no issuer to compare it with, is .configuration")
    func signedIssuerUnconfigured() async throws {
        let keys = mock.baseURL.appendingPathComponent("keys")
        mock.script(path: "/keys", [MockProvider.jwks([try Self.keyA.jwk()])])
        let provider = Provider(id: "app", tokenURL: mock.url(.token), userinfoURL: mock.url(.userinfo), jwksURL: keys, clientID: "mock-client",
                                scopes: ["openid"])
        let entry = storedEntry(provider: "app", issuedAt: clock.date)
        let flow = try await flow(provider, store: MemorySecretStore(["app": entry]))
        mock.script(.userinfo, [Self.jwt(try Self.keyA.token(claims: signedClaims()))])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") })
        #expect(error.code == .configuration)
        #expect(error.message?.contains("issuer") == true)
        #expect(flow.state == .error(provider: "app", error))
    }
}
