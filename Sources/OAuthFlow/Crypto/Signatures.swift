internal import COpenSSL

/// A JWS `alg` value (RFC 7518 §3.1, RFC 8037 §3.1). `none` is recognised only to be refused.
package enum JWSAlgorithm: String, Sendable, Hashable, CaseIterable {
    case hs256 = "HS256", hs384 = "HS384", hs512 = "HS512"
    case rs256 = "RS256", rs384 = "RS384", rs512 = "RS512"
    case ps256 = "PS256", ps384 = "PS384", ps512 = "PS512"
    case es256 = "ES256", es384 = "ES384", es512 = "ES512"
    case edDSA = "EdDSA"
    case none = "none"

    /// The key family an algorithm needs.
    enum Family: Sendable { case hmac, rsa, ecdsa(EllipticCurve), edDSA, none }

    var family: Family {
        switch self {
        case .hs256, .hs384, .hs512: return .hmac
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512: return .rsa
        case .es256: return .ecdsa(.p256)
        case .es384: return .ecdsa(.p384)
        case .es512: return .ecdsa(.p521)
        case .edDSA: return .edDSA
        case .none: return .none
        }
    }

    /// True for HS256/384/512 (a shared secret, never a public key).
    var isHMAC: Bool { if case .hmac = family { return true } else { return false } }

    /// True for the asymmetric signature algorithms.
    var isAsymmetric: Bool {
        switch family {
        case .rsa, .ecdsa, .edDSA: return true
        case .hmac, .none: return false
        }
    }

    /// The hash the algorithm signs with; for EdDSA (Ed25519) SHA-512, the hash OpenID Connect uses
    /// for its `at_hash`/`c_hash`. Nil for `none`.
    var hash: MessageDigest? {
        switch self {
        case .hs256, .rs256, .ps256, .es256: return .sha256
        case .hs384, .rs384, .ps384, .es384: return .sha384
        case .hs512, .rs512, .ps512, .es512, .edDSA: return .sha512
        case .none: return nil
        }
    }

    /// True for RSASSA-PSS.
    var isPSS: Bool { self == .ps256 || self == .ps384 || self == .ps512 }
}

/// A NIST curve usable with ECDSA in JOSE (RFC 7518 §6.2.1.1).
package enum EllipticCurve: String, Sendable, Hashable, CaseIterable {
    case p256 = "P-256", p384 = "P-384", p521 = "P-521"

    /// The length of one coordinate, and of `r` and of `s` in a JWS signature.
    var coordinateSize: Int {
        switch self {
        case .p256: return 32
        case .p384: return 48
        case .p521: return 66
        }
    }

    /// The JWS algorithm that uses this curve.
    var algorithm: JWSAlgorithm {
        switch self {
        case .p256: return .es256
        case .p384: return .es384
        case .p521: return .es512  // ES512 is ECDSA over P-521 (RFC 7518 §3.4)
        }
    }
}

/// A verified public key imported from JWK components, or taken from a ``SigningKey``.
///
/// Import refuses weak or invalid keys: an RSA modulus under 2048 bits, EC coordinates of the wrong
/// length or a point not on its curve, an Ed25519 key that is not 32 bytes.
package final class PublicKey: Sendable {
    /// What kind of key this is.
    enum Kind: Sendable, Hashable {
        case rsa(bits: Int)
        case ec(EllipticCurve)
        case ed25519
    }

    let kind: Kind
    private let key: EVPKey

    private init(kind: Kind, key: EVPKey) {
        self.kind = kind
        self.key = key
    }

    /// The smallest RSA modulus accepted (RFC 7518 §3.3 requires 2048 bits).
    static let minimumRSABits = 2048

    /// An RSA public key from the JWK `n` and `e` (big-endian bytes, RFC 7518 §6.3.1).
    /// - Throws: ``OAuthError`` `.invalidResponse` for a modulus under 2048 bits or a key OpenSSL refuses.
    static func rsa(modulus n: [UInt8], exponent e: [UInt8]) throws(OAuthError) -> PublicKey {
        let n = Array(n.drop { $0 == 0 })
        let e = Array(e.drop { $0 == 0 })
        guard !n.isEmpty, !e.isEmpty, e.count <= 8 else { throw keyError("an RSA key needs a modulus and a small exponent") }
        // n and e odd, e at least 3 (e = 1 would make every padded message its own signature).
        // OpenSSL's full public check (SP 800-56B, a Miller-Rabin test of n) costs ~10 ms per key.
        guard n[n.count - 1] & 1 == 1 else { throw keyError("an RSA modulus must be odd") }
        guard e[e.count - 1] & 1 == 1, e.count > 1 || e[0] >= 3 else { throw keyError("an RSA exponent must be odd and at least 3") }
        let bits = (n.count - 1) * 8 + (8 - n[0].leadingZeroBitCount)
        guard bits >= minimumRSABits else {
            throw keyError("RSA modulus of \(bits) bits is under the \(minimumRSABits)-bit minimum")
        }
        guard bits <= 16384 else { throw keyError("RSA modulus of \(bits) bits is over the 16384-bit maximum") }
        // OSSL_PARAM integers are native-endian (little-endian on every platform Swift on Linux runs on).
        let littleN = Array(n.reversed())
        let littleE = Array(e.reversed())
        let context = try PKeyContext(algorithm: "RSA")
        let key: EVPKey? = "n".withCString { nName in
            "e".withCString { eName in
                littleN.withUnsafeBytes { nBytes in
                    littleE.withUnsafeBytes { eBytes in
                        var parameters = [
                            libcrypto.pointee.OSSL_PARAM_construct_BN(nName, UnsafeMutablePointer(mutating: nBytes.bindMemory(to: UInt8.self).baseAddress), nBytes.count),
                            libcrypto.pointee.OSSL_PARAM_construct_BN(eName, UnsafeMutablePointer(mutating: eBytes.bindMemory(to: UInt8.self).baseAddress), eBytes.count),
                            libcrypto.pointee.OSSL_PARAM_construct_end(),
                        ]
                        return parameters.withUnsafeMutableBufferPointer { context.publicKey(from: $0.baseAddress!) }
                    }
                }
            }
        }
        guard let key, key.isA("RSA") else { throw keyError("OpenSSL refused the RSA key") }
        return PublicKey(kind: .rsa(bits: key.bits), key: key)
    }

    /// An EC public key from the JWK `crv`, `x` and `y` (RFC 7518 §6.2.1); the point must lie on the curve.
    /// - Throws: ``OAuthError`` `.invalidResponse` for a coordinate of the wrong length or a point not on the curve.
    static func ec(curve: EllipticCurve, x: [UInt8], y: [UInt8]) throws(OAuthError) -> PublicKey {
        guard x.count == curve.coordinateSize, y.count == curve.coordinateSize else {
            throw keyError("\(curve.rawValue) coordinates must be \(curve.coordinateSize) bytes each")
        }
        let point = [0x04] + x + y  // SEC 1 §2.3.3 uncompressed point
        let context = try PKeyContext(algorithm: "EC")
        let key: EVPKey? = "group".withCString { groupName in
            curve.rawValue.withCString { curveName in
                "pub".withCString { pubName in
                    point.withUnsafeBytes { pointBytes in
                        var parameters = [
                            libcrypto.pointee.OSSL_PARAM_construct_utf8_string(groupName, UnsafeMutablePointer(mutating: curveName), 0),
                            libcrypto.pointee.OSSL_PARAM_construct_octet_string(pubName, UnsafeMutableRawPointer(mutating: pointBytes.baseAddress), pointBytes.count),
                            libcrypto.pointee.OSSL_PARAM_construct_end(),
                        ]
                        return parameters.withUnsafeMutableBufferPointer { context.publicKey(from: $0.baseAddress!) }
                    }
                }
            }
        }
        guard let key, key.isA("EC"), try key.passesQuickPublicCheck() else {
            throw keyError("the \(curve.rawValue) point is not on the curve")
        }
        return PublicKey(kind: .ec(curve), key: key)
    }

    /// An Ed25519 public key from the JWK `x` (32 bytes, RFC 8037 §2).
    /// - Throws: ``OAuthError`` `.invalidResponse` when `x` is not 32 bytes or OpenSSL refuses it.
    static func ed25519(x: [UInt8]) throws(OAuthError) -> PublicKey {
        guard x.count == 32 else { throw keyError("an Ed25519 key must be 32 bytes") }
        guard let raw = try LibCrypto.require().pointee.EVP_PKEY_new_raw_public_key_ex(nil, "ED25519", nil, x, x.count) else {
            libcrypto.pointee.ERR_clear_error()
            throw keyError("OpenSSL refused the Ed25519 key")
        }
        return PublicKey(kind: .ed25519, key: EVPKey(taking: raw))
    }

    /// Wraps a generated key's public half (``SigningKey``).
    static func wrapping(_ key: EVPKey, kind: Kind) -> PublicKey { PublicKey(kind: kind, key: key) }

    /// True when this key's type can verify `algorithm` (RSA for RS*/PS*, the same curve for ES*,
    /// Ed25519 for EdDSA).
    func fits(_ algorithm: JWSAlgorithm) -> Bool {
        switch (algorithm.family, kind) {
        case (.rsa, .rsa): return true
        case (.ecdsa(let wanted), .ec(let curve)): return wanted == curve
        case (.edDSA, .ed25519): return true
        default: return false
        }
    }

    /// Verifies a JWS signature over `signingInput` (RFC 7515 §5.2 step 8).
    ///
    /// - Returns: false for a wrong signature (or an ECDSA signature that is not exactly 2 × the
    ///   coordinate size).
    /// - Throws: ``OAuthError`` `.idTokenRejected` when the algorithm does not fit the key: an HMAC
    ///   or `none` algorithm with a public key (algorithm confusion), or e.g. ES256 with an RSA key.
    package func verify(_ algorithm: JWSAlgorithm, signingInput: [UInt8], signature: [UInt8]) throws(OAuthError) -> Bool {
        guard fits(algorithm) else {
            let reason: TokenRejection = algorithm.isAsymmetric ? .keyMismatch : .algorithmConfusion
            throw reason.error("alg \(algorithm.rawValue) cannot be verified with \(kindName) key")
        }
        let context = try DigestContext()
        switch kind {
        case .rsa:
            return context.verify(key: key, digest: algorithm.hash, pss: algorithm.isPSS, message: signingInput, signature: signature)
        case .ec(let curve):
            guard let der = ECDSASignature.der(fromJWS: signature, coordinateSize: curve.coordinateSize) else { return false }
            return context.verify(key: key, digest: algorithm.hash, pss: false, message: signingInput, signature: der)
        case .ed25519:
            return context.verify(key: key, digest: nil, pss: false, message: signingInput, signature: signature)
        }
    }

    /// "an RSA-2048", "a P-256", "an Ed25519": for messages.
    var kindName: String {
        switch kind {
        case .rsa(let bits): return "an RSA-\(bits)"
        case .ec(let curve): return "a \(curve.rawValue)"
        case .ed25519: return "an Ed25519"
        }
    }

    private static func keyError(_ message: String) -> OAuthError {
        TokenRejection.unusableKey.error(message, code: .invalidResponse)
    }
}

/// HMAC for HS256/384/512 (RFC 7518 §3.2), compared in constant time.
enum HMACVerifier {
    /// The HMAC of `data` under `key` with the algorithm's hash.
    static func mac(_ algorithm: JWSAlgorithm, key: [UInt8], data: [UInt8]) throws(OAuthError) -> [UInt8] {
        guard algorithm.isHMAC, let digest = algorithm.hash else {
            throw TokenRejection.algorithmConfusion.error("alg \(algorithm.rawValue) is not an HMAC algorithm")
        }
        return try MACContext(.hmac).hmac(digest: digest, key: key, data: data)
    }

    /// True when `signature` is the HMAC of `signingInput` under `key` (constant-time comparison).
    static func verify(_ algorithm: JWSAlgorithm, key: [UInt8], signingInput: [UInt8], signature: [UInt8]) throws(OAuthError) -> Bool {
        ConstantTime.equals(try mac(algorithm, key: key, data: signingInput), signature)
    }
}

/// Converts between JWS ECDSA signatures (`r ‖ s`, each exactly the coordinate size, RFC 7518
/// §3.4) and the DER `ECDSA-Sig-Value` OpenSSL uses (SEC 1 §C.8, RFC 3279 §2.2.3).
enum ECDSASignature {
    /// DER `SEQUENCE { INTEGER r, INTEGER s }`; nil unless `raw` is exactly 2 × `coordinateSize` bytes.
    static func der(fromJWS raw: [UInt8], coordinateSize: Int) -> [UInt8]? {
        guard raw.count == 2 * coordinateSize else { return nil }
        let body = integer(raw[0..<coordinateSize]) + integer(raw[coordinateSize...])
        return [0x30] + length(body.count) + body
    }

    /// `r ‖ s`, each left-padded to `coordinateSize`; nil if `der` is not a well-formed signature that fits.
    static func jws(fromDER der: [UInt8], coordinateSize: Int) -> [UInt8]? {
        var index = 0
        func readLength() -> Int? {
            guard index < der.count else { return nil }
            let first = Int(der[index])
            index += 1
            if first < 0x80 { return first }
            guard first == 0x81, index < der.count else { return nil }
            defer { index += 1 }
            return Int(der[index])
        }
        func readInteger() -> [UInt8]? {
            guard index < der.count, der[index] == 0x02 else { return nil }
            index += 1
            guard let count = readLength(), count > 0, index + count <= der.count else { return nil }
            defer { index += count }
            let value = Array(der[index..<(index + count)].drop { $0 == 0 })
            guard value.count <= coordinateSize else { return nil }
            return [UInt8](repeating: 0, count: coordinateSize - value.count) + value
        }
        guard der.first == 0x30 else { return nil }
        index = 1
        guard let total = readLength(), index + total == der.count,
              let r = readInteger(), let s = readInteger(), index == der.count else { return nil }
        return r + s
    }

    /// A DER INTEGER holding the unsigned big-endian `bytes`, minimally encoded.
    private static func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var content = Array(bytes.drop { $0 == 0 })
        if content.isEmpty { content = [0] }
        if content[0] & 0x80 != 0 { content.insert(0, at: 0) }
        return [0x02] + length(content.count) + content
    }

    /// A DER length (short form below 128, else long form; ours stay below 65536).
    private static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        if count < 0x100 { return [0x81, UInt8(count)] }
        return [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
    }
}
