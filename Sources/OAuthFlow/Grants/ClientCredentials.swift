#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The client credentials grant ([RFC 6749 §4.4](https://www.rfc-editor.org/rfc/rfc6749#section-4.4)).
enum ClientCredentialsGrant {
    /// Refuses a public client: only a client that can authenticate may use this grant.
    static func checkAllowed(for provider: Provider) throws(OAuthError) {
        guard provider.isConfidential else {
            throw OAuthError(.configuration, providerID: provider.id,
                             message: "the client credentials grant needs a client secret (RFC 6749 §4.4)")
        }
    }

    static func request(scopes: [String], client: EndpointClient, tokenURL: URL) async throws(OAuthError) -> TokenResponse {
        try checkAllowed(for: client.provider)
        var fields: [(String, String)] = [("grant_type", GrantType.clientCredentials.rawValue)]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        return try await client.requestToken(fields, url: tokenURL, retrying: .transient)
    }
}
