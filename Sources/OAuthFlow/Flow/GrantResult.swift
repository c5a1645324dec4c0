#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a grant's exchange produced, with what the validation step needs to check it before
/// anything is stored (the pipeline: exchange → validate → store → publish).
struct GrantResult: Sendable {
    /// The token endpoint's §5.1 answer.
    var response: TokenResponse
    /// The grant of the authorization (a refresh keeps the grant that started it).
    var grant: GrantType
    /// The scopes asked for; the granted ones when the response has no `scope` (RFC 6749 §5.1).
    var requestedScopes: [String]
    /// The `nonce` sent with the authorization request (authorization code with `openid`).
    var nonce: Secret?
    /// The authorization code exchanged (authorization code grant only).
    var code: Secret?
    /// The set a refresh renews: its refresh token and ID token carry over when the answer has none.
    var previous: TokenSet?
    /// The `max_age` the authorization request sent, which makes the ID token's `auth_time` required.
    var maxAge: TimeInterval?
    /// When the authorization request was made (the reference time for `max_age`).
    var requestedAt: Date?

    init(
        response: TokenResponse, grant: GrantType, requestedScopes: [String], nonce: Secret? = nil, code: Secret? = nil,
        previous: TokenSet? = nil
    ) {
        self.response = response
        self.grant = grant
        self.requestedScopes = requestedScopes
        self.nonce = nonce
        self.code = code
        self.previous = previous
    }
}
