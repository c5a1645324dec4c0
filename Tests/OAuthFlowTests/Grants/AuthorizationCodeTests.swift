import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Authorization code + PKCE (RFC 6749 §4.1, RFC 7636)", .timeLimit(.minutes(1)))
struct AuthorizationCodeTests {
    let mock = MockProvider()
    let clock = TestClock()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, transport: mock.transport(), options: options(clock))
    }

    // MARK: The authorization URL

    @Test("URL carries response_type, client_id, redirect_uri, scope and a 256-bit state (RFC 6749 §4.1.1, §10.10)")
    func authorizationURL() async throws {
        let flow = try await flow(mock.provider(id: "web", clientID: "client-1", scopes: ["read", "write"]))
        let request = try await flow.authorizationRequest(provider: "web")

        let components = try #require(URLComponents(url: request.url, resolvingAgainstBaseURL: false))
        #expect(components.scheme == "https")
        #expect(components.host == mock.host)
        #expect(components.path == "/authorize")
        let items = try #require(query(request.url), "every parameter appears once")
        #expect(items["response_type"] == "code")
        #expect(items["client_id"] == "client-1")
        #expect(items["redirect_uri"] == "http://127.0.0.1:8765/callback")
        #expect(items["scope"] == "read write")
        let state = try #require(items["state"])
        #expect(state == request.state.reveal())
        #expect(state.count >= 43, "at least 128 bits, base64url")
        #expect(state.allSatisfy(base64URLAlphabet.contains))
        #expect(request.scopes == ["read", "write"])
        #expect(request.redirectURI == URL(string: "http://127.0.0.1:8765/callback"))
        #expect(request.expiresAt == clock.date.addingTimeInterval(600))
        // Spaces are %20 in a URL query, never a literal space.
        #expect(components.percentEncodedQuery?.contains("scope=read%20write") == true)
    }

    @Test("code_challenge is S256 of the verifier and code_challenge_method=S256 (RFC 7636 §4.2–4.3)")
    func pkceChallenge() async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        let verifier = try #require(request.codeVerifier)
        let items = try #require(query(request.url))
        #expect(verifier.reveal().count == 43)
        #expect(items["code_challenge"] == (try PKCE(verifier: verifier)).challenge)
        #expect(items["code_challenge_method"] == "S256")
        #expect(items["code_verifier"] == nil, "the verifier never goes to the authorization endpoint")
        #expect(!request.url.absoluteString.contains(verifier.reveal()))
    }

    @Test("nonce is sent only when openid is requested (OpenID Connect Core §3.1.2.1)", arguments: [
        (["read"], false), (["openid"], true), (["openid", "email"], true), (["openidx"], false),
    ])
    func nonceOnlyWithOpenID(scopes: [String], expectsNonce: Bool) async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web", scopes: scopes)
        let items = try #require(query(request.url))
        if expectsNonce {
            let nonce = try #require(request.nonce)
            #expect(items["nonce"] == nonce.reveal())
            #expect(nonce.reveal().count >= 43)
        } else {
            #expect(request.nonce == nil)
            #expect(items["nonce"] == nil)
        }
    }

    @Test("provider authorizationParameters are sent and per-call parameters override them (phone verification)")
    func extraParameters() async throws {
        let provider = mock.provider(
            id: "phone", scopes: ["openid", "ip:phone_verify"],
            authorizationParameters: ["login_hint": "+15551234567", "prompt": "login"])
        let flow = try await flow(provider)
        let request = try await flow.authorizationRequest(
            provider: "phone", parameters: ["login_hint": "+15557654321", "consent_id": "c&d=1"])
        let items = try #require(query(request.url), "an overridden parameter is not sent twice")
        #expect(items["login_hint"] == "+15557654321")
        #expect(items["prompt"] == "login")
        #expect(items["consent_id"] == "c&d=1")
        #expect(items["scope"] == "openid ip:phone_verify")
        let raw = try #require(URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.percentEncodedQuery)
        #expect(raw.contains("login_hint=%2B15557654321"), "a literal + must be escaped or servers read a space")
        #expect(raw.contains("consent_id=c%26d%3D1"))
    }

    @Test("a query already on the authorization URL is kept (RFC 6749 §3.1)")
    func existingQueryKept() async throws {
        var provider = mock.provider(id: "b2c")
        provider.authorizationURL = URL(string: "\(mock.url(.authorization).absoluteString)?p=B2C_1_signin&tenant=a%20b")
        let flow = try await flow(provider)
        let request = try await flow.authorizationRequest(provider: "b2c")
        let pairs = queryPairs(request.url)
        #expect(pairs.prefix(2).map(\.0) == ["p", "tenant"])
        let items = try #require(query(request.url))
        #expect(items["p"] == "B2C_1_signin")
        #expect(items["tenant"] == "a b")
        #expect(items["response_type"] == "code")
        #expect(items["state"] == request.state.reveal())
    }

    static let reserved = [
        "response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "nonce", "scope",
    ]

    @Test("per-call parameters may not override what the flow sets", arguments: reserved)
    func reservedPerCall(name: String) async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let error = await #expect(throws: OAuthError.self) {
            try await flow.authorizationRequest(provider: "web", parameters: [name: "attacker"])
        }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains(name) == true)
        // Nothing started, and the failure is published like every other (issue: every failing call publishes .error).
        #expect(flow.state == .error(provider: "web", try #require(error)))
        #expect(await flow.authorization(for: "web") == nil)
    }

    @Test("provider authorizationParameters may not override what the flow sets", arguments: reserved)
    func reservedInProvider(name: String) async throws {
        let error = await #expect(throws: OAuthError.self) {
            try await flow(mock.provider(id: "web", authorizationParameters: [name: "x"]))
        }
        #expect(error?.code == .configuration)
        #expect(error?.providerID == "web")
    }

    @Test("a public client cannot turn PKCE off; a confidential one can (RFC 9700 §2.1.1)")
    func pkceRequiredForPublicClients() async throws {
        let flow = try await flow(mock.provider(id: "public"), mock.provider(id: "web", clientSecret: "s3cret"))
        let error = await #expect(throws: OAuthError.self) {
            try await flow.authorizationRequest(provider: "public", usePKCE: false)
        }
        #expect(error?.code == .configuration)
        #expect(flow.state == .error(provider: "public", try #require(error)))

        mock.script(.token, [.token(access: "at-web")])
        let request = try await flow.authorizationRequest(provider: "web", usePKCE: false)
        let items = try #require(query(request.url))
        #expect(items["code_challenge"] == nil)
        #expect(items["code_challenge_method"] == nil)
        #expect(request.codeVerifier == nil)
        _ = try await flow.completeAuthorization(callbackURL: callback(request))
        let sent = try #require(mock.requests(.token).first)
        #expect(sent.form["code_verifier"] == nil)
        #expect(sent.basicCredentials?.secret == "s3cret")
    }

    @Test("a provider without authorizationURL or redirectURI cannot start the grant")
    func missingEndpoints() async throws {
        var noAuthorization = mock.provider(id: "a")
        noAuthorization.authorizationURL = nil
        let flow = try await flow(noAuthorization, mock.provider(id: "b", redirectURI: nil))
        for id in ["a", "b", "unknown"] {
            let error = await #expect(throws: OAuthError.self) { try await flow.authorizationRequest(provider: id) }
            #expect(error?.code == .configuration)
        }
    }

    // MARK: The code exchange

    @Test("public client: the exact token request (RFC 6749 §4.1.3, RFC 7636 §4.5)")
    func publicExchange() async throws {
        mock.script(.token, [.token(access: "at-1", expiresIn: 3600, refresh: "rt-1", scope: "read")])
        let flow = try await flow(mock.provider(id: "web", clientID: "public-client"))
        let request = try await flow.authorizationRequest(provider: "web")
        let authorization = try await flow.completeAuthorization(callbackURL: callback(request, code: "code 1/+"))

        let sent = try #require(mock.requests(.token).only)
        #expect(sent.method == "POST")
        #expect(sent.url == mock.url(.token))
        #expect(sent.url.query == nil)
        #expect(sent.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(sent.header("Accept") == "application/json")
        #expect(sent.header("Authorization") == nil)
        #expect(uniqueForm(sent) == [
            "grant_type": "authorization_code", "code": "code 1/+", "redirect_uri": "http://127.0.0.1:8765/callback",
            "code_verifier": request.codeVerifier?.reveal() ?? "-", "client_id": "public-client",
        ])
        #expect(mock.requests(.authorization).isEmpty)

        #expect(authorization.grant == .authorizationCode)
        #expect(authorization.isRefreshable)
        #expect(authorization.expiresAt == clock.date.addingTimeInterval(3600))
        #expect(try await flow.accessToken(for: "web").reveal() == "at-1")
        #expect(mock.requests(.token).count == 1, "a valid token is answered from memory")
    }

    @Test("confidential web back end: client_secret_basic, no secret in the body or URL (RFC 6749 §2.3.1)")
    func confidentialBasicExchange() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web", clientID: "backend", clientSecret: "top secret:1"))
        let request = try await flow.authorizationRequest(provider: "web")
        _ = try await flow.completeAuthorization(callbackURL: callback(request))

        let sent = try #require(mock.requests(.token).only)
        #expect(sent.header("Authorization") == "Basic " + Data("backend:top+secret%3A1".utf8).base64EncodedString())
        #expect(sent.basicCredentials?.id == "backend")
        #expect(sent.basicCredentials?.secret == "top secret:1")
        #expect(uniqueForm(sent) == [
            "grant_type": "authorization_code", "code": "auth-code-1", "redirect_uri": "http://127.0.0.1:8765/callback",
            "code_verifier": request.codeVerifier?.reveal() ?? "-",
        ])
        #expect(!String(decoding: sent.body, as: UTF8.self).contains("secret"))
        #expect(!sent.url.absoluteString.contains("secret"))
    }

    @Test("confidential client with client_secret_post sends id and secret in the body (RFC 6749 §2.3.1)")
    func confidentialPostExchange() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(
            mock.provider(id: "web", clientID: "backend", clientSecret: "p&ss=1", clientAuthentication: .clientSecretPost))
        let request = try await flow.authorizationRequest(provider: "web")
        _ = try await flow.completeAuthorization(callbackURL: callback(request))

        let sent = try #require(mock.requests(.token).only)
        #expect(sent.header("Authorization") == nil)
        #expect(uniqueForm(sent) == [
            "grant_type": "authorization_code", "code": "auth-code-1", "redirect_uri": "http://127.0.0.1:8765/callback",
            "code_verifier": request.codeVerifier?.reveal() ?? "-", "client_id": "backend", "client_secret": "p&ss=1",
        ])
        #expect(sent.url.query == nil)
    }

    @Test("two concurrent subscribers see empty → authorizing → requestingAccessToken → authorized")
    func stateSequence() async throws {
        mock.script(.token, [.token(access: "at-1", refresh: "rt-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let recorders = recordStates(flow)
        let request = try await flow.authorizationRequest(provider: "web")
        let authorization = try await flow.completeAuthorization(callbackURL: callback(request))
        let expected: [State] = [
            .empty, .authorizing(provider: "web", grant: .authorizationCode), .requestingAccessToken(provider: "web"),
            .authorized(provider: "web", authorization),
        ]
        for seen in await collected(recorders) { #expect(seen == expected) }
        #expect(flow.state == .authorized(provider: "web", authorization))
    }

    @Test("invalid_grant at the exchange is .serverRejected with the §5.2 body; the states end in .error (RFC 6749 §5.2)")
    func invalidGrantAtExchange() async throws {
        mock.script(.token, [.oauthError("invalid_grant", description: "code expired")])
        let flow = try await flow(mock.provider(id: "web"))
        let recorders = recordStates(flow)
        let request = try await flow.authorizationRequest(provider: "web")
        let error = try #require(await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(request))
        })
        #expect(error.code == .serverRejected)
        #expect(error.response?.code == .invalidGrant)
        #expect(error.response?.errorDescription == "code expired")
        #expect(error.httpStatus == 400)
        #expect(error.endpoint == .token)
        #expect(error.providerID == "web")
        #expect(error.recovery == .reauthorize)
        let expected: [State] = [
            .empty, .authorizing(provider: "web", grant: .authorizationCode), .requestingAccessToken(provider: "web"),
            .error(provider: "web", error),
        ]
        for seen in await collected(recorders) { #expect(seen == expected) }
        #expect(await flow.authorization(for: "web") == nil)
    }

    @Test("completeAuthorization(callbackURL:request:) finishes a request kept elsewhere (a web session)")
    func completeWithKeptRequest() async throws {
        let provider = mock.provider(id: "web", clientSecret: "s3cret")
        let first = try await flow(provider)
        let request = try await first.authorizationRequest(provider: "web")
        // The web tier stores the request in its session and another instance finishes it.
        let stored = try JSONEncoder().encode(request)
        let restored = try JSONDecoder().decode(AuthorizationRequest.self, from: stored)
        let second = try await flow(provider)
        mock.script(.token, [.token(access: "at-1")])

        let forged = await #expect(throws: OAuthError.self) {
            try await second.completeAuthorization(callbackURL: callback(query: "code=c&state=forged"), request: restored)
        }
        #expect(forged?.code == .stateMismatch)
        #expect(mock.requests(.token).isEmpty)

        let authorization = try await second.completeAuthorization(callbackURL: callback(request), request: restored)
        #expect(authorization.providerID == "web")
        let sent = try #require(mock.requests(.token).only)
        #expect(sent.form["code_verifier"] == request.codeVerifier?.reveal())
        #expect(sent.form["redirect_uri"] == "http://127.0.0.1:8765/callback")
    }

    @Test("a kept request is refused once expired")
    func keptRequestExpires() async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        clock.advance(by: .seconds(601))
        let error = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(request), request: request)
        }
        #expect(error?.code == .stateMismatch)
        #expect(mock.requests().isEmpty)
    }
}
