#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Builds client assertions: the signed JWT of `private_key_jwt` and `client_secret_jwt`
/// (RFC 7523 §2.2 and §3, RFC 7521 §4.2, OpenID Connect Core §9).
///
/// One assertion per request: `iss` = `sub` = the client id, `aud` one string, a `jti` of 128
/// random bits, `iat` now and `exp` 60 seconds later. The result is a ``Secret``: it authenticates
/// the client until it expires, so it is never stored, logged or shown in an error.
enum ClientAssertion {
    /// `client_assertion_type` (RFC 7523 §2.2).
    static let type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// Seconds from `iat` to `exp`.
    static let lifetime = 60
    /// Random bytes in `jti` (128 bits).
    static let jtiBytes = 16

    /// What goes into one assertion.
    struct Parameters: Sendable {
        /// `iss` and `sub`.
        var clientID: String
        /// `aud`.
        var audience: String
        /// The header's `alg`.
        var algorithm: SigningAlgorithm
        /// The header's `kid`, when configured.
        var keyID: String?
        /// The header's `x5t#S256`, when a certificate is configured.
        var certificateThumbprint: String?
    }

    /// A fresh signed assertion, in compact serialization.
    /// - Parameter now: The time for `iat` (whole seconds, rounded down).
    /// - Throws: ``OAuthError`` as the signer throws; `.crypto` when no random bytes can be had.
    static func make(_ parameters: Parameters, signer: any ClientAssertionSigner, now: Date) async throws(OAuthError) -> Secret {
        let signingInput = try signingInput(parameters, now: now)
        let signature = try await signer.sign(Array(signingInput.utf8), algorithm: parameters.algorithm)
        return Secret(signingInput + "." + Base64URL.encode(signature))
    }

    /// base64url(header) "." base64url(claims), with a fresh `jti`.
    static func signingInput(_ parameters: Parameters, now: Date) throws(OAuthError) -> String {
        var header: [(String, JSONValue)] = [("alg", .string(parameters.algorithm.rawValue)), ("typ", .string("JWT"))]
        if let keyID = parameters.keyID { header.append(("kid", .string(keyID))) }
        if let thumbprint = parameters.certificateThumbprint { header.append(("x5t#S256", .string(thumbprint))) }
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        let claims: [(String, JSONValue)] = [
            ("iss", .string(parameters.clientID)),
            ("sub", .string(parameters.clientID)),
            ("aud", .string(parameters.audience)),
            ("jti", .string(Base64URL.encode(try SecureRandom.bytes(jtiBytes)))),
            ("iat", JSONValue.number(issuedAt)),
            ("exp", JSONValue.number(issuedAt + lifetime)),
        ]
        return Base64URL.encode(Array(JSONValue.text(orderedMembers: header).utf8)) + "."
            + Base64URL.encode(Array(JSONValue.text(orderedMembers: claims).utf8))
    }

    /// The form fields that carry an assertion (RFC 7521 §4.2): `client_assertion_type`,
    /// `client_assertion`, and `client_id` (which OpenID Connect Core §9 allows and some servers require).
    static func formFields(clientID: String, assertion: Secret) -> [(String, String)] {
        [("client_id", clientID), ("client_assertion_type", type), ("client_assertion", assertion.reveal())]
    }
}

/// The `client_secret_jwt` signer: HMAC under the UTF-8 bytes of the client secret (OpenID
/// Connect Core §9).
final class ClientSecretSigner: ClientAssertionSigner {
    private let secret: Secret

    /// A signer over `secret`.
    /// - Throws: ``OAuthError`` `.configuration` when the secret is shorter than the hash of the
    ///   longest HMAC algorithm it is used with (RFC 7518 §3.2: 32 bytes for HS256).
    init(secret: Secret, algorithm: SigningAlgorithm) throws(OAuthError) {
        guard algorithm.isHMAC, let size = algorithm.jws.hash?.size else {
            throw OAuthError(.configuration, message: "client_secret_jwt signs with HS256, HS384 or HS512, not \(algorithm.rawValue)")
        }
        guard secret.reveal().utf8.count >= size else {
            throw OAuthError(.configuration, message: "client_secret_jwt with \(algorithm.rawValue) needs a client secret of at least \(size) bytes "
                + "(RFC 7518 §3.2); this one is shorter")
        }
        self.secret = secret
    }

    /// The HMAC of `input` under the secret.
    /// - Throws: ``OAuthError`` `.configuration` for a non-HMAC algorithm; `.crypto` when OpenSSL fails.
    func sign(_ input: [UInt8], algorithm: SigningAlgorithm) async throws(OAuthError) -> [UInt8] {
        guard algorithm.isHMAC else {
            throw OAuthError(.configuration, message: "client_secret_jwt signs with HS256, HS384 or HS512, not \(algorithm.rawValue)")
        }
        var key = Array(secret.reveal().utf8)
        defer { wipe(&key) }
        return try HMACVerifier.mac(algorithm.jws, key: key, data: input)
    }
}
