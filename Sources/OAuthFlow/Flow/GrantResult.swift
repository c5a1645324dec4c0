#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a grant's exchange produced, with what the validation step needs to check it before
/// anything is stored (the pipeline: exchange → validate → store → publish).
///
/// A class: it goes down the pipeline's chain of async calls, and a reference keeps each of their
/// frames small (the fields are 400 bytes).
final class GrantResult: Sendable {
    /// The token endpoint's §5.1 answer.
    let response: TokenResponse
    /// The grant of the authorization (a refresh keeps the grant that started it).
    let grant: GrantType
    /// The scopes asked for; the granted ones when the response has no `scope` (RFC 6749 §5.1).
    let requestedScopes: [String]
    /// The `nonce` sent with the authorization request (authorization code with `openid`).
    let nonce: Secret?
    /// The authorization code exchanged (authorization code grant only).
    let code: Secret?
    /// The set a refresh renews: its refresh token and ID token carry over when the answer has none.
    let previous: TokenSet?
    /// The `max_age` the authorization request sent, which makes the ID token's `auth_time` required.
    let maxAge: TimeInterval?
    /// When the authorization request was made (the reference time for `max_age`).
    let requestedAt: Date?

    init(
        response: TokenResponse, grant: GrantType, requestedScopes: [String], nonce: Secret? = nil, code: Secret? = nil,
        previous: TokenSet? = nil, maxAge: TimeInterval? = nil, requestedAt: Date? = nil
    ) {
        self.response = response
        self.grant = grant
        self.requestedScopes = requestedScopes
        self.nonce = nonce
        self.code = code
        self.previous = previous
        self.maxAge = maxAge
        self.requestedAt = requestedAt
    }
}
