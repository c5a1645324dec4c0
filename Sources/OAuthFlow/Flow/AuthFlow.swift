#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// Runs OAuth grants for a set of providers, stores their tokens, and publishes every state change.
///
/// Create one per process with your providers and a store; it restores what the store holds and
/// publishes `.authorized` for each. Then run a grant (``authorizeWithDeviceCode(provider:scopes:)``,
/// ``authorizationRequest(provider:scopes:parameters:)`` + ``completeAuthorization(callbackURL:)``,
/// ``clientCredentials(provider:scopes:)``) and call ``accessToken(for:)`` whenever you need a token:
/// it is answered from memory while valid, and refreshed once for all concurrent callers when not.
/// Subscribe to ``states`` to watch.
public actor AuthFlow {
    /// Knobs for time, refresh and logging.
    public struct Options: Sendable {
        /// Sleeps between device polls; inject a test clock to run them instantly.
        public var clock: any Clock<Duration>
        /// The wall clock used for expiry (the system clock, `Date()`, unless you pass one).
        public var now: @Sendable () -> Date {
            didSet { readsSystemClock = false }
        }
        /// True while ``now`` is the system clock: a cached token's freshness is then checked
        /// against `CLOCK_REALTIME_COARSE` (a few ms of resolution, a fifth of the cost of
        /// `Date()` here), which no 60 s refresh margin can notice.
        @usableFromInline var readsSystemClock: Bool
        /// Refresh this long before expiry (capped at half the token's lifetime).
        public var refreshMargin: TimeInterval
        /// How long an authorization request's `state` stays valid.
        public var pendingAuthorizationLifetime: TimeInterval
        /// The most authorization requests kept pending at once; the oldest is dropped beyond it.
        public var maximumPendingAuthorizations: Int
        /// The `User-Agent` sent when the provider sets none.
        public var userAgent: String
        /// Receives log events; debug events only for providers with `debug` set.
        public var log: (@Sendable (LogRecord) -> Void)?
        /// Restore stored authorizations in the initializer (the default); set false to subscribe
        /// first and call ``AuthFlow/restore()`` yourself.
        public var restoresAtStart: Bool
        /// How far an ID token's `exp`, `iat`, `nbf` and `auth_time` may be off (OpenID Connect Core §3.1.3.7).
        public var clockSkew: TimeInterval
        /// Renew each token in the background shortly before it is due, so callers never wait for a
        /// refresh (off by default; see ``AuthFlow/accessToken(for:)``). Timers sleep on ``clock``.
        public var proactiveRefresh: Bool
        /// How token requests are retried after a transport error, a 5xx or a 429 (see ``RetryPolicy``).
        public var retry: RetryPolicy
        /// A uniform random number in `0..<1` that spreads retries and proactive refreshes (jitter);
        /// inject a constant to make them deterministic in tests.
        public var jitter: @Sendable () -> Double

        /// The default ``refreshMargin``: 60 s.
        public static let defaultRefreshMargin: TimeInterval = 60

        /// The defaults: continuous clock, `Date()` (when `now` is nil), 60 s margin, 10 minute
        /// `state` lifetime, 60 s clock skew.
        public init(
            clock: any Clock<Duration> = ContinuousClock(), now: (@Sendable () -> Date)? = nil,
            refreshMargin: TimeInterval = Options.defaultRefreshMargin, pendingAuthorizationLifetime: TimeInterval = 600,
            maximumPendingAuthorizations: Int = 10_000, userAgent: String = "OAuthFlow/0.1",
            log: (@Sendable (LogRecord) -> Void)? = nil, restoresAtStart: Bool = true, clockSkew: TimeInterval = 60,
            proactiveRefresh: Bool = false, retry: RetryPolicy = RetryPolicy(),
            jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
        ) {
            self.clock = clock
            self.now = now ?? { Date() }
            self.readsSystemClock = now == nil
            self.refreshMargin = refreshMargin
            self.pendingAuthorizationLifetime = pendingAuthorizationLifetime
            self.maximumPendingAuthorizations = maximumPendingAuthorizations
            self.userAgent = userAgent
            self.log = log
            self.restoresAtStart = restoresAtStart
            self.clockSkew = clockSkew
            self.proactiveRefresh = proactiveRefresh
            self.retry = retry
            self.jitter = jitter
        }
    }

    /// The providers, by id.
    public nonisolated let providers: [String: Provider]
    let store: any SecretStore
    let transport: any HTTPTransport
    nonisolated let options: Options
    let logger: Logger
    private nonisolated let broadcaster = StateBroadcaster()

    /// Discovered metadata by issuer, and JWKS by URL (OIDC/Discovery.swift, OIDC/JWKSCache.swift).
    let discoveryCache = DocumentCache<ProviderMetadata>()
    let jwksCache = DocumentCache<JWKSet>()

    /// Written only by the actor; read without a hop by the fresh-token fast path.
    nonisolated let tokens: TokenCache
    /// Each provider's endpoint client, made once with its client authentication (providers never
    /// change after `init`); see ``client(for:)``.
    nonisolated let clients: [String: EndpointClient]
    /// The background renewals of ``Options/proactiveRefresh``; cancelled when the flow goes away.
    nonisolated let proactiveTimers = ProactiveTimers()
    /// The renewal running for each provider, and the logout generation it began under.
    private var refreshes: [String: (generation: UInt64, task: Task<Result<TokenSet, OAuthError>, Never>)] = [:]
    private var pending: [AuthorizationRequest] = []

    /// Creates a flow, validates the providers, and restores stored authorizations.
    ///
    /// Each restored authorization is published as `.authorized`; an entry that cannot be read is
    /// published as `.error` for its provider and left on disk untouched (see ``restore()``).
    /// - Throws: ``OAuthError`` `.configuration` for an invalid provider or a duplicate id;
    ///   `.storage` when the store cannot list its entries.
    public init(
        providers: [Provider], store: any SecretStore = MemorySecretStore(),
        transport: any HTTPTransport = CurlTransport(), options: Options = Options()
    ) async throws(OAuthError) {
        var byID: [String: Provider] = [:]
        for provider in providers {
            try provider.validate()
            guard byID[provider.id] == nil else {
                throw OAuthError(.configuration, providerID: provider.id, message: "duplicate provider id \"\(provider.id)\"")
            }
            byID[provider.id] = provider
        }
        self.providers = byID
        let logger = Logger(sink: options.log)
        self.clients = byID.mapValues { Self.makeClient(for: $0, transport: transport, options: options, logger: logger) }
        self.tokens = TokenCache(providers: byID.keys, refreshMargin: options.refreshMargin)
        self.store = store
        self.transport = transport
        self.options = options
        self.logger = logger
        if options.restoresAtStart { try await restore() }
        watchInvalidations()
    }

    /// Creates a flow from a JSON provider catalog file (see ``ProviderCatalog``).
    /// - Throws: ``OAuthError`` `.configuration` naming the provider, key and reason.
    public init(
        catalogURL: URL, store: any SecretStore = MemorySecretStore(),
        transport: any HTTPTransport = CurlTransport(), options: Options = Options()
    ) async throws(OAuthError) {
        try await self.init(providers: ProviderCatalog.load(contentsOf: catalogURL), store: store, transport: transport, options: options)
    }

    // MARK: State

    /// A new stream that yields the current state, then every transition in order.
    ///
    /// Any number of subscribers may listen; each gets its own buffer, so a slow one never stalls
    /// the flow. Stop iterating (or cancel the task) to unsubscribe.
    public nonisolated var states: AsyncStream<State> { broadcaster.subscribe() }

    /// The latest state published.
    public nonisolated var state: State { broadcaster.current }

    func publish(_ state: State) {
        if case .error(let provider, let error) = state {
            logger.warning(provider, "\(error.code): \(error.response?.code.rawValue ?? error.message ?? "")")
        }
        broadcaster.publish(state)
    }

    /// Publishes `.error` for a failure and rethrows it.
    func fail(_ provider: String, _ error: OAuthError) -> OAuthError {
        var error = error
        if error.providerID == nil, !provider.isEmpty { error.providerID = provider }
        publish(.error(provider: provider, error))
        return error
    }

    deinit {
        invalidationWatch?.cancel()
        broadcaster.finish()
    }

    // MARK: Deletions by other processes (stores that notify, such as the PostgreSQL fleet store)

    private var invalidationWatch: Task<Void, Never>?

    /// Drops the in-memory tokens of every key the store reports deleted elsewhere, publishing `.empty`.
    private func watchInvalidations() {
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
        publish(.empty)
    }

    /// After missed notifications: every cached key that is gone from the store is forgotten. A
    /// key that cannot be read now is dropped from memory too (the next call reads the store).
    private func recheckCachedEntries() async {
        for key in tokens.all.keys.sorted() {
            do {
                if try await store.load(key) == nil { forgetDeletedElsewhere(key) }
            } catch {
                proactiveTimers.cancel(key)
                tokens[key] = nil
                logger.warning(key, "could not re-check the local copy against the store (\(error.code)); it is dropped from memory")
            }
        }
    }

    // MARK: Providers and stored authorizations

    /// The provider with `id`.
    /// - Throws: ``OAuthError`` `.configuration` when there is none.
    public nonisolated func provider(_ id: String) throws(OAuthError) -> Provider {
        guard let provider = providers[id] else {
            throw OAuthError(.configuration, providerID: id, message: "no provider \"\(id)\" is configured")
        }
        return provider
    }

    /// What is stored for `provider`, without secrets; nil when nothing is.
    public func authorization(for provider: String) -> Authorization? { tokens[provider]?.authorization }

    /// Every stored authorization, by provider id.
    public var authorizations: [String: Authorization] { tokens.all.mapValues(\.authorization) }

    /// `provider`'s endpoint client: the one made in `init` for a configured provider; for another
    /// provider value (``metadata(for:)`` takes any), one made now.
    nonisolated func client(for provider: Provider) -> EndpointClient {
        if let client = clients[provider.id], client.provider == provider { return client }
        return Self.makeClient(for: provider, transport: transport, options: options, logger: logger)
    }

    private static func makeClient(for provider: Provider, transport: any HTTPTransport, options: Options, logger: Logger) -> EndpointClient {
        EndpointClient(provider: provider, transport: transport, userAgent: options.userAgent, log: logger,
                       retry: Retrier(policy: options.retry, clock: options.clock, now: options.now, jitter: options.jitter),
                       authentication: ClientAuthentication(provider))
    }

    /// Reads every stored authorization again and publishes `.authorized` for each provider.
    ///
    /// The initializer calls it unless ``Options/restoresAtStart`` is false; turn that off and call
    /// this after subscribing to ``states`` to see one `.authorized` per restored provider. An entry
    /// that cannot be read is published as `.error` for its provider (and left on disk untouched)
    /// while the others still load. Entries of providers that are not configured are ignored.
    /// - Returns: what was restored, by provider id.
    /// - Throws: ``OAuthError`` `.storage` when the store cannot even list its entries (published as
    ///   `.error` with an empty provider id: the failure is the store's, not one provider's).
    @discardableResult
    public func restore() async throws(OAuthError) -> [String: Authorization] {
        let keys: [String]
        do { keys = try await store.keys() } catch { throw fail("", error) }
        var restored: [String: Authorization] = [:]
        for id in providers.keys.sorted() where !keys.contains(id) { tokens[id] = nil }
        for key in keys where providers[key] != nil {
            let generation = generations[key, default: 0]
            do {
                guard let set = try await loadStored(key) else { continue }
                // A logout that began while the entry was read wins: nothing is cached or published.
                guard generations[key, default: 0] == generation else { continue }
                cache(set)
                restored[key] = set.authorization
                publish(.authorized(provider: key, set.authorization))
            } catch {
                tokens[key] = nil
                publish(.error(provider: key, error))
            }
        }
        return restored
    }

    func loadStored(_ key: String) async throws(OAuthError) -> TokenSet? {
        guard let data = try await store.load(key) else { return nil }
        return try Self.decodeStored(data, key: key)
    }

    /// A stored entry as ``restore()`` caches it.
    static func decodeStored(_ data: Data, key: String) throws(OAuthError) -> TokenSet {
        var set = try StoredEntry.decode(data, key: key)
        // An ID token stored without the validated mark (by a version that kept unvalidated ones)
        // is never used: not exposed, not sent as id_token_hint, gone from the next save.
        if set.validatedIDToken == nil { set.idToken = nil }
        return set
    }

    /// What ``tokenSet(for:)`` would answer from memory right after ``restore()`` read `data`
    /// (the bytes of `key`'s stored entry): the set, when it is fresh at `now` by the same rule
    /// (expiry minus `refreshMargin`, the margin capped at half the lifetime); nil when it needs a
    /// renewal. For `authflow token`, which answers a fresh token without making a flow.
    /// - Throws: ``OAuthError`` `.storage` as ``restore()`` would report for the entry.
    package static func freshStoredSet(
        _ data: Data, key: String, now: Date, refreshMargin: TimeInterval = Options.defaultRefreshMargin
    ) throws(OAuthError) -> TokenSet? {
        let set = try decodeStored(data, key: key)
        return now.timeIntervalSince1970 < TokenCache.renewalTime(of: set, margin: refreshMargin) ? set : nil
    }

    func save(_ set: TokenSet) async throws(OAuthError) {
        try await store.save(StoredEntry.encode(set), for: set.providerID)
        cache(set)
    }

    /// Removes the stored tokens of `provider` and publishes `.empty`.
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
        do {
            try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in
                try await self.finishLogout(id, generation: generation, publishing: true)
            }
        } catch {
            throw fail(id, error)
        }
    }

    /// Revokes `provider`'s tokens at its revocation endpoint, then forgets them and publishes `.empty`.
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
        let provider: Provider
        let url: URL?
        do {
            provider = try self.provider(id)
            url = try await endpointURL(.revocation, of: provider)
        } catch {
            throw fail(id, error)
        }
        let generation = beginLogout(id)
        do {
            return try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) -> RevocationResult in
                try await self.revokeLocked(provider, url: url, generation: generation)
            }
        } catch {
            throw fail(id, error)
        }
    }

    /// Under the store's lock: revokes what is stored, held and superseded, then deletes and publishes `.empty`.
    private func revokeLocked(_ provider: Provider, url: URL?, generation: UInt64) async throws(OAuthError) -> RevocationResult {
        let id = provider.id
        var sets = Array((superseded[id] ?? []).reversed())  // newest first
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

    /// Removes every provider's stored tokens and publishes `.empty`.
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
        do { keys = Set(try await store.keys()) } catch { throw fail("", error) }
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

    // MARK: Logout generations (the logout race)

    /// Bumped for a provider by ``clear(provider:)``, ``clear()`` and ``revoke(provider:)`` before
    /// they wait for the store's lock. A grant, refresh or restore that began under an older
    /// generation is discarded instead of stored or published.
    private var generations: [String: UInt64] = [:]
    /// The generation of the provider's last logout that finished (deleted and forgot); behind
    /// ``generations`` while a logout waits for the lock or after one failed.
    private var settled: [String: UInt64] = [:]
    /// Token sets that a refresh or grant received while a logout was waiting for the lock, and
    /// discarded: ``revoke(provider:)`` revokes them too, then they are dropped (at most four kept).
    private var superseded: [String: [TokenSet]] = [:]

    /// What a call that stores tokens knew when it began; checked before its result is stored.
    struct Ticket: Sendable {
        /// The provider's logout generation then.
        var generation: UInt64
        /// True when the store held an entry for the provider then. If it is gone when the result
        /// arrives, another process logged out meanwhile (deletes take the lock; a login's commit
        /// too), and the login does not undo that logout. Renewals, which re-read under the lock
        /// from the start, do not need it.
        var storedAtStart: Bool
    }

    /// The ticket of a grant beginning now: the generation, and whether the store holds an entry.
    func grantTicket(_ id: String) async -> Ticket {
        let generation = generations[id, default: 0]
        return Ticket(generation: generation, storedAtStart: await entryExists(id))
    }

    /// True when the store has an entry for `id`. One that exists but cannot be read (corrupt, or
    /// sealed with another key) counts as existing: a login may replace it, as it always could.
    private func entryExists(_ id: String) async -> Bool {
        do { return try await store.load(id) != nil } catch { return true }
    }

    /// Starts a logout of `id`: bumps its generation, drops its pending authorization requests,
    /// cancels its renewal and background timer. Everything that began before is now stale.
    private func beginLogout(_ id: String) -> UInt64 {
        let generation = generations[id, default: 0] &+ 1
        generations[id] = generation
        pending.removeAll { $0.providerID == id }
        refreshes[id]?.task.cancel()
        proactiveTimers.cancel(id)
        return generation
    }

    /// Under the store's lock: deletes the entry, forgets the memory copy, and publishes `.empty`.
    private func finishLogout(_ id: String, generation: UInt64, publishing: Bool) async throws(OAuthError) {
        try await store.delete(id)
        forgetLocally(id, generation: generation)
        if publishing { publish(.empty) }
    }

    private func forgetLocally(_ id: String, generation: UInt64) {
        tokens[id] = nil
        superseded[id] = nil
        settled[id] = max(settled[id, default: 0], generation)
    }

    func isCurrent(_ ticket: Ticket, _ id: String) -> Bool { generations[id, default: 0] == ticket.generation }

    /// Stores `set` and publishes `.authorized`, under the store's lock on its provider (taken here
    /// unless `locked`), unless the result is stale: a logout began after the call did (checked
    /// before and after the save; a save it overtook is deleted again), or the entry that existed
    /// when the call began was deleted by another process since. A stale result throws
    /// `.reauthorizationRequired` and nothing of it stays stored.
    func commit(_ set: TokenSet, ticket: Ticket, locked: Bool, what: String) async throws(OAuthError) {
        guard locked else {
            return try await store.withExclusiveAccess(to: set.providerID) { () async throws(OAuthError) in
                try await self.commit(set, ticket: ticket, locked: true, what: what)
            }
        }
        let id = set.providerID
        guard isCurrent(ticket, id) else { throw discard(set, what) }
        if ticket.storedAtStart {
            let exists = await entryExists(id)
            guard isCurrent(ticket, id) else { throw discard(set, what) }
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
        guard isCurrent(ticket, id) else {
            // A logout began during the save and waits for this lock; undo the save before it runs.
            try await store.delete(id)
            throw discard(set, what)
        }
        cache(set)
        publish(.authorized(provider: id, set.authorization))
    }

    /// The error of a result a logout made stale; keeps the set for a waiting ``revoke(provider:)``.
    private func discard(_ set: TokenSet, _ what: String) -> OAuthError {
        let id = set.providerID
        if settled[id, default: 0] < generations[id, default: 0] {
            superseded[id, default: []].append(set)
            if superseded[id, default: []].count > 4 { superseded[id]?.removeFirst() }
        }
        return OAuthError(.reauthorizationRequired, providerID: id, message: """
            "\(id)" was logged out (clear or revoke) while this \(what) was in flight; \
            its tokens were discarded, not stored; authorize again to log in
            """)
    }

    /// Publishes `.error` for a call that began under `ticket`. When a logout finished since and
    /// nothing is held now, `.empty` follows, so the logout's state stays the last one published.
    func fail(_ id: String, _ error: OAuthError, since ticket: Ticket) -> OAuthError {
        let failed = fail(id, error)
        let current = generations[id, default: 0]
        if current != ticket.generation, settled[id, default: 0] == current, tokens[id] == nil { publish(.empty) }
        return failed
    }

    // MARK: Authorization code + PKCE

    /// Starts the authorization code grant with PKCE S256, `state`, and a `nonce` for `openid`.
    ///
    /// Send the user to the returned request's `url`, then call ``completeAuthorization(callbackURL:)``
    /// with the redirect. Publishes `.authorizing`. See [RFC 6749 §4.1.1](https://www.rfc-editor.org/rfc/rfc6749#section-4.1.1)
    /// and [RFC 7636 §4.3](https://www.rfc-editor.org/rfc/rfc7636#section-4.3).
    /// - Parameters:
    ///   - scopes: defaults to the provider's scopes.
    ///   - parameters: extra query parameters (such as `login_hint`), over the provider's own.
    ///   - usePKCE: keep `true`; only a confidential client may turn it off.
    /// - Throws: ``OAuthError`` `.configuration` without an authorization URL or redirect URI.
    public func authorizationRequest(
        provider id: String, scopes: [String]? = nil, parameters: [String: String] = [:], usePKCE: Bool = true
    ) async throws(OAuthError) -> AuthorizationRequest {
        let now = options.now()
        let provider: Provider
        let request: AuthorizationRequest
        do {
            provider = try self.provider(id)
            request = try AuthorizationCodeGrant.makeRequest(
                provider: provider, authorizationURL: try await requiredEndpoint(.authorization, of: provider),
                scopes: scopes ?? provider.scopes, parameters: parameters, usePKCE: usePKCE, now: now,
                lifetime: options.pendingAuthorizationLifetime)
        } catch {
            throw fail(id, error)
        }
        pending.removeAll { $0.expiresAt <= now }
        if pending.count >= options.maximumPendingAuthorizations { pending.removeFirst(pending.count - options.maximumPendingAuthorizations + 1) }
        pending.append(request)
        logger.debug(provider, "authorization request built; scopes=\(request.scopes.joined(separator: " ")) pkce=\(usePKCE)")
        publish(.authorizing(provider: id, grant: .authorizationCode))
        return request
    }

    /// Completes a browser login from the redirect URL the user came back with.
    ///
    /// Checks `state` against the pending requests (exact, constant time, single use, unexpired),
    /// `iss` against the provider's issuer (RFC 9207), then exchanges the code with the PKCE verifier,
    /// stores the tokens and publishes `.requestingAccessToken` then `.authorized`.
    /// See [RFC 6749 §4.1.2–4.1.4](https://www.rfc-editor.org/rfc/rfc6749#section-4.1.2).
    /// - Throws: ``OAuthError`` `.stateMismatch`, `.invalidCallback`, `.accessDenied` (the user said no),
    ///   `.serverRejected` (RFC 6749 §5.2, such as `invalid_grant` for an expired code), `.transport`, `.storage`;
    ///   `.reauthorizationRequired` when the provider was logged out while the exchange was in flight
    ///   (the tokens are discarded; see ``clear(provider:)``).
    @discardableResult
    public func completeAuthorization(callbackURL: URL) async throws(OAuthError) -> Authorization {
        // Until the state names a request, failures go to the login most likely waiting for this callback.
        let waiting = pending.last?.providerID ?? state.providerID ?? ""
        let response: AuthorizationResponse
        do { response = try AuthorizationResponse(callbackURL: callbackURL) } catch { throw fail(waiting, error) }
        guard let state = response.state else {
            throw fail(waiting, OAuthError(.stateMismatch, endpoint: .authorization, message: "the callback carries no state"))
        }
        let now = options.now()
        // Single use: the matching request leaves the pending list whatever happens next.
        guard let index = pending.firstIndex(where: { $0.state.constantTimeEquals(state) }) else {
            throw fail(waiting, OAuthError(
                .stateMismatch, endpoint: .authorization,
                message: "the callback's state matches no pending authorization request (reused, expired, or forged)"))
        }
        let request = pending.remove(at: index)
        guard request.expiresAt > now else {
            throw fail(request.providerID, OAuthError(.stateMismatch, endpoint: .authorization, message: "the authorization request expired"))
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
        let response: AuthorizationResponse
        do { response = try AuthorizationResponse(callbackURL: callbackURL) } catch { throw fail(request.providerID, error) }
        guard let state = response.state, state.constantTimeEquals(request.state) else {
            throw fail(request.providerID, OAuthError(.stateMismatch, endpoint: .authorization,
                                                      message: "the callback's state does not match the request"))
        }
        pending.removeAll { $0.state.constantTimeEquals(request.state) }
        guard request.expiresAt > options.now() else {
            throw fail(request.providerID, OAuthError(.stateMismatch, endpoint: .authorization, message: "the authorization request expired"))
        }
        return try await complete(response, request: request)
    }

    private func complete(_ response: AuthorizationResponse, request: AuthorizationRequest) async throws(OAuthError) -> Authorization {
        try await run(request.providerID) { provider throws(OAuthError) in
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
            let maxAge = (URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "max_age" }?.value).flatMap { Int($0) }.map { TimeInterval(max($0, 0)) }
            return AuthorizationCodeGrant.exchange(code: code, request: request, maxAge: maxAge,
                                                   requestedAt: request.expiresAt.addingTimeInterval(-options.pendingAuthorizationLifetime))
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
        do {
            let code = try await DeviceAuthorizationGrant.requestCode(
                scopes: scopes ?? provider.scopes, client: client(for: provider),
                url: try await requiredEndpoint(.deviceAuthorization, of: provider), now: options.now())
            publish(.receivedDeviceCode(provider: id, code))
            return code
        } catch {
            throw fail(id, error)
        }
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

    // MARK: Client credentials

    /// Gets a token for the client itself with its secret (RFC 6749 §4.4).
    ///
    /// Publishes `.requestingAccessToken` then `.authorized`. ``accessToken(for:)`` runs it again by
    /// itself when the token expires. See [RFC 6749 §4.4](https://www.rfc-editor.org/rfc/rfc6749#section-4.4).
    /// - Throws: ``OAuthError`` `.configuration` without a secret; `.serverRejected` (`invalid_client` for bad credentials); `.transport`;
    ///   `.reauthorizationRequired` when the provider was logged out while the request was in flight (see ``clear(provider:)``).
    @discardableResult
    public func clientCredentials(provider id: String, scopes: [String]? = nil) async throws(OAuthError) -> Authorization {
        try await run(id) { provider throws(OAuthError) in try ClientCredentialsGrant.request(provider, scopes: scopes ?? provider.scopes) }
            .authorization
    }

    // MARK: Tokens and refresh

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
        options.readsSystemClock ? SystemClock.coarseSeconds() : options.now().timeIntervalSince1970
    }

    nonisolated func isFresh(_ set: TokenSet) -> Bool {
        options.now().timeIntervalSince1970 < TokenCache.renewalTime(of: set, margin: options.refreshMargin)
    }

    /// One renewal per provider at a time; everyone waiting gets its result.
    ///
    /// A renewal that began before a logout is not joined: its result is discarded (see ``clear(provider:)``).
    @usableFromInline
    func renewShared(_ provider: String, force: Bool) async throws(OAuthError) -> TokenSet {
        let ticket = Ticket(generation: generations[provider, default: 0], storedAtStart: false)
        if let running = refreshes[provider], running.generation == ticket.generation { return try await running.task.value.get() }
        let previous = tokens[provider]
        let task = Task { await self.renewLocked(provider, force: force, previous: previous, ticket: ticket) }
        refreshes[provider] = (ticket.generation, task)
        let result = await task.value
        if refreshes[provider]?.task == task { refreshes[provider] = nil }
        return try result.get()
    }

    private func renewLocked(_ id: String, force: Bool, previous: TokenSet?, ticket: Ticket) async -> Result<TokenSet, OAuthError> {
        let provider: Provider
        do { provider = try self.provider(id) } catch { return .failure(fail(id, error)) }
        do {
            // `renew` publishes its own failures and hands them back as a value, so what the store
            // throws is only the store's: the lock not had in time, a cancelled wait, a failed commit.
            return try await store.withExclusiveAccess(to: id) { () async -> Result<TokenSet, OAuthError> in
                do throws(OAuthError) {
                    return .success(try await self.renew(provider, force: force, previous: previous, ticket: ticket))
                } catch {
                    return .failure(error)
                }
            }
        } catch {
            return .failure(fail(id, error, since: ticket))
        }
    }

    /// Runs under the store's lock: re-read (another process may have renewed), then refresh or re-fetch.
    ///
    /// Every outcome is checked against `ticket`: after a logout that began since, nothing is sent,
    /// cached, marked or stored.
    private func renew(_ provider: Provider, force: Bool, previous: TokenSet?, ticket: Ticket) async throws(OAuthError) -> TokenSet {
        let stale = { [id = provider.id] () -> OAuthError in
            OAuthError(.reauthorizationRequired, providerID: id,
                       message: "\"\(id)\" was logged out (clear or revoke) before this refresh could run; authorize again to log in")
        }
        guard isCurrent(ticket, provider.id) else { throw fail(provider.id, stale(), since: ticket) }
        let stored: TokenSet?
        do { stored = try await loadStored(provider.id) } catch { throw fail(provider.id, error, since: ticket) }
        guard isCurrent(ticket, provider.id) else { throw fail(provider.id, stale(), since: ticket) }
        if let stored, !force || renewedElsewhere(stored, since: previous), isFresh(stored), !stored.needsReauthorization {
            cache(stored)
            logger.info(provider.id, "using the token another process stored")
            return stored
        }
        // The store is the truth: an entry another process deleted (a logout) is not revived from memory.
        guard let current = stored else {
            tokens[provider.id] = nil
            let serviceOnly: Bool
            do { serviceOnly = try await isServiceOnly(provider) } catch { throw fail(provider.id, error, since: ticket) }
            if serviceOnly {
                // A service-only provider: client credentials need no user, so fetch on demand.
                let scopes = previous?.scopes ?? provider.scopes
                return try await run(provider, ticket: ticket, locked: true) { provider throws(OAuthError) in
                    try ClientCredentialsGrant.request(provider, scopes: scopes)
                }
            }
            throw fail(provider.id, OAuthError(.reauthorizationRequired, message: "nothing is stored for \"\(provider.id)\"; authorize first"))
        }
        if current.grant == .clientCredentials {
            return try await run(provider, ticket: ticket, locked: true) { provider throws(OAuthError) in
                try ClientCredentialsGrant.request(provider, scopes: current.scopes)
            }
        }
        guard !current.needsReauthorization else {
            throw fail(provider.id, OAuthError(.reauthorizationRequired, message: "the refresh token was rejected earlier; authorize again"))
        }
        guard let refreshToken = current.refreshToken else {
            throw fail(provider.id, OAuthError(.reauthorizationRequired, message: "the token expired and no refresh token is held"))
        }
        return try await run(provider, ticket: ticket, locked: true) { _ in RefreshTokenGrant.request(refreshToken: refreshToken, renewing: current) }
    }

    /// True when the stored set is not the one this flow last saw: another process renewed it.
    private func renewedElsewhere(_ stored: TokenSet, since previous: TokenSet?) -> Bool {
        guard let previous else { return true }
        return !stored.accessToken.constantTimeEquals(previous.accessToken)
    }
}
