import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("ID tokens in the pipeline: JWKS, rotation, nothing stored on rejection (OpenID Connect Core §3.1.3.7)",
       .timeLimit(.minutes(1)))
struct IDTokenFlowTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = MemorySecretStore()
    static let keyA = Minter(TestKeys.rsa, .rs256, kid: "key-a")
    static let keyB = Minter(TestKeys.rsaOther, .rs256, kid: "key-b")

    func flow(_ provider: Provider? = nil) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider ?? mock.discoveredProvider(id: "op")], store: store, transport: mock.transport(),
                           options: options(clock))
    }

    /// Claims that pass at the test clock's time, for `nonce` and `changes`.
    func claims(nonce: Secret?, _ changes: [String: JSONValue] = [:]) -> [String: JSONValue] {
        let now = Int(clock.date.timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(mock.issuer), "sub": .string("user-1"), "aud": .string("mock-client"),
            "exp": .number(String(now + 600)), "iat": .number(String(now)),
        ]
        if let nonce { claims["nonce"] = .string(nonce.reveal()) }
        claims.merge(changes) { $1 }
        return claims
    }

    /// Runs a browser login whose token response carries an ID token signed by `minter`.
    @discardableResult
    func login(
        _ flow: AuthFlow, minter: Minter = keyA, changes: [String: JSONValue] = [:], provider: String = "op"
    ) async throws -> Authorization {
        let request = try await flow.authorizationRequest(provider: provider)
        let token = try minter.token(claims: claims(nonce: request.nonce, changes))
        mock.script(.token, [.token(access: "at-\(UUID().uuidString.prefix(6))", refresh: "rt-1", idToken: token)])
        return try await flow.completeAuthorization(callbackURL: callback(request))
    }

    func jwksRequests() -> Int { mock.requests(.jwks).count }

    @Test("auth code: the ID token is validated with the discovered JWKS and exposed as Authorization.idToken")
    func validated() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        let authorization = try await login(flow)
        #expect(authorization.idToken?.subject == "user-1")
        #expect(authorization.idToken?.issuer == mock.issuer)
        #expect(await flow.authorization(for: "op")?.idToken == authorization.idToken)
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration", "/token", "/jwks"])
        // Stored raw, marked validated; a new flow on the same store rebuilds the claims without a request.
        let stored = try #require(try await store.load("op"))
        #expect(String(decoding: stored, as: UTF8.self).contains(#""idTokenValidated":true"#))
        mock.clearRequests()
        let restored = try await AuthFlow(providers: [mock.discoveredProvider(id: "op")], store: store, transport: mock.transport(),
                                          options: options(clock))
        #expect(await restored.authorization(for: "op")?.idToken?.subject == "user-1")
        #expect(mock.requests().isEmpty)
    }

    @Test("an ID token stored without the validated mark (by an older version) is never used, and the next save drops it")
    func unmarkedEntry() async throws {
        let token = try Self.keyA.token(claims: claims(nonce: nil))
        let set = TokenSet(providerID: "op", accessToken: Secret("at"), refreshToken: Secret("rt-1"), idToken: Secret(token),
                           issuedAt: clock.date, expiresAt: clock.date.addingTimeInterval(3600), grant: .authorizationCode)
        try await store.save(StoredEntry.encode(set), for: "op")
        let flow = try await flow()
        #expect(await flow.authorization(for: "op")?.hasIDToken == false)
        #expect(await flow.authorization(for: "op")?.idToken == nil)
        #expect(try await flow.tokenSet(for: "op").idToken == nil)
        // A refresh without an ID token saves the entry again: the unvalidated token is gone from it.
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.token, [.token(access: "at-2")])
        try await flow.refresh(provider: "op")
        let saved = String(decoding: try #require(try await store.load("op")), as: UTF8.self)
        #expect(!saved.contains("idToken") && !saved.contains(token.split(separator: ".")[2]))
    }

    @Test("an unknown kid triggers one JWKS refetch, and the rotated key validates")
    func rotation() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()]), MockProvider.jwks([try Self.keyA.jwk(), try Self.keyB.jwk()])])
        let flow = try await flow()
        try await login(flow, minter: Self.keyA)
        #expect(jwksRequests() == 1)
        // Rotated a second after the first fetch: the first fetch does not count against the limit.
        clock.advance(by: .seconds(1))
        let authorization = try await login(flow, minter: Self.keyB)
        #expect(authorization.idToken?.subject == "user-1")
        #expect(jwksRequests() == 2)
        // Both keys are now cached: no further request.
        try await login(flow, minter: Self.keyA)
        try await login(flow, minter: Self.keyB)
        #expect(jwksRequests() == 2)
    }

    @Test("an unknown kid still unknown after the refetch is .idTokenRejected; nothing stored; .error published")
    func unknownAfterRefetch() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        let error = try #require(await #expect(throws: OAuthError.self) { try await login(flow, minter: Self.keyB) })
        #expect(error.code == .idTokenRejected)
        #expect(error.tokenRejection == .unknownKey)
        #expect(jwksRequests() == 2, "the first fetch and one refetch")
        #expect(try await store.load("op") == nil)
        #expect(await flow.authorization(for: "op") == nil)
        #expect(flow.state == .error(provider: "op", error))
    }

    @Test("JWKS refetch rate limit: a second unknown kid within a minute causes no fetch; after a minute it does")
    func rateLimit() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        await #expect(throws: OAuthError.self) { try await login(flow, minter: Self.keyB) }
        #expect(jwksRequests() == 2)
        clock.advance(by: .seconds(59))
        let error = await #expect(throws: OAuthError.self) { try await login(flow, minter: Self.keyB) }
        #expect(error?.tokenRejection == .unknownKey)
        #expect(jwksRequests() == 2, "refetched less than a minute ago: no request")
        clock.advance(by: .seconds(2))
        await #expect(throws: OAuthError.self) { try await login(flow, minter: Self.keyB) }
        #expect(jwksRequests() == 3)
    }

    @Test("the JWKS honours max-age: fetched again after it expires")
    func jwksMaxAge() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()], maxAge: 300)])
        let flow = try await flow()
        try await login(flow)
        clock.advance(by: .seconds(299))
        try await login(flow)
        #expect(jwksRequests() == 1)
        clock.advance(by: .seconds(2))
        try await login(flow)
        #expect(jwksRequests() == 2)
    }

    @Test("a failed JWKS fetch is a typed error, stores nothing, and is retried on the next login")
    func jwksFailureNotCached() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [.html(status: 503), MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        let error = await #expect(throws: OAuthError.self) { try await login(flow) }
        #expect(error?.code == .httpStatus)
        #expect(error?.endpoint == .discovery)
        #expect(try await store.keys().isEmpty)
        #expect(try await login(flow).idToken?.subject == "user-1")
        #expect(jwksRequests() == 2)
    }

    @Test("the validated ID token prints only sub and iss: never the raw token, the nonce or other claims")
    func redaction() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        let authorization = try await login(flow, changes: ["email": .string("secret-mail@example.com")])
        let set = try await flow.tokenSet(for: "op")
        let raw = try #require(set.idToken?.reveal())
        let nonce = try #require(authorization.idToken?.nonce)
        for text in [String(describing: authorization), String(reflecting: authorization), String(reflecting: set),
                     String(describing: authorization.idToken as Any)] {
            #expect(!text.contains(raw) && !text.contains(raw.split(separator: ".")[2]))
            #expect(!text.contains(nonce))
            #expect(!text.contains("secret-mail"))
        }
        #expect(String(describing: authorization.idToken as Any).contains("user-1"))
    }

    @Test("the catalog's jwksURL wins over jwks_uri, and no discovery is needed when every endpoint is written")
    func catalogJWKS() async throws {
        let custom = mock.baseURL.appendingPathComponent("keys")
        mock.script(path: "/keys", [MockProvider.jwks([try Self.keyA.jwk()])])
        let provider = Provider(
            id: "op", authorizationURL: mock.url(.authorization), tokenURL: mock.url(.token), issuer: mock.issuer, jwksURL: custom,
            clientID: "mock-client", redirectURI: URL(string: "http://127.0.0.1:8765/callback"), scopes: ["openid"])
        let flow = try await flow(provider)
        let request = try await flow.authorizationRequest(provider: "op")
        mock.script(.token, [.token(access: "at-1", idToken: try Self.keyA.token(claims: claims(nonce: request.nonce)))])
        _ = try await flow.completeAuthorization(callbackURL: callback(request, extra: [("iss", mock.issuer)]))
        #expect(mock.requests().map(\.url.path) == ["/token", "/keys"])
    }

    @Test("a rejected ID token (wrong nonce) stores nothing and publishes .error")
    func rejectedStoresNothing() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        let recorders = recordStates(flow, count: 1)
        let error = try #require(await #expect(throws: OAuthError.self) {
            try await login(flow, changes: ["nonce": .string("not-the-nonce")])
        })
        #expect(error.code == .idTokenRejected)
        #expect(error.tokenRejection == .nonce)
        #expect(try await store.keys().isEmpty)
        let states = await collected(recorders)[0]
        #expect(states.last == .error(provider: "op", error))
        #expect(!states.contains { if case .authorized = $0 { true } else { false } })
    }

    @Test("openid requested in the code flow and no id_token returned is .idTokenRejected (Core §3.1.3.3)")
    func missingIDToken() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        let flow = try await flow()
        let request = try await flow.authorizationRequest(provider: "op")
        mock.script(.token, [.token(access: "at-1")])
        let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: callback(request)) }
        #expect(error?.code == .idTokenRejected)
        #expect(try await store.keys().isEmpty)
    }

    @Test("the discovery document's asymmetric algorithms are the default allowed list")
    func discoveredAlgorithms() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument(algorithms: ["ES256", "HS256"])])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        let error = await #expect(throws: OAuthError.self) { try await login(flow) }
        #expect(error?.tokenRejection == .algorithmNotAllowed)
    }

    @Test("HS256 named in idTokenSigningAlgorithms validates with the client secret, without fetching a JWKS")
    func hmacWithSecret() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument(algorithms: ["RS256", "HS256"])])
        let provider = mock.discoveredProvider(id: "op", clientSecret: "hmac-client-secret-0123456789abcdef", idTokenSigningAlgorithms: ["HS256"])
        let flow = try await flow(provider)
        let request = try await flow.authorizationRequest(provider: "op")
        let token = try hmacToken(.hs256, header: #"{"alg":"HS256"}"#, payload: JSONValue.object(claims(nonce: request.nonce)).jsonText,
                                  key: Array("hmac-client-secret-0123456789abcdef".utf8))
        mock.script(.token, [.token(access: "at-1", idToken: token)])
        let authorization = try await flow.completeAuthorization(callbackURL: callback(request))
        #expect(authorization.idToken?.subject == "user-1")
        #expect(mock.requests(.jwks).isEmpty)
    }

    @Test("Options.clockSkew widens the exp check")
    func clockSkew() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let now = Int(clock.date.timeIntervalSince1970)
        let expired: [String: JSONValue] = ["exp": .number(String(now - 90))]
        let strict = try await flow()
        await #expect(throws: OAuthError.self) { try await login(strict, changes: expired) }
        var lenient = options(clock)
        lenient.clockSkew = 120
        let flow = try await AuthFlow(providers: [mock.discoveredProvider(id: "op")], store: store, transport: mock.transport(), options: lenient)
        #expect(try await login(flow, changes: expired).idToken != nil)
    }
}

// MARK: - Refresh

extension IDTokenFlowTests {
    /// Logs in, then expires the access token.
    func loggedInAndExpired() async throws -> AuthFlow {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        try await login(flow)
        clock.advance(by: .seconds(3600))
        return flow
    }

    @Test("a refreshed ID token with a changed sub is rejected; the stored entry stays byte-identical")
    func refreshChangedSub() async throws {
        let flow = try await loggedInAndExpired()
        let before = try #require(try await store.load("op"))
        let token = try Self.keyA.token(claims: claims(nonce: nil, ["sub": .string("someone-else")]))
        mock.script(.token, [.token(access: "at-new", refresh: "rt-new", idToken: token)])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "op") })
        #expect(error.code == .idTokenRejected)
        #expect(error.tokenRejection == .refreshChanged)
        #expect(error.message?.contains("sub") == true)
        #expect(try await store.load("op") == before)
        #expect(await flow.authorization(for: "op")?.idToken?.subject == "user-1")
        #expect(flow.state == .error(provider: "op", error))
    }

    @Test("a refreshed ID token keeping iss, sub and aud is accepted without a nonce")
    func refreshAccepted() async throws {
        let flow = try await loggedInAndExpired()
        let token = try Self.keyA.token(claims: claims(nonce: nil, ["email": .string("u@example.com")]))
        mock.script(.token, [.token(access: "at-new", refresh: "rt-new", idToken: token)])
        #expect(try await flow.accessToken(for: "op").reveal() == "at-new")
        #expect(await flow.authorization(for: "op")?.idToken?.claims["email"] == .string("u@example.com"))
    }

    @Test("a refresh without an ID token keeps the previous validated one (Core §12.2)")
    func refreshWithoutIDToken() async throws {
        let flow = try await loggedInAndExpired()
        mock.script(.token, [.token(access: "at-new")])
        #expect(try await flow.accessToken(for: "op").reveal() == "at-new")
        #expect(await flow.authorization(for: "op")?.idToken?.subject == "user-1")
    }

    @Test("device grant ID tokens are validated without a nonce; a bad signature is rejected and nothing stored")
    func deviceIDToken() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let flow = try await flow()
        mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        let good = try Self.keyA.token(claims: claims(nonce: nil))
        mock.script(.token, [.token(access: "at-1", idToken: good)])
        #expect(try await flow.authorizeWithDeviceCode(provider: "op").idToken?.subject == "user-1")

        try await flow.clear(provider: "op")
        var forged = good.split(separator: ".").map(String.init)
        forged[2] = String(forged[2].reversed())
        mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        mock.script(.token, [.token(access: "at-2", idToken: forged.joined(separator: "."))])
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "op") }
        #expect(error?.code == .idTokenRejected)
        #expect(try await store.keys().isEmpty)
    }
}

// MARK: - Client credentials, and providers that cannot validate

extension IDTokenFlowTests {
    /// The discovered provider "svc" as a confidential client.
    func serviceFlow() async throws -> AuthFlow {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        return try await flow(mock.discoveredProvider(id: "svc", clientSecret: "svc-secret"))
    }

    @Test("client credentials: an ID token in the answer is validated (no nonce), stored marked validated and exposed as Authorization.idToken")
    func clientCredentialsValidated() async throws {
        let flow = try await serviceFlow()
        let token = try Self.keyA.token(claims: claims(nonce: nil, ["sub": .string("svc-client")]))
        mock.script(.token, [.token(access: "at-cc", idToken: token)])
        let authorization = try await flow.clientCredentials(provider: "svc")
        #expect(authorization.grant == .clientCredentials)
        #expect(authorization.idToken?.subject == "svc-client")
        #expect(authorization.idToken?.issuer == mock.issuer)
        #expect(authorization.hasIDToken)
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration", "/token", "/jwks"])
        let stored = String(decoding: try #require(try await store.load("svc")), as: UTF8.self)
        #expect(stored.contains(#""idTokenValidated":true"#))
        #expect(try await flow.tokenSet(for: "svc").idToken?.reveal() == token)
    }

    @Test("client credentials: a rejected ID token (wrong aud) stores nothing and publishes .error, never .authorized")
    func clientCredentialsRejected() async throws {
        let flow = try await serviceFlow()
        let recorders = recordStates(flow, count: 1)
        let token = try Self.keyA.token(claims: claims(nonce: nil, ["aud": .string("someone-else")]))
        mock.script(.token, [.token(access: "at-cc", idToken: token)])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") })
        #expect(error.code == .idTokenRejected)
        #expect(error.tokenRejection == .audience)
        #expect(error.endpoint == .token)
        #expect(try await store.keys().isEmpty)
        #expect(await flow.authorization(for: "svc") == nil)
        #expect(await collected(recorders)[0] == [.empty, .requestingAccessToken(provider: "svc"), .error(provider: "svc", error)])
    }

    @Test("a provider without issuer: an id_token in the answer is discarded — not stored, not exposed — with a warning that shows only its shape")
    func noIssuerDiscards() async throws {
        let log = LogCollector()
        let flow = try await AuthFlow(providers: [mock.provider(id: "plain", scopes: ["openid", "read"])], store: store,
                                      transport: mock.transport(), options: options(clock, log: log))
        let token = try Self.keyA.token(claims: claims(nonce: nil))
        mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        mock.script(.token, [.token(access: "at-1", refresh: "rt-1", idToken: token)])
        let authorization = try await flow.authorizeWithDeviceCode(provider: "plain")
        #expect(authorization.idToken == nil)
        #expect(!authorization.hasIDToken)
        #expect(try await flow.tokenSet(for: "plain").idToken == nil)
        let stored = String(decoding: try #require(try await store.load("plain")), as: UTF8.self)
        #expect(!stored.contains("idToken"))
        #expect(!stored.contains(token.split(separator: ".")[1]))
        let warning = try #require(log.all.first { $0.level == .warning && $0.message.contains("id_token") })
        #expect(warning.message.contains("discarded") && warning.message.contains("3 segments"))
        #expect(!warning.message.contains(token.split(separator: ".")[1]) && !warning.message.contains(token.split(separator: ".")[2]))
        #expect(mock.requests(.jwks).isEmpty, "nothing to validate against, so no keys are fetched")

        // A refresh answer's id_token is discarded the same way.
        clock.advance(by: .seconds(3600))
        mock.script(.token, [.token(access: "at-2", idToken: token)])
        try await flow.refresh(provider: "plain")
        #expect(await flow.authorization(for: "plain")?.hasIDToken == false)
        #expect(!String(decoding: try #require(try await store.load("plain")), as: UTF8.self).contains("idToken"))
    }

    // MARK: max_age and the request's time, kept in the request

    @Test("a kept request's max_age is checked against the time it was made, not one derived from the finishing flow's options")
    func keptRequestMaxAge() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.keyA.jwk()])])
        let first = try await flow()
        let request = try await first.authorizationRequest(provider: "op", parameters: ["max_age": "300"])
        #expect(request.maxAge == 300)
        #expect(request.requestedAt == clock.date)
        let restored = try JSONDecoder().decode(AuthorizationRequest.self, from: JSONEncoder().encode(request))
        #expect(restored.maxAge == 300 && restored.requestedAt == clock.date)

        // Another instance with a shorter request lifetime finishes it: expiresAt - 60 s would put
        // the request 540 s after it was made, and auth_time 100 s before it would look 640 s old.
        var shortLived = options(clock)
        shortLived.pendingAuthorizationLifetime = 60
        let second = try await AuthFlow(providers: [mock.discoveredProvider(id: "op")], store: store, transport: mock.transport(),
                                        options: shortLived)
        let authTime = Int(clock.date.timeIntervalSince1970) - 100
        let token = try Self.keyA.token(claims: claims(nonce: restored.nonce, ["auth_time": .number(String(authTime))]))
        mock.script(.token, [.token(access: "at-kept", refresh: "rt-1", idToken: token)])
        let authorization = try await second.completeAuthorization(callbackURL: callback(restored), request: restored)
        #expect(authorization.hasIDToken)
    }

    @Test("a request encoded before maxAge and requestedAt were kept still decodes: max_age from its URL, no requestedAt")
    func oldEncodingDecodes() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        let flow = try await flow()
        let request = try await flow.authorizationRequest(provider: "op", parameters: ["max_age": "120"])
        var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(request)) as? [String: Any])
        #expect(object["maxAge"] as? Double == 120)
        object["maxAge"] = nil
        object["requestedAt"] = nil
        let old = try JSONDecoder().decode(AuthorizationRequest.self, from: JSONSerialization.data(withJSONObject: object))
        #expect(old.maxAge == 120)
        #expect(old.requestedAt == nil)
        #expect(old.url == request.url && old.expiresAt == request.expiresAt && old.state.constantTimeEquals(request.state))

        let plain = try await flow.authorizationRequest(provider: "op")
        let back = try JSONDecoder().decode(AuthorizationRequest.self, from: JSONEncoder().encode(plain))
        #expect(plain.maxAge == nil && back.maxAge == nil && back.requestedAt == plain.requestedAt)
    }
}
