import Foundation

// Userinfo, introspection and RP-initiated logout: calls about a held authorization that store nothing.
extension AuthFlow {
    /// Fetches the signed-in user's claims from the provider's userinfo endpoint.
    ///
    /// Sends `GET` with `Authorization: Bearer <access token>` (the scheme always written `Bearer`,
    /// whatever case the server used in `token_type`), refreshing the token first when it is due,
    /// like ``accessToken(for:)``. A JSON answer is read into ``UserInfo``; when an ID token is
    /// held, the answer's `sub` must equal its `sub`. A signed JWT answer (`application/jwt`) is
    /// refused with `.invalidResponse`: verifying it is not supported yet. Nothing is stored, and
    /// no state but `.error` is published.
    /// See [OpenID Connect Core §5.3](https://openid.net/specs/openid-connect-core-1_0.html#UserInfo)
    /// and [RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750#section-2.1).
    /// - Returns: the `sub` and every claim.
    /// - Throws: ``OAuthError`` `.configuration` (unknown provider, no userinfo endpoint, a
    ///   `token_type` other than Bearer); what ``accessToken(for:)`` throws (`.reauthorizationRequired`
    ///   when nothing is stored); `.serverRejected` with ``ErrorResponse/Code/invalidToken`` when the
    ///   server rejects the token (RFC 6750 §3.1; refresh with ``refresh(provider:)`` or authorize
    ///   again); `.httpStatus` for another non-2xx answer; `.invalidResponse` for an answer that is
    ///   not a JSON object with a string `sub`, a `sub` other than the ID token's (Core §5.3.4), or
    ///   a signed JWT; `.transport`.
    public func userInfo(provider id: String) async throws(OAuthError) -> UserInfo {
        let provider: Provider
        let url: URL
        do {
            provider = try self.provider(id)
            url = try await requiredEndpoint(.userinfo, of: provider, key: "userinfoURL")
        } catch {
            throw fail(id, error)
        }
        // Its failures are published by the renewal itself.
        let set = try await tokenSet(for: id)
        do throws(OAuthError) {
            guard set.isBearer else {
                throw OAuthError(.configuration, providerID: id, endpoint: .userinfo,
                                 message: "the access token's token_type is \"\(set.tokenType)\", not Bearer (RFC 6750)")
            }
            let info = try await UserInfoEndpoint.fetch(url, token: set.accessToken, client: client(for: provider))
            if let idToken = set.idToken {
                let expected = try Self.subject(ofHeld: idToken, provider: id)
                guard info.subject == expected else {
                    throw OAuthError(.invalidResponse, providerID: id, endpoint: .userinfo, httpStatus: 200,
                                     message: "userinfo response: sub differs from the ID token's sub (OpenID Connect Core §5.3.4)")
                }
            }
            return info
        } catch {
            throw fail(id, error)
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
    ///   out-of-range time; `.transport`.
    public func introspect(provider id: String, token: TokenKind = .accessToken) async throws(OAuthError) -> TokenIntrospection {
        do throws(OAuthError) {
            let provider = try self.provider(id)
            let url = try await requiredEndpoint(.introspection, of: provider, key: "introspectionURL")
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
            return try await Introspection.introspect(value, kind: token, url: url, client: client(for: provider))
        } catch {
            throw fail(id, error)
        }
    }

    /// The endpoint's URL, or `.configuration` naming the catalog key when the provider has none.
    func requiredEndpoint(_ endpoint: OAuthError.Endpoint, of provider: Provider, key: String) async throws(OAuthError) -> URL {
        guard let url = try await endpointURL(endpoint, of: provider) else {
            throw OAuthError(.configuration, providerID: provider.id, endpoint: endpoint,
                             message: "provider \"\(provider.id)\" has no \(key)")
        }
        return url
    }

    /// The `sub` of the ID token held for `provider`.
    /// - Throws: ``OAuthError`` `.idTokenRejected` when the held token cannot be read.
    static func subject(ofHeld idToken: Secret, provider: String) throws(OAuthError) -> String {
        let unreadable = { (reason: String) in
            OAuthError(.idTokenRejected, providerID: provider, message: "the held ID token cannot be read: \(reason)")
        }
        let segments = idToken.reveal().split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, let payload = Base64URL.decode(String(segments[1])) else {
            throw unreadable("not a compact JWS")
        }
        let value: JSONValue
        do { value = try JSONValue.parse(payload) } catch { throw unreadable("its claims are not JSON") }
        return try JSONObject(value, what: "its claims", failure: unreadable).requiredString("sub")
    }
}
