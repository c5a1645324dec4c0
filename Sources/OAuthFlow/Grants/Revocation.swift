#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What ``AuthFlow/revoke(provider:)`` achieved at the provider ([RFC 7009](https://www.rfc-editor.org/rfc/rfc7009)).
///
/// The tokens are forgotten locally whatever this says. Check ``isComplete``: when false, a token
/// the server did not confirm may stay valid there until it expires; ``errors`` says why
/// (unreachable, refused, no endpoint).
public struct RevocationResult: Sendable, Equatable {
    /// True when the server confirmed revoking the refresh token (HTTP 200, RFC 7009 §2.2).
    public var refreshTokenRevoked: Bool
    /// True when the server confirmed revoking the access token (HTTP 200, RFC 7009 §2.2).
    public var accessTokenRevoked: Bool
    /// Which tokens were held when revoking began.
    public var heldTokens: Set<TokenKind>
    /// The failure of each revocation that was sent and not confirmed.
    public var errors: [TokenKind: OAuthError]
    /// False when the provider has no revocation endpoint, so nothing was sent.
    public var hasRevocationEndpoint: Bool

    /// Creates a result.
    public init(
        refreshTokenRevoked: Bool = false, accessTokenRevoked: Bool = false, heldTokens: Set<TokenKind> = [],
        errors: [TokenKind: OAuthError] = [:], hasRevocationEndpoint: Bool = true
    ) {
        self.refreshTokenRevoked = refreshTokenRevoked
        self.accessTokenRevoked = accessTokenRevoked
        self.heldTokens = heldTokens
        self.errors = errors
        self.hasRevocationEndpoint = hasRevocationEndpoint
    }

    /// True when the server confirmed every held token's revocation (also when none was held).
    public var isComplete: Bool {
        heldTokens.allSatisfy { $0 == .refreshToken ? refreshTokenRevoked : accessTokenRevoked }
    }
}

/// Token revocation ([RFC 7009](https://www.rfc-editor.org/rfc/rfc7009)); no state.
enum Revocation {
    /// Revokes the refresh tokens, then the access tokens, of `sets`, each with its `token_type_hint`.
    ///
    /// Both kinds are sent: RFC 7009 §2.1 lets a server keep access tokens alive after their refresh
    /// token is revoked. Usually `sets` is one set; a logout that raced a refresh or another
    /// process passes the stored set, the one in memory and any a refresh received meanwhile, and
    /// each distinct token is sent once. A failure of one does not stop the others; a kind counts
    /// as revoked when every token of it was confirmed, and the first failure of each is recorded.
    static func revoke(_ sets: [TokenSet], url: URL, client: EndpointClient) async -> RevocationResult {
        var refreshTokens: [Secret] = []
        var accessTokens: [Secret] = []
        for set in sets {
            if let token = set.refreshToken, !refreshTokens.contains(where: { $0.constantTimeEquals(token) }) { refreshTokens.append(token) }
            if !accessTokens.contains(where: { $0.constantTimeEquals(set.accessToken) }) { accessTokens.append(set.accessToken) }
        }
        var result = RevocationResult()
        if !refreshTokens.isEmpty { result.heldTokens.insert(.refreshToken) }
        if !accessTokens.isEmpty { result.heldTokens.insert(.accessToken) }
        for (kind, tokens) in [(TokenKind.refreshToken, refreshTokens), (.accessToken, accessTokens)] where !tokens.isEmpty {
            for token in tokens {
                do {
                    try await revoke(token, kind: kind, url: url, client: client)
                } catch {
                    if result.errors[kind] == nil { result.errors[kind] = error }
                }
            }
            let confirmed = result.errors[kind] == nil
            if kind == .refreshToken { result.refreshTokenRevoked = confirmed } else { result.accessTokenRevoked = confirmed }
        }
        return result
    }

    /// One revocation request (RFC 7009 §2.1). A 200 with any body is success (§2.2);
    /// `unsupported_token_type` and other §5.2 errors are `.serverRejected` (§2.2.1).
    static func revoke(_ token: Secret, kind: TokenKind, url: URL, client: EndpointClient) async throws(OAuthError) {
        do {
            _ = try await client.post([("token", token.reveal()), ("token_type_hint", kind.rawValue)], to: url, endpoint: .revocation)
        } catch where error.code == .invalidResponse && error.httpStatus.map({ (200..<300).contains($0) }) == true {
            return  // RFC 7009 §2.2: the body of a 200 is not specified; an empty one is success.
        }
    }
}
