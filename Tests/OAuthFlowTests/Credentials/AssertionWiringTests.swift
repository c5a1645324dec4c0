import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// The assertion and mutual-TLS methods as the flow applies them: made once per provider, applied
/// by its endpoint client to every request that authenticates the client.
@Suite("Client assertions on every authenticating request (RFC 7523 §2.2, RFC 7521 §4.2, RFC 8705)", .timeLimit(.minutes(1)))
struct AssertionWiringTests {
    enum Method: String, CaseIterable, Sendable { case privateKeyJWT, clientSecretJWT }

    static func provider(_ mock: MockProvider, _ method: Method, files: KeyFiles) throws -> Provider {
        var provider = mock.provider(id: "app", clientID: "cli-1")
        switch method {
        case .privateKeyJWT:
            provider.clientKey = try ClientKey(contentsOfFile: try files.key(.p256SEC1))
            provider.clientKeyID = "k1"
            provider.clientAuthentication = .privateKeyJWT
        case .clientSecretJWT:
            provider.clientSecret = Secret(String(repeating: "s", count: 32))
            provider.clientAuthentication = .clientSecretJWT
        }
        try provider.validate()
        return provider
    }

    @Test("device authorization, token (poll, refresh), introspection and revocation each carry a fresh assertion for their own URL",
          arguments: Method.allCases)
    func everyEndpoint(_ method: Method) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let mock = MockProvider()
        let flow = try await AuthFlow(providers: [try Self.provider(mock, method, files: files)], transport: mock.transport(),
                                      options: options(TestClock()))
        let sent = try await requestEveryAuthenticatingEndpoint(flow, mock: mock, provider: "app")
        #expect(sent.count == 6)
        var identifiers = Set<String>()
        for request in sent {
            let form = request.form
            #expect(request.header("Authorization") == nil)
            #expect(form["client_secret"] == nil)
            #expect(form["client_id"] == "cli-1")
            #expect(form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            let jws = try JWS(compact: try #require(form["client_assertion"]))
            #expect(jws.header.algorithm == (method == .privateKeyJWT ? .es256 : .hs256))
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
            #expect(claims["aud"] as? String == request.url.absoluteString)
            #expect(claims["iss"] as? String == "cli-1" && claims["sub"] as? String == "cli-1")
            identifiers.insert(try #require(claims["jti"] as? String))
        }
        #expect(identifiers.count == 6)
    }

    @Test("a retried token request carries a new assertion: a retry never resends a jti (RFC 7523 §3)", arguments: Method.allCases)
    func retryGetsFreshAssertion(_ method: Method) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let mock = MockProvider()
        mock.script(.token, [MockResponse(status: 503, body: Data("busy".utf8)), .token(access: "at-1")])
        let flow = try await AuthFlow(providers: [try Self.provider(mock, method, files: files)], transport: mock.transport(),
                                      options: options(TestClock()))
        _ = try await flow.clientCredentials(provider: "app")

        let sent = mock.requests(.token)
        #expect(sent.count == 2)
        let identifiers = try sent.map { request -> String in
            let jws = try JWS(compact: try #require(request.form["client_assertion"]))
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
            return try #require(claims["jti"] as? String)
        }
        #expect(Set(identifiers).count == 2, "the retry resent the first attempt's assertion")
    }

    @Test("the endpoint client holds the assertion method, named without a value")
    func heldOnce() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let mock = MockProvider()
        let flow = try await AuthFlow(providers: [try Self.provider(mock, .privateKeyJWT, files: files)], transport: mock.transport())
        guard case .assertion(let authenticator) = flow.endpoints["app"]?.client.authenticator else {
            Issue.record("app: \(String(describing: flow.endpoints["app"]?.client.authenticator))")
            return
        }
        #expect(authenticator.keyID == "k1")
        #expect(flow.endpoints["app"]?.client.authenticator.name == "private_key_jwt")
    }

    static func discovery(_ mock: MockProvider, extra: [String: Any]) throws -> MockResponse {
        var object = try #require(try JSONSerialization.jsonObject(with: mock.discoveryDocument().body) as? [String: Any])
        for (key, value) in extra { object[key] = value }
        return .json(String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self))
    }

    @Test("an algorithm not in token_endpoint_auth_signing_alg_values_supported fails .configuration before any token request")
    func notAdvertised() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let mock = MockProvider()
        var provider = try Self.provider(mock, .privateKeyJWT, files: files)
        provider.issuer = mock.issuer
        mock.script(.openIDConfiguration, [try Self.discovery(mock, extra: ["token_endpoint_auth_signing_alg_values_supported": ["RS256", "PS256"]])])
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport())
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.clientCredentials(provider: "app") }
        #expect(error?.code == .configuration)
        #expect(error?.recovery == .fixConfiguration)
        #expect(error?.message?.contains("ES256 is not in the provider's token_endpoint_auth_signing_alg_values_supported (RS256, PS256)") == true)
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("an advertised algorithm passes, and the token request carries the assertion")
    func advertised() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let mock = MockProvider()
        var provider = try Self.provider(mock, .privateKeyJWT, files: files)
        provider.issuer = mock.issuer
        mock.script(.openIDConfiguration, [try Self.discovery(mock, extra: ["token_endpoint_auth_signing_alg_values_supported": ["ES256"]])])
        mock.script(.token, [.token(access: "at-1", refresh: nil)])
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport())
        _ = try await flow.clientCredentials(provider: "app")
        #expect(mock.requests(.token).first?.form["client_assertion"] != nil)
    }

    @Test("mutual TLS: client_id in the body, nothing else; the discovered mtls_endpoint_aliases are used (RFC 8705 §5)")
    func mutualTLS() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let keyPath = try files.key(.p256SEC1)
        let mock = MockProvider()
        let provider = Provider(id: "app", issuer: mock.issuer, clientID: "cli-1", clientAuthentication: .selfSignedTLSClientAuth,
                                clientKey: try ClientKey(contentsOfFile: keyPath),
                                clientCertificate: try ClientCertificate(contentsOfFile: try files.certificate(for: keyPath)))
        try provider.validate()
        let alias = mock.baseURL.appendingPathComponent("mtls/token")
        mock.script(.openIDConfiguration, [try Self.discovery(mock, extra: ["mtls_endpoint_aliases": ["token_endpoint": alias.absoluteString]])])
        mock.script(path: "/mtls/token", [.token(access: "at-1", refresh: nil)])
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport())
        _ = try await flow.clientCredentials(provider: "app")
        #expect(mock.requests(.token).isEmpty)
        let sent = try #require(mock.requests(path: "/mtls/token").first)
        #expect(sent.form["client_id"] == "cli-1")
        #expect(sent.form["client_assertion"] == nil && sent.form["client_secret"] == nil && sent.header("Authorization") == nil)
    }
}
