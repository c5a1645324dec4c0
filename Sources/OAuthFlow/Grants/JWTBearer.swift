#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JWT-bearer authorization grant ([RFC 7523 §2.1](https://www.rfc-editor.org/rfc/rfc7523#section-2.1)):
/// no refresh token; a new assertion whenever a token is due.
enum JWTBearerGrant {
    /// The request: `grant_type`, a fresh `assertion`, `scope`, and a `resource` per resource indicator.
    ///
    /// With a service-account key (``ServiceAccountKey``): RS256, `kid` = `private_key_id`, `iss`
    /// = `client_email`, `aud` = the token endpoint called, `sub` = `subject` when given. With
    /// ``Provider/Settings/clientKey`` (catalog `grant: "jwt-bearer"` with `clientKeyFile`): the key's
    /// algorithm (or `clientAssertionAlgorithm`), `kid` = `clientKeyID`, `iss` = the client id,
    /// `sub` = `subject` or else the client id (RFC 7523 §3 requires one), `aud` = the token
    /// endpoint. Valid at most one hour. With `assertion` (a pre-made one, from the provider's
    /// ``Provider/subjectTokenSource``), that is sent as it is and nothing is signed. Retried only
    /// when the request cannot have reached the server: a retry sends the same assertion.
    /// - Throws: ``OAuthError`` `.configuration` without a key; `.crypto` when signing fails.
    static func request(
        _ provider: Provider, tokenURL: URL, scopes: [String], subject: String?, resources: [URL] = [], now: Date,
        assertion premade: Secret? = nil
    ) async throws(OAuthError) -> GrantRequest {
        if let premade {
            var fields = JWTBearerAssertion.fields(assertion: premade, scopes: scopes)
            try ResourceIndicators.append(resources, to: &fields, provider: provider)
            return GrantRequest(.post(fields, retrying: .beforeResponse), grant: .jwtBearer, requestedScopes: scopes)
        }
        let parameters: JWTBearerAssertion.Parameters
        let signer: any ClientAssertionSigner
        if let account = provider.serviceAccount {
            parameters = JWTBearerAssertion.Parameters(
                issuer: account.clientEmail, subject: subject, audience: tokenURL.absoluteString, scopes: scopes, algorithm: .rs256,
                keyID: account.privateKeyID)
            signer = account.key
        } else if let key = provider.clientKey, let algorithm = provider.jwtBearerAlgorithm {
            parameters = JWTBearerAssertion.Parameters(
                issuer: provider.clientID, subject: subject ?? provider.clientID, audience: tokenURL.absoluteString, scopes: scopes,
                algorithm: algorithm, keyID: provider.clientKeyID)
            signer = key
        } else {
            throw OAuthError(.configuration, providerID: provider.id,
                             message: "the JWT-bearer grant needs a key: a service-account key (serviceAccountFile) or clientKeyFile")
        }
        let assertion = try await JWTBearerAssertion.make(parameters, signer: signer, now: now)
        var fields = JWTBearerAssertion.fields(assertion: assertion, scopes: scopes)
        try ResourceIndicators.append(resources, to: &fields, provider: provider)
        return GrantRequest(.post(fields, retrying: .beforeResponse), grant: .jwtBearer, requestedScopes: scopes)
    }
}
