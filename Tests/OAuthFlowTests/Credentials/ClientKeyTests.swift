import Foundation
@testable import OAuthFlow
import Synchronization
import Testing

@Suite("Client keys and assertions (RFC 7523 §2.2/§3, OpenID Connect Core §9)")
struct ClientKeyTests {
    /// Each key recipe with the algorithm it signs with; the first per key type is its default.
    static let signing: [(KeyFiles.Recipe, SigningAlgorithm)] = [
        (.rsa2048PKCS8, .rs256), (.rsa2048PKCS1, .rs256), (.rsa2048PKCS8, .ps256), (.rsa3072PKCS8, .rs512),
        (.p256SEC1, .es256), (.p256PKCS8, .es256), (.p384SEC1, .es384), (.p521SEC1, .es512), (.ed25519PKCS8, .edDSA),
    ]

    static let defaults: [(KeyFiles.Recipe, String, SigningAlgorithm)] = [
        (.rsa2048PKCS8, "RSA-2048", .rs256), (.rsa2048PKCS1, "RSA-2048", .rs256), (.rsa3072PKCS8, "RSA-3072", .rs256),
        (.p256SEC1, "EC P-256", .es256), (.p256PKCS8, "EC P-256", .es256), (.p384SEC1, "EC P-384", .es384),
        (.p521SEC1, "EC P-521", .es512), (.ed25519PKCS8, "Ed25519", .edDSA),
    ]

    @Test("A key made by openssl loads with its type and default algorithm", arguments: defaults)
    func loads(recipe: KeyFiles.Recipe, kind: String, algorithm: SigningAlgorithm) throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let path = try files.key(recipe)
        #expect(try files.read("key.pem").contains("-----BEGIN \(recipe.label)-----"))
        let key = try ClientKey(contentsOfFile: path)
        #expect(key.kind.description == kind)
        #expect(key.defaultAlgorithm == algorithm)
        #expect(key.path == path)
        #expect(key.supports(algorithm))
        #expect(!key.supports(.hs256))
    }

    @Test("The assertion verifies with the JWS verifier and with openssl; its claims are RFC 7523 §3's", arguments: signing)
    func assertion(recipe: KeyFiles.Recipe, algorithm: SigningAlgorithm) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let path = try files.key(recipe)
        let key = try ClientKey(contentsOfFile: path)
        let now = Date(timeIntervalSince1970: 1_800_000_000.75)
        let parameters = ClientAssertion.Parameters(
            clientID: "svc-client", audience: "https://as.example/oauth2/token", algorithm: algorithm, keyID: "key-2026", certificateThumbprint: nil)
        let compact = try await ClientAssertion.make(parameters, signer: key, now: now).reveal()
        let jws = try JWS(compact: compact)

        #expect(jws.header.algorithm.rawValue == algorithm.rawValue)
        #expect(jws.header.keyID == "key-2026")
        #expect(jws.header.type == "JWT")
        #expect(try key.publicKey.verify(algorithm.jws, signingInput: jws.signingInput, signature: jws.signature))
        #expect(try files.opensslVerifies(keyPath: path, algorithm: algorithm, input: jws.signingInput, signature: jws.signature))
        // A changed input fails both: the checks can fail.
        var tampered = jws.signingInput
        tampered[tampered.count - 1] ^= 1
        #expect(try !key.publicKey.verify(algorithm.jws, signingInput: tampered, signature: jws.signature))
        #expect(try !files.opensslVerifies(keyPath: path, algorithm: algorithm, input: tampered, signature: jws.signature))

        let claims = try Self.claims(jws)
        #expect(claims["iss"] as? String == "svc-client")
        #expect(claims["sub"] as? String == "svc-client")
        #expect(claims["aud"] as? String == "https://as.example/oauth2/token")
        #expect(claims["iat"] as? Int == 1_800_000_000)
        #expect(claims["exp"] as? Int == 1_800_000_060)
        let jti = try #require(claims["jti"] as? String)
        #expect(Base64URL.decode(jti)?.count == 16)
        #expect(Set(claims.keys) == ["iss", "sub", "aud", "jti", "iat", "exp"])
    }

    @Test("A SEC1 key after its EC PARAMETERS block (openssl ecparam -genkey without -noout) loads")
    func ecParametersBlock() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try KeyFiles.openssl(["ecparam", "-name", "secp384r1", "-genkey", "-out", files.path("key.pem")])
        try files.chmod("key.pem", 0o600)
        #expect(try files.read("key.pem").hasPrefix("-----BEGIN EC PARAMETERS-----"))
        let key = try ClientKey(contentsOfFile: files.path("key.pem"))
        #expect(key.kind == .ec(curve: "P-384"))
    }

    @Test("Every assertion has a fresh jti")
    func freshJTI() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let key = try ClientKey(contentsOfFile: try files.key(.p256SEC1))
        let parameters = ClientAssertion.Parameters(clientID: "c", audience: "https://as.example/token", algorithm: .es256, keyID: nil,
                                                    certificateThumbprint: nil)
        var seen = Set<String>()
        for _ in 0..<20 {
            let jws = try JWS(compact: try await ClientAssertion.make(parameters, signer: key, now: Date()).reveal())
            let claims = try Self.claims(jws)
            seen.insert(try #require(claims["jti"] as? String))
            #expect(jws.header.keyID == nil)
        }
        #expect(seen.count == 20)
    }

    @Test("x5t#S256 is the SHA-256 of the certificate's DER, as openssl fingerprints it (RFC 7515 §4.1.8)")
    func thumbprint() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let keyPath = try files.key(.p256SEC1)
        let certificatePath = try files.certificate(for: keyPath)
        let certificate = try ClientCertificate(contentsOfFile: certificatePath)
        #expect(certificate.thumbprint == Base64URL.encode(try files.opensslFingerprint(certificatePath)))
        #expect(certificate.chainLength == 1)
        let key = try ClientKey(contentsOfFile: keyPath)
        #expect(certificate.matches(key))
        let other = try ClientKey(contentsOfFile: try files.key(.p256SEC1, name: "other.pem"))
        #expect(!certificate.matches(other))

        let parameters = ClientAssertion.Parameters(clientID: "c", audience: "https://as.example/token", algorithm: .es256, keyID: nil,
                                                    certificateThumbprint: certificate.thumbprint)
        let jws = try JWS(compact: try await ClientAssertion.make(parameters, signer: key, now: Date()).reveal())
        let headerBytes = try #require(Base64URL.decode(String(decoding: jws.signingInput.prefix { $0 != UInt8(ascii: ".") }, as: UTF8.self)))
        let header = try #require(try JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any])
        #expect(header["x5t#S256"] as? String == certificate.thumbprint)
    }

    @Test("client_secret_jwt: HMAC under the secret's UTF-8 bytes, as openssl computes it", arguments: [SigningAlgorithm.hs256, .hs384, .hs512])
    func clientSecretJWT(algorithm: SigningAlgorithm) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let secret = String(repeating: "k3y-", count: 16)  // 64 bytes: enough for HS512
        let signer = try ClientSecretSigner(secret: Secret(secret), algorithm: algorithm)
        let parameters = ClientAssertion.Parameters(clientID: "c", audience: "https://as.example/token", algorithm: algorithm, keyID: nil,
                                                    certificateThumbprint: nil)
        let jws = try JWS(compact: try await ClientAssertion.make(parameters, signer: signer, now: Date()).reveal())
        #expect(jws.header.algorithm.rawValue == algorithm.rawValue)
        #expect(try HMACVerifier.verify(algorithm.jws, key: Array(secret.utf8), signingInput: jws.signingInput, signature: jws.signature))
        let hex = jws.signature.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        #expect(hex == (try files.opensslHMAC(algorithm, key: secret, input: jws.signingInput)))
    }

    @Test("client_secret_jwt refuses a secret shorter than the hash (RFC 7518 §3.2) and non-HMAC algorithms")
    func shortSecret() throws {
        let short = #expect(throws: OAuthError.self) { try ClientSecretSigner(secret: Secret(String(repeating: "a", count: 31)), algorithm: .hs256) }
        #expect(short?.code == .configuration)
        #expect(short?.message?.contains("at least 32 bytes") == true)
        #expect(!(short?.description.contains("aaaa") ?? true))
        _ = try ClientSecretSigner(secret: Secret(String(repeating: "a", count: 32)), algorithm: .hs256)
        #expect(throws: OAuthError.self) { try ClientSecretSigner(secret: Secret(String(repeating: "a", count: 47)), algorithm: .hs384) }
        #expect(throws: OAuthError.self) { try ClientSecretSigner(secret: Secret(String(repeating: "a", count: 64)), algorithm: .rs256) }
    }

    @Test("A key refuses an algorithm that does not fit it")
    func mismatchedAlgorithm() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let key = try ClientKey(contentsOfFile: try files.key(.p256SEC1))
        for algorithm in [SigningAlgorithm.es384, .rs256, .ps256, .edDSA, .hs256] {
            #expect(!key.supports(algorithm))
            let error = await #expect(throws: OAuthError.self) { _ = try await key.sign([1, 2, 3], algorithm: algorithm) }
            #expect(error?.code == .configuration)
        }
    }

    @Test("A custom signer (an HSM or KMS) signs through the seam without the key in the flow")
    func customSigner() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let key = try ClientKey(contentsOfFile: try files.key(.ed25519PKCS8))
        let remote = RemoteSigner(key: key)
        let parameters = ClientAssertion.Parameters(clientID: "c", audience: "https://as.example/token", algorithm: .edDSA, keyID: "kms-1",
                                                    certificateThumbprint: nil)
        let jws = try JWS(compact: try await ClientAssertion.make(parameters, signer: remote, now: Date()).reveal())
        #expect(remote.calls.withLock { $0 } == [.edDSA])
        #expect(try key.publicKey.verify(.edDSA, signingInput: jws.signingInput, signature: jws.signature))
    }

    @Test("The public JWK verifies the key's assertions through the JWKS verifier; it holds no private member", arguments: signing)
    func publicJWK(recipe: KeyFiles.Recipe, algorithm: SigningAlgorithm) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let key = try ClientKey(contentsOfFile: try files.key(recipe))
        let jwk = try key.publicJWK(keyID: "k1", algorithm: algorithm)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(jwk.utf8)) as? [String: String])
        #expect(object["kid"] == "k1" && object["alg"] == algorithm.rawValue && object["use"] == "sig")
        for privateMember in ["d", "p", "q", "dp", "dq", "qi"] { #expect(object[privateMember] == nil) }
        let keys = try JWKSet(json: Data(#"{"keys": [\#(jwk)]}"#.utf8))
        let parameters = ClientAssertion.Parameters(clientID: "c", audience: "https://as.example/token", algorithm: algorithm, keyID: "k1",
                                                    certificateThumbprint: nil)
        let compact = try await ClientAssertion.make(parameters, signer: key, now: Date()).reveal()
        _ = try JWSVerifier.verify(compact: compact, keys: keys, allowed: [algorithm.jws], clientSecret: nil)

        // RFC 7638 §3: the required members, sorted, no whitespace; hashed here by openssl.
        let required = object.filter { ["crv", "e", "kty", "n", "x", "y"].contains($0.key) }.sorted { $0.key < $1.key }
        let canonical = "{" + required.map { "\"\($0.key)\":\"\($0.value)\"" }.joined(separator: ",") + "}"
        let canonicalFile = try files.write("canonical.json", canonical)
        let digest = try KeyFiles.openssl(["dgst", "-sha256", "-r", canonicalFile]).prefix(64)
        var bytes: [UInt8] = []
        var index = digest.startIndex
        while index < digest.endIndex {
            let next = digest.index(index, offsetBy: 2)
            bytes.append(try #require(UInt8(digest[index..<next], radix: 16)))
            index = next
        }
        #expect(try key.jwkThumbprint() == Base64URL.encode(bytes))
    }

    @Test("Every SigningAlgorithm is a known JWS algorithm")
    func algorithmNames() {
        for algorithm in SigningAlgorithm.allCases {
            #expect(algorithm.jws != .none)
            #expect(algorithm.jws.rawValue == algorithm.rawValue)
            #expect(algorithm.isHMAC == algorithm.rawValue.hasPrefix("HS"))
        }
    }

    static func claims(_ jws: JWS) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
    }
}

/// A signer that holds no key of its own: it asks another object, as an HSM client would.
final class RemoteSigner: ClientAssertionSigner {
    private let key: ClientKey
    let calls = Synchronization.Mutex<[SigningAlgorithm]>([])

    init(key: ClientKey) { self.key = key }

    func sign(_ input: [UInt8], algorithm: SigningAlgorithm) async throws(OAuthError) -> [UInt8] {
        calls.withLock { $0.append(algorithm) }
        return try await key.sign(input, algorithm: algorithm)
    }
}
