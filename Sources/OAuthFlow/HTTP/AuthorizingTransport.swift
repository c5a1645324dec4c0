/// An ``HTTPTransport`` that authorizes every request with a bearer token from a ``TokenSource``
/// (what Go's `oauth2.Transport` does), and renews the token once when the server says it is no
/// longer valid.
///
/// Wrap the transport your service calls its APIs with:
///
/// ```swift
/// let api = AuthorizingTransport(base: transport, source: flow.tokenSource(for: "billing-api"))  // any HTTPTransport
/// let response = try await api.send(HTTPRequest(method: "GET", url: invoicesURL))
/// ```
///
/// - Each request gets `Authorization: Bearer <token>` (RFC 6750 §2.1); a server's `bearer`
///   `token_type` is sent as `Bearer`.
/// - A request that already carries an `Authorization` header is sent unchanged (no token is
///   added, none is fetched, nothing is retried): credentials set explicitly win, and a request
///   never carries two.
/// - A 401 whose `WWW-Authenticate` holds a Bearer challenge with `error="invalid_token"`
///   (RFC 6750 §3.1) renews the token once — a refresh shared with every other caller, or none
///   when another caller already renewed it — and sends the request once more. Whatever that
///   second attempt answers is returned as is. Any other 401 (or 403) is returned unchanged.
///
/// The request body is sent again on the retry; every ``HTTPRequest`` body is in memory.
public struct AuthorizingTransport: HTTPTransport {
    /// The transport requests go through: the one given, or, for a provider using
    /// `tls_client_auth` or `self_signed_tls_client_auth` and a ``CurlTransport`` without a client
    /// certificate, one like it that presents the provider's certificate (RFC 8705 §3).
    public let base: any HTTPTransport
    /// Where the tokens come from.
    public let source: TokenSource

    /// Authorizes requests sent through `base` with tokens from `source`.
    public init(base: any HTTPTransport, source: TokenSource) {
        self.base = source.presentingClientCertificate(on: base)
        self.source = source
    }

    /// The base transport's limit.
    public var maximumBodySize: Int { base.maximumBodySize }

    /// Sends `request` with a bearer token; on a 401 `invalid_token` renews the token and sends it once more.
    ///
    /// - Throws: ``OAuthError`` from ``TokenSource/tokenSet()`` before anything is sent
    ///   (`.reauthorizationRequired`, `.transport` from the token endpoint, …); from the renewal
    ///   after a 401 `invalid_token` (then the 401 is not returned); `.invalidResponse` for a token
    ///   type other than Bearer; and whatever `base` throws.
    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard request.header("Authorization") == nil else { return try await base.send(request) }
        let set = try await source.tokenSet()
        let response = try await base.send(Self.authorize(request, with: set))
        guard response.status == 401, Challenge.isInvalidBearerToken(response.headers["www-authenticate"]) else {
            return response
        }
        let renewed = try await source.renew(rejecting: set.accessToken)
        return try await base.send(Self.authorize(request, with: renewed))
    }

    static func authorize(_ request: HTTPRequest, with set: TokenSet) throws(OAuthError) -> HTTPRequest {
        var request = request
        request.headers.append((name: "Authorization", value: try TokenSource.authorizationValue(for: set)))
        return request
    }
}
