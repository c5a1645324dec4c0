#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A PKCE verifier and its S256 challenge ([RFC 7636](https://www.rfc-editor.org/rfc/rfc7636)).
///
/// Made for you by ``AuthFlow/authorizationRequest(provider:scopes:parameters:usePKCE:resources:)``; only S256 is
/// supported (`plain` is not offered, RFC 9700 §2.1.1).
public struct PKCE: Sendable {
    /// The `code_verifier`, sent only with the code exchange.
    public let verifier: Secret
    /// The `code_challenge`: base64url(SHA-256(verifier)) without padding.
    public let challenge: String
    /// Always `S256`.
    public var method: String { "S256" }

    /// A fresh verifier from 32 random bytes (43 characters) and its challenge.
    /// - Throws: ``OAuthError`` `.crypto` when the random generator or the digest fails.
    public init() throws(OAuthError) {
        // 32 random bytes and their digest live on the stack; the only allocations are the two
        // strings. A verifier made this way is unreserved characters by construction.
        guard let (verifier, challenge) = SecureRandom.verifierAndChallenge() else {
            throw OAuthError(.crypto, message: "generating a PKCE pair failed: \(OpenSSLError.last())")
        }
        self.verifier = Secret(verifier)
        self.challenge = challenge
    }

    /// Derives the S256 challenge for a given verifier (RFC 7636 §4.2); use it for test vectors.
    /// - Throws: ``OAuthError`` `.configuration` when the verifier is not 43–128 unreserved characters.
    public init(verifier: Secret) throws(OAuthError) {
        let bytes = Array(verifier.reveal().utf8)
        guard (43...128).contains(bytes.count), bytes.allSatisfy(Self.isUnreserved) else {
            throw OAuthError(.configuration, message: "a PKCE verifier must be 43 to 128 unreserved characters (RFC 7636 §4.1)")
        }
        self.verifier = verifier
        self.challenge = Base64URL.encode(try Digest.sha256(bytes))
    }

    /// `ALPHA / DIGIT / "-" / "." / "_" / "~"` (RFC 7636 §4.1, RFC 3986 §2.3).
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}
