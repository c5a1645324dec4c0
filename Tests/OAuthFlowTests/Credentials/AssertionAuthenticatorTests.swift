import Foundation
@testable import OAuthFlow
import Testing

@Suite("Assertion authenticator: the form fields of private_key_jwt and client_secret_jwt (RFC 7521 §4.2)")
struct AssertionAuthenticatorTests {
    static let tokenURL = URL(string: "https://as.example/oauth2/token")!
    static let revocationURL = URL(string: "https://as.example/oauth2/revoke")!

    static func metadata(_ json: String) throws -> ProviderMetadata {
        let object = try JSONObject(try JSONValue.parse(Array(json.utf8)), what: "discovery") { OAuthError(.invalidResponse, message: $0) }
        return try ProviderMetadata(object)
    }

    static func claims(_ assertion: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(try JWS(compact: assertion).payload)) as? [String: Any])
    }

    @Test("Fields: client_id, the assertion type, a fresh assertion per call with aud = the endpoint called")
    func fields() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let key = try ClientKey(contentsOfFile: try files.key(.p256SEC1))
        let provider = Provider(id: "svc", tokenURL: Self.tokenURL, issuer: "https://as.example", clientID: "svc-client", clientKey: key,
                                clientKeyID: "k1")
        try provider.validate()
        let authenticator = try #require(try AssertionAuthenticator(provider: provider))
        let now = Date(timeIntervalSince1970: 1_900_000_000)
        let first = try await authenticator.fields(endpoint: Self.tokenURL, now: now)
        let second = try await authenticator.fields(endpoint: Self.revocationURL, now: now)
        #expect(first.map(\.0) == ["client_id", "client_assertion_type", "client_assertion"])
        #expect(first[0].1 == "svc-client")
        #expect(first[1].1 == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        let a = try Self.claims(first[2].1), b = try Self.claims(second[2].1)
        #expect(a["aud"] as? String == Self.tokenURL.absoluteString)
        #expect(b["aud"] as? String == Self.revocationURL.absoluteString)
        #expect(a["jti"] as? String != b["jti"] as? String)
        #expect(try JWS(compact: first[2].1).header.keyID == "k1")
    }

    @Test("Audience: issuer, or an explicit URI, whatever endpoint is called", arguments: [
        (ClientAssertionAudience.issuer, "https://as.example"), (.uri("https://login.example/aud"), "https://login.example/aud"),
    ])
    func audience(_ audience: ClientAssertionAudience, expected: String) async throws {
        let provider = Provider(id: "svc", tokenURL: Self.tokenURL, issuer: "https://as.example", clientID: "c",
                                clientSecret: Secret(String(repeating: "s", count: 32)), clientAuthentication: .clientSecretJWT,
                                clientAssertionAudience: audience)
        try provider.validate()
        let authenticator = try #require(try AssertionAuthenticator(provider: provider))
        let fields = try await authenticator.fields(endpoint: Self.revocationURL, now: Date())
        #expect(try Self.claims(fields[2].1)["aud"] as? String == expected)
        #expect(try JWS(compact: fields[2].1).header.algorithm == .hs256)
    }

    @Test("Secret methods and none need no authenticator")
    func notAssertion() throws {
        for method in [Provider.ClientAuthentication.clientSecretBasic, .clientSecretPost, .none] {
            let provider = Provider(id: "svc", tokenURL: Self.tokenURL, clientID: "c", clientSecret: method == .none ? nil : Secret("s"),
                                    clientAuthentication: method)
            #expect(try AssertionAuthenticator(provider: provider) == nil)
        }
    }

    @Test("An algorithm the server does not advertise is refused before any request (.configuration)")
    func advertised() throws {
        let listed = try Self.metadata(#"{"issuer": "https://as.example", "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"]}"#)
        try AssertionAuthenticator.checkAdvertised(.es256, in: listed, providerID: "svc")
        let error = #expect(throws: OAuthError.self) { try AssertionAuthenticator.checkAdvertised(.edDSA, in: listed, providerID: "svc") }
        #expect(error?.code == .configuration)
        #expect(error?.recovery == .fixConfiguration)
        #expect(error?.message?.contains("EdDSA is not in the provider's token_endpoint_auth_signing_alg_values_supported (RS256, ES256)") == true)
        let silent = try Self.metadata(#"{"issuer": "https://as.example"}"#)
        try AssertionAuthenticator.checkAdvertised(.edDSA, in: silent, providerID: "svc")
    }
}
