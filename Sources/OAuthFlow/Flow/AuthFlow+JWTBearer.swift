#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension AuthFlow {
    /// Gets a token with the JWT-bearer grant (RFC 7523 §2.1), signed with the provider's
    /// service-account key or, for catalog `grant: "jwt-bearer"`, its client key.
    ///
    /// Signs a fresh assertion (for a service account: RS256, `kid` = `private_key_id`, `iss` =
    /// `client_email`; with a client key: its algorithm, `kid` = `clientKeyID`, `iss` = the client
    /// id; both: `aud` = the token endpoint, `scope`, `sub` = ``Provider/serviceAccountSubject``
    /// when set, valid one hour) and exchanges it. No refresh token is issued:
    /// ``accessToken(for:)`` runs this again by itself when the token is due, single-flight like
    /// client credentials. Publishes `.requestingAccessToken` then `.authorized`. See
    /// [RFC 7523 §2.1](https://www.rfc-editor.org/rfc/rfc7523#section-2.1).
    /// - Parameters:
    ///   - scopes: defaults to the provider's scopes.
    ///   - resources: `resource` indicators (RFC 8707); defaults to the provider's ``Provider/resources``.
    /// - Throws: ``OAuthError`` `.configuration` without a key; `.serverRejected`
    ///   (`invalid_grant` for an assertion the server refuses); `.transport`.
    @discardableResult
    public func jwtBearer(provider id: String, scopes: [String]? = nil, resources: [URL]? = nil) async throws(OAuthError) -> Authorization {
        try await run(id) { provider throws(OAuthError) in
            try await JWTBearerGrant.request(
                provider, tokenURL: try await requiredEndpoint(.token, of: provider), scopes: scopes ?? provider.scopes, subject: provider.serviceAccountSubject,
                resources: resources ?? provider.resources, now: options.now())
        }.authorization
    }
}
