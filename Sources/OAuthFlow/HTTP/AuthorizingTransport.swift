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
///   `token_type` is sent as `Bearer`. A DPoP-bound token is sent as `Authorization: DPoP <token>`
///   with a fresh `DPoP` proof bound to the request and the token (`ath`, RFC 9449 §7.1); a 401
///   `use_dpop_nonce` with a new `DPoP-Nonce` is sent once more with it (§9).
/// - A request that already carries an `Authorization` header is sent unchanged (no token is
///   added, none is fetched, nothing is retried): credentials set explicitly win, and a request
///   never carries two.
/// - A 401 whose `WWW-Authenticate` holds a Bearer challenge with `error="invalid_token"`
///   (RFC 6750 §3.1) renews the token once — a refresh shared with every other caller, or none
///   when another caller already renewed it — and sends the request once more. Whatever that
///   second attempt answers is returned, unless it is a step-up (below).
/// - A 401 or 403 whose challenge asks for more than the token carries — `insufficient_scope`
///   (RFC 6750 §3.1) or `insufficient_user_authentication` (RFC 9470 §3) — is thrown as
///   ``OAuthError`` `.stepUpRequired` with what was asked (``OAuthError/Fields/challenge``); nothing
///   logs in by itself (``AuthFlow/stepUpRequest(provider:challenge:)`` does, with a person).
///   A 401 or 403 whose `WWW-Authenticate` holds a control character is `.invalidResponse`.
///   Any other 401 (or 403) is returned unchanged.
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
    ///   type other than Bearer or DPoP; what the DPoP signer throws; and whatever `base` throws.
    ///   `.stepUpRequired` for a refusal that asks for more scope or a stronger authentication;
    ///   `.invalidResponse` for a refusal whose challenge holds a control character.
    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard request.header("Authorization") == nil else { return try await base.send(request) }
        let set = try await source.tokenSet()
        var response = try await sendDPoPAware(request, with: set)
        if response.status == 401, Challenge.isInvalidToken(response.headers["www-authenticate"]) {
            let renewed = try await source.renew(rejecting: set.accessToken)
            response = try await sendDPoPAware(request, with: renewed)
        }
        try await source.checkStepUp(response)
        return response
    }

    /// Sends `request` authorized with `set`. For a DPoP-bound token: a fresh proof, the server's
    /// `DPoP-Nonce` kept, and a 401 `use_dpop_nonce` that brings a new nonce sent once more with a
    /// proof carrying it (RFC 9449 §9); whatever that answers is returned.
    private func sendDPoPAware(_ request: HTTPRequest, with set: TokenSet) async throws(OAuthError) -> HTTPResponse {
        let response = try await base.send(try await authorize(request, with: set))
        guard set.isDPoPBound, source.recordNonce(response, from: request.url), response.status == 401,
              Challenge.isDPoPNonceRequest(response.headers["www-authenticate"]) else { return response }
        let second = try await base.send(try await authorize(request, with: set))
        source.recordNonce(second, from: request.url)
        return second
    }

    /// `request` with `Authorization` (and `DPoP` for a DPoP-bound token) for `set`.
    func authorize(_ request: HTTPRequest, with set: TokenSet) async throws(OAuthError) -> HTTPRequest {
        var request = request
        let headers = try await source.headers(for: set, method: request.method, url: request.url)
        request.headers.append((name: "Authorization", value: headers.authorization.reveal()))
        if let proof = headers.dpop { request.headers.append((name: "DPoP", value: proof.reveal())) }
        return request
    }
}
