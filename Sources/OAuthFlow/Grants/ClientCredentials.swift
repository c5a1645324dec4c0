import Foundation

/// The client credentials grant ([RFC 6749 §4.4](https://www.rfc-editor.org/rfc/rfc6749#section-4.4)).
enum ClientCredentialsGrant {
    static func request(scopes: [String], client: EndpointClient) async throws(OAuthError) -> TokenResponse {
        guard client.provider.isConfidential else {
            throw OAuthError(.configuration, providerID: client.provider.id,
                             message: "the client credentials grant needs a client secret (RFC 6749 §4.4)")
        }
        var fields: [(String, String)] = [("grant_type", GrantType.clientCredentials.rawValue)]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        return try await client.requestToken(fields)
    }
}
