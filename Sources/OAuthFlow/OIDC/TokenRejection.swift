/// Why a JWS, a JWK or an ID token was refused: the fine-grained reason behind an ``OAuthError``.
///
/// Carried as ``OAuthError/Fields/underlying`` (read it with ``OAuthError/tokenRejection``), so code inside
/// the library can tell reasons apart without parsing messages: the JWKS fetcher refetches once on
/// ``unknownKey``; tests assert the exact check that failed.
enum TokenRejection: Error, Sendable, Hashable, CaseIterable {
    /// Not a compact JWS or JWT: segment count, base64url, JSON, a header or claim of the wrong type.
    case malformed
    /// The token is larger than ``JWS/maximumSize``.
    case oversized
    /// `alg` is `none`: unsigned tokens are never accepted.
    case algorithmNone
    /// `alg` is unknown or not in the allowed list.
    case algorithmNotAllowed
    /// An HMAC `alg` where a public key would have to serve as the secret, or no client secret.
    case algorithmConfusion
    /// The header lists a `crit` extension this library does not implement (RFC 7515 §4.1.11).
    case unsupportedCritical
    /// No key in the JWKS has the token's `kid` (or, without a `kid`, none fits the `alg`):
    /// the keys may have rotated, so a fetcher should refetch the JWKS once.
    case unknownKey
    /// The key exists but cannot be used: invalid components, too weak, `use` not `sig`,
    /// `key_ops` without `verify`, or a JWK `alg` other than the token's.
    case unusableKey
    /// The key's type does not fit the algorithm (e.g. ES256 with an RSA key).
    case keyMismatch
    /// The signature does not verify.
    case badSignature
    /// A claim is missing, of the wrong type, or out of range.
    case invalidClaim
    /// `iss` is not the expected issuer.
    case issuer
    /// `aud` does not contain the client ID.
    case audience
    /// `azp` is not the client ID, or is missing with several audiences.
    case authorizedParty
    /// `exp` is in the past (beyond the clock skew).
    case expired
    /// `iat` is in the future (beyond the clock skew).
    case issuedInFuture
    /// `nbf` is in the future (beyond the clock skew).
    case notYetValid
    /// `nonce` is missing or differs from the one sent.
    case nonce
    /// `at_hash` does not match the access token.
    case accessTokenHash
    /// `c_hash` does not match the authorization code.
    case codeHash
    /// `auth_time` is missing or older than `max_age` allows.
    case authTime
    /// A refreshed ID token changed `iss`, `sub`, `aud`, `azp` or `auth_time` (OpenID Connect Core §12.2).
    case refreshChanged
    /// The token is encrypted (a JWE, five segments): OAuthFlow verifies signatures but does not decrypt.
    case encrypted

    /// An ``OAuthError`` carrying this reason; `code` is `.idTokenRejected` unless given.
    func error(_ message: String, code: OAuthError.Code = .idTokenRejected) -> OAuthError {
        OAuthError(code, message: message, underlying: self)
    }

    /// A server-sent name fit for a message: printable ASCII only, at most 64 characters.
    static func printable(_ name: String) -> String {
        String(String.UnicodeScalarView(name.unicodeScalars.filter { (0x20...0x7E).contains($0.value) }.prefix(64)))
    }
}

extension OAuthError {
    /// The fine-grained reason when a JWS, JWK or ID token check failed.
    var tokenRejection: TokenRejection? { self.underlying as? TokenRejection }
}
