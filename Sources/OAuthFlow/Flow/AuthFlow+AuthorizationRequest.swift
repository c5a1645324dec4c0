#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// The authorization request's way to the server — in the browser's URL, signed (RFC 9101), or
// pushed (RFC 9126) — and the checks of the callback that comes back (RFC 9207). The code
// exchange that follows is a grant like the others (Flow/AuthFlow+PersonGrants.swift).
extension AuthFlow {
    /// Starts the authorization code grant with PKCE S256, `state`, and a `nonce` for `openid`.
    ///
    /// Send the user to the returned request's `url`, then call ``completeAuthorization(callbackURL:)``
    /// with the redirect. Publishes `.authorizing`. See [RFC 6749 §4.1.1](https://www.rfc-editor.org/rfc/rfc6749#section-4.1.1)
    /// and [RFC 7636 §4.3](https://www.rfc-editor.org/rfc/rfc7636#section-4.3).
    /// - Parameters:
    ///   - scopes: defaults to the provider's scopes.
    ///   - parameters: extra query parameters (such as `login_hint`), over the provider's own.
    ///   - usePKCE: keep `true`; only a confidential client may turn it off.
    ///   - resources: RFC 8707 `resource` indicators, sent again with the code exchange;
    ///     defaults to the provider's ``Provider/resources``.
    ///
    /// With the provider's `requestObject`, the parameters are signed with its client key into a
    /// request object (RFC 9101) and the URL carries `client_id`, `response_type` and `scope` (which
    /// OpenID Connect Core §6.1 wants outside the object too) and `request`. With
    /// `pushedAuthorization`, or when discovery says `require_pushed_authorization_requests`, they
    /// are first POSTed to the pushed authorization request endpoint with the client's
    /// authentication (RFC 9126) and the URL carries only `client_id` and `request_uri`; the
    /// answer's `expires_in` then bounds ``AuthorizationRequest/expiresAt``.
    /// - Throws: ``OAuthError`` `.configuration` without an authorization URL or redirect URI, or
    ///   without a pushed authorization request endpoint when pushing (catalog or discovery), or for an
    ///   invalid resource;
    ///   for a pushed request, `.serverRejected`, `.httpStatus`, `.invalidResponse` (a malformed
    ///   `request_uri` or `expires_in`) and `.transport` from that endpoint.
    public func authorizationRequest(
        provider id: String, scopes: [String]? = nil, parameters: [String: String] = [:], usePKCE: Bool = true, resources: [URL]? = nil
    ) async throws(OAuthError) -> AuthorizationRequest {
        let now = options.now()
        let provider = try resolve(id)
        let request = try await reporting(id) { () async throws(OAuthError) in
            // Plain, signed (RFC 9101) or pushed (RFC 9126): makeAuthorizationRequest below.
            try await makeAuthorizationRequest(
                provider, scopes: scopes ?? provider.scopes, parameters: try await addingDPoPThumbprint(parameters, for: provider),
                usePKCE: usePKCE, resources: resources ?? provider.resources, now: now)
        }
        pending.removeAll { $0.expiresAt <= now }
        if pending.count >= options.maximumPendingAuthorizations { pending.removeFirst(pending.count - options.maximumPendingAuthorizations + 1) }
        pending.append(request)
        logger.debug(provider, "authorization request built; scopes=\(request.scopes.joined(separator: " ")) pkce=\(usePKCE)")
        publish(.authorizing(provider: id, grant: .authorizationCode))
        return request
    }

    /// A new authorization request for `provider`: its parameters made, then signed into a
    /// request object when the provider says `requestObject`, then pushed when it says
    /// `pushedAuthorization` or its metadata says `require_pushed_authorization_requests`. A DPoP
    /// provider's push carries a DPoP proof of the key its `dpop_jkt` names (RFC 9449 §10.1).
    /// - Throws: ``OAuthError`` as ``authorizationRequest(provider:scopes:parameters:usePKCE:resources:)`` documents.
    func makeAuthorizationRequest(
        _ provider: Provider, scopes: [String], parameters: [String: String], usePKCE: Bool, resources: [URL], now: Date
    ) async throws(OAuthError) -> AuthorizationRequest {
        let endpoint = tokenEndpoint(for: provider)
        let prepared = try AuthorizationCodeGrant.parameters(
            provider: provider, authorizationURL: try await discovery.requiredEndpoint(.authorization, endpoint.client), scopes: scopes,
            parameters: parameters, usePKCE: usePKCE, resources: resources)
        let lifetime = options.pendingAuthorizationLifetime
        let signed = provider.requestObject ? try await RequestObject.make(prepared.query, provider: provider, now: now) : nil
        guard try await pushesAuthorizationRequests(provider) else {
            let browserQuery = signed.map { Self.requestObjectQuery(prepared.query, clientID: provider.clientID, requestObject: $0) }
                ?? prepared.query
            return try AuthorizationCodeGrant.request(prepared, providerID: provider.id, browserQuery: browserQuery, now: now, lifetime: lifetime)
        }
        let url = try await discovery.requiredEndpoint(.pushedAuthorization, endpoint.client)
        let fields = PushedAuthorization.fields(
            prepared.query, requestObject: signed, clientID: provider.clientID, authenticator: endpoint.client.authenticator)
        // A DPoP provider proves its key on the push too (RFC 9449 §10.1): the key dpop_jkt named,
        // held in the client's slot since addingDPoPThumbprint made or found it.
        let proof = try await endpoint.prover()
        let answer = try await PushedAuthorization.push(fields, to: url, client: endpoint.client, proof: proof)
        logger.debug(provider, "authorization request pushed; request_uri expires in \(answer.expiresIn) s; request object=\(signed != nil); "
            + "DPoP=\(proof != nil)")
        return try AuthorizationCodeGrant.request(
            prepared, providerID: provider.id, browserQuery: [("client_id", provider.clientID), ("request_uri", answer.requestURI)],
            now: now, lifetime: lifetime, requestURIExpiresAt: now.addingTimeInterval(TimeInterval(answer.expiresIn)))
    }

    /// The browser's query for a request object sent by value, not pushed: `client_id`, then
    /// `response_type` and `scope` as the object has them, then `request`. OpenID Connect Core 1.0
    /// §6.1 requires `response_type`, `client_id` and `scope` outside the object too (an OpenID
    /// provider such as idpyoidc checks them before it opens the object); RFC 9101 §5 needs only
    /// `client_id`, lets a client repeat the others, and has its servers read the object alone.
    static func requestObjectQuery(_ query: [(String, String)], clientID: String, requestObject: Secret) -> [(String, String)] {
        [("client_id", clientID)] + query.filter { $0.0 == "response_type" || $0.0 == "scope" } + [("request", requestObject.reveal())]
    }

    /// True when `provider`'s authorization requests are pushed: the catalog's
    /// `pushedAuthorization`, or the discovered `require_pushed_authorization_requests`.
    ///
    /// The metadata is read when the flow needs it anyway (the authorization endpoint is not
    /// written in the catalog) or already holds it; a provider whose endpoints are all written
    /// costs no discovery request.
    /// - Throws: what ``metadata(for:)`` throws when discovery was needed and failed.
    func pushesAuthorizationRequests(_ provider: Provider) async throws(OAuthError) -> Bool {
        if provider.pushedAuthorization { return true }
        guard let issuer = provider.issuer else { return false }
        if provider.authorizationURL == nil {
            return try await discovery.metadata(client(for: provider)).requirePushedAuthorizationRequests
        }
        return discovery.cachedMetadata(issuer: issuer)?.requirePushedAuthorizationRequests ?? false
    }

    /// Refuses a callback for a pushed request whose `request_uri` has expired (RFC 9126 §2.2:
    /// its `expires_in` bounds the pending request).
    /// - Throws: ``OAuthError`` `.expired` (recovery: authorize again) naming the expiry.
    func checkRequestURIExpiry(of request: AuthorizationRequest) throws(OAuthError) {
        guard let expiry = request.requestURIExpiresAt, expiry <= options.now() else { return }
        throw OAuthError(.expired, providerID: request.providerID, endpoint: .pushedAuthorization,
                         message: "the pushed authorization request's request_uri expired at \(expiry) (its expires_in, RFC 9126 §2.2); "
                            + "start a new authorization request")
    }

    /// The authorization request's parameters with `dpop_jkt` (RFC 9449 §10), the thumbprint of
    /// the key the code exchange will prove, for a DPoP provider.
    /// - Throws: what ``TokenEndpoint/prover(previous:)`` throws.
    func addingDPoPThumbprint(_ parameters: [String: String], for provider: Provider) async throws(OAuthError) -> [String: String] {
        // Checked here too, so a provider without DPoP (most) looks up no endpoint for it.
        guard provider.dpop != .off, let prover = try await tokenEndpoint(for: provider).prover() else { return parameters }
        var parameters = parameters
        parameters["dpop_jkt"] = prover.thumbprint
        return parameters
    }

    /// RFC 9207 §2.4 for a callback of `provider`, before any code is exchanged.
    ///
    /// Only with a configured `issuer`: a callback's `iss` must equal it exactly. A callback without
    /// `iss` that carries a code is refused when the server's metadata advertises
    /// `authorization_response_iss_parameter_supported: true`; to know, the metadata is read
    /// (cached, else fetched now). A server publishing no metadata at all (both well-known
    /// documents answer 4xx) counts as not advertising. An error response without `iss` is
    /// reported as its error: it carries no code to exchange.
    /// - Throws: ``OAuthError`` `.invalidCallback`; what ``metadata(for:)`` throws otherwise (fail closed).
    func checkCallbackIssuer(_ response: AuthorizationResponse, of provider: Provider) async throws(OAuthError) {
        guard let issuer = provider.issuer else { return }
        if let returned = response.issuer {
            guard returned == issuer else {
                throw OAuthError(.invalidCallback, providerID: provider.id, endpoint: .authorization,
                                 message: "the callback's iss \"\(TokenRejection.printable(returned))\" is not the provider's issuer "
                                    + "\"\(issuer)\" (RFC 9207 §2.4)")
            }
            return
        }
        guard response.code != nil, response.error == nil else { return }
        let advertised: Bool
        do {
            advertised = try await discovery.metadata(client(for: provider)).authorizationResponseIssParameterSupported
        } catch where error.code == .httpStatus && (400..<500).contains(error.httpStatus ?? 0) {
            advertised = false
        }
        if advertised {
            throw OAuthError(.invalidCallback, providerID: provider.id, endpoint: .authorization,
                             message: "the callback has no iss, and \(issuer) advertises authorization_response_iss_parameter_supported "
                                + "(RFC 9207 §2.4)")
        }
    }
}
