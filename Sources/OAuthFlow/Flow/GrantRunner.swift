#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// The public grant methods, and the runner every one of them goes through:
//
//     resolve the provider → logout ticket → the grant's request (Grants/) → publish
//     → the exchange (Flow/TokenEndpoint.swift: endpoint, client authentication, DPoP proof,
//       post with retries, response, ID token and certificate-binding checks)
//     → commit (store, under the store's lock) → cache → publish `.authorized`
//
// and on any failure: publish `.error`, rethrow. A public grant method only says which grant.
extension AuthFlow {
    // MARK: Client credentials

    /// Gets a token for the client itself with its credentials (RFC 6749 §4.4); `resources` are
    /// RFC 8707 `resource` indicators (default: the provider's ``Provider/resources``).
    ///
    /// Publishes `.requestingAccessToken` then `.authorized`. ``accessToken(for:)`` runs it again by
    /// itself when the token expires. See [RFC 6749 §4.4](https://www.rfc-editor.org/rfc/rfc6749#section-4.4).
    /// - Throws: ``OAuthError`` `.configuration` without a secret; `.serverRejected` (`invalid_client` for bad credentials); `.transport`;
    ///   `.reauthorizationRequired` when the provider was logged out while the request was in flight (see ``clear(provider:)``).
    @discardableResult
    public func clientCredentials(provider id: String, scopes: [String]? = nil, resources: [URL]? = nil) async throws(OAuthError) -> Authorization {
        try await run(id) { provider throws(OAuthError) in
            try ClientCredentialsGrant.request(provider, scopes: scopes ?? provider.scopes, resources: resources ?? provider.resources)
        }
            .authorization
    }

    // MARK: JWT bearer and token exchange

    /// Gets a token with the JWT-bearer grant (RFC 7523 §2.1), signed with the provider's
    /// service-account key or, for catalog `grant: "jwt-bearer"`, its client key — or with the
    /// pre-made assertion its ``Provider/subjectTokenSource`` gives.
    ///
    /// Signs a fresh assertion (for a service account: RS256, `kid` = `private_key_id`, `iss` =
    /// `client_email`; with a client key: its algorithm, `kid` = `clientKeyID`, `iss` = the client
    /// id; both: `aud` = the token endpoint, `scope`, `sub` = ``Provider/Settings/serviceAccountSubject``
    /// when set, valid one hour) and exchanges it. No refresh token is issued:
    /// ``accessToken(for:)`` runs this again by itself when the token is due, single-flight like
    /// client credentials. Publishes `.requestingAccessToken` then `.authorized`. See
    /// [RFC 7523 §2.1](https://www.rfc-editor.org/rfc/rfc7523#section-2.1).
    /// - Parameters:
    ///   - scopes: defaults to the provider's scopes.
    ///   - resources: `resource` indicators (RFC 8707); defaults to the provider's ``Provider/resources``.
    /// - Throws: ``OAuthError`` `.configuration` without a key; `.serverRejected`
    ///   (`invalid_grant` for an assertion the server refuses); `.transport`.
    @discardableResult
    public func jwtBearer(provider id: String, scopes: [String]? = nil, resources: [URL]? = nil) async throws(OAuthError) -> Authorization {
        try await run(id) { provider throws(OAuthError) in
            try await JWTBearerGrant.request(
                provider, tokenURL: try await discovery.requiredEndpoint(.token, client(for: provider)), scopes: scopes ?? provider.scopes,
                subject: provider.serviceAccountSubject,
                resources: resources ?? provider.resources, now: options.now(), assertion: try await premadeAssertion(provider))
        }.authorization
    }

    /// Exchanges a subject token (and optionally an actor token) for a token of this provider:
    /// workload identity federation, delegation and impersonation (RFC 8693).
    ///
    /// Sends `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` with the tokens, each
    /// `audience`, each `resource` (RFC 8707), `scope` and `requested_token_type` given, through the
    /// provider's client authentication. The result is stored and published like any grant's; its
    /// ``Authorization/issuedTokenType`` says what was issued (``TokenType``). A response whose
    /// `token_type` is `N_A` is accepted only when the issued token is not an access token
    /// (§2.2.1). No person is needed: a provider with a ``Provider/subjectTokenSource`` (catalog
    /// `subjectTokenSource`, `subjectTokenFile` or `externalAccountFile`) is exchanged again by
    /// ``accessToken(for:)`` whenever its token is due, with a token asked of the source again. See
    /// [RFC 8693 §2](https://www.rfc-editor.org/rfc/rfc8693#section-2).
    /// - Parameters:
    ///   - subjectToken: the token that says who the request is for (a Kubernetes or CI JWT, or
    ///     another provider's access token). Never logged.
    ///   - subjectTokenType: defaults to the provider's ``Provider/TokenExchange/subjectTokenType``, else ``TokenType/jwt``.
    ///   - actorToken: the token of the party acting for the subject (delegation); needs `actorTokenType`.
    ///   - audience: defaults to the provider's ``Provider/TokenExchange/audience``.
    ///   - resources: defaults to the provider's ``Provider/resources``.
    ///   - scopes: defaults to the provider's scopes.
    ///   - requestedTokenType: defaults to the provider's ``Provider/TokenExchange/requestedTokenType`` (none: the server chooses).
    /// - Throws: ``OAuthError`` `.configuration` for a type that is not an absolute URI or an actor
    ///   token without its type; `.serverRejected` (`invalid_request`, `invalid_target` for an
    ///   audience or resource the server refuses, `invalid_client`); `.invalidResponse` for `N_A`
    ///   with an access token; `.transport`; `.reauthorizationRequired` when the provider was
    ///   logged out while the request was in flight.
    @discardableResult
    public func exchangeToken(
        provider id: String, subjectToken: Secret, subjectTokenType: String? = nil, actorToken: Secret? = nil,
        actorTokenType: String? = nil, audience: [String]? = nil, resources: [URL]? = nil, scopes: [String]? = nil,
        requestedTokenType: String? = nil
    ) async throws(OAuthError) -> Authorization {
        try await run(id) { provider throws(OAuthError) in
            let configured = provider.tokenExchange
            return try TokenExchangeGrant.request(
                TokenExchangeGrant.Parameters(
                    subjectToken: subjectToken, subjectTokenType: subjectTokenType ?? configured?.subjectTokenType ?? TokenType.jwt,
                    actorToken: actorToken, actorTokenType: actorTokenType, audience: audience ?? configured?.audience ?? [],
                    resources: resources ?? provider.resources, scopes: scopes ?? provider.scopes,
                    requestedTokenType: requestedTokenType ?? configured?.requestedTokenType, options: configured?.options,
                    impersonation: configured?.impersonation),
                provider: provider)
        }.authorization
    }

    // MARK: Device authorization

    /// Requests a device code and user code (RFC 8628 §3.1).
    ///
    /// Show the returned code's `verificationURI` and `userCode`, then call ``pollDeviceAuthorization(_:)``.
    /// Publishes `.requestingDeviceCode` then `.receivedDeviceCode`.
    /// See [RFC 8628 §3.1](https://www.rfc-editor.org/rfc/rfc8628#section-3.1).
    /// - Throws: ``OAuthError`` `.configuration` without a device endpoint; `.serverRejected` on a §5.2 error; `.transport`.
    public func requestDeviceCode(provider id: String, scopes: [String]? = nil) async throws(OAuthError) -> DeviceCode {
        let provider = try resolve(id)
        publish(.requestingDeviceCode(provider: id))
        let code = try await reporting(id) { () async throws(OAuthError) in
            let client = client(for: provider)
            return try await DeviceAuthorizationGrant.requestCode(
                scopes: scopes ?? provider.scopes, client: client,
                url: try await discovery.requiredEndpoint(.deviceAuthorization, client), now: options.now())
        }
        publish(.receivedDeviceCode(provider: id, code))
        return code
    }

    /// Polls until the user approves, denies, or the code expires; stores the tokens (RFC 8628 §3.4–3.5).
    ///
    /// Waits `interval` seconds between polls; `slow_down` adds 5 s for the rest of the flow and
    /// republishes `.receivedDeviceCode` with the new interval. Cancel the task to stop promptly.
    /// Publishes `.authorized` or `.error`.
    /// - Throws: ``OAuthError`` `.accessDenied`, `.expired`, `.cancelled`, `.serverRejected`, `.transport`, `.storage`;
    ///   `.reauthorizationRequired` when the provider was logged out while polling (see ``clear(provider:)``).
    @discardableResult
    public func pollDeviceAuthorization(_ code: DeviceCode) async throws(OAuthError) -> Authorization {
        try await run(code.providerID) { _ in DeviceAuthorizationGrant.request(polling: code) }.authorization
    }

    /// Runs the whole device flow: request a code, publish it, poll, store.
    ///
    /// Subscribers see `.requestingDeviceCode`, `.receivedDeviceCode` (show it), then `.authorized`.
    /// - Throws: what ``requestDeviceCode(provider:scopes:)`` and ``pollDeviceAuthorization(_:)`` throw.
    @discardableResult
    public func authorizeWithDeviceCode(provider: String, scopes: [String]? = nil) async throws(OAuthError) -> Authorization {
        let code = try await requestDeviceCode(provider: provider, scopes: scopes)
        return try await pollDeviceAuthorization(code)
    }

    // MARK: CIBA (OpenID Connect Client-Initiated Backchannel Authentication)

    /// Asks the provider to ask the person `request` names, on their own device (CIBA Core §7.1).
    ///
    /// Show the returned request's ``BackchannelAuthentication/bindingMessage`` and
    /// ``BackchannelAuthentication/expiresAt`` to the local user, then call
    /// ``pollBackchannelAuthentication(_:)``. Everything in `request` is checked before anything is
    /// sent. The request carries the client's authentication (every method the provider has; a
    /// public client is refused). In ping mode a fresh `client_notification_token` goes with it.
    /// Publishes `.authorizing(provider:grant:backchannel:)` with the request. See
    /// [CIBA Core §7](https://openid.net/specs/openid-client-initiated-backchannel-authentication-core-1_0.html#rfc.section.7).
    /// - Throws: ``OAuthError`` `.configuration` for a public client, no endpoint, no hint, a
    ///   binding message with a control character or over
    ///   ``BackchannelAuthenticationRequest/maximumBindingMessageLength`` characters, a user code
    ///   the provider's metadata does not accept (`backchannel_user_code_parameter_supported`);
    ///   `.serverRejected` for a §13 error (`unknown_user_id`, `invalid_binding_message`,
    ///   `missing_user_code`, `invalid_user_code`, `invalid_client`…); `.accessDenied`;
    ///   `.invalidResponse` for an acknowledgement without a usable `auth_req_id` or `expires_in`; `.transport`.
    public func requestBackchannelAuthentication(
        provider id: String, _ request: BackchannelAuthenticationRequest = BackchannelAuthenticationRequest()
    ) async throws(OAuthError) -> BackchannelAuthentication {
        let provider = try resolve(id)
        let authentication = try await reporting(id) { () async throws(OAuthError) in
            let client = client(for: provider)
            // The checks that need no network come first: nothing is fetched for a request that cannot be sent.
            _ = try BackchannelAuthenticationGrant.fields(request, provider: provider, notificationToken: nil)
            let url = try await discovery.requiredEndpoint(.backchannelAuthentication, client)
            if request.userCode != nil, provider.issuer != nil, !(try await discovery.metadata(client).backchannelUserCodeParameterSupported) {
                throw OAuthError(.configuration, providerID: id, endpoint: .backchannelAuthentication, message: """
                    the provider's metadata does not say backchannel_user_code_parameter_supported: it takes no user code; \
                    log in without one
                    """)
            }
            return try await BackchannelAuthenticationGrant.start(request, client: client, url: url, now: options.now)
        }
        // Ping mode: a ping that comes before the poll starts is kept for it.
        _ = tokenEndpoint(for: provider).pings.register(authentication, now: options.now())
        publish(.authorizing(provider: id, grant: .ciba, backchannel: authentication))
        return authentication
    }

    /// Polls until the person approves or denies, or the request expires; stores the tokens
    /// (CIBA Core §10.1, §11).
    ///
    /// Waits `interval` seconds between polls; `slow_down` adds 5 s for the rest of the flow and
    /// republishes `.authorizing` with the new interval; never polls past `expires_in`. In ping
    /// mode, ``receiveBackchannelNotification(authorization:body:)`` cuts a wait short. The ID
    /// token is validated as the code flow's is (without a nonce). Cancel the task to stop
    /// promptly. Publishes `.requestingAccessToken` once tokens arrive, then `.authorized`; or `.error`.
    /// - Throws: ``OAuthError`` `.accessDenied` (the person said no; some servers say it too for a
    ///   request already used), `.expired`, `.cancelled`, `.serverRejected` (`invalid_grant`), `.idTokenRejected`,
    ///   `.transport`, `.storage`; `.reauthorizationRequired` when the provider was logged out while polling.
    @discardableResult
    public func pollBackchannelAuthentication(_ authentication: BackchannelAuthentication) async throws(OAuthError) -> Authorization {
        try await run(authentication.providerID) { _ in BackchannelAuthenticationGrant.request(polling: authentication) }.authorization
    }

    /// Runs a whole CIBA login: ask the person, publish the request (show its binding message), poll, store.
    ///
    /// Subscribers see `.authorizing` (with the ``BackchannelAuthentication``), then
    /// `.requestingAccessToken` and `.authorized`.
    /// - Throws: what ``requestBackchannelAuthentication(provider:_:)`` and ``pollBackchannelAuthentication(_:)`` throw.
    @discardableResult
    public func authorizeWithBackchannel(
        provider id: String, _ request: BackchannelAuthenticationRequest = BackchannelAuthenticationRequest()
    ) async throws(OAuthError) -> Authorization {
        let authentication = try await requestBackchannelAuthentication(provider: id, request)
        return try await pollBackchannelAuthentication(authentication)
    }

    /// Hands the flow a ping your notification endpoint received (CIBA Core §10.2): wakes the
    /// poll of the ping-mode request it names, which then asks for the tokens at once.
    ///
    /// Call it from the HTTP handler of the endpoint registered as the client's
    /// `backchannel_client_notification_endpoint`, with the request's `Authorization` header and
    /// body; answer `204 No Content` when it returns true, `401` otherwise. A ping names a request
    /// by its `client_notification_token` (the bearer) and its `auth_req_id`, both compared in
    /// constant time; one that names no request being polled changes nothing. It never throws:
    /// a ping is only a hint, and the poll goes on at its interval without one.
    public nonisolated func receiveBackchannelNotification(authorization: String?, body: Data) -> Bool {
        guard let token = BackchannelPings.bearer(authorization), let id = BackchannelPings.authRequestID(inPing: body) else { return false }
        return endpointList.contains { $0.pings.deliver(token: token, authRequestID: id) }
    }

    // MARK: Authorization code (the callback; the request is in Flow/AuthFlow+AuthorizationRequest.swift)

    /// Completes a browser login from the redirect URL the user came back with.
    ///
    /// Checks `state` against the pending requests (exact, constant time, single use, unexpired),
    /// `iss` against the provider's issuer (RFC 9207), then exchanges the code with the PKCE verifier,
    /// stores the tokens and publishes `.requestingAccessToken` then `.authorized`.
    /// See [RFC 6749 §4.1.2–4.1.4](https://www.rfc-editor.org/rfc/rfc6749#section-4.1.2).
    /// - Throws: ``OAuthError`` `.stateMismatch`, `.invalidCallback`, `.accessDenied` (the user said no),
    ///   `.serverRejected` (RFC 6749 §5.2, such as `invalid_grant` for an expired code), `.transport`, `.storage`;
    ///   `.reauthorizationRequired` when the provider was logged out while the exchange was in flight
    ///   (the tokens are discarded; see ``clear(provider:)``). A callback that names no pending
    ///   request (unparseable, no state, or a state that matches none) is published as
    ///   `.error(provider: nil, …)`: it is no provider's.
    @discardableResult
    public func completeAuthorization(callbackURL: URL) async throws(OAuthError) -> Authorization {
        // Until the state names a request, a failure is no provider's: `.error(provider: nil, …)`.
        let (response, request) = try await reporting(nil) { () throws(OAuthError) in
            let response = try AuthorizationResponse(callbackURL: callbackURL)
            guard let state = response.state else {
                throw OAuthError(.stateMismatch, endpoint: .authorization, message: "the callback carries no state")
            }
            // Single use: the matching request leaves the pending list whatever happens next.
            guard let index = pending.firstIndex(where: { $0.state.constantTimeEquals(state) }) else {
                throw OAuthError(.stateMismatch, endpoint: .authorization,
                                 message: "the callback's state matches no pending authorization request (reused, expired, or forged)")
            }
            return (response, pending.remove(at: index))
        }
        return try await complete(response, request: request)
    }

    /// Completes a browser login against a request you kept yourself (for example in a web session).
    ///
    /// The same checks as ``completeAuthorization(callbackURL:)``, with `request` as the only candidate.
    /// Remove `request` from your session before calling: single use across instances is the session's job.
    /// - Throws: the same as ``completeAuthorization(callbackURL:)``.
    @discardableResult
    public func completeAuthorization(callbackURL: URL, request: AuthorizationRequest) async throws(OAuthError) -> Authorization {
        let response = try await reporting(request.providerID) { () throws(OAuthError) in
            let response = try AuthorizationResponse(callbackURL: callbackURL)
            guard let state = response.state, state.constantTimeEquals(request.state) else {
                throw OAuthError(.stateMismatch, endpoint: .authorization, message: "the callback's state does not match the request")
            }
            return response
        }
        pending.removeAll { $0.state.constantTimeEquals(request.state) }
        return try await complete(response, request: request)
    }

    /// Completes a browser login from what the person pasted back: the full URL the browser
    /// ended on, or the bare `code` a provider's page showed (a paste-back login).
    ///
    /// For a person who signs in on another device, whose browser's redirect cannot reach this
    /// machine: show `request.url`, take one line from your own UI and pass it here. Nothing
    /// listens; the redirect URI is the provider's (a loopback one whose page fails to load, a
    /// custom scheme, an https page). `request` must be pending in this flow (made by
    /// ``authorizationRequest(provider:scopes:parameters:usePKCE:resources:)``) and leaves it
    /// whatever happens (single use). A URL is read by the parser of ``AuthorizationResponse`` and
    /// must be for `request.redirectURI`, with no parameter repeated and a `state` equal to
    /// `request.state` (constant time); then, as for ``completeAuthorization(callbackURL:)``, the
    /// request must be unexpired, `iss` must match (RFC 9207), an `error` is thrown as such, and
    /// the code is exchanged with the PKCE verifier. A bare code carries nothing to check and is
    /// taken only with PKCE (RFC 7636: only this request's verifier redeems a code issued for
    /// it); it is refused by an issuer whose metadata advertises
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §2.4). Publishes `.error`, or
    /// `.requestingAccessToken` then `.authorized`. See
    /// [RFC 6749 §4.1.2](https://www.rfc-editor.org/rfc/rfc6749#section-4.1.2).
    /// - Parameters:
    ///   - pasted: the line as typed; surrounding blanks and line ends are ignored. At most
    ///     ``AuthorizationResponse/maximumPastedLength`` bytes of printable ASCII.
    ///   - request: the request whose URL the person opened.
    /// - Throws: ``OAuthError`` `.invalidCallback` for text that is neither (a control character,
    ///   too long, another redirect URI, a repeated parameter, no query, a bare code without PKCE or
    ///   from an RFC 9207 issuer, a wrong `iss`); `.stateMismatch` for a missing or wrong `state`, a
    ///   request not pending or expired; `.accessDenied` or `.serverRejected` for an `error`; then
    ///   what ``completeAuthorization(callbackURL:)`` throws for the exchange.
    @discardableResult
    public func completeAuthorization(pasted: String, request: AuthorizationRequest) async throws(OAuthError) -> Authorization {
        let response = try await reporting(request.providerID) { () throws(OAuthError) in
            // Single use, as for a redirect: the request leaves the pending list whatever happens next.
            guard let index = pending.firstIndex(where: { $0.state.constantTimeEquals(request.state) }) else {
                throw OAuthError(.stateMismatch, endpoint: .authorization, message: """
                    this authorization request is not pending in this flow (completed already, expired, or made by another); \
                    start a new one
                    """)
            }
            pending.remove(at: index)
            switch try AuthorizationResponse.pasted(pasted, redirectURI: request.redirectURI) {
            case .redirect(let response):
                guard let state = response.state else {
                    throw OAuthError(.stateMismatch, endpoint: .authorization, message: "the pasted URL carries no state")
                }
                guard state.constantTimeEquals(request.state) else {
                    throw OAuthError(.stateMismatch, endpoint: .authorization, message: "the pasted URL's state is not this login's")
                }
                return response
            case .code(let code):
                guard request.codeVerifier != nil else {
                    throw OAuthError(.invalidCallback, endpoint: .authorization, message: """
                        a bare code is taken only with PKCE, and this request has none: paste the whole URL, whose state \
                        ties it to this login
                        """)
                }
                return AuthorizationResponse(code: code)
            }
        }
        return try await complete(response, request: request)
    }

    /// After the callback named `request`: unexpired, then the code exchange through the runner.
    private func complete(_ response: AuthorizationResponse, request: AuthorizationRequest) async throws(OAuthError) -> Authorization {
        do { try checkRequestURIExpiry(of: request) } catch { throw fail(request.providerID, error) }
        guard request.expiresAt > options.now() else {
            throw fail(request.providerID, OAuthError(.stateMismatch, endpoint: .authorization, message: "the authorization request expired"))
        }
        return try await run(request.providerID) { provider throws(OAuthError) in
            if !response.duplicates.isEmpty {
                logger.warning(provider.id, "callback repeats parameters \(response.duplicates); the first value of each was used")
            }
            try await checkCallbackIssuer(response, of: provider)
            if let error = response.error {
                throw EndpointClient.error(for: error, provider: provider.id, endpoint: .authorization, status: nil)
            }
            guard let code = response.code else {
                throw OAuthError(.invalidCallback, endpoint: .authorization, message: "the callback carries neither code nor error")
            }
            let requestedAt = request.requestedAt ?? request.expiresAt.addingTimeInterval(-options.pendingAuthorizationLifetime)
            return AuthorizationCodeGrant.exchange(code: code, request: request, requestedAt: requestedAt)
        }.authorization
    }

    // MARK: The runner

    /// Runs the grant `make` builds for provider `id`, from a public entry point.
    ///
    /// Resolves the provider and takes the logout ticket (both before anything is sent), then
    /// ``run(_:ticket:locked:_:)``.
    /// - Throws: ``OAuthError`` `.configuration` for an unknown provider; what the grant and the
    ///   steps throw. Each is published as `.error`.
    func run(_ id: String, _ make: (Provider) async throws(OAuthError) -> GrantRequest) async throws(OAuthError) -> TokenSet {
        let provider = try resolve(id)
        let ticket = await grantTicket(id)
        return try await run(provider, ticket: ticket, locked: false, make)
    }

    /// The steps every grant shares, after the ticket: the grant's request (`make`; its failure
    /// publishes `.error` before anything else), `.requestingAccessToken`, the exchange
    /// (``TokenEndpoint/exchange(_:onPoll:)``: endpoint, client authentication, DPoP proof,
    /// post, response, ID token and certificate-binding checks), then ``commit(_:ticket:locked:what:)``.
    /// A failure publishes `.error` and is rethrown.
    /// - Parameter locked: true when the caller already holds the store's lock on the provider (a renewal).
    func run(
        _ provider: Provider, ticket: LogoutLedger.Ticket, locked: Bool, _ make: (Provider) async throws(OAuthError) -> GrantRequest
    ) async throws(OAuthError) -> TokenSet {
        let grant: GrantRequest
        do { grant = try await make(provider) } catch { throw fail(provider.id, error) }
        if !grant.isPolled { publish(.requestingAccessToken(provider: provider.id)) }
        let set: TokenSet
        do throws(TokenEndpoint.Failure) {
            var onPoll: (@Sendable (PollEvent) async -> Void)?
            if grant.isPolled {
                onPoll = { [weak self] event in await self?.publishPoll(event) }
            }
            set = try await tokenEndpoint(for: provider).exchange(grant, onPoll: onPoll)
        } catch {
            switch error {
            case .request(let error):
                guard let previous = grant.previous else { throw fail(provider.id, error) }
                if error.code == .reauthorizationRequired { await markRejected(previous, ticket: ticket) }
                throw fail(provider.id, error, since: ticket)
            case .checks(let error):
                throw fail(provider.id, error, since: ticket)
            }
        }
        do { try await commit(set, ticket: ticket, locked: locked, what: grant.name) } catch { throw fail(provider.id, error, since: ticket) }
        return set
    }

    /// A poll's states: `slow_down` republishes the device code or the CIBA request with its new
    /// interval; a CIBA answer with tokens is `.requestingAccessToken` (the person approved), while
    /// the device grant goes from its code to `.authorized`.
    private func publishPoll(_ event: PollEvent) {
        switch event {
        case .slowedDown(.device(let code)):
            publish(.receivedDeviceCode(provider: code.providerID, code))
        case .slowedDown(.backchannel(let authentication)):
            publish(.authorizing(provider: authentication.providerID, grant: .ciba, backchannel: authentication))
        case .answered(.backchannel(let authentication)):
            publish(.requestingAccessToken(provider: authentication.providerID))
        case .answered(.device):
            break
        }
    }

    /// Remembers that `previous`'s refresh token was rejected, so a dead refresh token is not
    /// posted again on every call (not after a logout began: that would store the entry again).
    private func markRejected(_ previous: TokenSet, ticket: LogoutLedger.Ticket) async {
        guard ledger.isCurrent(ticket, previous.providerID) else { return }
        var marked = previous
        marked.needsReauthorization = true
        do { try await save(marked) } catch { logger.warning(previous.providerID, "could not mark the authorization: \(error)") }
    }

    /// The configured provider `id`; an unknown one is published as `.error`.
    /// - Throws: ``OAuthError`` `.configuration` when there is none.
    func resolve(_ id: String) throws(OAuthError) -> Provider {
        do { return try provider(id) } catch { throw fail(id, error) }
    }

    // MARK: Tickets and the commit step (the logout race, see LogoutLedger)

    /// The ticket of a grant beginning now: the generation, and whether the store holds an entry.
    func grantTicket(_ id: String) async -> LogoutLedger.Ticket {
        let generation = ledger.generation(id)
        return LogoutLedger.Ticket(generation: generation, storedAtStart: await entryExists(id))
    }

    /// True when the store has an entry for `id`. One that exists but cannot be read (corrupt, or
    /// sealed with another key) counts as existing: a login may replace it, as it always could.
    private func entryExists(_ id: String) async -> Bool {
        do { return try await store.load(id) != nil } catch { return true }
    }

    /// Stores `set` under the store's lock on its provider (taken here unless `locked`), unless the
    /// result is stale (``storeLocked(_:ticket:what:)``), then caches it and publishes `.authorized`.
    ///
    /// The set is cached and `.authorized` published only once the lock is released, so only once
    /// the store has made the save durable (a fleet store commits its transaction then): no caller
    /// gets a renewed access token whose rotated refresh token a failed commit could still lose.
    /// Unless `locked`, that happens here (``adopt(_:ticket:what:)``); a caller that holds the lock
    /// adopts the set itself after releasing it.
    @inline(never)
    func commit(_ set: TokenSet, ticket: LogoutLedger.Ticket, locked: Bool, what: String) async throws(OAuthError) {
        if locked { return try await storeLocked(set, ticket: ticket, what: what) }
        try await store.withExclusiveAccess(to: set.providerID) { () async throws(OAuthError) in
            try await self.storeLocked(set, ticket: ticket, what: what)
        }
        try adopt(set, ticket: ticket, what: what)
    }

    /// Under the store's lock: saves `set`, unless the result is stale: a logout began after the
    /// call did (checked before and after the save; a save it overtook is deleted again), or the
    /// entry that existed when the call began was deleted by another process since. A stale
    /// result throws `.reauthorizationRequired` and nothing of it stays stored.
    private func storeLocked(_ set: TokenSet, ticket: LogoutLedger.Ticket, what: String) async throws(OAuthError) {
        let id = set.providerID
        guard ledger.isCurrent(ticket, id) else { throw discard(set, what) }
        if ticket.storedAtStart {
            let exists = await entryExists(id)
            guard ledger.isCurrent(ticket, id) else { throw discard(set, what) }
            guard exists else {
                // The store is the truth: the local copy of the deleted entry goes too.
                tokens[id] = nil
                throw OAuthError(.reauthorizationRequired, providerID: id, message: """
                    "\(id)" was logged out by another process while this \(what) was in flight; \
                    its tokens were discarded, not stored; authorize again to log in
                    """)
            }
        }
        try await store.save(StoredEntry.encode(set), for: id)
        guard ledger.isCurrent(ticket, id) else {
            // A logout began during the save and waits for this lock; undo the save before it runs.
            try await store.delete(id)
            throw discard(set, what)
        }
    }

    /// Caches a set committed under the store's lock, now released, and publishes `.authorized`;
    /// unless a logout began since, which then deletes the stored set under the lock after this
    /// one (and a waiting ``revoke(provider:)`` revokes it).
    /// - Throws: ``OAuthError`` `.reauthorizationRequired` when a logout made the set stale.
    func adopt(_ set: TokenSet, ticket: LogoutLedger.Ticket, what: String) throws(OAuthError) {
        guard ledger.isCurrent(ticket, set.providerID) else { throw discard(set, what) }
        cache(set)
        publish(.authorized(provider: set.providerID, set.authorization))
    }

    /// The error of a result a logout made stale; keeps the set for a waiting ``revoke(provider:)``.
    func discard(_ set: TokenSet, _ what: String) -> OAuthError {
        let id = set.providerID
        ledger.supersede(set)
        return OAuthError(.reauthorizationRequired, providerID: id, message: """
            "\(id)" was logged out (clear or revoke) while this \(what) was in flight; \
            its tokens were discarded, not stored; authorize again to log in
            """)
    }

    /// Publishes `.error` for a call that began under `ticket`. When a logout finished since and
    /// nothing is held now, `.empty` follows, so the logout's state stays the last one published.
    @inline(never)
    func fail(_ id: String, _ error: OAuthError, since ticket: LogoutLedger.Ticket) -> OAuthError {
        let failed = fail(id, error)
        if ledger.loggedOut(since: ticket, id), tokens[id] == nil { publish(.empty(provider: id)) }
        return failed
    }
}
