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
    ///
    /// The JSON is written straight into bytes (members in this order, strings escaped as
    /// ``JSONValue`` escapes them): building it through ``JSONValue`` cost a third of an ES256
    /// signature (Documentation/PerformanceLog.md, "Client assertions and the agent").
    static func signingInput(_ parameters: Parameters, now: Date) throws(OAuthError) -> String {
        var header: [UInt8] = []
        header.reserveCapacity(160)
        header += Array(#"{"alg":"#.utf8)
        appendJSONString(parameters.algorithm.rawValue, to: &header)
        header += Array(#","typ":"JWT""#.utf8)
        if let keyID = parameters.keyID {
            header += Array(#","kid":"#.utf8)
            appendJSONString(keyID, to: &header)
        }
        if let thumbprint = parameters.certificateThumbprint {
            header += Array(#","x5t#S256":"#.utf8)
            appendJSONString(thumbprint, to: &header)
        }
        header.append(UInt8(ascii: "}"))
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        var claims: [UInt8] = []
        claims.reserveCapacity(2 * parameters.clientID.utf8.count + parameters.audience.utf8.count + 120)
        claims += Array(#"{"iss":"#.utf8)
        appendJSONString(parameters.clientID, to: &claims)
        claims += Array(#","sub":"#.utf8)
        appendJSONString(parameters.clientID, to: &claims)
        claims += Array(#","aud":"#.utf8)
        appendJSONString(parameters.audience, to: &claims)
        claims += Array(#","jti":""#.utf8)
        claims += Array(Base64URL.encode(try SecureRandom.bytes(jtiBytes)).utf8)
        claims += Array(#"","iat":"#.utf8)
        claims += Array(String(issuedAt).utf8)
        claims += Array(#","exp":"#.utf8)
        claims += Array(String(issuedAt + lifetime).utf8)
        claims.append(UInt8(ascii: "}"))
        return Base64URL.encode(header) + "." + Base64URL.encode(claims)
    }

    /// Appends `text` as a JSON string: as it is when every byte is printable ASCII other than `"`
    /// and `\` (a client id, a URL, a key id), else escaped by ``JSONValue``'s own rules.
    private static func appendJSONString(_ text: String, to out: inout [UInt8]) {
        let plain = text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        if plain {
            out.append(UInt8(ascii: "\""))
            out += text.utf8
            out.append(UInt8(ascii: "\""))
        } else {
            var quoted = ""
            JSONValue.quote(text, into: &quoted)
            out += quoted.utf8
        }
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
