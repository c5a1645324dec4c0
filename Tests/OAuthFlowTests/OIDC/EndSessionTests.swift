import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("RP-initiated logout URL (OpenID Connect RP-Initiated Logout 1.0 §2)")
struct EndSessionTests {
    @Test("id_token_hint, client_id, post_logout_redirect_uri and state, in that order, percent-encoded; the endpoint's query kept")
    func parameters() throws {
        let endpoint = try #require(URL(string: "https://op.example/logout?tenant=a%20b"))
        let url = try EndSession.url(
            endpoint: endpoint, providerID: "app", clientID: "cli 1", idTokenHint: Secret("h.p.s"),
            postLogoutRedirectURI: URL(string: "https://rp.example/bye?x=1"), state: "st+/=")
        #expect(url.absoluteString == "https://op.example/logout?tenant=a%20b&id_token_hint=h.p.s&client_id=cli%201"
            + "&post_logout_redirect_uri=https%3A%2F%2Frp.example%2Fbye%3Fx%3D1&state=st%2B%2F%3D")
        let items = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems)
        #expect(items.map(\.name) == ["tenant", "id_token_hint", "client_id", "post_logout_redirect_uri", "state"])
        #expect(items.first { $0.name == "post_logout_redirect_uri" }?.value == "https://rp.example/bye?x=1")
        #expect(items.first { $0.name == "state" }?.value == "st+/=")
    }

    @Test("without an ID token, redirect or state only client_id is sent")
    func minimal() throws {
        let url = try EndSession.url(endpoint: try #require(URL(string: "https://op.example/logout")), providerID: "app",
                                     clientID: "cli", idTokenHint: nil, postLogoutRedirectURI: nil, state: nil)
        #expect(url.absoluteString == "https://op.example/logout?client_id=cli")
    }

    @Test("a post-logout redirect with a fragment or without a scheme is .configuration", arguments: [
        "https://rp.example/bye#frag", "/relative/bye",
    ])
    func badRedirect(redirect: String) throws {
        let error = #expect(throws: OAuthError.self) {
            try EndSession.url(endpoint: URL(string: "https://op.example/logout")!, providerID: "app", clientID: "cli",
                               idTokenHint: nil, postLogoutRedirectURI: URL(string: redirect), state: nil)
        }
        #expect(error?.code == .configuration)
    }
}

@Suite("AuthFlow.endSessionURL (OpenID Connect RP-Initiated Logout 1.0 §2)", .timeLimit(.minutes(1)))
struct EndSessionFlowTests {
    let mock = MockProvider()
    let clock = TestClock()

    /// A flow for `provider` whose store holds tokens for "app", with a validated ID token when `idToken` is given.
    func flow(_ provider: Provider, idToken: String? = nil, validated: Bool = true, log: LogCollector? = nil) async throws -> AuthFlow {
        let entry = storedEntry(provider: "app", idToken: idToken, validated: validated, issuedAt: clock.date)
        return try await AuthFlow(providers: [provider], store: MemorySecretStore(["app": entry]), transport: mock.transport(),
                                  options: options(clock, log: log))
    }

    var heldToken: String { compactJWT(heldIDTokenClaims(sub: "user-1", iss: mock.issuer, aud: "mock-client")) }

    @Test("the catalog's endSessionURL wins over the discovered end_session_endpoint; no discovery request is made")
    func catalogWins() async throws {
        var provider = mock.discoveredProvider(id: "app")
        provider.endSessionURL = URL(string: "https://sso.example/bye?tenant=t1")
        let flow = try await flow(provider, idToken: heldToken)
        let url = try await flow.endSessionURL(provider: "app", postLogoutRedirectURI: URL(string: "https://rp.example/done"),
                                               state: Secret("logout-state-1"))
        #expect(url.host == "sso.example" && url.path == "/bye")
        #expect(queryPairs(url).map(\.0) == ["tenant", "id_token_hint", "client_id", "post_logout_redirect_uri", "state"])
        #expect(query(url)?["id_token_hint"] == heldToken)
        #expect(query(url)?["client_id"] == "mock-client")
        #expect(query(url)?["post_logout_redirect_uri"] == "https://rp.example/done")
        #expect(query(url)?["state"] == "logout-state-1")
        #expect(mock.requests().isEmpty)
        #expect(flow.state.name == "authorized", "building the URL sends, stores and publishes nothing")
        #expect(try await flow.tokenSet(for: "app").idToken?.reveal() == heldToken, "the tokens are not forgotten")
    }

    @Test("without endSessionURL, the discovered end_session_endpoint is used")
    func discoveredFallback() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        let flow = try await flow(mock.discoveredProvider(id: "app"), idToken: heldToken)
        let url = try await flow.endSessionURL(provider: "app")
        let components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
        #expect(components.host == mock.host && components.path == "/logout")
        #expect(queryPairs(url).map(\.0) == ["id_token_hint", "client_id"])
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration"])
    }

    @Test("no end-session endpoint, written or discovered, is .configuration naming endSessionURL, published as .error")
    func noEndpoint() async throws {
        let flow = try await flow(mock.provider(id: "app"))
        let recorders = recordStates(flow, count: 1)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.endSessionURL(provider: "app") })
        #expect(error.code == .configuration)
        #expect(error.endpoint == .endSession)
        #expect(error.message?.contains("endSessionURL") == true)
        #expect(await collected(recorders)[0].map(\.name) == ["authorized", "error"])
        #expect(flow.state == .error(provider: "app", error))
    }

    @Test("a discovery document without end_session_endpoint is .configuration naming the catalog key and the member")
    func noDiscoveredEndpoint() async throws {
        mock.script(.openIDConfiguration, [.json(#"{"issuer":"\#(mock.issuer)","token_endpoint":"\#(mock.url(.token))"}"#)])
        let flow = try await flow(mock.discoveredProvider(id: "app"))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.endSessionURL(provider: "app") })
        #expect(error.code == .configuration)
        #expect(error.message?.contains("endSessionURL") == true && error.message?.contains("end_session_endpoint") == true)
        #expect(flow.state == .error(provider: "app", error))
    }

    @Test("an unknown provider and a bad post-logout redirect are .configuration, published as .error; the state never appears")
    func badArguments() async throws {
        var provider = mock.provider(id: "app")
        provider.endSessionURL = URL(string: "https://sso.example/bye")
        let flow = try await flow(provider)
        let unknown = try #require(await #expect(throws: OAuthError.self) { try await flow.endSessionURL(provider: "nope") })
        #expect(unknown.code == .configuration)
        #expect(flow.state == .error(provider: "nope", unknown))
        let bad = try #require(await #expect(throws: OAuthError.self) {
            try await flow.endSessionURL(provider: "app", postLogoutRedirectURI: URL(string: "https://rp.example/done#frag"),
                                         state: Secret("state-secret-77"))
        })
        #expect(bad.code == .configuration)
        #expect(flow.state == .error(provider: "app", bad))
        #expect(!String(reflecting: bad).contains("state-secret-77"))
    }

    @Test("without a held ID token the URL still carries client_id (and the state)")
    func noIDToken() async throws {
        var provider = mock.provider(id: "app")
        provider.endSessionURL = URL(string: "https://sso.example/bye")
        let flow = try await flow(provider)
        let url = try await flow.endSessionURL(provider: "app", state: Secret("s-1"))
        #expect(url.absoluteString == "https://sso.example/bye?client_id=mock-client&state=s-1")
    }

    @Test("an ID token stored without the validated mark is never sent as id_token_hint")
    func unvalidatedNotHinted() async throws {
        var provider = mock.provider(id: "app")
        provider.endSessionURL = URL(string: "https://sso.example/bye")
        let flow = try await flow(provider, idToken: heldToken, validated: false)
        let url = try await flow.endSessionURL(provider: "app")
        #expect(url.absoluteString == "https://sso.example/bye?client_id=mock-client")
    }

    @Test("the debug log says which parameters were sent, never the ID token or the state")
    func logRedaction() async throws {
        var provider = mock.discoveredProvider(id: "app")
        provider.endSessionURL = URL(string: "https://sso.example/bye")
        provider.debug = true
        let log = LogCollector()
        let flow = try await flow(provider, idToken: heldToken, log: log)
        _ = try await flow.endSessionURL(provider: "app", postLogoutRedirectURI: URL(string: "https://rp.example/done"),
                                         state: Secret("state-secret-42"))
        let lines = log.all.map(\.message)
        #expect(lines.contains { $0.contains("end-session URL built") && $0.contains("id_token_hint=true") && $0.contains("state=true") })
        for line in lines {
            #expect(!line.contains("state-secret-42"))
            #expect(!line.contains(heldToken) && !line.contains(heldToken.split(separator: ".")[1]))
        }
    }
}
