import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Discovery (OpenID Connect Discovery 1.0, RFC 8414, RFC 9207)", .timeLimit(.minutes(1)))
struct DiscoveryTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = MemorySecretStore()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, store: store, transport: mock.transport(), options: options(clock))
    }

    /// A service provider configured from `issuer` alone (no `openid`, so no ID token is involved).
    func serviceProvider(issuer: String? = nil) -> Provider {
        Provider(id: "svc", issuer: issuer ?? mock.issuer, clientID: "svc-client", clientSecret: Secret("svc-secret"), scopes: ["read"])
    }

    @Test("a provider configured from issuer alone takes its endpoints from discovery, fetched once")
    func issuerOnly() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.token, [.token(access: "at-1"), .token(access: "at-2")])
        let flow = try await flow(serviceProvider())
        _ = try await flow.clientCredentials(provider: "svc")
        _ = try await flow.clientCredentials(provider: "svc")
        #expect(mock.requests(.openIDConfiguration).count == 1)
        #expect(mock.requests(.openIDConfiguration).first?.method == "GET")
        #expect(mock.requests(.token).map(\.url) == [mock.url(.token), mock.url(.token)])
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration", "/token", "/token"])
    }

    @Test("the device and refresh grants use the discovered endpoints too")
    func deviceAndRefresh() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        let provider = Provider(id: "dev", issuer: mock.issuer, clientID: "dev-client", scopes: ["read"])
        let flow = try await flow(provider)
        try await authorizeByDevice(flow, mock: mock, provider: "dev")
        clock.advance(by: .seconds(3600))
        mock.script(.token, [.token(access: "at-2")])
        #expect(try await flow.accessToken(for: "dev").reveal() == "at-2")
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration", "/device/code", "/token", "/token"])
    }

    @Test("the document's issuer must equal the configured one exactly: .invalidResponse naming both, no grant request")
    func issuerMismatch() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument(issuer: mock.issuer + "/")])
        let flow = try await flow(serviceProvider())
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .discovery)
        #expect(error.message?.contains("\"\(mock.issuer)/\"") == true)
        #expect(error.message?.contains("\"\(mock.issuer)\"") == true)
        #expect(mock.requests(.token).isEmpty)
        #expect(flow.state == .error(provider: "svc", error))
    }

    @Test("an issuer with a path: the OpenID document under it, then RFC 8414's inserted between host and path (§3.1)")
    func fallbackPath() async throws {
        let issuer = mock.issuer + "/tenant"
        mock.script(path: "/tenant/.well-known/openid-configuration", [.json(#"{"error":"not_found"}"#, status: 404)])
        mock.script(path: "/.well-known/oauth-authorization-server/tenant", [mock.discoveryDocument(issuer: issuer)])
        let flow = try await flow(serviceProvider(issuer: issuer))
        let metadata = try await flow.metadata(for: flow.provider("svc"))
        #expect(metadata.issuer == issuer)
        #expect(metadata.tokenEndpoint == mock.url(.token))
        #expect(mock.requests().map(\.url.path) == [
            "/tenant/.well-known/openid-configuration", "/.well-known/oauth-authorization-server/tenant",
        ])
    }

    @Test("the well-known URLs of RFC 8414 §3.1 and Discovery §4", arguments: [
        ("https://a.example", "https://a.example/.well-known/openid-configuration",
         "https://a.example/.well-known/oauth-authorization-server"),
        ("https://a.example/", "https://a.example/.well-known/openid-configuration",
         "https://a.example/.well-known/oauth-authorization-server"),
        ("https://a.example/t/1", "https://a.example/t/1/.well-known/openid-configuration",
         "https://a.example/.well-known/oauth-authorization-server/t/1"),
        ("http://127.0.0.1:8910/o", "http://127.0.0.1:8910/o/.well-known/openid-configuration",
         "http://127.0.0.1:8910/.well-known/oauth-authorization-server/o"),
    ])
    func wellKnownURLs(issuer: String, openID: String, oauth: String) {
        #expect(Discovery.openIDConfigurationURL(issuer: issuer)?.absoluteString == openID)
        #expect(Discovery.authorizationServerMetadataURL(issuer: issuer)?.absoluteString == oauth)
    }

    @Test("Cache-Control: max-age is honoured: no request while fresh, one after expiry")
    func maxAge() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument(maxAge: 120)])
        let flow = try await flow(serviceProvider())
        let provider = try flow.provider("svc")
        _ = try await flow.metadata(for: provider)
        clock.advance(by: .seconds(119))
        _ = try await flow.metadata(for: provider)
        #expect(mock.requests(.openIDConfiguration).count == 1)
        clock.advance(by: .seconds(2))
        _ = try await flow.metadata(for: provider)
        _ = try await flow.metadata(for: provider)
        #expect(mock.requests(.openIDConfiguration).count == 2)
    }

    @Test("without Cache-Control a document is kept 24 hours")
    func defaultLifetime() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        let flow = try await flow(serviceProvider())
        let provider = try flow.provider("svc")
        _ = try await flow.metadata(for: provider)
        clock.advance(by: .seconds(24 * 3600 - 1))
        _ = try await flow.metadata(for: provider)
        #expect(mock.requests(.openIDConfiguration).count == 1)
        clock.advance(by: .seconds(2))
        _ = try await flow.metadata(for: provider)
        #expect(mock.requests(.openIDConfiguration).count == 2)
    }

    @Test("Cache-Control lifetimes", arguments: [
        ("max-age=300", 300.0), ("public, max-age=60, must-revalidate", 60), ("no-store", 0), ("no-cache, max-age=60", 0),
        ("max-age=99999999999999999999999", 7 * 24 * 3600), ("max-age=-5", 24 * 3600), ("private", 24 * 3600),
    ] as [(String, TimeInterval)])
    func cacheControl(header: String, lifetime: TimeInterval) {
        #expect(Discovery.lifetime(of: HTTPResponse(status: 200, headers: ["Cache-Control": header])) == lifetime)
    }

    @Test("concurrent first callers cause one fetch")
    func singleFlight() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        let flow = try await flow(serviceProvider())
        let provider = try flow.provider("svc")
        let issuers = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<16 { group.addTask { try await flow.metadata(for: provider).issuer } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(issuers == Array(repeating: mock.issuer, count: 16))
        #expect(mock.requests(.openIDConfiguration).count == 1)
    }

    @Test("a failed fetch is a typed error, not cached: the next call fetches again", arguments: [
        (MockResponse.html(status: 503), OAuthError.Code.httpStatus),
        (MockResponse.json("{\"issuer\": ", status: 200), .invalidResponse),
        (MockResponse.json(#"{"issuer": "ISSUER", "token_endpoint": "http://evil.example/token"}"#), .invalidResponse),
    ])
    func failureNotCached(failure: MockResponse, code: OAuthError.Code) async throws {
        var failure = failure
        failure.body = Data(String(decoding: failure.body, as: UTF8.self).replacingOccurrences(of: "ISSUER", with: mock.issuer).utf8)
        mock.script(.openIDConfiguration, [failure, mock.discoveryDocument()])
        let flow = try await flow(serviceProvider())
        let provider = try flow.provider("svc")
        let error = await #expect(throws: OAuthError.self) { try await flow.metadata(for: provider) }
        #expect(error?.code == code)
        #expect(error?.endpoint == .discovery)
        #expect(try await flow.metadata(for: provider).tokenEndpoint == mock.url(.token))
        #expect(mock.requests(.openIDConfiguration).count == 2)
    }

    @Test("a transport failure is .transport and retried on the next call")
    func transportFailure() async throws {
        let provider = Provider(id: "svc", issuer: "https://\(UUID().uuidString.lowercased()).gone.test", clientID: "c")
        let flow = try await flow(provider)
        let error = await #expect(throws: OAuthError.self) { try await flow.metadata(for: provider) }
        #expect(error?.code == .transport)
        #expect(error?.isRetryable == true)
    }

    @Test("endpoints written in the catalog win, and no discovery happens when none is missing")
    func catalogWins() async throws {
        let custom = mock.baseURL.appendingPathComponent("custom-token")
        mock.script(path: "/custom-token", [.token(access: "at-1")])
        let provider = Provider(id: "svc", tokenURL: custom, issuer: mock.issuer, clientID: "c", clientSecret: Secret("s"))
        let flow = try await flow(provider)
        _ = try await flow.clientCredentials(provider: "svc")
        #expect(mock.requests().map(\.url) == [custom], "nothing else, discovery included")
    }

    @Test("a written endpoint wins over the discovered one when discovery fills another gap")
    func catalogWinsBesideDiscovery() async throws {
        let custom = mock.baseURL.appendingPathComponent("custom-token")
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        mock.script(path: "/custom-token", [.token(access: "at-1")])
        let provider = Provider(id: "dev", tokenURL: custom, issuer: mock.issuer, clientID: "c")
        let flow = try await flow(provider)
        _ = try await flow.authorizeWithDeviceCode(provider: "dev")
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration", "/device/code", "/custom-token"])
    }

    @Test("a grant missing from grant_types_supported is still attempted")
    func grantTypesNeverBlock() async throws {
        let document = #"{"issuer": "\#(mock.issuer)", "token_endpoint": "\#(mock.url(.token))", "grant_types_supported": ["authorization_code"]}"#
        mock.script(.openIDConfiguration, [.json(document)])
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(serviceProvider())
        _ = try await flow.clientCredentials(provider: "svc")
        #expect(mock.requests(.token).count == 1)
        #expect(try await flow.metadata(for: flow.provider("svc")).grantTypesSupported == ["authorization_code"])
    }

    @Test("an endpoint missing from both catalog and discovery is .configuration naming both")
    func missingEverywhere() async throws {
        mock.script(.openIDConfiguration, [.json(#"{"issuer": "\#(mock.issuer)", "token_endpoint": "\#(mock.url(.token))"}"#)])
        let flow = try await flow(Provider(id: "dev", issuer: mock.issuer, clientID: "c"))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.requestDeviceCode(provider: "dev") })
        #expect(error.code == .configuration)
        #expect(error.message?.contains("deviceAuthorizationURL") == true)
        #expect(error.message?.contains("device_authorization_endpoint") == true)
    }

    @Test("the same for userinfo, introspection, the end-session URL and the token endpoint: one message, key and member",
          arguments: ["userinfo", "introspection", "endSession", "token"])
    func missingEverywhereForEveryCall(call: String) async throws {
        // A document with no endpoint but the JWKS: every call's endpoint is missing from both places.
        mock.script(.openIDConfiguration, [.json(#"{"issuer":"\#(mock.issuer)","jwks_uri":"\#(mock.url(.jwks).absoluteString)"}"#)])
        let flow = try await flow(serviceProvider())
        let expected: (key: String, member: String)
        let error: OAuthError?
        switch call {
        case "userinfo":
            expected = ("userinfoURL", "userinfo_endpoint")
            error = await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "svc") }
        case "introspection":
            expected = ("introspectionURL", "introspection_endpoint")
            error = await #expect(throws: OAuthError.self) { try await flow.introspect(provider: "svc") }
        case "endSession":
            expected = ("endSessionURL", "end_session_endpoint")
            error = await #expect(throws: OAuthError.self) { try await flow.endSessionURL(provider: "svc") }
        default:
            expected = ("tokenURL", "token_endpoint")
            error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") }
        }
        let failure = try #require(error)
        #expect(failure.code == .configuration)
        #expect(failure.message == "provider \"svc\" has no \(expected.key), and the discovery document of \(mock.issuer) has no \(expected.member)")
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration"])
        #expect(flow.state == .error(provider: "svc", failure))
    }

    @Test("metadata(for:) without an issuer is .configuration")
    func noIssuer() async throws {
        let provider = mock.provider(id: "plain")
        let flow = try await flow(provider)
        let error = await #expect(throws: OAuthError.self) { try await flow.metadata(for: provider) }
        #expect(error?.code == .configuration)
        #expect(mock.requests().isEmpty)
    }

    @Test("metadata decodes every typed member and keeps the document")
    func decoding() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument(issParameterSupported: true, algorithms: ["ES256", "RS256"])])
        let flow = try await flow(serviceProvider())
        let metadata = try await flow.metadata(for: flow.provider("svc"))
        #expect(metadata.authorizationEndpoint == mock.url(.authorization))
        #expect(metadata.deviceAuthorizationEndpoint == mock.url(.deviceAuthorization))
        #expect(metadata.userinfoEndpoint == mock.url(.userinfo))
        #expect(metadata.revocationEndpoint == mock.url(.revocation))
        #expect(metadata.introspectionEndpoint == mock.url(.introspection))
        #expect(metadata.endSessionEndpoint == mock.baseURL.appendingPathComponent("logout"))
        #expect(metadata.jwksURI == mock.url(.jwks))
        #expect(metadata.idTokenSigningAlgorithmsSupported == ["ES256", "RS256"])
        #expect(metadata.codeChallengeMethodsSupported == ["S256"])
        #expect(metadata.responseTypesSupported == ["code"])
        #expect(metadata.authorizationResponseIssParameterSupported)
        #expect(metadata.document["response_types_supported"] == .array([.string("code")]))
    }
}

// MARK: - RFC 9207 against the advertised metadata

extension DiscoveryTests {
    func loginRequest(advertised: Bool) async throws -> (AuthFlow, AuthorizationRequest) {
        mock.script(.openIDConfiguration, [mock.discoveryDocument(issParameterSupported: advertised)])
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(Provider(id: "web", issuer: mock.issuer, clientID: "c", redirectURI: URL(string: "http://127.0.0.1:8765/callback"),
                                           scopes: ["read"]))
        return (flow, try await flow.authorizationRequest(provider: "web"))
    }

    @Test("advertised iss support makes iss required: a callback without it is .invalidCallback and the code is never exchanged")
    func issRequiredWhenAdvertised() async throws {
        let (flow, request) = try await loginRequest(advertised: true)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: callback(request)) })
        #expect(error.code == .invalidCallback)
        #expect(error.message?.contains("authorization_response_iss_parameter_supported") == true)
        #expect(mock.requests(.token).isEmpty)
        #expect(flow.state == .error(provider: "web", error))
    }

    @Test("advertised iss support: a different iss is .invalidCallback, the code never exchanged")
    func differentIssWhenAdvertised() async throws {
        let (flow, request) = try await loginRequest(advertised: true)
        let url = callback(request, extra: [("iss", "https://evil.example")])
        let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: url) }
        #expect(error?.code == .invalidCallback)
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("advertised iss support: the exact iss is accepted")
    func exactIssWhenAdvertised() async throws {
        let (flow, request) = try await loginRequest(advertised: true)
        _ = try await flow.completeAuthorization(callbackURL: callback(request, extra: [("iss", mock.issuer)]))
        #expect(mock.requests(.token).count == 1)
    }

    @Test("without advertised support an absent iss is accepted")
    func absentIssNotAdvertised() async throws {
        let (flow, request) = try await loginRequest(advertised: false)
        _ = try await flow.completeAuthorization(callbackURL: callback(request))
        #expect(mock.requests(.token).count == 1)
    }

    @Test("an error response without iss is reported as its error even when support is advertised (no code to exchange)")
    func errorWithoutIss() async throws {
        let (flow, request) = try await loginRequest(advertised: true)
        let url = callback(query: "error=access_denied&state=\(request.state.reveal())")
        let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: url) }
        #expect(error?.code == .accessDenied)
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("a server with no metadata at all (404 on both documents) does not advertise: an absent iss is accepted")
    func noMetadataAtAll() async throws {
        mock.script(.openIDConfiguration, [.json("{}", status: 404)])
        mock.script(.authorizationServerMetadata, [.json("{}", status: 404)])
        mock.script(.token, [.token(access: "at-1")])
        let provider = mock.provider(id: "web", issuer: mock.issuer)
        let flow = try await flow(provider)
        let request = try await flow.authorizationRequest(provider: "web")
        _ = try await flow.completeAuthorization(callbackURL: callback(request))
        #expect(mock.requests().map(\.url.path) == ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server", "/token"])
    }
}
