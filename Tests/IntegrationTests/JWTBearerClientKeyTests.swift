import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// Catalog `grant: "jwt-bearer"` with `clientKeyFile`, `clientID` and `tokenURL` (RFC 7523 §2.1 for
/// any server, not only service-account files), judged by Authlib 1.9.6's `JWTBearerGrant`
/// (`Server/credentials/credserver.py`) on 127.0.0.1.
@Suite(
    "Integration: JWT-bearer grant with a client key from the catalog against Authlib on loopback (RFC 7523 §2.1)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .credentialsServer,
    .serialized,
    .timeLimit(.minutes(2))
)
struct JWTBearerClientKeyIntegration {
    @Test("accessToken(for:) signs an ES256 assertion with clientKeyFile (iss = sub = client id, aud = token URL, kid) and Authlib issues a token")
    func catalogJWTBearer() async throws {
        let server = try CredentialsServer.require()
        let scratch = try TemporaryDirectory("jwtb-it")
        defer { scratch.remove() }
        let directory = scratch.url
        let keyPath = directory.appendingPathComponent("key.pem").path
        try ClientAssertionIntegration.generateP256Key(at: keyPath)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        let id = "jwtb-\(UUID().uuidString.prefix(6))"
        try await server.register(["client_id": id, "method": "private_key_jwt",
                                   "jwk": try JSONSerialization.jsonObject(with: Data(try ClientKey(contentsOfFile: keyPath).publicJWK().utf8))])
        let catalog = """
            [{"id": "rfc7523", "grant": "jwt-bearer", "clientID": "\(id)", "tokenURL": "\(server.tokenURL.absoluteString)",
              "clientKeyFile": "key.pem", "clientKeyID": "kid-\(id)", "scopes": ["read"], "resource": "https://api.example.com/"}]
            """
        let providers = try ProviderCatalog.load(data: Data(catalog.utf8), baseDirectory: directory, environment: [:], strict: true)
        #expect(providers[0].clientAuthentication == Provider.ClientAuthentication.none && providers[0].serviceGrant == .jwtBearer)
        let flow = try await AuthFlow(providers: providers)
        let before = try await server.received().count
        let token = try await flow.accessToken(for: "rfc7523")
        #expect(!token.reveal().isEmpty)
        let authorization = try #require(await flow.authorization(for: "rfc7523"))
        #expect(authorization.grant == .jwtBearer && !authorization.isRefreshable && authorization.scopes == ["read"])

        let sent = Array(try await server.received().dropFirst(before))
        let received = try #require(sent.only)
        #expect(Set(received.keys) == ["grant_type", "assertion", "scope", "resource", "client_id", "_authorization"])
        #expect(received["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"])
        #expect(received["resource"] == ["https://api.example.com/"] && received["client_id"] == [id] && received["_authorization"] == [""])
        let jws = try JWS(compact: try #require(received["assertion"]?.first))
        #expect(jws.header.algorithm == .es256 && jws.header.keyID == "kid-\(id)")
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
        #expect(claims["iss"] as? String == id && claims["sub"] as? String == id)
        #expect(claims["aud"] as? String == server.tokenURL.absoluteString)
        #expect(claims["scope"] as? String == "read")
        #expect(claims["exp"] as? Int == (claims["iat"] as? Int).map { $0 + 3600 })
    }

    @Test("a key the server does not know for that client: Authlib refuses the assertion (invalid_grant or invalid_client), surfaced as .serverRejected")
    func wrongKey() async throws {
        let server = try CredentialsServer.require()
        let scratch = try TemporaryDirectory("jwtb-it")
        defer { scratch.remove() }
        let directory = scratch.url
        let registered = directory.appendingPathComponent("registered.pem").path
        let used = directory.appendingPathComponent("key.pem").path
        for path in [registered, used] {
            try ClientAssertionIntegration.generateP256Key(at: path)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        }
        let id = "jwtb-wrong-\(UUID().uuidString.prefix(6))"
        try await server.register(["client_id": id, "method": "private_key_jwt",
                                   "jwk": try JSONSerialization.jsonObject(with: Data(try ClientKey(contentsOfFile: registered).publicJWK().utf8))])
        let catalog = """
            [{"id": "rfc7523", "grant": "jwt-bearer", "clientID": "\(id)", "tokenURL": "\(server.tokenURL.absoluteString)", "clientKeyFile": "key.pem"}]
            """
        let flow = try await AuthFlow(providers: try ProviderCatalog.load(data: Data(catalog.utf8), baseDirectory: directory, environment: [:]))
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.accessToken(for: "rfc7523") }
        #expect(error?.code == .serverRejected, "\(String(describing: error))")
        #expect(["invalid_grant", "invalid_client"].contains(error?.response?.code.rawValue ?? ""))
    }
}
