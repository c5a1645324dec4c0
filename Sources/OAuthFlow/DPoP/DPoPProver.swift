#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Builds DPoP proofs (RFC 9449 §4.2): a JWT signed with the client's DPoP key, fresh for every
/// HTTP request.
///
/// Header: `typ` `dpop+jwt`, `alg`, `jwk` (the public key's required members). Claims: `jti`
/// (128 random bits), `htm`, `htu` (the URL without query and fragment), `iat`, and `ath`
/// (base64url SHA-256 of the access token) on resource requests, `nonce` when the server gave one.
/// A proof is a ``Secret``: it is never logged or stored.
enum DPoPProof {
    /// The header's `typ` (RFC 9449 §4.2).
    static let type = "dpop+jwt"
    /// Random bytes in `jti`.
    static let jtiBytes = 16
    /// The algorithms a DPoP key may use here (ES256 first: the default).
    static let algorithms: [SigningAlgorithm] = [.es256, .es384, .edDSA, .ps256, .rs256]

    /// base64url(header) and the RFC 7638 thumbprint of `jwk`.
    /// - Throws: ``OAuthError`` `.configuration` when `jwk` lacks `kty`; `.crypto` when hashing fails.
    static func header(jwk: [String: String], algorithm: SigningAlgorithm) throws(OAuthError) -> (encoded: String, thumbprint: String) {
        guard jwk["kty"] != nil, jwk["d"] == nil else {
            throw OAuthError(.configuration, message: "a DPoP key's public JWK must have kty and no private member")
        }
        let required = Self.requiredMembers(jwk)
        let members = JSONValue.object(required.mapValues { JSONValue.string($0) })
        let header = JSONValue.text(orderedMembers: [("typ", .string(type)), ("alg", .string(algorithm.rawValue)), ("jwk", members)])
        // RFC 7638 §3: the required members, sorted, no white space; `.object` writes exactly that.
        let thumbprint = Base64URL.encode(try Digest.sha256(Array(members.jsonText.utf8)))
        return (Base64URL.encode(Array(header.utf8)), thumbprint)
    }

    /// The members RFC 7638 §3.2 requires for the key's type (all of them for an unknown type).
    static func requiredMembers(_ jwk: [String: String]) -> [String: String] {
        let names: Set<String>
        switch jwk["kty"] {
        case "EC": names = ["crv", "kty", "x", "y"]
        case "RSA": names = ["e", "kty", "n"]
        case "OKP": names = ["crv", "kty", "x"]
        default: return jwk
        }
        return jwk.filter { names.contains($0.key) }
    }

    /// `htu`: the URL without query and fragment (RFC 9449 §4.2, §4.3 step 9).
    static func htu(_ url: URL) -> String {
        let text = url.absoluteString
        guard let cut = text.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return text }
        return String(text[..<cut])
    }

    /// `ath`: base64url of the SHA-256 of the access token's ASCII bytes (RFC 9449 §4.2).
    /// - Throws: ``OAuthError`` `.crypto` when hashing fails.
    static func ath(_ accessToken: Secret) throws(OAuthError) -> String {
        Base64URL.encode(try Digest.sha256(Array(accessToken.reveal().utf8)))
    }

    /// The claims, base64url-encoded, with a fresh `jti`: `{"jti":…,"htm":…,"htu":…,"iat":…[,"ath":…][,"nonce":…]}`.
    ///
    /// Written straight into one string (a proof is made for every request): each value is appended
    /// as it is when it needs no JSON escaping (printable ASCII without `"` and `\`), else through
    /// the one JSON writer's escaping.
    static func encodedClaims(method: String, url: URL, issuedAt: Int, nonce: String?, accessToken: Secret?) throws(OAuthError) -> String {
        var json = "{\"jti\":"
        json.reserveCapacity(256)
        appendString(Base64URL.encode(try SecureRandom.bytes(jtiBytes)), to: &json)
        json += ",\"htm\":"
        appendString(method, to: &json)
        json += ",\"htu\":"
        appendString(htu(url), to: &json)
        json += ",\"iat\":" + String(issuedAt)
        if let accessToken {
            json += ",\"ath\":"
            appendString(try ath(accessToken), to: &json)
        }
        if let nonce {
            json += ",\"nonce\":"
            appendString(nonce, to: &json)
        }
        json += "}"
        return Base64URL.encode(Array(json.utf8))
    }

    /// Appends `value` as a JSON string.
    private static func appendString(_ value: String, to json: inout String) {
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            json += "\"" + value + "\""
        } else {
            JSONValue.quote(value, into: &json)
        }
    }
}

/// What signs one provider's proofs: its signer, the algorithm, and the header made once.
struct DPoPProver: Sendable {
    let signer: any DPoPSigner
    let algorithm: SigningAlgorithm
    /// base64url of the proofs' header.
    let encodedHeader: String
    /// The RFC 7638 thumbprint of the public key: `dpop_jkt` (RFC 9449 §10).
    let thumbprint: String
    /// The key the flow made, to keep with the tokens; nil for a signer the application gave.
    let generatedKey: DPoPKey?

    /// A prover over a key the flow made (its header is computed already).
    init(_ key: DPoPKey) {
        self.init(signer: key, algorithm: key.algorithm, encodedHeader: key.encodedHeader, thumbprint: key.thumbprint, generatedKey: key)
    }

    /// A prover over the application's signer.
    /// - Throws: ``OAuthError`` as the signer's ``DPoPSigner/publicKeyJWK()`` throws.
    init(signer: any DPoPSigner, algorithm: SigningAlgorithm) throws(OAuthError) {
        let header = try DPoPProof.header(jwk: try signer.publicKeyJWK(), algorithm: algorithm)
        self.init(signer: signer, algorithm: algorithm, encodedHeader: header.encoded, thumbprint: header.thumbprint, generatedKey: nil)
    }

    private init(signer: any DPoPSigner, algorithm: SigningAlgorithm, encodedHeader: String, thumbprint: String, generatedKey: DPoPKey?) {
        self.signer = signer
        self.algorithm = algorithm
        self.encodedHeader = encodedHeader
        self.thumbprint = thumbprint
        self.generatedKey = generatedKey
    }

    /// A fresh proof for `method` on `url`; `accessToken` adds `ath` (a resource request).
    /// - Throws: ``OAuthError`` as the signer throws; `.crypto` without random bytes.
    func proof(method: String, url: URL, nonce: String?, accessToken: Secret? = nil, now: Date) async throws(OAuthError) -> Secret {
        if generatedKey != nil { return try proofNow(method: method, url: url, nonce: nonce, accessToken: accessToken, now: now) }
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        let input = encodedHeader + "." + (try DPoPProof.encodedClaims(method: method, url: url, issuedAt: issuedAt, nonce: nonce, accessToken: accessToken))
        let signature = try await signer.sign(Array(input.utf8), algorithm: algorithm)
        return Secret(input + "." + Base64URL.encode(signature))
    }

    /// ``proof(method:url:nonce:accessToken:now:)`` without a suspension, for a key the flow made.
    /// - Throws: ``OAuthError`` `.configuration` for an application's signer; `.crypto` when OpenSSL fails.
    func proofNow(method: String, url: URL, nonce: String?, accessToken: Secret? = nil, now: Date) throws(OAuthError) -> Secret {
        guard let generatedKey else { throw OAuthError(.configuration, message: "an application's DPoP signer signs asynchronously") }
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        let input = encodedHeader + "." + (try DPoPProof.encodedClaims(method: method, url: url, issuedAt: issuedAt, nonce: nonce, accessToken: accessToken))
        return Secret(input + "." + Base64URL.encode(try generatedKey.signNow(Array(input.utf8))))
    }
}

/// The latest `DPoP-Nonce` of each server (RFC 9449 §8, §9), by origin; one table per provider.
final class DPoPNonces: Sendable {
    private let table = Mutex<[String: String]>([:])
    /// The most origins remembered; beyond it the table starts over.
    static let capacity = 64

    /// The nonce to put in the next proof to `url`'s server, if it gave one.
    func nonce(for url: URL) -> String? {
        let origin = Self.origin(url)
        return table.withLock { $0[origin] }
    }

    /// Keeps the `DPoP-Nonce` of `response` from `url`'s server; true when it held a valid one.
    @discardableResult
    func record(_ response: HTTPResponse, from url: URL) -> Bool {
        guard let nonce = response.headers["dpop-nonce"], Self.isValidNonce(nonce) else { return false }
        let origin = Self.origin(url)
        table.withLock { table in
            if table.count >= Self.capacity, table[origin] == nil { table.removeAll() }
            table[origin] = nonce
        }
        return true
    }

    /// RFC 9449 §8.1: `nonce = 1*NQCHAR` (printable ASCII but `"` and `\`), bounded here to 1024 bytes.
    static func isValidNonce(_ nonce: String) -> Bool {
        !nonce.isEmpty && nonce.utf8.count <= 1024
            && nonce.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// `scheme://host:port`, lower-cased.
    static func origin(_ url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\((url.host ?? "").lowercased()):\(port)"
    }
}

extension ErrorResponse.Code {
    /// `use_dpop_nonce`: send the request again with the `DPoP-Nonce` the server gave (RFC 9449 §8, §9).
    public static let useDPoPNonce = ErrorResponse.Code(rawValue: "use_dpop_nonce")
    /// `invalid_dpop_proof`: the DPoP proof was refused (RFC 9449 §5, §7.1).
    public static let invalidDPoPProof = ErrorResponse.Code(rawValue: "invalid_dpop_proof")
}

/// The DPoP key a provider's client uses until its tokens are stored with it: made on first use
/// (``TokenEndpoint/prover(previous:)``), forgotten by a logout. One per ``EndpointClient``.
final class DPoPKeySlot: Sendable {
    private let key = Mutex<DPoPKey?>(nil)

    /// The key held, when it signs with `algorithm`.
    func current(_ algorithm: SigningAlgorithm) -> DPoPKey? {
        key.withLock { $0?.algorithm == algorithm ? $0 : nil }
    }

    /// Holds `new` (the key of the stored tokens, or a fresh one).
    func hold(_ new: DPoPKey) { key.withLock { $0 = new } }

    /// Forgets the key (a logout).
    func forget() { key.withLock { $0 = nil } }
}
