internal import COpenSSL

/// A private key decoded from DER (PKCS#8, PKCS#1 RSA or SEC1 EC) that signs JWS for client
/// assertions (RFC 7523 §2.2, OpenID Connect Core §9).
///
/// Owns its `EVP_PKEY` through ``EVPKey``; the key never leaves OpenSSL's memory, and nothing here
/// prints it. Decoding refuses what a client assertion must not use: RSA under 2048 bits, curves
/// other than P-256/P-384/P-521, key types other than RSA, EC and Ed25519.
final class PrivateKeyPair: Sendable {
    private let pair: EVPKey
    /// The key's type and size.
    let kind: PublicKey.Kind
    /// The public half, for checks (a certificate's key, a signature in tests).
    let publicKey: PublicKey

    private init(pair: EVPKey, kind: PublicKey.Kind) {
        self.pair = pair
        self.kind = kind
        self.publicKey = .wrapping(pair, kind: kind)
    }

    /// Why a key was refused, phrased to follow the key's name ("is RSA-1024; …").
    struct Refusal: Error {
        let reason: String
    }

    /// Decodes a DER private key (`d2i_AutoPrivateKey`: PKCS#8 `PrivateKeyInfo`, PKCS#1
    /// `RSAPrivateKey`, SEC1 `ECPrivateKey`) and checks its type and size.
    /// - Throws: ``Refusal`` with the reason (never key material); ``OAuthError`` `.crypto` when
    ///   libcrypto cannot be loaded.
    static func decode(der: [UInt8]) throws(OAuthError) -> Result<PrivateKeyPair, Refusal> {
        let api = try LibCrypto.require()
        defer { api.pointee.ERR_clear_error() }
        let decoded: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return api.pointee.d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let decoded else { return .failure(Refusal(reason: "is not a private key OpenSSL can read (PKCS#8, PKCS#1 RSA or SEC1 EC)")) }
        let key = EVPKey(taking: decoded)
        if key.isA("RSA") {
            let bits = key.bits
            guard bits >= PublicKey.minimumRSABits else {
                return .failure(Refusal(reason: "is an RSA-\(bits) key; RSA keys must have at least \(PublicKey.minimumRSABits) bits (RFC 7518 §3.3)"))
            }
            guard bits <= 16384 else { return .failure(Refusal(reason: "is an RSA-\(bits) key, over the 16384-bit maximum")) }
            return .success(PrivateKeyPair(pair: key, kind: .rsa(bits: bits)))
        }
        if key.isA("EC") {
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard api.pointee.EVP_PKEY_get_group_name(key.pointer, &name, name.count, &length) == 1 else {
                return .failure(Refusal(reason: "is an EC key whose curve OpenSSL does not name; use P-256, P-384 or P-521"))
            }
            let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard let curve = Self.curve(named: group) else {
                return .failure(Refusal(reason: "is an EC key on \(group); use P-256, P-384 or P-521 (RFC 7518 §3.4)"))
            }
            return .success(PrivateKeyPair(pair: key, kind: .ec(curve)))
        }
        if key.isA("ED25519") { return .success(PrivateKeyPair(pair: key, kind: .ed25519)) }
        return .failure(Refusal(reason: "is neither an RSA, an EC (P-256, P-384, P-521) nor an Ed25519 key"))
    }

    /// A fresh key pair for `algorithm` (a DPoP key, RFC 9449 §2): P-256/P-384/P-521 for ES256/
    /// ES384/ES512, Ed25519 for EdDSA, RSA-2048 for RS*/PS*.
    /// - Throws: ``OAuthError`` `.configuration` for an HMAC algorithm; `.crypto` when OpenSSL fails.
    static func generate(for algorithm: JWSAlgorithm) throws(OAuthError) -> PrivateKeyPair {
        switch algorithm.family {
        case .ecdsa(let curve):
            let key = try PKeyContext(algorithm: "EC").generate { libcrypto.pointee.EVP_PKEY_CTX_set_group_name($0, curve.rawValue) }
            return PrivateKeyPair(pair: key, kind: .ec(curve))
        case .edDSA:
            return PrivateKeyPair(pair: try PKeyContext(algorithm: "ED25519").generate(), kind: .ed25519)
        case .rsa:
            let key = try PKeyContext(algorithm: "RSA").generate {
                libcrypto.pointee.EVP_PKEY_CTX_set_rsa_keygen_bits($0, Int32(PublicKey.minimumRSABits))
            }
            return PrivateKeyPair(pair: key, kind: .rsa(bits: key.bits))
        case .hmac, .none:
            throw OAuthError(.configuration, message: "a key pair cannot be made for \(algorithm.rawValue)")
        }
    }

    /// The private key as DER (`i2d_PrivateKey`: PKCS#1 for RSA, SEC1 for EC, PKCS#8 for
    /// Ed25519), which ``decode(der:)`` reads back. A secret: the caller wipes or seals it.
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL cannot encode the key.
    func privateKeyDER() throws(OAuthError) -> [UInt8] {
        let length = Int(libcrypto.pointee.i2d_PrivateKey(pair.pointer, nil))
        guard length > 0 else { throw OAuthError(.crypto, message: "encoding a private key failed: \(OpenSSLError.last())") }
        var der = [UInt8](repeating: 0, count: length)
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return libcrypto.pointee.i2d_PrivateKey(pair.pointer, &cursor)
        }
        guard Int(written) == length else { throw OAuthError(.crypto, message: "encoding a private key failed: \(OpenSSLError.last())") }
        return der
    }

    /// The JOSE curve for an OpenSSL group name (`prime256v1`, `secp384r1`, `secp521r1`, or the NIST names).
    static func curve(named group: String) -> EllipticCurve? {
        switch group {
        case "prime256v1", "P-256", "secp256r1": return .p256
        case "secp384r1", "P-384": return .p384
        case "secp521r1", "P-521": return .p521
        default: return nil
        }
    }

    /// The JWS signature of `signingInput` with `algorithm` (`r ‖ s` for ECDSA, RFC 7518 §3.4;
    /// RSASSA-PSS with MGF1 and a salt as long as the hash for PS*, RFC 7518 §3.5).
    /// - Throws: ``OAuthError`` `.configuration` when `algorithm` does not fit the key; `.crypto`
    ///   when OpenSSL fails.
    func sign(_ algorithm: JWSAlgorithm, signingInput: [UInt8]) throws(OAuthError) -> [UInt8] {
        guard algorithm.isAsymmetric, publicKey.fits(algorithm) else {
            throw OAuthError(.configuration, message: "the algorithm \(algorithm.rawValue) does not fit \(publicKey.kindName) key")
        }
        let digest: MessageDigest? = algorithm == .edDSA ? nil : algorithm.hash
        let signature = try DigestContext().sign(key: pair, digest: digest, pss: algorithm.isPSS, message: signingInput)
        guard case .ec(let curve) = kind else { return signature }
        guard let raw = ECDSASignature.jws(fromDER: signature, coordinateSize: curve.coordinateSize) else {
            throw OAuthError(.crypto, message: "OpenSSL returned an unexpected ECDSA signature")
        }
        return raw
    }

    /// The public half's JWK members (RFC 7517 §4, RFC 7518 §6, RFC 8037 §2), in RFC 7638 order.
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL cannot export a parameter.
    func publicJWKMembers() throws(OAuthError) -> [(String, String)] {
        switch kind {
        case .rsa:
            return [("e", Base64URL.encode(try pair.bigNumberParameter("e"))), ("kty", "RSA"),
                    ("n", Base64URL.encode(try pair.bigNumberParameter("n")))]
        case .ec(let curve):
            return [("crv", curve.rawValue), ("kty", "EC"),
                    ("x", Base64URL.encode(try pair.bigNumberParameter("qx", width: curve.coordinateSize))),
                    ("y", Base64URL.encode(try pair.bigNumberParameter("qy", width: curve.coordinateSize)))]
        case .ed25519:
            return [("crv", "Ed25519"), ("kty", "OKP"), ("x", Base64URL.encode(try pair.rawPublicKey()))]
        }
    }

    /// True when the DER X.509 certificate `der` carries this key's public half (`EVP_PKEY_eq`).
    /// - Throws: ``Refusal`` when `der` is not a certificate OpenSSL can read.
    func matchesCertificate(der: [UInt8]) throws(Refusal) -> Bool {
        guard let certificate = Certificate(der: der) else {
            throw Refusal(reason: "is not an X.509 certificate OpenSSL can read")
        }
        return certificate.hasPublicKey(of: pair)
    }
}

/// Owns one `X509` certificate, decoded from DER.
final class Certificate {
    private let pointer: OpaquePointer

    /// Decodes `der`; nil when it is not a certificate (or libcrypto cannot be loaded).
    init?(der: [UInt8]) {
        guard let api = LibCrypto.loaded else { return nil }
        defer { api.pointee.ERR_clear_error() }
        let decoded: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return api.pointee.d2i_X509(nil, &cursor, buffer.count)
        }
        guard let decoded else { return nil }
        pointer = decoded
    }

    deinit { libcrypto.pointee.X509_free(pointer) }

    /// True when the certificate's subject public key is `key`'s public half.
    func hasPublicKey(of key: EVPKey) -> Bool {
        defer { libcrypto.pointee.ERR_clear_error() }
        // X509_get0_pubkey: borrowed from the certificate, which outlives this call.
        guard let certificateKey = libcrypto.pointee.X509_get0_pubkey(pointer) else { return false }
        return libcrypto.pointee.EVP_PKEY_eq(certificateKey, key.pointer) == 1
    }
}
