#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Tokens on demand and their renewal: one renewal per provider at a time (single flight), under
// the store's lock, re-reading first; a refresh, or a re-run of a grant that needs no person,
// goes through the grant runner (Flow/GrantRunner.swift).
extension AuthFlow {
    /// A valid access token for `provider`: from memory while valid, else refreshed once for everyone.
    ///
    /// Concurrent callers share one refresh; other processes using the same ``FileSecretStore`` are
    /// seen through its lock, so a rotated refresh token is never lost. Client-credentials
    /// authorizations are fetched again rather than refreshed. Put the result in an
    /// `Authorization: Bearer` header (RFC 6750 §2.1).
    /// - Throws: ``OAuthError`` `.reauthorizationRequired` when nothing is stored or the refresh
    ///   token was rejected; `.transport` (retry later); `.storage`.
    nonisolated(nonsending) public func accessToken(for provider: String) async throws(OAuthError) -> Secret {
        // The hot path: one clock read, then the provider's slot lock held for one copy; no actor
        // hop, no executor switch (nonsending), and no lock a refresh holds.
        if let token = tokens.slot(provider)?.freshToken(at: freshnessTime()) { return token }
        return try await renewShared(provider, force: false).accessToken
    }

    /// The full valid token set for `provider`, refreshed when needed (see ``accessToken(for:)``).
    /// - Throws: the same as ``accessToken(for:)``.
    nonisolated(nonsending) public func tokenSet(for provider: String) async throws(OAuthError) -> TokenSet {
        // The fast path reads the provider's slot, without a hop onto the actor.
        if let set = tokens.slot(provider)?.freshSet(at: freshnessTime()) { return set }
        return try await renewShared(provider, force: false)
    }

    /// Refreshes `provider`'s tokens now, even when they are still valid.
    ///
    /// Publishes `.requestingAccessToken` then `.authorized`. See [RFC 6749 §6](https://www.rfc-editor.org/rfc/rfc6749#section-6).
    /// - Throws: ``OAuthError`` `.reauthorizationRequired` (no refresh token, or `invalid_grant`); `.transport`; `.storage`.
    @discardableResult
    public func refresh(provider: String) async throws(OAuthError) -> Authorization {
        try await renewShared(provider, force: true).authorization
    }

    /// Now, in seconds since 1970, for a freshness check: the coarse system clock when
    /// ``Options/now`` is the system clock (see ``Options/readsSystemClock``), else ``Options/now``.
    @inline(__always)
    nonisolated func freshnessTime() -> Double {
        SystemClock.freshnessSeconds(readsSystemClock: options.readsSystemClock, now: options.now)
    }

    nonisolated func isFresh(_ set: TokenSet) -> Bool {
        options.now().timeIntervalSince1970 < RenewalTiming.renewalTime(of: set, refreshMargin: options.refreshMargin)
    }

    /// One renewal per provider at a time; everyone waiting gets its result.
    ///
    /// A renewal that began before a logout is not joined: its result is discarded (see ``clear(provider:)``).
    @usableFromInline
    func renewShared(_ provider: String, force: Bool) async throws(OAuthError) -> TokenSet {
        let ticket = ledger.ticket(provider, storedAtStart: false)
        if let running = refreshes[provider], running.generation == ticket.generation { return try await running.task.value.get() }
        let previous = tokens[provider]
        let task = Task { await self.renewLocked(provider, force: force, previous: previous, ticket: ticket) }
        refreshes[provider] = (ticket.generation, task)
        let result = await task.value
        if refreshes[provider]?.task == task { refreshes[provider] = nil }
        return try result.get()
    }

    private func renewLocked(_ id: String, force: Bool, previous: TokenSet?, ticket: LogoutLedger.Ticket) async -> Result<TokenSet, OAuthError> {
        let provider: Provider
        do { provider = try resolve(id) } catch { return .failure(error) }
        do {
            // `renew` publishes its own failures and hands them back as a value, so what the store
            // throws is only the store's: the lock not had in time, a cancelled wait, a failed commit.
            let renewed = try await store.withExclusiveAccess(to: id) { () async -> Result<Renewed, OAuthError> in
                do throws(OAuthError) {
                    return .success(try await self.renew(provider, force: force, previous: previous, ticket: ticket))
                } catch {
                    return .failure(error)
                }
            }
            // A set the grant stored is served only now that the lock's writes are durable
            // (commit(_:ticket:locked:what:)).
            if case .success(.granted(let set)) = renewed { try adopt(set, ticket: ticket, what: "renewal") }
            return renewed.map(\.set)
        } catch {
            return .failure(fail(id, error, since: ticket))
        }
    }

    /// What a renewal under the lock found: a set another process stored (cached already), or
    /// one its own grant stored, to cache and publish once the lock is released.
    private enum Renewed: Sendable {
        case stored(TokenSet)
        case granted(TokenSet)

        var set: TokenSet {
            switch self {
            case .stored(let set), .granted(let set): set
            }
        }
    }

    /// Runs under the store's lock: re-read (another process may have renewed), then refresh or re-fetch.
    ///
    /// Every outcome is checked against `ticket`: after a logout that began since, nothing is sent,
    /// cached, marked or stored.
    private func renew(_ provider: Provider, force: Bool, previous: TokenSet?, ticket: LogoutLedger.Ticket) async throws(OAuthError) -> Renewed {
        let stale = { [id = provider.id] () -> OAuthError in
            OAuthError(.reauthorizationRequired, providerID: id,
                       message: "\"\(id)\" was logged out (clear or revoke) before this refresh could run; authorize again to log in")
        }
        guard ledger.isCurrent(ticket, provider.id) else { throw fail(provider.id, stale(), since: ticket) }
        let stored: TokenSet?
        do { stored = try await loadStored(provider.id) } catch { throw fail(provider.id, error, since: ticket) }
        guard ledger.isCurrent(ticket, provider.id) else { throw fail(provider.id, stale(), since: ticket) }
        if let stored, !force || renewedElsewhere(stored, since: previous), isFresh(stored), !stored.needsReauthorization {
            cache(stored)
            logger.info(provider.id, "using the token another process stored")
            return .stored(stored)
        }
        // The store is the truth: an entry another process deleted (a logout) is not revived from memory.
        if let grant = onDemandGrant(provider, stored: stored) {
            // A grant that needs no person (a service account, a client key, a subject token file,
            // client credentials): no refresh token; run it again whenever a token is due.
            if stored == nil { tokens[provider.id] = nil }
            let scopes = stored?.scopes ?? previous?.scopes ?? provider.scopes
            return .granted(try await run(provider, ticket: ticket, locked: true) { [self] provider throws(OAuthError) in
                try await onDemandRequest(grant, provider, scopes: scopes)
            })
        }
        guard let current = stored else {
            tokens[provider.id] = nil
            let serviceOnly: Bool
            do { serviceOnly = try await discovery.isServiceOnly(client(for: provider)) } catch { throw fail(provider.id, error, since: ticket) }
            if serviceOnly {
                // A service-only provider: client credentials need no user, so fetch on demand.
                let scopes = previous?.scopes ?? provider.scopes
                return .granted(try await run(provider, ticket: ticket, locked: true) { provider throws(OAuthError) in
                    try ClientCredentialsGrant.request(provider, scopes: scopes, resources: provider.resources)
                })
            }
            throw fail(provider.id, OAuthError(.reauthorizationRequired, message: "nothing is stored for \"\(provider.id)\"; authorize first"))
        }
        if current.grant == .clientCredentials {
            return .granted(try await run(provider, ticket: ticket, locked: true) { provider throws(OAuthError) in
                try ClientCredentialsGrant.request(provider, scopes: current.scopes, resources: provider.resources)
            })
        }
        guard !current.needsReauthorization else {
            throw fail(provider.id, OAuthError(.reauthorizationRequired, message: "the refresh token was rejected earlier; authorize again"))
        }
        guard let refreshToken = current.refreshToken else {
            throw fail(provider.id, OAuthError(.reauthorizationRequired, message: "the token expired and no refresh token is held"))
        }
        return .granted(try await run(provider, ticket: ticket, locked: true) { provider in
            RefreshTokenGrant.request(refreshToken: refreshToken, renewing: current, resources: provider.resources)
        })
    }

    /// True when the stored set is not the one this flow last saw: another process renewed it.
    private func renewedElsewhere(_ stored: TokenSet, since previous: TokenSet?) -> Bool {
        guard let previous else { return true }
        return !stored.accessToken.constantTimeEquals(previous.accessToken)
    }

    /// The grant ``accessToken(for:)`` runs by itself for `provider` now, with no person: its
    /// ``Provider/serviceGrant`` when nothing is stored or the stored set came from that grant;
    /// nil otherwise (then a refresh, or the client-credentials check by endpoints, decides).
    func onDemandGrant(_ provider: Provider, stored: TokenSet?) -> GrantType? {
        guard let grant = provider.serviceGrant else { return nil }
        guard let stored else { return grant }
        return stored.grant == grant ? grant : nil
    }

    /// The request of `grant` (one that needs no person) for `provider`, built now: a fresh
    /// JWT-bearer assertion (or the pre-made one its subject token source gives), or the subject
    /// token asked of its source again.
    /// - Throws: ``OAuthError`` as the source throws (``SubjectTokenSource``: a missing file, a
    ///   failed fetch or command, an expired token, each naming the source); `.crypto` when signing fails.
    func onDemandRequest(_ grant: GrantType, _ provider: Provider, scopes: [String]) async throws(OAuthError) -> GrantRequest {
        switch grant {
        case .jwtBearer:
            return try await JWTBearerGrant.request(
                provider, tokenURL: try await discovery.requiredEndpoint(.token, client(for: provider)), scopes: scopes,
                subject: provider.serviceAccountSubject, resources: provider.resources, now: options.now(),
                assertion: try await premadeAssertion(provider))
        case .tokenExchange:
            guard let settings = provider.tokenExchange, let subjectToken = try await sourceToken(provider, as: settings.subjectTokenType) else {
                throw OAuthError(.configuration, providerID: provider.id, message: "\"\(provider.id)\" has no subjectTokenSource to exchange; "
                    + "call exchangeToken(provider:subjectToken:…) instead")
            }
            return try TokenExchangeGrant.request(
                TokenExchangeGrant.Parameters(
                    subjectToken: subjectToken, subjectTokenType: settings.subjectTokenType, actorToken: nil, actorTokenType: nil,
                    audience: settings.audience, resources: provider.resources, scopes: scopes,
                    requestedTokenType: settings.requestedTokenType, options: settings.options, impersonation: settings.impersonation),
                provider: provider)
        default:
            return try ClientCredentialsGrant.request(provider, scopes: scopes, resources: provider.resources)
        }
    }

    /// The token `provider`'s ``Provider/subjectTokenSource`` gives now, checked for a token of
    /// `type`; nil when it has no source. A URL source's GET goes through the flow's transport.
    /// - Throws: what ``SubjectTokenSource`` throws, naming the source.
    func sourceToken(_ provider: Provider, as type: String) async throws(OAuthError) -> Secret? {
        guard let source = provider.subjectTokenSource else { return nil }
        return try await source.token(SubjectTokenSource.Context(
            providerID: provider.id, tokenType: type, transport: transport, userAgent: provider.userAgent ?? options.userAgent,
            now: options.now()))
    }

    /// The JWT-bearer grant's pre-made assertion: the subject token source's JWT, when the
    /// provider has a source and no service-account key; nil when the grant signs its own.
    func premadeAssertion(_ provider: Provider) async throws(OAuthError) -> Secret? {
        guard provider.serviceAccount == nil else { return nil }
        return try await sourceToken(provider, as: TokenType.jwt)
    }
}
