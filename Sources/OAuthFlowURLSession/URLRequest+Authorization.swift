#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking   // URLRequest lives here on Linux
#else
public import Foundation
#endif
public import OAuthFlow

extension URLRequest {
    /// Sets `Authorization: Bearer <token>` from `source`: the one line a `URLSession` caller adds.
    ///
    /// The token comes from ``TokenSource/authorizationHeaderValue()``: from memory while it is
    /// fresh, otherwise after the flow's single shared refresh. An `Authorization` header already
    /// on the request is replaced. A server's `bearer` `token_type` is written `Bearer`
    /// ([RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750#section-2.1)).
    ///
    /// ```swift
    /// var request = URLRequest(url: invoicesURL)
    /// try await request.authorize(with: flow.tokenSource(for: "billing-api"))
    /// let (data, response) = try await session.data(for: request)
    /// ```
    ///
    /// Unlike ``AuthorizingTransport`` this does not renew the token when the server answers
    /// 401 `invalid_token`: call ``TokenSource/renew(rejecting:)`` and authorize again for that.
    /// - Throws: ``OAuthError`` as ``TokenSource/authorizationHeaderValue()``:
    ///   `.reauthorizationRequired`, `.transport` from the token endpoint, `.storage`,
    ///   `.configuration` for a provider that is not configured. The request is left unchanged.
    public mutating func authorize(with source: TokenSource) async throws(OAuthError) {
        let value = try await source.authorizationHeaderValue()
        setValue(value, forHTTPHeaderField: "Authorization")
    }
}
