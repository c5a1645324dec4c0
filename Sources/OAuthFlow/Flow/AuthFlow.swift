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
/// ``authorizationRequest(provider:scopes:parameters:usePKCE:resources:)`` + ``completeAuthorization(callbackURL:)``,
/// ``clientCredentials(provider:scopes:resources:)``) and call ``accessToken(for:)`` whenever you need a token:
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
        /// Refresh this long before expiry (capped at a third of the token's lifetime).
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

    /// What providers publish (metadata, signing keys), fetched when needed and cached for all of
    /// them (OIDC/Discovery.swift, OIDC/JWKSCache.swift).
    nonisolated let discovery: Discovery

    /// Written only by the actor; read without a hop by the fresh-token fast path.
    nonisolated let tokens: TokenCache
    /// Each provider's token endpoint, holding the provider's endpoint client (with its client
    /// authentication), made once (providers never change after `init`); see ``tokenEndpoint(for:)``.
    nonisolated let endpoints: [String: TokenEndpoint]
    /// The same endpoints in a list: with a few providers, a fetch finds its provider and endpoint
    /// by comparing ids rather than hashing one (as ``TokenCache`` does).
    nonisolated let endpointList: [TokenEndpoint]
    private static let scanLimit = 8
    /// The background renewals of ``Options/proactiveRefresh``; cancelled when the flow goes away.
    nonisolated let proactiveTimers = ProactiveTimers()
    /// The renewal running for each provider, and the logout generation it began under (Flow/Renewal.swift).
    var refreshes: [String: (generation: UInt64, task: Task<Result<TokenSet, OAuthError>, Never>)] = [:]
    /// The authorization requests waiting for their callback, oldest first.
    var pending: [AuthorizationRequest] = []
    /// Logout generations, tickets and superseded sets (Flow/LogoutLedger.swift, Flow/Logout.swift).
    var ledger = LogoutLedger()
    /// Follows the deletions the store reports from other processes (Flow/Logout.swift).
    var invalidationWatch: Task<Void, Never>?

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
        let logger = Logger(sink: options.log)
        // A dynamically registered provider gets its stored registration (Flow/AuthFlow+Registration.swift).
        byID = await Self.applyingRegistrations(byID, store: store, logger: logger)
        self.providers = byID
        let tokens = TokenCache(providers: byID.keys, refreshMargin: options.refreshMargin)
        let discovery = Discovery(now: options.now)
        self.endpoints = byID.mapValues { provider in
            TokenEndpoint(client: Self.makeClient(for: provider, transport: transport, options: options, logger: logger),
                          discovery: discovery, tokens: tokens, options: options)
        }
        self.endpointList = Array(endpoints.values)
        self.tokens = tokens
        self.discovery = discovery
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

    // `publish`, `fail` (and the runner's `fail(_:_:since:)` and `commit`) stay out of line: inlined
    // into an async function, the state and the error they build are given room in its frame,
    // which is allocated per task for the whole call (a token request's network wait included),
    // not only while they run.
    @inline(never)
    func publish(_ state: State) {
        if case .error(let provider, let error) = state {
            logger.warning(provider, "\(error.code): \(error.response?.code.rawValue ?? error.message ?? "")")
        }
        broadcaster.publish(state)
    }

    /// Publishes `.error` for a failure and rethrows it; `provider` nil for a failure that is no one
    /// provider's (the store's listing, an unmatched callback).
    @inline(never)
    func fail(_ provider: String?, _ error: OAuthError) -> OAuthError {
        var error = error
        if error.providerID == nil, let provider { error.providerID = provider }
        publish(.error(provider: provider, error))
        return error
    }

    /// Runs `body`; its failure is published as `.error` for `provider` and rethrown.
    func reporting<Value>(_ provider: String?, _ body: () async throws(OAuthError) -> Value) async throws(OAuthError) -> Value {
        do { return try await body() } catch { throw fail(provider, error) }
    }

    deinit {
        invalidationWatch?.cancel()
        broadcaster.finish()
    }

    // MARK: Providers and stored authorizations

    /// The provider with `id`.
    /// - Throws: ``OAuthError`` `.configuration` when there is none.
    public nonisolated func provider(_ id: String) throws(OAuthError) -> Provider {
        guard let provider = configuredEndpoint(id)?.provider else {
            throw OAuthError(.configuration, providerID: id, message: "no provider \"\(id)\" is configured")
        }
        return provider
    }

    /// What is stored for `provider`, without secrets; nil when nothing is.
    public func authorization(for provider: String) -> Authorization? { tokens[provider]?.authorization }

    /// Every stored authorization, by provider id.
    public var authorizations: [String: Authorization] { tokens.all.mapValues(\.authorization) }

    /// `provider`'s token endpoint: the one made in `init` for a configured provider; for another
    /// provider value (``metadata(for:)`` takes any), one made now.
    nonisolated func tokenEndpoint(for provider: Provider) -> TokenEndpoint {
        if let endpoint = configuredEndpoint(provider.id), endpoint.provider == provider { return endpoint }
        return TokenEndpoint(client: Self.makeClient(for: provider, transport: transport, options: options, logger: logger),
                             discovery: discovery, tokens: tokens, options: options)
    }

    /// `provider`'s endpoint client (its token endpoint's), for the other endpoints.
    nonisolated func client(for provider: Provider) -> EndpointClient {
        tokenEndpoint(for: provider).client
    }

    /// The token endpoint of the configured provider `id` (`endpoints[id]`), found by comparing
    /// ids when there are few providers.
    nonisolated func configuredEndpoint(_ id: String) -> TokenEndpoint? {
        guard endpointList.count <= Self.scanLimit else { return endpoints[id] }
        for endpoint in endpointList where endpoint.provider.id == id { return endpoint }
        return nil
    }

    private static func makeClient(for provider: Provider, transport: any HTTPTransport, options: Options, logger: Logger) -> EndpointClient {
        EndpointClient(provider: provider, transport: provider.transport(sharing: transport), userAgent: options.userAgent, log: logger,
                       retry: Retrier(policy: options.retry, clock: options.clock, now: options.now, jitter: options.jitter),
                       authenticator: ClientAuthenticator(provider))
    }
}
