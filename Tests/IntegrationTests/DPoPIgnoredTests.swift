import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// A real server that does not implement DPoP (Authlib 1.9.6, `Server/credentials/credserver.py`)
/// ignores the `DPoP` header and answers `token_type: Bearer` (RFC 9449 §7.1 lets a server issue a
/// bearer token to a request with a proof). With `"dpop": "required"` that answer is refused
/// (`.invalidResponse` naming the cause, nothing stored); with `"dpop": true` it is kept and used as
/// a bearer token. For both grants Authlib offers: client credentials and the JWT-bearer grant. This
/// is the most a server without DPoP can show: the proof reaches it and it issues a bearer token; it
/// proves no binding.
@Suite(
    "Integration: a Bearer answer to a request with a DPoP proof, from Authlib on loopback (RFC 9449 §5, §7.1)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .credentialsServer,
    .serialized,
    .timeLimit(.minutes(2))
)
struct DPoPIgnoredIntegration {
    typealias Exchanges = PushedAuthorizationIntegration.DPoP.Exchanges

    /// The one token request sent: a fresh ES256 proof for POST to the token URL; Authlib answered
    /// 200 with `token_type: Bearer`.
    static func checkBearerAnswer(_ transport: Exchanges, server: CredentialsServer, grantType: String) throws {
        let exchange = try #require(transport.to("/token").only)
        let fields = Dictionary(PushedAuthorizationIntegration.fields(exchange.request), uniquingKeysWith: { first, _ in first })
        #expect(fields["grant_type"] == grantType)
        let proof = try WireJWS(try #require(exchange.request.header("DPoP")))
        #expect(proof.header["typ"] as? String == "dpop+jwt" && proof.header["alg"] as? String == "ES256")
        #expect(proof.claims["htm"] as? String == "POST" && proof.claims["htu"] as? String == server.tokenURL.absoluteString)
        #expect(exchange.response.status == 200)
        let body = try #require(try JSONSerialization.jsonObject(with: exchange.response.body) as? [String: Any])
        #expect(body["token_type"] as? String == "Bearer")
    }

    /// What the flow did with that answer: `.required` refused it, `.enabled` kept a bearer token.
    static func checkOutcome(_ mode: DPoPMode, flow: AuthFlow, provider id: String, result: Result<Authorization, OAuthError>) async throws {
        switch mode {
        case .required:
            guard case .failure(let error) = result else { Issue.record("a Bearer answer to a required DPoP request was accepted"); return }
            #expect(error.code == .invalidResponse && error.endpoint == .token, "\(error)")
            #expect(error.message?.contains("token_type is Bearer, but the provider requires DPoP-bound tokens") == true, "\(error)")
            #expect(await flow.authorization(for: id) == nil)
            await #expect(throws: OAuthError.self) { _ = try await flow.tokenSet(for: id) }
        default:
            let authorization = try result.get()
            #expect(authorization.tokenType == "Bearer" && !authorization.isDPoPBound)
            let headers = try await flow.tokenSource(for: id).authorizationHeaders(method: "GET", url: URL(string: "https://api.example.com/v1")!)
            let set = try await flow.tokenSet(for: id)
            #expect(headers.authorization.reveal() == "Bearer \(set.accessToken.reveal())" && headers.dpop == nil)
        }
    }

    @Test("client credentials with a proof: Authlib answers Bearer; \"required\" refuses it (.invalidResponse, nothing stored), true keeps a bearer token",
          arguments: [DPoPMode.required, .enabled])
    func clientCredentials(mode: DPoPMode) async throws {
        let server = try CredentialsServer.require()
        let id = "dpop-ignored-\(mode.rawValue)-\(UUID().uuidString.prefix(6))"
        let secret = "secret-\(UUID().uuidString)"
        try await server.register(["client_id": id, "method": "client_secret_basic", "client_secret": secret])
        var provider = Provider(id: "authlib", tokenURL: server.tokenURL, clientID: id, clientSecret: Secret(secret),
                                clientAuthentication: .clientSecretBasic, scopes: ["read"])
        provider.dpop = mode
        try provider.validate()
        let transport = Exchanges(CurlTransport(timeout: 30, proxy: .none))
        let flow = try await AuthFlow(providers: [provider], transport: transport)
        let result: Result<Authorization, OAuthError>
        do throws(OAuthError) { result = .success(try await flow.clientCredentials(provider: "authlib")) } catch { result = .failure(error) }

        try Self.checkBearerAnswer(transport, server: server, grantType: "client_credentials")
        try await Self.checkOutcome(mode, flow: flow, provider: "authlib", result: result)
    }

    @Test("the JWT-bearer grant from the catalog with a proof: Authlib answers Bearer; \"dpop\": \"required\" refuses it, true keeps it",
          arguments: [DPoPMode.required, .enabled])
    func jwtBearer(mode: DPoPMode) async throws {
        let server = try CredentialsServer.require()
        let scratch = try TemporaryDirectory("dpop-ignored")
        defer { scratch.remove() }
        let directory = scratch.url
        let keyPath = directory.appendingPathComponent("key.pem").path
        try ClientAssertionIntegration.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        let id = "dpop-jwtb-\(mode.rawValue)-\(UUID().uuidString.prefix(6))"
        try await server.register(["client_id": id, "method": "private_key_jwt",
                                   "jwk": try JSONSerialization.jsonObject(with: Data(try ClientKey(contentsOfFile: keyPath).publicJWK().utf8))])
        let dpop = mode == .required ? "\"required\"" : "true"
        let catalog = """
            [{"id": "rfc7523", "grant": "jwt-bearer", "clientID": "\(id)", "tokenURL": "\(server.tokenURL.absoluteString)",
              "clientKeyFile": "key.pem", "scopes": ["read"], "dpop": \(dpop)}]
            """
        let providers = try ProviderCatalog.load(data: Data(catalog.utf8), baseDirectory: directory, environment: [:], strict: true)
        #expect(providers[0].dpop == mode)
        let transport = Exchanges(CurlTransport(timeout: 30, proxy: .none))
        let flow = try await AuthFlow(providers: providers, transport: transport)
        let result: Result<Authorization, OAuthError>
        do throws(OAuthError) { result = .success(try await flow.jwtBearer(provider: "rfc7523")) } catch { result = .failure(error) }

        try Self.checkBearerAnswer(transport, server: server, grantType: "urn:ietf:params:oauth:grant-type:jwt-bearer")
        try await Self.checkOutcome(mode, flow: flow, provider: "rfc7523", result: result)
    }
}
