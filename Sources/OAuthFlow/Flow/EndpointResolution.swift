import Foundation

extension AuthFlow {
    /// The URL of one of `provider`'s endpoints, or nil when it has none.
    ///
    /// The one place every caller asks, so that endpoints written in the catalog win and, once
    /// discovery is in (OpenID Connect Discovery 1.0 / RFC 8414), the discovered ones fill the gaps.
    func endpointURL(_ endpoint: OAuthError.Endpoint, of provider: Provider) async throws(OAuthError) -> URL? {
        switch endpoint {
        case .authorization: provider.authorizationURL
        case .token: provider.tokenURL
        case .deviceAuthorization: provider.deviceAuthorizationURL
        case .revocation: provider.revocationURL
        case .introspection: provider.introspectionURL
        case .userinfo: provider.userinfoURL
        case .discovery: nil
        }
    }
}
