#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// The public methods of the grants no person answers (client credentials, JWT bearer, token
// exchange; those a person answers are in Flow/AuthFlow+PersonGrants.swift), and the runner every
// grant goes through:
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
        let provider: Provider
        do { provider = try self.provider(id) } catch { throw fail(id, error) }
        // A dynamically registered client without its registration has no client ID to send yet.
        guard !provider.awaitsRegistration else {
            throw fail(id, OAuthError(.reauthorizationRequired, providerID: id, message:
                "provider \"\(id)\" registers its client dynamically and no registration is stored yet; a login registers it (registerClient(provider:))"))
        }
        return provider
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
