#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Whether a provider binds its tokens to a key with DPoP (RFC 9449), catalog `"dpop"`.
public enum DPoPMode: String, Sendable, Hashable, CaseIterable {
    /// No proofs; a `token_type` other than Bearer is refused (the default).
    case off
    /// A proof on every token request; a `DPoP` token is used with proofs, a Bearer answer as a bearer token.
    case enabled
    /// A proof on every token request, and a Bearer answer is refused (`.invalidResponse`).
    case required
}

/// Signs DPoP proofs (RFC 9449 §4.2) with a key held elsewhere: an HSM, a TPM, a cloud KMS.
///
/// The flow makes and keeps a key of its own for each DPoP provider unless you set
/// ``Provider/Settings/dpopKey``: a ``ClientKey`` (a PEM file), or a class of your own that conforms:
///
/// ```swift
/// final class KMSProofKey: DPoPSigner {
///     func sign(_ input: [UInt8], algorithm: SigningAlgorithm) async throws(OAuthError) -> [UInt8] {
///         // ECDSA P-256 SHA-256 of `input` from the KMS, as r ‖ s (64 bytes)
///     }
///     func publicKeyJWK() throws(OAuthError) -> [String: String] {
///         ["kty": "EC", "crv": "P-256", "x": "…", "y": "…"]
///     }
/// }
/// ```
///
/// Set ``Provider/Settings/dpopAlgorithm`` to the algorithm it signs with. A signer you give is never
/// stored; see `Documentation/Security.md`.
public protocol DPoPSigner: ClientAssertionSigner {
    /// The public key's required JWK members (RFC 7638 §3.2): `kty` and, for EC `crv`, `x`, `y`;
    /// for RSA `e`, `n`; for Ed25519 (`OKP`) `crv`, `x`. No private member, no `kid`.
    /// - Throws: ``OAuthError`` `.crypto` when the key cannot be exported.
    func publicKeyJWK() throws(OAuthError) -> [String: String]
}

extension ClientKey: DPoPSigner {
    /// The public key's required JWK members (RFC 7638 §3.2), for DPoP proofs' `jwk` header.
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL cannot export the key.
    public func publicKeyJWK() throws(OAuthError) -> [String: String] {
        Dictionary(try pair.publicJWKMembers(), uniquingKeysWith: { first, _ in first })
    }
}

/// A DPoP key pair the flow made itself (one per provider, on first use), kept in the store with
/// the tokens it binds.
///
/// The private key lives in OpenSSL; ``encoded`` (base64url DER) exists for the store only.
/// `description` and `dump` show the algorithm, never key material.
final class DPoPKey: DPoPSigner, Codable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let pair: PrivateKeyPair
    /// The algorithm the key signs its proofs with.
    let algorithm: SigningAlgorithm
    /// base64url(DER of the private key): what ``StoredEntry`` writes.
    let encoded: Secret
    /// The proofs' header, already base64url-encoded: it never changes for one key.
    let encodedHeader: String
    /// The RFC 7638 thumbprint of the public key (`dpop_jkt`, `cnf.jkt`).
    let thumbprint: String

    private init(pair: PrivateKeyPair, algorithm: SigningAlgorithm, der: [UInt8]) throws(OAuthError) {
        self.pair = pair
        self.algorithm = algorithm
        self.encoded = Secret(Base64URL.encode(der))
        let jwk = Dictionary(try pair.publicJWKMembers(), uniquingKeysWith: { first, _ in first })
        (encodedHeader, thumbprint) = try DPoPProof.header(jwk: jwk, algorithm: algorithm)
    }

    /// A fresh key for `algorithm` (ES256: P-256; ES384: P-384; EdDSA: Ed25519; RS256/PS256: RSA-2048).
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL fails.
    static func generate(_ algorithm: SigningAlgorithm) throws(OAuthError) -> DPoPKey {
        let pair = try PrivateKeyPair.generate(for: algorithm.jws)
        var der = try pair.privateKeyDER()
        defer { wipe(&der) }
        return try DPoPKey(pair: pair, algorithm: algorithm, der: der)
    }

    /// The key a store entry holds (``encoded``), for `algorithm`.
    /// - Throws: ``OAuthError`` `.storage` when it is not a key OpenSSL reads or does not fit the algorithm.
    static func decode(_ encoded: String, algorithm: SigningAlgorithm) throws(OAuthError) -> DPoPKey {
        guard var der = Base64URL.decode(encoded) else { throw OAuthError(.storage, message: "the stored DPoP key is not base64url") }
        defer { wipe(&der) }
        switch try PrivateKeyPair.decode(der: der) {
        case .success(let pair):
            guard pair.publicKey.fits(algorithm.jws) else {
                throw OAuthError(.storage, message: "the stored DPoP key \(pair.publicKey.kindName) key does not fit \(algorithm.rawValue)")
            }
            return try DPoPKey(pair: pair, algorithm: algorithm, der: der)
        case .failure(let refusal):
            throw OAuthError(.storage, message: "the stored DPoP key \(refusal.reason)")
        }
    }

    /// Signs `input` with OpenSSL.
    /// - Throws: ``OAuthError`` `.configuration` when `algorithm` does not fit the key; `.crypto` when OpenSSL fails.
    func sign(_ input: [UInt8], algorithm: SigningAlgorithm) async throws(OAuthError) -> [UInt8] {
        try pair.sign(algorithm.jws, signingInput: input)
    }

    /// ``sign(_:algorithm:)`` without the suspension point.
    func signNow(_ input: [UInt8]) throws(OAuthError) -> [UInt8] {
        try pair.sign(algorithm.jws, signingInput: input)
    }

    /// The public key's required JWK members.
    func publicKeyJWK() throws(OAuthError) -> [String: String] {
        Dictionary(try pair.publicJWKMembers(), uniquingKeysWith: { first, _ in first })
    }

    private enum CodingKeys: String, CodingKey { case algorithm, key }

    /// Reads what ``encode(to:)`` writes (``TokenSet``'s `Codable` form).
    /// - Throws: `DecodingError` when a member is missing or the key cannot be read.
    convenience init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .algorithm)
        guard let algorithm = SigningAlgorithm(rawValue: name), DPoPProof.algorithms.contains(algorithm) else {
            throw DecodingError.dataCorruptedError(forKey: .algorithm, in: container, debugDescription: "not a DPoP algorithm")
        }
        guard var der = Base64URL.decode(try container.decode(Secret.self, forKey: .key).reveal()) else {
            throw DecodingError.dataCorruptedError(forKey: .key, in: container, debugDescription: "not base64url")
        }
        defer { wipe(&der) }
        guard case .success(let pair) = try PrivateKeyPair.decode(der: der), pair.publicKey.fits(algorithm.jws) else {
            throw DecodingError.dataCorruptedError(forKey: .key, in: container, debugDescription: "not a key for \(name)")
        }
        try self.init(pair: pair, algorithm: algorithm, der: der)
    }

    /// Writes the algorithm and the key (base64url DER): only for a store of your own.
    /// - Throws: what the encoder throws.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(algorithm.rawValue, forKey: .algorithm)
        try container.encode(encoded, forKey: .key)
    }

    /// `DPoPKey(ES256)`: never key material.
    var description: String { "DPoPKey(\(algorithm.rawValue))" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: ["algorithm": algorithm.rawValue], displayStyle: .class) }
}
