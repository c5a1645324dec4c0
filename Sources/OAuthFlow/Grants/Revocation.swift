import Foundation

/// Token revocation ([RFC 7009](https://www.rfc-editor.org/rfc/rfc7009)).
enum Revocation {
    /// Revokes the refresh token (which also ends its access tokens, RFC 7009 §2.1), else the access token.
    ///
    /// A 200 with any body is success (RFC 7009 §2.2); `unsupported_token_type` is reported as `.serverRejected`.
    static func revoke(_ set: TokenSet, client: EndpointClient, url: URL?) async throws(OAuthError) {
        guard let url else {
            throw OAuthError(.configuration, providerID: client.provider.id, endpoint: .revocation,
                             message: "provider \"\(client.provider.id)\" has no revocationURL")
        }
        let (token, hint) = set.refreshToken.map { ($0, "refresh_token") } ?? (set.accessToken, "access_token")
        let request = client.formRequest(url: url, fields: [("token", token.reveal()), ("token_type_hint", hint)])
        do {
            _ = try await client.send(request, endpoint: .revocation)
        } catch where error.code == .invalidResponse && error.httpStatus.map({ (200..<300).contains($0) }) == true {
            return  // RFC 7009 §2.2: the body of a 200 is not specified; an empty one is success.
        }
    }
}
