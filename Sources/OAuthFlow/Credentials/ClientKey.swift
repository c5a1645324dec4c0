#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JWS algorithm a client assertion can be signed with (RFC 7518 §3.1, RFC 8037 §3.1).
public enum SigningAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256, the default for an RSA key.
    case rs256 = "RS256"
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    case rs384 = "RS384"
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    case rs512 = "RS512"
    /// RSASSA-PSS with SHA-256 (FAPI 2.0 asks for it).
    case ps256 = "PS256"
    /// RSASSA-PSS with SHA-384.
    case ps384 = "PS384"
    /// RSASSA-PSS with SHA-512.
    case ps512 = "PS512"
    /// ECDSA on P-256 with SHA-256, the default for a P-256 key.
    case es256 = "ES256"
    /// ECDSA on P-384 with SHA-384, the default for a P-384 key.
    case es384 = "ES384"
    /// ECDSA on P-521 with SHA-512, the default for a P-521 key.
    case es512 = "ES512"
    /// Ed25519 (RFC 8037), the default for an Ed25519 key.
    case edDSA = "EdDSA"
    /// HMAC with SHA-256 under the client secret: `client_secret_jwt`'s default.
    case hs256 = "HS256"
    /// HMAC with SHA-384 under the client secret.
    case hs384 = "HS384"
    /// HMAC with SHA-512 under the client secret.
    case hs512 = "HS512"

    /// The JWS algorithm this is.
    var jws: JWSAlgorithm {
        // Every raw value is a JWSAlgorithm raw value (checked by a unit test over allCases).
        JWSAlgorithm(rawValue: rawValue) ?? .none
    }

    /// True for HS256/384/512 (`client_secret_jwt`).
    public var isHMAC: Bool { jws.isHMAC }
}

/// Signs client assertions: the seam through which an HSM, a TPM or a cloud KMS signs without the
/// private key ever being in this process.
///
/// ``ClientKey`` (a key loaded into OpenSSL) is the built-in signer. To use a key held elsewhere,
/// conform a class to this protocol and set it as ``Provider/Settings/clientKey``, with
/// ``Provider/Settings/clientAssertionAlgorithm`` naming the algorithm it signs with:
///
/// ```swift
/// final class KMSSigner: ClientAssertionSigner {
///     let keyName: String
///     init(keyName: String) { self.keyName = keyName }
///     func sign(_ input: [UInt8], algorithm: SigningAlgorithm) async throws(OAuthError) -> [UInt8] {
///         guard algorithm == .es256 else { throw OAuthError(.configuration, message: "KMS key signs ES256 only") }
///         // Ask the KMS for an ECDSA P-256 SHA-256 signature of `input`; return r ‖ s (64 bytes).
///         …
///     }
/// }
/// ```
///
/// The flow calls ``sign(_:algorithm:)`` once per request that authenticates the client (a fresh
/// assertion each time, RFC 7523 §3). See `Documentation/Security.md`.
public protocol ClientAssertionSigner: AnyObject, Sendable {
    /// Signs `input` (the JWS signing input, RFC 7515 §5.1) and returns the JWS signature bytes.
    ///
    /// ECDSA signatures are `r ‖ s`, each as long as a coordinate (RFC 7518 §3.4), not DER.
    /// - Throws: ``OAuthError``: `.configuration` when `algorithm` does not fit the key, `.crypto`
    ///   or `.transport` when the signer fails.
    func sign(_ input: [UInt8], algorithm: SigningAlgorithm) async throws(OAuthError) -> [UInt8]
}

/// A private key for `private_key_jwt` client assertions, loaded once into OpenSSL.
///
/// Load one from a PEM file (``init(contentsOfFile:)``; the catalog's `clientKeyFile` does this)
/// or from PEM text (``init(pem:)``), then set it as ``Provider/Settings/clientKey``. Accepted: PKCS#8
/// (`PRIVATE KEY`), PKCS#1 RSA (`RSA PRIVATE KEY`) and SEC1 EC (`EC PRIVATE KEY`) of RSA with at
/// least 2048 bits, P-256, P-384, P-521 or Ed25519. The key stays inside an OpenSSL object owned
/// by this instance and freed with it; the bytes read and the decoded DER are wiped once
/// OpenSSL holds the key (best effort: intermediate copies made while parsing are not).
/// `description`, `debugDescription` and `dump` show the key's type and file, never key material.
public final class ClientKey: ClientAssertionSigner, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// A key's type and size.
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// RSA with a modulus of `bits` bits.
        case rsa(bits: Int)
        /// ECDSA on a NIST curve: `P-256`, `P-384` or `P-521`.
        case ec(curve: String)
        /// Ed25519 (RFC 8037).
        case ed25519

        /// `RSA-2048`, `EC P-256`, `Ed25519`.
        public var description: String {
            switch self {
            case .rsa(let bits): return "RSA-\(bits)"
            case .ec(let curve): return "EC \(curve)"
            case .ed25519: return "Ed25519"
            }
        }
    }

    let pair: PrivateKeyPair
    /// The key's type and size.
    public let kind: Kind
    /// The file the key was read from, or nil for a key given as text.
    public let path: String?

    /// Loads the PEM private key in the file at `path` (an absolute path, or one relative to the
    /// working directory).
    ///
    /// The file must be a regular file with no group or other permission bits (mode 0600 or
    /// 0400) and hold one unencrypted private key.
    /// - Throws: ``OAuthError`` `.configuration` naming the file and what is wrong: missing,
    ///   not a regular file, readable by others, encrypted, not a key, RSA under 2048 bits, an
    ///   unsupported curve. The message never holds the file's contents. `.crypto` when OpenSSL 3
    ///   cannot be loaded.
    public convenience init(contentsOfFile path: String) throws(OAuthError) {
        let shown = DisplayText.escape(path)
        var bytes: [UInt8]
        do {
            bytes = try CredentialFile.read(path, isPrivate: true)
        } catch {
            throw OAuthError(.configuration, message: "client key file \(shown) \(error.reason)")
        }
        defer { wipe(&bytes) }
        try self.init(pemBytes: bytes, path: path, label: "client key file \(shown)")
    }

    /// Loads a PEM private key given as text (from a secret manager, an environment variable).
    /// - Throws: ``OAuthError`` `.configuration` when the text is not one unencrypted PEM private
    ///   key of a supported type and size (the message never holds the text); `.crypto` when
    ///   OpenSSL 3 cannot be loaded.
    public convenience init(pem: String) throws(OAuthError) {
        var bytes = Array(pem.utf8)
        defer { wipe(&bytes) }
        try self.init(pemBytes: bytes, path: nil, label: "the client key")
    }

    private init(pemBytes: [UInt8], path: String?, label: String) throws(OAuthError) {
        var blocks: [PEMBlock]
        do {
            blocks = try PEMBlock.parse(pemBytes)
        } catch {
            throw OAuthError(.configuration, message: "\(label) \(error.reason)")
        }
        defer { for index in blocks.indices { wipe(&blocks[index].der) } }
        if blocks.contains(where: { $0.label == "ENCRYPTED PRIVATE KEY" || ($0.label.hasSuffix("PRIVATE KEY") && $0.isLegacyEncrypted) }) {
            throw OAuthError(.configuration, message: "\(label) holds an encrypted private key, which OAuthFlow does not decrypt; "
                + "store it unencrypted with mode 0600 (openssl pkey -in encrypted.pem -out key.pem), or as a systemd credential")
        }
        let keys = blocks.filter { ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"].contains($0.label) }
        guard let block = keys.first else {
            throw OAuthError(.configuration, message: "\(label) holds no PEM private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)")
        }
        guard keys.count == 1 else {
            throw OAuthError(.configuration, message: "\(label) holds \(keys.count) private keys; keep one")
        }
        switch try PrivateKeyPair.decode(der: block.der) {
        case .success(let pair):
            self.pair = pair
        case .failure(let refusal):
            throw OAuthError(.configuration, message: "\(label) \(refusal.reason)")
        }
        switch pair.kind {
        case .rsa(let bits): kind = .rsa(bits: bits)
        case .ec(let curve): kind = .ec(curve: curve.rawValue)
        case .ed25519: kind = .ed25519
        }
        self.path = path
    }

    /// The algorithm used when none is configured: RS256 for RSA, ES256/ES384/ES512 by curve,
    /// EdDSA for Ed25519.
    public var defaultAlgorithm: SigningAlgorithm {
        switch pair.kind {
        case .rsa: return .rs256
        case .ec(let curve): return SigningAlgorithm(rawValue: curve.algorithm.rawValue) ?? .es256
        case .ed25519: return .edDSA
        }
    }

    /// True when this key can sign with `algorithm` (RS*/PS* for RSA, the curve's ES* for EC,
    /// EdDSA for Ed25519).
    public func supports(_ algorithm: SigningAlgorithm) -> Bool {
        algorithm.jws.isAsymmetric && pair.publicKey.fits(algorithm.jws)
    }

    /// Signs `input` in process with OpenSSL (`EVP_DigestSign`).
    /// - Throws: ``OAuthError`` `.configuration` when `algorithm` does not fit the key; `.crypto`
    ///   when OpenSSL fails.
    public func sign(_ input: [UInt8], algorithm: SigningAlgorithm) async throws(OAuthError) -> [UInt8] {
        try signNow(input, algorithm: algorithm)
    }

    /// ``sign(_:algorithm:)`` without the suspension point, for callers that are not async.
    func signNow(_ input: [UInt8], algorithm: SigningAlgorithm) throws(OAuthError) -> [UInt8] {
        try pair.sign(algorithm.jws, signingInput: input)
    }

    /// The public key as a JWK (RFC 7517), to register at the provider: `kty` and the public
    /// parameters, then `kid`, `alg` and `"use": "sig"`. Never holds private parameters.
    /// - Parameters:
    ///   - keyID: The `kid` to include (the catalog's `clientKeyID`), or nil.
    ///   - algorithm: The `alg` to include, or nil.
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL cannot export the key.
    public func publicJWK(keyID: String? = nil, algorithm: SigningAlgorithm? = nil) throws(OAuthError) -> String {
        var members = try pair.publicJWKMembers().map { ($0.0, JSONValue.string($0.1)) }
        if let keyID { members.append(("kid", .string(keyID))) }
        if let algorithm { members.append(("alg", .string(algorithm.rawValue))) }
        members.append(("use", .string("sig")))
        return JSONValue.text(orderedMembers: members)
    }

    /// The RFC 7638 JWK thumbprint: base64url of the SHA-256 of the required members in order.
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL cannot export the key.
    public func jwkThumbprint() throws(OAuthError) -> String {
        let members = try pair.publicJWKMembers().map { ($0.0, JSONValue.string($0.1)) }
        return Base64URL.encode(try Digest.sha256(Array(JSONValue.text(orderedMembers: members).utf8)))
    }

    /// The public half, for verifying this key's signatures.
    var publicKey: PublicKey { pair.publicKey }

    /// True when the DER certificate `der` carries this key's public half.
    func matchesCertificate(der: [UInt8]) -> Bool {
        (try? pair.matchesCertificate(der: der)) ?? false
    }

    /// `ClientKey(EC P-256, file: /etc/…/key.pem)`: the type and the file, never key material.
    public var description: String {
        "ClientKey(\(kind)\(path.map { ", file: \(DisplayText.escape($0))" } ?? ""))"
    }

    /// The same as ``description``.
    public var debugDescription: String { description }

    /// A mirror with the type and file only, so `dump` shows no key material.
    public var customMirror: Mirror {
        Mirror(self, children: ["kind": kind.description, "path": path as Any], displayStyle: .class)
    }
}
