internal import COpenSSL

/// A key pair generated through OpenSSL that signs JWS for tests, the mock provider and the
/// benchmark; it exports its public half as a JWK. Never used to verify server tokens.
package final class SigningKey: Sendable {
    private let pair: EVPKey
    /// The public half, as the verifier would import it.
    package let publicKey: PublicKey

    private init(pair: EVPKey, kind: PublicKey.Kind) {
        self.pair = pair
        self.publicKey = .wrapping(pair, kind: kind)
    }

    /// A fresh RSA key (2048 bits unless asked; smaller sizes exist only to test their refusal).
    package static func rsa(bits: Int = 2048) throws(OAuthError) -> SigningKey {
        let key = try PKeyContext(algorithm: "RSA").generate { libcrypto.pointee.EVP_PKEY_CTX_set_rsa_keygen_bits($0, Int32(bits)) }
        return SigningKey(pair: key, kind: .rsa(bits: key.bits))
    }

    /// A fresh EC key on `curve`.
    package static func ec(_ curve: EllipticCurve) throws(OAuthError) -> SigningKey {
        let key = try PKeyContext(algorithm: "EC").generate { libcrypto.pointee.EVP_PKEY_CTX_set_group_name($0, curve.rawValue) }
        return SigningKey(pair: key, kind: .ec(curve))
    }

    /// A fresh Ed25519 key.
    package static func ed25519() throws(OAuthError) -> SigningKey {
        SigningKey(pair: try PKeyContext(algorithm: "ED25519").generate(), kind: .ed25519)
    }

    /// The JWS signature of `signingInput` (`r ‖ s` for ECDSA, RFC 7518 §3.4).
    /// - Throws: ``OAuthError`` `.idTokenRejected` when `algorithm` does not fit the key.
    package func sign(_ algorithm: JWSAlgorithm, signingInput: [UInt8]) throws(OAuthError) -> [UInt8] {
        guard publicKey.fits(algorithm) else {
            throw TokenRejection.keyMismatch.error("alg \(algorithm.rawValue) does not fit \(publicKey.kindName) key")
        }
        let digest: MessageDigest? = algorithm == .edDSA ? nil : algorithm.hash
        let signature = try DigestContext().sign(key: pair, digest: digest, pss: algorithm.isPSS, message: signingInput)
        guard case .ec(let curve) = publicKey.kind else { return signature }
        guard let raw = ECDSASignature.jws(fromDER: signature, coordinateSize: curve.coordinateSize) else {
            throw OAuthError(.crypto, message: "OpenSSL returned an unexpected ECDSA signature")
        }
        return raw
    }

    /// A compact JWS: base64url(header) "." base64url(payload) "." base64url(signature).
    package func compact(header: String, payload: String, algorithm: JWSAlgorithm) throws(OAuthError) -> String {
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        return signingInput + "." + Base64URL.encode(try sign(algorithm, signingInput: Array(signingInput.utf8)))
    }

    /// The public JWK as JSON text (RFC 7517 §4, RFC 7518 §6, RFC 8037 §2), with `kid`, `alg`
    /// and `use` when given.
    package func publicJWK(kid: String? = nil, algorithm: String? = nil, use: String? = "sig") throws(OAuthError) -> String {
        var members: [(String, String)] = []
        switch publicKey.kind {
        case .rsa:
            members = [("kty", "RSA"),
                       ("n", Base64URL.encode(try pair.bigNumberParameter("n"))),
                       ("e", Base64URL.encode(try pair.bigNumberParameter("e")))]
        case .ec(let curve):
            members = [("kty", "EC"), ("crv", curve.rawValue),
                       ("x", Base64URL.encode(try pair.bigNumberParameter("qx", width: curve.coordinateSize))),
                       ("y", Base64URL.encode(try pair.bigNumberParameter("qy", width: curve.coordinateSize)))]
        case .ed25519:
            members = [("kty", "OKP"), ("crv", "Ed25519"), ("x", Base64URL.encode(try pair.rawPublicKey()))]
        }
        if let kid { members.append(("kid", kid)) }
        if let algorithm { members.append(("alg", algorithm)) }
        if let use { members.append(("use", use)) }
        return "{" + members.map { "\"\($0.0)\":\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
    }

    /// A JSON string body: quotes, backslashes and control characters escaped.
    private static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
