#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// Discovery, userinfo, introspection and RP-initiated logout: calls that store nothing.
extension AuthFlow {
    /// The metadata of `provider`'s issuer, from the cache while fresh, else fetched.
    ///
    /// Fetches `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4), and
    /// when that answers a 4xx status, `/.well-known/oauth-authorization-server` inserted before the
    /// issuer's path (RFC 8414 §3.1). The document's `issuer` must equal the configured one exactly.
    /// It is cached per issuer for its `Cache-Control: max-age` (24 hours without one; `no-store`
    /// or `no-cache`: not reused); concurrent callers share one fetch, and a failed fetch is not
    /// cached, so the next call tries again. The flow reads the same cache itself when a provider
    /// leaves out an endpoint it needs; call this to read what the server supports. A failure is
    /// published as `.error` for the provider, like every failing call.
    /// - Throws: ``OAuthError`` `.configuration` when the provider has no `issuer`; `.transport`;
    ///   `.httpStatus` when neither document exists; `.invalidResponse` for a malformed document or
    ///   one whose issuer differs (the message names both).
    public func metadata(for provider: Provider) async throws(OAuthError) -> ProviderMetadata {
        do { return try await discovery.metadata(client(for: provider)) } catch { throw fail(provider.id, error) }
    }

    /// Fetches the signed-in user's claims from the provider's userinfo endpoint.
    ///
    /// Sends `GET` with `Authorization: Bearer <access token>` (the scheme always written `Bearer`,
    /// whatever case the server used in `token_type`; a DPoP-bound token as `Authorization: DPoP`
    /// with a proof, RFC 9449 §7.1, without a nonce retry), refreshing the token first when it is due,
    /// like ``accessToken(for:)``. A JSON answer is read into ``UserInfo``. A signed answer
    /// (`application/jwt`, Core §5.3.2) is verified first, as an ID token's signature is: with the
    /// provider's JWKS (an unknown `kid` refetches it once, see the ID token rules in
    /// `Documentation/OIDC.md`) or, for an allowed HS256/384/512, the client secret; the same
    /// allowed algorithms; then `iss`, when present, must equal the provider's issuer, `aud`, when
    /// present, must contain the client id, and `exp`, when present, must not have passed. An
    /// encrypted answer (a JWE) is refused: OAuthFlow does not decrypt. When a validated ID token
    /// is held, the answer's `sub` must equal its `sub` (Core §5.3.4). Nothing is stored, and no
    /// state but `.error` is published.
    /// See [OpenID Connect Core §5.3](https://openid.net/specs/openid-connect-core-1_0.html#UserInfo)
    /// and [RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750#section-2.1).
    /// - Returns: the `sub` and every claim.
    /// - Throws: ``OAuthError`` `.configuration` (unknown provider, no userinfo endpoint, a
    ///   `token_type` other than Bearer, a signed answer without a JWKS URL to verify it or with an
    ///   `iss` and no `issuer` configured); what ``accessToken(for:)`` throws
    ///   (`.reauthorizationRequired` when nothing is stored); `.serverRejected` with
    ///   ``ErrorResponse/Code/invalidToken`` when the server rejects the token (RFC 6750 §3.1;
    ///   refresh with ``refresh(provider:)`` or authorize again); `.httpStatus` for another non-2xx
    ///   answer; `.invalidResponse` for an answer that is not a JSON object with a string `sub`, a
    ///   signed answer that fails a check above (the message names it), an encrypted answer, or a
    ///   `sub` other than the ID token's; `.transport`.
    public func userInfo(provider id: String) async throws(OAuthError) -> UserInfo {
        let provider = try resolve(id)
        let url = try await reporting(id) { () async throws(OAuthError) in
            try await discovery.requiredEndpoint(.userinfo, client(for: provider))
        }
        // Its failures are published by the renewal itself.
        let set = try await tokenSet(for: id)
        return try await reporting(id) { () async throws(OAuthError) -> UserInfo in
            guard set.isBearer || set.isDPoPBound else {
                throw OAuthError(.configuration, providerID: id, endpoint: .userinfo,
                                 message: "the access token's token_type is \"\(set.tokenType)\", not Bearer (RFC 6750) or DPoP (RFC 9449)")
            }
            // A DPoP-bound token goes with a proof for this GET (RFC 9449 §7.1).
            let dpop = set.isDPoPBound ? try await tokenSource(for: id).headers(for: set, method: "GET", url: url) : nil
            let info: UserInfo
            switch try await UserInfoEndpoint.fetch(url, token: set.accessToken, client: client(for: provider), dpop: dpop) {
            case .claims(let claims): info = claims
            case .signed(let compact): info = try await verifiedUserInfo(compact, of: provider)
            }
            if let expected = set.validatedIDToken?.subject {
                guard info.subject == expected else {
                    throw OAuthError(.invalidResponse, providerID: id, endpoint: .userinfo, httpStatus: 200,
                                     message: "userinfo response: sub differs from the ID token's sub (OpenID Connect Core §5.3.4)")
                }
            }
            return info
        }
    }

    /// The claims of a signed userinfo answer, once its signature and claims pass (see ``userInfo(provider:)``).
    /// - Throws: ``OAuthError`` `.invalidResponse` carrying the ``TokenRejection`` reason; what
    ///   fetching the JWKS throws; `.configuration` without keys or issuer to check against.
    private func verifiedUserInfo(_ compact: String, of provider: Provider) async throws(OAuthError) -> UserInfo {
        let client = client(for: provider)
        let allowed = try await discovery.allowedAlgorithms(client)
        let verified: VerifiedJWS
        do {
            let jws = try JWS(compact: compact)
            if jws.header.algorithm.isHMAC {
                // The client secret is the only HMAC key: no keys to fetch.
                verified = try JWSVerifier.verify(jws, keys: JWKSet(keys: []), allowed: allowed, clientSecret: provider.clientSecret)
            } else {
                verified = try await discovery.withSigningKeys(client) { keys throws(OAuthError) in
                    try JWSVerifier.verify(jws, keys: keys, allowed: allowed, clientSecret: provider.clientSecret)
                }
            }
        } catch {
            throw UserInfoEndpoint.rejected(error, provider: provider.id)
        }
        return try UserInfoEndpoint.claims(ofSigned: verified.payload, issuer: provider.issuer, clientID: provider.clientID,
                                           now: options.now(), clockSkew: options.clockSkew, provider: provider.id)
    }

    /// The URL that logs the user out at the provider: send their browser there (RP-initiated logout).
    ///
    /// The endpoint is the catalog's `endSessionURL`, else the discovered `end_session_endpoint`.
    /// The query adds `id_token_hint` (the held ID token, only when it was validated; the
    /// provider may accept an expired one), `client_id`, and `post_logout_redirect_uri` and
    /// `state` when given (the provider must have the redirect registered). Nothing is sent,
    /// stored or forgotten: build the URL first, while the ID token is still held, then call
    /// ``clear(provider:)`` or ``revoke(provider:)`` to forget the tokens here. The URL holds the
    /// ID token and the state: treat it as a secret (it is never logged).
    /// See [OpenID Connect RP-Initiated Logout 1.0 §2](https://openid.net/specs/openid-connect-rpinitiated-1_0.html#RPLogout).
    /// - Parameters:
    ///   - postLogoutRedirectURI: where the provider sends the browser afterwards; absolute, no fragment.
    ///   - state: an opaque value the provider hands back on that redirect; compare it there.
    /// - Returns: the end-session endpoint with the parameters appended to any query it has.
    /// - Throws: ``OAuthError`` `.configuration` for an unknown provider, no end-session endpoint
    ///   (written or discovered), or a `postLogoutRedirectURI` that is not absolute or has a
    ///   fragment; what ``metadata(for:)`` throws when discovery was needed and failed. Each is
    ///   published as `.error`.
    public func endSessionURL(provider id: String, postLogoutRedirectURI: URL? = nil, state: Secret? = nil) async throws(OAuthError) -> URL {
        return try await reporting(id) { () async throws(OAuthError) -> URL in
            let provider = try self.provider(id)
            let endpoint = try await discovery.requiredEndpoint(.endSession, client(for: provider))
            let held = tokens[id]
            let hint = held?.validatedIDToken == nil ? nil : held?.idToken
            let url = try EndSession.url(endpoint: endpoint, providerID: id, clientID: provider.clientID, idTokenHint: hint,
                                         postLogoutRedirectURI: postLogoutRedirectURI, state: state?.reveal())
            logger.debug(provider, "end-session URL built; id_token_hint=\(hint != nil) post_logout_redirect_uri=\(postLogoutRedirectURI != nil) "
                + "state=\(state != nil)")
            return url
        }
    }

    /// Asks the provider's introspection endpoint about a held token.
    ///
    /// POSTs `token` and `token_type_hint` with the client's authentication (most servers answer
    /// only confidential clients or resource servers). The stored token is sent as it is, never
    /// refreshed first, so the answer is about the token you hold. Nothing is stored.
    /// See [RFC 7662 §2](https://www.rfc-editor.org/rfc/rfc7662#section-2).
    /// - Parameter token: which held token to ask about; the access token by default.
    /// - Returns: the answer; check ``TokenIntrospection/active`` first.
    /// - Throws: ``OAuthError`` `.configuration` (unknown provider, no introspection endpoint, no
    ///   refresh token held when asked about it); `.reauthorizationRequired` when nothing is stored;
    ///   `.serverRejected` for a §5.2 body (`invalid_client`); `.httpStatus` for another non-2xx
    ///   answer (such as 403 for a client the server does not let introspect); `.invalidResponse`
    ///   when `active` is missing or not a boolean, or a member has the wrong type or an
    ///   out-of-range time, or, for a provider using mutual TLS, when `cnf` `x5t#S256` is not the
    ///   client certificate's (RFC 8705 §3); `.transport`.
    public func introspect(provider id: String, token: TokenKind = .accessToken) async throws(OAuthError) -> TokenIntrospection {
        return try await reporting(id) { () async throws(OAuthError) -> TokenIntrospection in
            let provider = try self.provider(id)
            let client = client(for: provider)
            let url = try await discovery.requiredEndpoint(.introspection, client)
            guard let set = tokens[id] else {
                throw OAuthError(.reauthorizationRequired, providerID: id, message: "nothing is stored for \"\(id)\"; authorize first")
            }
            let value: Secret
            switch token {
            case .accessToken: value = set.accessToken
            case .refreshToken:
                guard let refreshToken = set.refreshToken else {
                    throw OAuthError(.configuration, providerID: id, endpoint: .introspection,
                                     message: "no refresh token is held for \"\(id)\"")
                }
                value = refreshToken
            }
            let answer = try await Introspection.introspect(value, kind: token, url: url, client: client)
            try CertificateBinding.check(answer, provider: provider)
            return answer
        }
    }
}
