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
    ///
    /// For a DPoP-bound token (RFC 9449 §7.1) it sets `Authorization: DPoP <token>` and a `DPoP`
    /// proof for this request's method and URL: set both before calling, and authorize again for
    /// every send. When the answer is a 401 `use_dpop_nonce`,
    /// ``TokenSource/shouldRetryWithDPoPNonce(status:headers:url:)`` says so; authorize again and
    /// send once more.
    public mutating func authorize(with source: TokenSource) async throws(OAuthError) {
        guard let url else {
            let value = try await source.authorizationHeaderValue()
            setValue(value, forHTTPHeaderField: "Authorization")
            return
        }
        let headers = try await source.authorizationHeaders(method: httpMethod ?? "GET", url: url)
        setValue(headers.authorization.reveal(), forHTTPHeaderField: "Authorization")
        setValue(headers.dpop?.reveal(), forHTTPHeaderField: "DPoP")
    }
}
