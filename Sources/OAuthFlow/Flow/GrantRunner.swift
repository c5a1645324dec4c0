#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The grant runner: every grant, once (STYLE.md §11).
///
///     resolve the provider → logout ticket → the grant's request (Grants/) → publish
///     → token endpoint → exchange (the provider's EndpointClient: client authentication)
///     → validate (the ID token) → commit (store) → publish `.authorized`
///
/// and on any failure: publish `.error`, rethrow. A public grant method only says which grant.
extension AuthFlow {
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
    /// publishes `.error` before anything else), `.requestingAccessToken`, the token endpoint,
    /// the exchange through the provider's ``EndpointClient``, then ``finish(_:_:for:ticket:locked:)``.
    /// - Parameter locked: true when the caller already holds the store's lock on the provider (a renewal).
    func run(
        _ provider: Provider, ticket: LogoutLedger.Ticket, locked: Bool, _ make: (Provider) async throws(OAuthError) -> GrantRequest
    ) async throws(OAuthError) -> TokenSet {
        let grant: GrantRequest
        do { grant = try await make(provider) } catch { throw fail(provider.id, error) }
        if grant.announces { publish(.requestingAccessToken(provider: provider.id)) }
        let response: TokenResponse
        let proof: DPoPProver?
        do {
            // Checked here too, so a provider without DPoP (most) makes no async call for it.
            proof = provider.dpop == .off ? nil : try await dpopProver(for: provider, previous: grant.previous)
            response = try await exchange(grant, for: provider, proof: proof)
        } catch {
            guard let previous = grant.previous else { throw fail(provider.id, error) }
            if error.code == .reauthorizationRequired { await markRejected(previous, ticket: ticket) }
            throw fail(provider.id, error, since: ticket)
        }
        if grant.isRefresh { logger.info(provider.id, "refreshed; refresh token \(response.refreshToken == nil ? "kept" : "rotated")") }
        return try await finish(grant, response, for: provider, dpopKey: proof?.generatedKey, ticket: ticket, locked: locked)
    }

    /// The exchange: the token endpoint (the catalog's, else discovered), then the grant's
    /// request through the provider's client, which adds the client's authentication.
    /// With `proof`, every request carries a DPoP proof (RFC 9449 §5).
    private func exchange(_ grant: GrantRequest, for provider: Provider, proof: DPoPProver?) async throws(OAuthError) -> TokenResponse {
        // The catalog's token endpoint, when it has one, without the async call that would also
        // look for a discovered one (requiredEndpoint's first step is the same lookup).
        let url: URL
        if let configured = Self.configuredURL(.token, of: provider) {
            url = configured
        } else {
            url = try await requiredEndpoint(.token, of: provider)
        }
        let client = client(for: provider)   // looked up once: the check and the request use it
        // Only a client that signs assertions has an algorithm to check (the check's own first test).
        if case .assertion = client.authentication { try await checkClientAssertionAlgorithm(for: provider, client: client) }
        do {
            switch grant.exchange {
            case .post(let fields, let scope):
                return try await client.requestToken(fields, url: url, retrying: scope, proof: proof)
            case .devicePoll(let code):
                return try await DeviceAuthorizationGrant.poll(
                    code, client: client, tokenURL: url, proof: proof, clock: options.clock, now: options.now,
                    onSlowDown: { [weak self] raised in await self?.publishSlowDown(raised) })
            }
        } catch {
            throw grant.read(error)
        }
    }

    private func publishSlowDown(_ code: DeviceCode) {
        publish(.receivedDeviceCode(provider: code.providerID, code))
    }

    /// Remembers that `previous`'s refresh token was rejected, so a dead refresh token is not
    /// posted again on every call (not after a logout began: that would store the entry again).
    private func markRejected(_ previous: TokenSet, ticket: LogoutLedger.Ticket) async {
        guard ledger.isCurrent(ticket, previous.providerID) else { return }
        var marked = previous
        marked.needsReauthorization = true
        do { try await save(marked) } catch { logger.warning(previous.providerID, "could not mark the authorization: \(error)") }
    }

    /// Everything after the exchange: the validation step turns the token response into the set
    /// to keep (nothing is stored when it throws), then the set is committed (stored and
    /// `.authorized` published, unless a logout began after the call did; see
    /// ``commit(_:ticket:locked:what:)``). A failure publishes `.error` and is rethrown.
    private func finish(
        _ grant: GrantRequest, _ response: TokenResponse, for provider: Provider, dpopKey: DPoPKey?, ticket: LogoutLedger.Ticket, locked: Bool
    ) async throws(OAuthError) -> TokenSet {
        do {
            var set = try await validate(response, of: grant, for: provider)
            // The DPoP key the flow made is kept with the tokens it binds (RFC 9449; sealed with them).
            set.dpopKey = dpopKey
            try await commit(set, ticket: ticket, locked: locked, what: grant.name)
            return set
        } catch {
            throw fail(provider.id, error, since: ticket)
        }
    }

    /// The validation step between exchange and storing: the ID token (OIDC/, Flow/IDTokenStep.swift),
    /// and a certificate-bound access token's `cnf` (Credentials/CertificateBinding.swift).
    private func validate(_ response: TokenResponse, of grant: GrantRequest, for provider: Provider) async throws(OAuthError) -> TokenSet {
        let now = options.now()
        // Without an id_token only an authorization code answer can be refused for it (the step's own
        // rule), so the other grants skip the async call.
        let idToken = response.idToken == nil && grant.grant != .authorizationCode
            ? nil : try await verifiedIDToken(response, of: grant, for: provider, now: now)
        try CertificateBinding.check(accessToken: response.accessToken, provider: provider)   // RFC 8705 §3, mutual TLS only
        var set: TokenSet
        if let previous = grant.previous {
            set = RefreshTokenGrant.merge(response, into: previous, now: now)
        } else {
            set = TokenSet(response, providerID: provider.id, requestedScopes: grant.requestedScopes, grant: grant.grant, now: now)
        }
        Self.keepOnlyValidated(idToken, of: response, grant, in: &set)
        return set
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
    /// result is stale: a logout began after the call did (checked before and after the save; a
    /// save it overtook is deleted again), or the entry that existed when the call began was
    /// deleted by another process since. A stale result throws `.reauthorizationRequired` and
    /// nothing of it stays stored.
    ///
    /// The set is cached and `.authorized` published only once the lock is released, so only once
    /// the store has made the save durable (a fleet store commits its transaction then): no caller
    /// gets a renewed access token whose rotated refresh token a failed commit could still lose.
    /// Unless `locked`, that happens here (``adopt(_:ticket:what:)``); a caller that holds the lock
    /// adopts the set itself after releasing it.
    func commit(_ set: TokenSet, ticket: LogoutLedger.Ticket, locked: Bool, what: String) async throws(OAuthError) {
        guard locked else {
            try await store.withExclusiveAccess(to: set.providerID) { () async throws(OAuthError) in
                try await self.commit(set, ticket: ticket, locked: true, what: what)
            }
            return try adopt(set, ticket: ticket, what: what)
        }
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
    func fail(_ id: String, _ error: OAuthError, since ticket: LogoutLedger.Ticket) -> OAuthError {
        let failed = fail(id, error)
        if ledger.loggedOut(since: ticket, id), tokens[id] == nil { publish(.empty(provider: id)) }
        return failed
    }
}
