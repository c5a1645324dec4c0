#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The refresh grant ([RFC 6749 §6](https://www.rfc-editor.org/rfc/rfc6749#section-6)).
enum RefreshTokenGrant {
    /// The request that renews `previous` with its refresh token, posted to the token endpoint
    /// (never the authorization endpoint), with a `resource` per resource indicator (RFC 8707
    /// §2.2; the provider's, checked when it loaded); retried on transient failures.
    static func request(refreshToken: Secret, renewing previous: TokenSet, resources: [URL] = []) -> GrantRequest {
        let fields: [(String, String)] = [("grant_type", GrantType.refreshToken.rawValue), ("refresh_token", refreshToken.reveal())]
            + resources.map { ("resource", $0.absoluteString) }
        return GrantRequest(.post(fields, retrying: .transient), grant: previous.grant, requestedScopes: previous.scopes, previous: previous)
    }

    /// Reads the token endpoint's refusal of a refresh: `invalid_grant` becomes
    /// `.reauthorizationRequired`, with the §5.2 body kept; so does a 400 or 401 without a §5.2
    /// body (some servers answer a dead refresh token that way), so the flow marks the login
    /// instead of posting the dead token again on every call.
    static func read(_ error: OAuthError) -> OAuthError {
        var error = error
        if error.response?.code == .invalidGrant {
            error.code = .reauthorizationRequired
            error.message = "the refresh token was rejected; authorize again"
        } else if error.code == .httpStatus && (error.httpStatus == 400 || error.httpStatus == 401) {
            error.code = .reauthorizationRequired
            error.message = "the token endpoint refused the refresh with HTTP \(error.httpStatus ?? 0) and no OAuth error body; authorize again"
        }
        return error
    }

    /// Folds a refresh response into the previous set: a new refresh token replaces the old one
    /// (rotation); an absent one keeps it; an absent scope keeps the old scopes (RFC 6749 §6).
    static func merge(_ response: TokenResponse, into previous: TokenSet, now: Date) -> TokenSet {
        var next = TokenSet(response, providerID: previous.providerID, requestedScopes: previous.scopes, grant: previous.grant, now: now)
        next.refreshToken = response.refreshToken ?? previous.refreshToken
        next.idToken = response.idToken ?? previous.idToken
        return next
    }
}
