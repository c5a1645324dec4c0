import Foundation
@testable import OAuthFlow
import Testing

@Suite("Catalog keys for client authentication without a shared secret (issue 17)")
struct ClientCredentialCatalogTests {
    static func load(_ files: KeyFiles, _ members: String, environment: [String: String] = [:]) throws(OAuthError) -> Provider {
        let text = #"[{"id": "svc", "tokenURL": "https://as.example/oauth2/token", "issuer": "https://as.example", "clientID": "svc-client", "#
            + members + "}]"
        let providers = try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: files.directory, environment: environment, strict: true)
        return providers[0]
    }

    static func failure(_ files: KeyFiles, _ members: String, environment: [String: String] = [:]) -> OAuthError? {
        do {
            _ = try load(files, members, environment: environment)
            return nil
        } catch {
            return error
        }
    }

    @Test("private_key_jwt with a relative clientKeyFile: the key loads, its default algorithm, endpoint audience")
    func privateKeyJWT() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.p384SEC1)
        let provider = try Self.load(files, #""clientAuthentication": "private_key_jwt", "clientKeyFile": "key.pem", "clientKeyID": "k1""#)
        #expect(provider.clientAuthentication == .privateKeyJWT)
        let key = try #require(provider.clientKey as? ClientKey)
        #expect(key.kind == .ec(curve: "P-384"))
        #expect(key.path == files.path("key.pem"))
        #expect(provider.clientKeyID == "k1")
        #expect(provider.effectiveClientAssertionAlgorithm == .es384)
        #expect(provider.clientAssertionAudience == .endpoint)
        #expect(provider.isConfidential)
        #expect(provider.supportedGrants.contains(.clientCredentials))
    }

    @Test("clientKeyFile alone implies private_key_jwt; ${CREDENTIALS_DIRECTORY} is expanded")
    func credentialsDirectory() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.rsa2048PKCS1)
        let provider = try Self.load(files, #""clientKeyFile": "${CREDENTIALS_DIRECTORY}/key.pem", "clientAssertionAlgorithm": "PS256", "clientAssertionAudience": "issuer""#,
                                     environment: ["CREDENTIALS_DIRECTORY": files.directory.path])
        #expect(provider.clientAuthentication == .privateKeyJWT)
        #expect(provider.effectiveClientAssertionAlgorithm == .ps256)
        #expect(provider.clientAssertionAudience == .issuer)
        let unset = Self.failure(files, #""clientKeyFile": "${CREDENTIALS_DIRECTORY}/key.pem""#)
        #expect(unset?.message?.contains("clientKeyFile: environment variable CREDENTIALS_DIRECTORY is not set or is empty") == true)
    }

    @Test("A key file with group or other bits is refused at load, naming the provider, the key and the file")
    func unsafeMode() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.p256SEC1)
        try files.chmod("key.pem", 0o644)
        let error = try #require(Self.failure(files, #""clientAuthentication": "private_key_jwt", "clientKeyFile": "key.pem""#))
        #expect(error.code == .configuration)
        #expect(error.providerID == "svc")
        #expect(error.message == #"provider #1 ("svc"): clientKeyFile: "# + files.path("key.pem")
            + " is readable or writable by group or others (mode 0644); a private key must be mode 0600 or 0400 (chmod 600 it)")
    }

    /// A catalog fragment and the message's end.
    struct Refusal: Sendable, CustomStringConvertible {
        let description: String
        let members: String
        let expected: String
    }

    static let refusals: [Refusal] = [
        Refusal(description: "private_key_jwt without a key", members: #""clientAuthentication": "private_key_jwt""#,
                expected: "clientAuthentication: private_key_jwt needs a private key (clientKeyFile, or clientKey in code)"),
        Refusal(description: "an algorithm that does not fit the key", members: #""clientKeyFile": "p256.pem", "clientAssertionAlgorithm": "ES384""#,
                expected: "clientAssertionAlgorithm: ES384 does not fit the EC P-256 key; use ES256"),
        Refusal(description: "HS256 with private_key_jwt", members: #""clientKeyFile": "p256.pem", "clientAssertionAlgorithm": "HS256""#,
                expected: "clientAssertionAlgorithm: HS256 is for client_secret_jwt"),
        Refusal(description: "an unknown algorithm", members: #""clientKeyFile": "p256.pem", "clientAssertionAlgorithm": "ES256K""#,
                expected: "clientAssertionAlgorithm: must be one of RS256, RS384, RS512, PS256"),
        Refusal(description: "a bad audience", members: #""clientKeyFile": "p256.pem", "clientAssertionAudience": "the token endpoint""#,
                expected: #"clientAssertionAudience: must be "endpoint", "issuer" or an absolute URI"#),
        Refusal(description: "a certificate of another key", members: #""clientKeyFile": "p256.pem", "clientCertificateFile": "other-cert.pem""#,
                expected: "clientCertificateFile: the certificate does not match the client key"),
        Refusal(description: "tls_client_auth without a certificate", members: #""clientAuthentication": "tls_client_auth", "clientKeyFile": "p256.pem""#,
                expected: "clientAuthentication: tls_client_auth needs a client certificate (clientCertificateFile)"),
        Refusal(description: "self_signed_tls_client_auth with a mismatched pair",
                members: #""clientAuthentication": "self_signed_tls_client_auth", "clientKeyFile": "p256.pem", "clientCertificateFile": "other-cert.pem""#,
                expected: "clientCertificateFile: the certificate does not match the client key"),
        Refusal(description: "a key with client_secret_basic",
                members: #""clientAuthentication": "client_secret_basic", "clientSecret": "s", "clientKeyFile": "p256.pem""#,
                expected: "clientKeyFile: is used with private_key_jwt, tls_client_auth or self_signed_tls_client_auth, not client_secret_basic"),
        Refusal(description: "a key next to a secret, no method (client_secret_basic by default)",
                members: #""clientSecret": "s", "clientKeyFile": "p256.pem""#,
                expected: "clientKeyFile: is used with private_key_jwt, tls_client_auth or self_signed_tls_client_auth, not client_secret_basic"),
        Refusal(description: "client_secret_jwt with a short secret",
                members: #""clientAuthentication": "client_secret_jwt", "clientSecret": "0123456789""#,
                expected: "clientSecret: client_secret_jwt with HS256 needs a client secret of at least 32 bytes (RFC 7518 §3.2); this one is shorter"),
        Refusal(description: "client_secret_jwt without a secret", members: #""clientAuthentication": "client_secret_jwt""#,
                expected: "clientAuthentication: client_secret_jwt needs a client secret"),
        Refusal(description: "an algorithm with client_secret_post",
                members: #""clientAuthentication": "client_secret_post", "clientSecret": "s", "clientAssertionAlgorithm": "HS256""#,
                expected: "clientAssertionAlgorithm: is used only with private_key_jwt and client_secret_jwt, not client_secret_post"),
        Refusal(description: "a missing certificate file", members: #""clientKeyFile": "p256.pem", "clientCertificateFile": "absent.pem""#,
                expected: "clientCertificateFile: "),
        Refusal(description: "a CA file without a certificate", members: #""clientKeyFile": "p256.pem", "caFile": "p256.pem""#,
                expected: "p256.pem holds no PEM certificate (BEGIN CERTIFICATE)"),
        Refusal(description: "an empty key id", members: #""clientKeyFile": "p256.pem", "clientKeyID": """#,
                expected: "clientKeyID: must be a non-empty string without control characters"),
    ]

    @Test("Each misconfiguration is refused at load with the key and the reason", arguments: refusals)
    func refused(_ refusal: Refusal) throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.p256SEC1, name: "p256.pem")
        try files.certificate(for: try files.key(.p256SEC1, name: "other.pem"), name: "other-cert.pem")
        let error = try #require(Self.failure(files, refusal.members))
        #expect(error.code == .configuration)
        #expect(error.message?.hasPrefix(#"provider #1 ("svc"): "#) == true)
        #expect(error.message?.contains(refusal.expected) == true, "\(error.message ?? "")")
    }

    @Test("tls_client_auth: a matching pair over https loads; over http it is refused")
    func mutualTLS() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let keyPath = try files.key(.p256SEC1)
        let certificatePath = try files.certificate(for: keyPath)
        try files.key(.p256SEC1, name: "ca-key.pem")
        let caPath = try files.certificate(for: files.path("ca-key.pem"), name: "ca.pem")
        let provider = try Self.load(files, #""clientAuthentication": "tls_client_auth", "clientKeyFile": "key.pem", "clientCertificateFile": "cert.pem", "caFile": "ca.pem""#)
        #expect(provider.clientAuthentication.isMutualTLS)
        #expect(provider.clientCertificate?.path == certificatePath)
        #expect((provider.clientKey as? ClientKey)?.path == keyPath)
        #expect(provider.caFile == caPath)
        #expect(provider.isConfidential)
        #expect(provider.effectiveClientAssertionAlgorithm == nil)

        let text = #"[{"id": "svc", "tokenURL": "http://127.0.0.1:9/token", "clientID": "c", "clientAuthentication": "tls_client_auth", "#
            + #""clientKeyFile": "key.pem", "clientCertificateFile": "cert.pem"}]"#
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: files.directory, environment: [:]) }
        #expect(error?.message?.contains("tokenURL: tls_client_auth is mutual TLS and needs an https:// token endpoint") == true)
    }

    @Test("client_secret_jwt with a long enough secret defaults to HS256")
    func clientSecretJWT() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let provider = try Self.load(files, #""clientAuthentication": "client_secret_jwt", "clientSecret": "0123456789abcdef0123456789abcdef""#)
        #expect(provider.effectiveClientAssertionAlgorithm == .hs256)
        #expect(provider.isConfidential)
    }

    @Test("In code: a custom signer needs an algorithm; providers compare keys by identity")
    func inCode() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let key = try ClientKey(contentsOfFile: try files.key(.ed25519PKCS8))
        let url = URL(string: "https://as.example/token")
        let signer = RemoteSigner(key: key)
        let missing = #expect(throws: OAuthError.self) {
            try Provider(id: "svc", tokenURL: url, clientID: "c", clientKey: signer).validate()
        }
        #expect(missing?.message?.contains("clientAssertionAlgorithm: is required with a custom signer") == true)
        let custom = Provider(id: "svc", tokenURL: url, clientID: "c", clientKey: signer, clientAssertionAlgorithm: .edDSA)
        try custom.validate()
        #expect(custom.clientAuthentication == .privateKeyJWT)
        let a = Provider(id: "svc", tokenURL: url, clientID: "c", clientKey: key)
        #expect(a == Provider(id: "svc", tokenURL: url, clientID: "c", clientKey: key))
        #expect(a != Provider(id: "svc", tokenURL: url, clientID: "c", clientKey: try ClientKey(contentsOfFile: files.path("key.pem"))))
        #expect(a != custom)
    }
}
