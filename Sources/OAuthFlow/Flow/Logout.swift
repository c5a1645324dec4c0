#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Logging out: clear and revoke, and deletions other processes report. Each bumps the provider's
// logout generation first (``LogoutLedger``), so whatever began before is discarded, not stored.
extension AuthFlow {
    /// Removes the stored tokens of `provider` and publishes `.empty(provider:)` for it.
    ///
    /// The logout is final: a refresh or grant of `provider` that began before it and answers after
    /// it is discarded (its call throws `.reauthorizationRequired`), never stored, and never
    /// published as `.authorized` after this `.empty`. The entry is deleted under the store's lock
    /// (``SecretStore/withExclusiveAccess(to:_:)``), so a refresh that another process runs under
    /// that lock finishes first and is deleted with the rest; a pending authorization request of
    /// `provider` is dropped.
    /// - Throws: ``OAuthError`` `.storage` when the store cannot delete; `.timedOut` when another
    ///   process holds the lock too long (run it again); `.configuration` for an id the store cannot
    ///   name. Each publishes `.error`; the results of earlier calls are discarded all the same.
    public func clear(provider id: String) async throws(OAuthError) {
        let generation = beginLogout(id)
        try await reporting(id) { () async throws(OAuthError) in
            try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in
                try await self.finishLogout(id, generation: generation, publishing: true)
            }
        }
    }

    /// Revokes `provider`'s tokens at its revocation endpoint, then forgets them and publishes `.empty(provider:)` for it.
    ///
    /// Sends the refresh token, then the access token, each with its `token_type_hint` and the
    /// client's authentication: RFC 7009 §2.1 lets a server keep the access token alive after its
    /// refresh token is revoked, and some do. The tokens are forgotten locally in every case —
    /// when the provider has no revocation endpoint, is unreachable, or refuses — and the result
    /// says which revocations the server confirmed; a refused one is also logged as a warning.
    ///
    /// Like ``clear(provider:)`` it is final, and it runs under the store's lock: the tokens revoked
    /// are the ones stored when the lock is held (another process may have rotated them), those
    /// held in memory, and those a refresh received while this waited for the lock (that refresh
    /// is discarded, so a rotated token is not left valid at the server).
    /// See [RFC 7009 §2](https://www.rfc-editor.org/rfc/rfc7009#section-2).
    /// - Returns: what the server confirmed; check ``RevocationResult/isComplete``.
    /// - Throws: ``OAuthError`` `.configuration` for an unknown provider; `.storage` when the store
    ///   cannot delete (the revocations were still sent); `.timedOut` when another process holds the
    ///   store's lock too long (nothing was sent). Each publishes `.error`.
    @discardableResult
    public func revoke(provider id: String) async throws(OAuthError) -> RevocationResult {
        let provider = try resolve(id)
        let url = try await reporting(id) { () async throws(OAuthError) in try await discovery.endpointURL(.revocation, client(for: provider)) }
        let generation = beginLogout(id)
        return try await reporting(id) { () async throws(OAuthError) -> RevocationResult in
            try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) -> RevocationResult in
                try await self.revokeLocked(provider, url: url, generation: generation)
            }
        }
    }

    /// Under the store's lock: revokes what is stored, held and superseded, then deletes and publishes `.empty`.
    private func revokeLocked(_ provider: Provider, url: URL?, generation: UInt64) async throws(OAuthError) -> RevocationResult {
        let id = provider.id
        var sets = Array(ledger.superseded(id).reversed())  // newest first
        do {
            // The store is the truth: another process may have rotated the tokens since this one read them.
            if let stored = try await loadStored(id) { sets.append(stored) }
        } catch {
            logger.warning(id, "the stored entry cannot be read (\(error.code)); revoking the tokens held in memory")
        }
        if let held = tokens[id] { sets.append(held) }
        var result = RevocationResult(hasRevocationEndpoint: url != nil)
        if !sets.isEmpty {
            if let url {
                result = await Revocation.revoke(sets, url: url, client: client(for: provider))
                for (kind, error) in result.errors.sorted(by: { $0.key.rawValue > $1.key.rawValue }) {
                    logger.warning(id, "the provider did not confirm revoking the \(kind.rawValue): \(error.code); forgetting it anyway")
                }
            } else {
                result.heldTokens = sets.contains { $0.refreshToken != nil } ? [.refreshToken, .accessToken] : [.accessToken]
            }
        }
        try await finishLogout(id, generation: generation, publishing: true)
        return result
    }

    /// Removes every provider's stored tokens and publishes `.empty` (provider nil: every provider).
    ///
    /// Final for every provider, as ``clear(provider:)`` is for one; each entry is deleted under its
    /// lock. Entries of providers that are not configured are left alone. When some deletes fail,
    /// the others still happen, `.error` is published for each failed provider and the first
    /// failure is thrown (no `.empty` then).
    /// - Throws: ``OAuthError`` `.storage` when the store cannot list or delete; `.timedOut` as for
    ///   ``clear(provider:)``.
    public func clear() async throws(OAuthError) {
        var started: [(id: String, generation: UInt64)] = []
        for id in providers.keys.sorted() { started.append((id, beginLogout(id))) }
        pending.removeAll()
        let keys: Set<String>
        do { keys = Set(try await store.keys()) } catch { throw fail(nil, error) }
        var failures: [(id: String, error: OAuthError)] = []
        for (id, generation) in started {
            guard keys.contains(id) else {
                forgetLocally(id, generation: generation)
                continue
            }
            do {
                try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in
                    try await self.finishLogout(id, generation: generation, publishing: false)
                }
            } catch {
                failures.append((id, error))
            }
        }
        guard let first = failures.first else {
            publish(.empty)
            return
        }
        for failure in failures.dropFirst() { _ = fail(failure.id, failure.error) }
        throw fail(first.id, first.error)
    }

    /// Starts a logout of `id`: bumps its generation, drops its pending authorization requests,
    /// cancels its renewal and background timer. Everything that began before is now stale.
    func beginLogout(_ id: String) -> UInt64 {
        let generation = ledger.begin(id)
        pending.removeAll { $0.providerID == id }
        refreshes[id]?.task.cancel()
        proactiveTimers.cancel(id)
        endpoints[id]?.client.dpopKeySlot.forget()   // a logout forgets the DPoP key too
        return generation
    }

    /// Under the store's lock: deletes the entry, forgets the memory copy, and publishes `.empty`.
    func finishLogout(_ id: String, generation: UInt64, publishing: Bool) async throws(OAuthError) {
        try await store.delete(id)
        forgetLocally(id, generation: generation)
        if publishing { publish(.empty(provider: id)) }
    }

    func forgetLocally(_ id: String, generation: UInt64) {
        tokens[id] = nil
        ledger.settle(id, generation: generation)
    }

    // MARK: Deletions by other processes (stores that notify, such as the PostgreSQL fleet store)

    /// Drops the in-memory tokens of every key the store reports deleted elsewhere, publishing `.empty`.
    func watchInvalidations() {
        guard let stream = store.invalidations() else { return }
        invalidationWatch = Task { [weak self] in
            for await change in stream {
                switch change {
                case .deleted(let key): await self?.forgetDeletedElsewhere(key)
                case .resync: await self?.recheckCachedEntries()
                }
            }
        }
    }

    /// As ``clear(provider:)`` does locally, without touching the store: the background renewal is
    /// cancelled, the copy is dropped, `.empty` is published. A refresh in flight is left to fail
    /// on its own: a store that reports deletions refuses its write-back, so its callers get
    /// `.reauthorizationRequired`, where cancelling it would tell them `.cancelled`.
    private func forgetDeletedElsewhere(_ key: String) {
        proactiveTimers.cancel(key)
        guard tokens[key] != nil else { return }
        tokens[key] = nil
        logger.info(key, "logged out by another process; the local copy is dropped")
        publish(.empty(provider: key))
    }

    /// After missed notifications: every cached key the store answers it no longer holds is
    /// forgotten. A key the store cannot answer for (the database is down, the read timed out) keeps
    /// its copy: a store that is unreachable says nothing about a logout, and the copy is what serves
    /// fresh tokens while it is down. A deletion missed then is caught by the next `.resync` or by
    /// the next refresh, which re-reads the entry under the lock.
    private func recheckCachedEntries() async {
        for key in tokens.all.keys.sorted() {
            let stored: Data?
            do {
                stored = try await store.load(key)
            } catch {
                logger.warning(key, "could not re-check the local copy against the store (\(error.code)); it is kept")
                continue
            }
            if stored == nil { forgetDeletedElsewhere(key) }
        }
    }
}
