#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One grant as the runner sends it (``AuthFlow/run(_:_:)``, Flow/GrantRunner.swift): what goes
/// to the token endpoint, and what the answer is checked against before anything is stored.
///
/// Each grant builds one (Grants/: ``ClientCredentialsGrant``, ``DeviceAuthorizationGrant``,
/// ``AuthorizationCodeGrant``, ``RefreshTokenGrant``, ``JWTBearerGrant``, ``TokenExchangeGrant``,
/// ``BackchannelAuthenticationGrant``)
/// and reads its answer; the rest is the same for every grant: the exchange (``TokenEndpoint``:
/// the endpoint, the client's authentication, the DPoP proof, the post, the checks), then the
/// runner's store and states.
///
/// A class: it goes down the runner's chain of async calls, and a reference keeps each of their
/// frames small.
final class GrantRequest: Sendable {
    /// How the token endpoint is asked.
    enum Exchange: Sendable {
        /// One POST of these fields (the client's authentication is added by the endpoint client),
        /// retried as the scope allows (each grant decides, see Documentation/Grants.md).
        case post([(String, String)], retrying: RetryScope)
        /// Polling until the person acts: a device code (RFC 8628 §3.4) or a CIBA request (CIBA
        /// Core §10.1), in one loop (Grants/Polling.swift).
        case poll(PolledAuthorization)
    }

    /// A step run on the token endpoint's answer before the checks, given the provider's client
    /// and the time: Google's service-account impersonation (``ServiceAccountImpersonation``).
    typealias FollowUp = @Sendable (TokenResponse, EndpointClient, Date) async throws(OAuthError) -> TokenResponse

    /// What to send.
    let exchange: Exchange
    /// What to do with the answer before the checks, or nil.
    let followUp: FollowUp?
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
        _ exchange: Exchange, grant: GrantType, requestedScopes: [String], nonce: Secret? = nil, code: Secret? = nil,
        previous: TokenSet? = nil, maxAge: TimeInterval? = nil, requestedAt: Date? = nil, followUp: FollowUp? = nil
    ) {
        self.exchange = exchange
        self.followUp = followUp
        self.grant = grant
        self.requestedScopes = requestedScopes
        self.nonce = nonce
        self.code = code
        self.previous = previous
        self.maxAge = maxAge
        self.requestedAt = requestedAt
    }

    /// True for a refresh: the answer is merged into ``previous``.
    var isRefresh: Bool { previous != nil }

    /// True for a poll, whose states are the authorization's: the runner publishes no
    /// `.requestingAccessToken` before it, and follows its ``PollEvent``s.
    var isPolled: Bool {
        if case .poll = exchange { return true }
        return false
    }

    /// What the request is called in messages.
    var name: String {
        guard previous == nil else { return "refresh" }
        switch grant {
        case .authorizationCode: return "authorization code exchange"
        case .deviceCode: return "device authorization"
        case .clientCredentials: return "client credentials request"
        case .refreshToken: return "refresh"
        case .jwtBearer: return "JWT-bearer request"
        case .tokenExchange: return "token exchange"
        case .ciba: return "backchannel authentication"
        }
    }

    /// The token endpoint's refusal as the grant reads it (a refresh: see ``RefreshTokenGrant/read(_:)``),
    /// naming the grant (``OAuthError/Fields/grant``) so that its recovery fits it: a refused credential of
    /// a grant no person logs in to is fixed in the credential, not by logging in.
    func read(_ error: OAuthError) -> OAuthError {
        var error = isRefresh ? RefreshTokenGrant.read(error) : error
        error.grant = isRefresh ? .refreshToken : grant
        return error
    }
}
