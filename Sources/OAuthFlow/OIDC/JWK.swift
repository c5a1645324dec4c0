#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// One JSON Web Key (RFC 7517 §4) from a provider's JWKS, with its public key imported.
///
/// A key that cannot be used (an unknown `kty` or `crv`, missing or malformed members, an RSA
/// modulus under 2048 bits, an EC point off its curve) is kept with the reason in ``key``, as
/// RFC 7517 §5 asks ("SHOULD ignore"), so that a token naming it by `kid` fails with that reason.
struct JWK: Sendable {
    /// `kty` as sent: `RSA`, `EC`, `OKP`, `oct`, or anything else.
    let keyType: String
    /// `kid`.
    let keyID: String?
    /// `use` (`sig` or `enc`), when present.
    let use: String?
    /// `alg`, when present (as sent: an unknown value never matches a token's `alg`).
    let algorithm: String?
    /// `key_ops`, when present.
    let operations: [String]?
    /// `crv` for EC and OKP keys.
    let curve: String?
    /// The imported public key, or why there is none.
    let key: Result<PublicKey, OAuthError>

    /// Reads one JWK object; per-key problems land in ``key`` instead of throwing.
    /// - Throws: ``OAuthError`` `.invalidResponse` only when a common member (`kty`, `kid`, `use`,
    ///   `alg`, `key_ops`, `crv`) has the wrong JSON type.
    init(_ value: JSONValue) throws(OAuthError) {
        let object = try JSONObject(value, what: "a JWK") { Self.structureError("JWK: \($0)") }
        keyType = try object.string("kty") ?? ""
        keyID = try object.string("kid")
        use = try object.string("use")
        algorithm = try object.string("alg")
        operations = try object.strings("key_ops")
        curve = try object.string("crv")
        do {
            key = .success(try Self.importKey(object, keyType: keyType, curve: curve))
        } catch {
            key = .failure(error)
        }
    }

    private static func importKey(_ object: JSONObject, keyType: String, curve: String?) throws(OAuthError) -> PublicKey {
        func bytes(_ member: String) throws(OAuthError) -> [UInt8] {
            guard let text = try object.string(member) else { throw unusable("\(keyType) key without \(member)") }
            guard let decoded = Base64URL.decode(text) else { throw unusable("\(keyType) key member \(member) is not base64url") }
            return decoded
        }
        switch keyType {
        case "RSA":
            return try .rsa(modulus: bytes("n"), exponent: bytes("e"))
        case "EC":
            guard let name = curve, let ellipticCurve = EllipticCurve(rawValue: name) else {
                throw unusable("EC curve \(TokenRejection.printable(curve ?? "(none)")) is not supported")
            }
            return try .ec(curve: ellipticCurve, x: bytes("x"), y: bytes("y"))
        case "OKP":
            guard curve == "Ed25519" else {
                throw unusable("OKP curve \(TokenRejection.printable(curve ?? "(none)")) is not a supported signature curve")
            }
            return try .ed25519(x: bytes("x"))
        case "oct":
            throw unusable("a symmetric (oct) key in a JWKS is never used; HMAC uses the client secret")
        default:
            throw unusable("kty \(TokenRejection.printable(keyType.isEmpty ? "(none)" : keyType)) is not supported")
        }
    }

    /// True when the public key was imported (it is then an asymmetric key).
    var isImported: Bool {
        if case .success = key { return true }
        return false
    }

    /// Why this key cannot verify a token with `algorithm`, or nil when it can.
    func refusal(for algorithm: JWSAlgorithm) -> OAuthError? {
        var name: String { "key \(keyID.map { "\"\(TokenRejection.printable($0))\"" } ?? "without kid")" }
        if let use, use != "sig" {
            return TokenRejection.unusableKey.error("\(name) has use \"\(TokenRejection.printable(use))\", not sig")
        }
        if let operations, !operations.contains("verify") {
            return TokenRejection.unusableKey.error("\(name) has key_ops without verify")
        }
        if let declared = self.algorithm, declared != algorithm.rawValue {
            return TokenRejection.unusableKey.error("\(name) is for alg \(TokenRejection.printable(declared)), the token uses \(algorithm.rawValue)")
        }
        switch key {
        case .failure(let error):
            return TokenRejection.unusableKey.error("\(name) is unusable: \(error.message ?? "invalid")")
        case .success(let publicKey):
            guard publicKey.fits(algorithm) else {
                return TokenRejection.keyMismatch.error("\(name) is \(publicKey.kindName) key, which cannot verify \(algorithm.rawValue)")
            }
            return nil
        }
    }

    private static func unusable(_ message: String) -> OAuthError {
        TokenRejection.unusableKey.error(message, code: .invalidResponse)
    }

    static func structureError(_ message: String) -> OAuthError {
        OAuthError(.invalidResponse, endpoint: .discovery, message: message)
    }
}

/// A JSON Web Key Set (RFC 7517 §5): the provider's signing keys, parsed and imported once.
///
/// A pure value: whoever fetches `jwks_uri` builds one with ``init(json:)`` and hands it to
/// ``JWSVerifier/verify(_:keys:allowed:clientSecret:)``; a ``TokenRejection/unknownKey`` failure
/// from there is the signal to refetch.
package struct JWKSet: Sendable {
    /// The most keys read from one set; more are refused (importing keys costs CPU).
    static let maximumKeys = 64

    /// Every entry of `keys`, usable or not, in document order.
    let keys: [JWK]

    init(keys: [JWK]) { self.keys = keys }

    /// Parses a JWKS document (`{"keys": [...]}`).
    /// - Throws: ``OAuthError`` `.invalidResponse` (endpoint `.discovery`) when the text is not
    ///   JSON, not an object with a `keys` array, holds more than ``maximumKeys`` keys, or an entry
    ///   is not an object or has a member of the wrong type.
    package init(json data: Data) throws(OAuthError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(data)
        } catch {
            throw JWK.structureError("the JWKS is \(error.message ?? "not JSON")")
        }
        try self.init(value)
    }

    /// Reads an already parsed JWKS document.
    /// - Throws: as ``init(json:)``.
    init(_ value: JSONValue) throws(OAuthError) {
        let object = try JSONObject(value, what: "the JWKS") { JWK.structureError("JWKS: \($0)") }
        guard case .array(let entries)? = object.value("keys") else {
            throw JWK.structureError("the JWKS has no keys array")
        }
        guard entries.count <= Self.maximumKeys else {
            throw JWK.structureError("the JWKS holds \(entries.count) keys, over the limit of \(Self.maximumKeys)")
        }
        var keys: [JWK] = []
        keys.reserveCapacity(entries.count)
        for entry in entries { keys.append(try JWK(entry)) }
        self.keys = keys
    }

    /// True when some key carries `keyID`.
    func contains(keyID: String) -> Bool { keys.contains { $0.keyID == keyID } }
}

/// A JWS whose signature has been verified.
struct VerifiedJWS: Sendable {
    /// The protected header.
    let header: JWS.Header
    /// The payload bytes (for a JWT, the claims' JSON).
    let payload: [UInt8]
}

/// Verifies a compact JWS against a provider's keys (RFC 7515 §5.2) with the rules of an
/// OpenID Connect relying party.
enum JWSVerifier {
    /// Verifies `jws` and returns its header and payload.
    ///
    /// Rules, in order:
    /// - `alg: none` is refused (``TokenRejection/algorithmNone``), as is any `alg` outside
    ///   `allowed` (``TokenRejection/algorithmNotAllowed``).
    /// - HS256/384/512 use only `clientSecret` as key; without one, or when the header's `kid`
    ///   names a public key of the set, it is algorithm confusion (``TokenRejection/algorithmConfusion``).
    /// - Otherwise the candidate keys are those with the header's `kid` (none: ``TokenRejection/unknownKey``,
    ///   the signal to refetch the JWKS once), or every key when there is no `kid`. A candidate is
    ///   skipped when its `use` is not `sig`, its `key_ops` lack `verify`, its `alg` differs from the
    ///   header's, its `kty`/`crv` does not fit the `alg`, or it failed to import. With a `kid` and
    ///   no candidate left, the first key's reason is thrown; without a `kid`, ``TokenRejection/unknownKey``.
    /// - The signature must verify with a candidate (``TokenRejection/badSignature``).
    ///
    /// - Throws: ``OAuthError`` `.idTokenRejected` carrying the ``TokenRejection`` reason.
    static func verify(_ jws: JWS, keys: JWKSet, allowed: Set<JWSAlgorithm>, clientSecret: Secret?) throws(OAuthError) -> VerifiedJWS {
        let algorithm = jws.header.algorithm
        guard algorithm != .none else { throw TokenRejection.algorithmNone.error("alg none: unsigned tokens are refused") }
        guard allowed.contains(algorithm) else {
            let names = allowed.map(\.rawValue).sorted().joined(separator: ", ")
            throw TokenRejection.algorithmNotAllowed.error("alg \(algorithm.rawValue) is not allowed (allowed: \(names.isEmpty ? "none" : names))")
        }
        if algorithm.isHMAC {
            if let keyID = jws.header.keyID, keys.keys.contains(where: { $0.keyID == keyID && $0.isImported }) {
                throw TokenRejection.algorithmConfusion.error("alg \(algorithm.rawValue) names a public key by kid; a public key is never an HMAC secret")
            }
            guard let clientSecret, !clientSecret.reveal().isEmpty else {
                throw TokenRejection.algorithmConfusion.error("alg \(algorithm.rawValue) needs the client secret as key, and there is none")
            }
            guard try HMACVerifier.verify(algorithm, key: Array(clientSecret.reveal().utf8), signingInput: jws.signingInput, signature: jws.signature) else {
                throw TokenRejection.badSignature.error("the \(algorithm.rawValue) signature does not verify with the client secret")
            }
            return VerifiedJWS(header: jws.header, payload: jws.payload)
        }

        let named: [JWK]
        if let keyID = jws.header.keyID {
            named = keys.keys.filter { $0.keyID == keyID }
            guard !named.isEmpty else {
                throw TokenRejection.unknownKey.error("no key in the JWKS has kid \"\(TokenRejection.printable(keyID))\"")
            }
        } else {
            named = keys.keys
        }
        var firstRefusal: OAuthError?
        var candidates: [PublicKey] = []
        for jwk in named {
            if let refusal = jwk.refusal(for: algorithm) {
                if firstRefusal == nil { firstRefusal = refusal }
            } else if case .success(let key) = jwk.key {
                candidates.append(key)
            }
        }
        guard !candidates.isEmpty else {
            if jws.header.keyID != nil, let firstRefusal { throw firstRefusal }
            throw TokenRejection.unknownKey.error("no key in the JWKS can verify \(algorithm.rawValue)")
        }
        for key in candidates where try key.verify(algorithm, signingInput: jws.signingInput, signature: jws.signature) {
            return VerifiedJWS(header: jws.header, payload: jws.payload)
        }
        throw TokenRejection.badSignature.error("the \(algorithm.rawValue) signature does not verify")
    }

    /// Parses `compact` (``JWS/init(compact:)``) and verifies it.
    /// - Throws: as ``JWS/init(compact:)`` and ``verify(_:keys:allowed:clientSecret:)``.
    static func verify(compact: String, keys: JWKSet, allowed: Set<JWSAlgorithm>, clientSecret: Secret?) throws(OAuthError) -> VerifiedJWS {
        try verify(JWS(compact: compact), keys: keys, allowed: allowed, clientSecret: clientSecret)
    }
}
