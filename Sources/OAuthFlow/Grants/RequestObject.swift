#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Signed authorization requests: the parameters in a JWT signed with the client's key
/// ([RFC 9101](https://www.rfc-editor.org/rfc/rfc9101)), sent as `request` (or pushed, RFC 9126).
///
/// Header: `alg`, `typ: oauth-authz-req+jwt` (RFC 9101 §10.8), `kid` when configured. Claims:
/// every authorization parameter (as strings; `max_age` as a number, OpenID Connect Core §6.1),
/// then `iss` = the client id, `aud` = the issuer (RFC 9101 §4), `iat`, `nbf`, `exp` 5 minutes
/// later and a `jti` of 128 random bits. The result is a ``Secret``: it carries `state` and the
/// `nonce`.
enum RequestObject {
    /// The JOSE `typ` of a request object (RFC 9101 §10.8).
    static let type = "oauth-authz-req+jwt"
    /// Seconds from `iat` to `exp`.
    static let lifetime = 300

    /// A freshly signed request object carrying `parameters`.
    /// - Throws: ``OAuthError`` `.configuration` without a key, an algorithm or an issuer
    ///   (``Provider/validate()`` refuses such providers first); what the signer throws.
    static func make(_ parameters: [(String, String)], provider: Provider, now: Date) async throws(OAuthError) -> Secret {
        guard let signer = provider.clientKey, let algorithm = provider.requestObjectAlgorithm, let issuer = provider.issuer else {
            throw OAuthError(.configuration, providerID: provider.id,
                             message: "requestObject needs a client key, its algorithm and the provider's issuer")
        }
        let input = try signingInput(parameters, clientID: provider.clientID, audience: issuer, algorithm: algorithm,
                                     keyID: provider.clientKeyID, now: now)
        let signature = try await signer.sign(Array(input.utf8), algorithm: algorithm)
        return Secret(input + "." + Base64URL.encode(signature))
    }

    /// base64url(header) "." base64url(claims).
    static func signingInput(
        _ parameters: [(String, String)], clientID: String, audience: String, algorithm: SigningAlgorithm, keyID: String?, now: Date
    ) throws(OAuthError) -> String {
        var header: [(String, JSONValue)] = [("alg", .string(algorithm.rawValue)), ("typ", .string(type))]
        if let keyID { header.append(("kid", .string(keyID))) }
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        let registered: Set<String> = ["iss", "aud", "iat", "nbf", "exp", "jti"]
        var claims: [(String, JSONValue)] = []
        for (name, value) in parameters where !registered.contains(name) && !claims.contains(where: { $0.0 == name }) {
            if name == "max_age", let seconds = Int(value) {
                claims.append((name, JSONValue.number(seconds)))
            } else {
                claims.append((name, .string(value)))
            }
        }
        claims += [
            ("iss", .string(clientID)),
            ("aud", .string(audience)),
            ("iat", JSONValue.number(issuedAt)),
            ("nbf", JSONValue.number(issuedAt)),
            ("exp", JSONValue.number(issuedAt + lifetime)),
            ("jti", .string(Base64URL.encode(try SecureRandom.bytes(16)))),
        ]
        return Base64URL.encode(Array(JSONValue.text(orderedMembers: header).utf8)) + "."
            + Base64URL.encode(Array(JSONValue.text(orderedMembers: claims).utf8))
    }
}
