#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The client credentials grant ([RFC 6749 §4.4](https://www.rfc-editor.org/rfc/rfc6749#section-4.4)).
enum ClientCredentialsGrant {
    /// The request for `scopes`: `grant_type`, `scope`, and a `resource` per resource indicator
    /// (RFC 8707); retried on transient failures (a client credentials request has no single-use part).
    /// - Throws: ``OAuthError`` `.configuration` for a public client: only a client that can
    ///   authenticate may use this grant; for an invalid resource.
    static func request(_ provider: Provider, scopes: [String], resources: [URL] = []) throws(OAuthError) -> GrantRequest {
        guard provider.isConfidential else {
            throw OAuthError(.configuration, providerID: provider.id,
                             message: "the client credentials grant needs a client that authenticates: a secret, a private key or a client certificate (RFC 6749 §4.4)")
        }
        var fields: [(String, String)] = [("grant_type", GrantType.clientCredentials.rawValue)]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        try ResourceIndicators.append(resources, to: &fields, provider: provider)
        return GrantRequest(.post(fields, retrying: .transient), grant: .clientCredentials, requestedScopes: scopes)
    }
}
