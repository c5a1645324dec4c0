#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JWT-bearer authorization grant ([RFC 7523 §2.1](https://www.rfc-editor.org/rfc/rfc7523#section-2.1))
/// with a service-account key: no refresh token; a new assertion whenever a token is due.
enum JWTBearerGrant {
    /// The request: `grant_type`, a fresh `assertion` (``ServiceAccountKey``: RS256, `kid`,
    /// `iss` = `client_email`, `aud` = the token endpoint called, at most one hour), and `scope`.
    /// Retried only when the request cannot have reached the server: a retry sends the same assertion.
    /// - Throws: ``OAuthError`` `.configuration` without a service account; `.crypto` when signing fails.
    static func request(_ provider: Provider, tokenURL: URL, scopes: [String], subject: String?, now: Date) async throws(OAuthError) -> GrantRequest {
        guard let account = provider.serviceAccount else {
            throw OAuthError(.configuration, providerID: provider.id,
                             message: "the JWT-bearer grant needs a service-account key (serviceAccountFile)")
        }
        let parameters = JWTBearerAssertion.Parameters(
            issuer: account.clientEmail, subject: subject, audience: tokenURL.absoluteString, scopes: scopes, algorithm: .rs256,
            keyID: account.privateKeyID)
        let assertion = try await JWTBearerAssertion.make(parameters, signer: account.key, now: now)
        return GrantRequest(.post(JWTBearerAssertion.fields(assertion: assertion, scopes: scopes), retrying: .beforeResponse),
                            grant: .jwtBearer, requestedScopes: scopes)
    }
}
