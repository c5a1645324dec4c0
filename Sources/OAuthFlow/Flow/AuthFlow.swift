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

    /// Discovered metadata by issuer, and JWKS by URL (OIDC/Discovery.swift, OIDC/JWKSCache.swift).
    let discoveryCache = DocumentCache<ProviderMetadata>()
    let jwksCache = DocumentCache<JWKSet>()

    /// Written only by the actor; read without a hop by the fresh-token fast path.
    nonisolated let tokens: TokenCache
    /// Each provider's endpoint client, made once with its client authentication (providers never
    /// change after `init`); see ``client(for:)``.
    nonisolated let clients: [String: EndpointClient]
    /// The same clients in a list, each holding its provider: with a few providers, a fetch finds
    /// its provider and client by comparing ids rather than hashing one (as ``TokenCache`` does).
    nonisolated let clientList: [EndpointClient]
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
        self.providers = byID
        let logger = Logger(sink: options.log)
        self.clients = byID.mapValues { Self.makeClient(for: $0, transport: transport, options: options, logger: logger) }
        self.clientList = Array(clients.values)
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

    /// Publishes `.error` for a failure and rethrows it; `provider` nil for a failure that is no one
    /// provider's (the store's listing, an unmatched callback).
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
        guard let provider = configuredClient(id)?.provider else {
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
        if let client = configuredClient(provider.id), client.provider == provider { return client }
        return Self.makeClient(for: provider, transport: transport, options: options, logger: logger)
    }

    /// The endpoint client of the configured provider `id` (`clients[id]`), found by comparing
    /// ids when there are few providers.
    nonisolated func configuredClient(_ id: String) -> EndpointClient? {
        guard clientList.count <= Self.scanLimit else { return clients[id] }
        for client in clientList where client.provider.id == id { return client }
        return nil
    }

    private static func makeClient(for provider: Provider, transport: any HTTPTransport, options: Options, logger: Logger) -> EndpointClient {
        EndpointClient(provider: provider, transport: provider.transport(sharing: transport), userAgent: options.userAgent, log: logger,
                       retry: Retrier(policy: options.retry, clock: options.clock, now: options.now, jitter: options.jitter),
                       authentication: ClientAuthentication(provider))
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
            // Flow/AuthFlow+AuthorizationRequest.swift: plain, signed (RFC 9101) or pushed (RFC 9126).
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
            try await DeviceAuthorizationGrant.requestCode(
                scopes: scopes ?? provider.scopes, client: client(for: provider),
                url: try await requiredEndpoint(.deviceAuthorization, of: provider), now: options.now())
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
}
