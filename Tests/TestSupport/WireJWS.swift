import Foundation
@testable import OAuthFlow
import Testing

/// A compact JWS as it went on the wire (a DPoP proof, RFC 9449 §4.2; a client or JWT-bearer
/// assertion, RFC 7523; a request object or a JWT access token), decoded as a server would: three
/// unpadded base64url parts (RFC 7515 §7.1), a JSON object header and a JSON object payload.
/// Use it to assert what the library sent; it checks no signature unless asked (``verifies()``).
/// Fails the test (`#require`) on anything else: another part count, padding or a character outside
/// the URL alphabet, a header or payload that is not a JSON object.
public struct WireJWS {
    /// The three base64url parts as sent: header, payload, signature.
    public let parts: [String]
    /// The protected header.
    public let header: [String: Any]
    /// The payload's members (the JWT claims).
    public let claims: [String: Any]
    /// The signed bytes' text: the first two parts joined by ".".
    public var signingInput: String { parts[0] + "." + parts[1] }
    /// The decoded signature.
    public let signature: [UInt8]

    /// Splits and decodes `compact`.
    public init(_ compact: some StringProtocol) throws {
        let parts = String(compact).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        func object(_ part: String) throws -> [String: Any] {
            let bytes = try #require(Base64URL.decode(part))
            return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        }
        self.parts = parts
        header = try object(parts[0])
        claims = try object(parts[1])
        signature = try #require(Base64URL.decode(parts[2]))
    }

    /// The header's `jwk` (a DPoP proof's public key, RFC 9449 §4.2), empty when there is none.
    public var jwk: [String: String] { (header["jwk"] as? [String: String]) ?? [:] }
    /// The `jti` claim.
    public var jti: String? { claims["jti"] as? String }

    /// True when the signature verifies with the header's own `jwk` (RFC 9449 §4.3 step 6-7).
    public func verifies() throws -> Bool {
        let algorithm = try #require(JWSAlgorithm(rawValue: header["alg"] as? String ?? ""))
        let key: PublicKey
        switch jwk["kty"] {
        case "EC":
            let curve = try #require(EllipticCurve(rawValue: jwk["crv"] ?? ""))
            key = try PublicKey.ec(curve: curve, x: try #require(Base64URL.decode(jwk["x"] ?? "")), y: try #require(Base64URL.decode(jwk["y"] ?? "")))
        case "OKP":
            key = try PublicKey.ed25519(x: try #require(Base64URL.decode(jwk["x"] ?? "")))
        default:
            key = try PublicKey.rsa(modulus: try #require(Base64URL.decode(jwk["n"] ?? "")), exponent: try #require(Base64URL.decode(jwk["e"] ?? "")))
        }
        return try key.verify(algorithm, signingInput: Array(signingInput.utf8), signature: signature)
    }

    /// RFC 7638 thumbprint of the header's `jwk`.
    public func thumbprint() throws -> String { try DPoPProof.header(jwk: jwk, algorithm: .es256).thumbprint }
}
