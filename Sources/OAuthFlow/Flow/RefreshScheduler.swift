#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// Keeps every provider of a flow fresh ahead of expiry and tells you about each new token:
/// what a long-running service (or `authflow agent`) runs beside its flow.
///
/// The renewal itself is the flow's own background renewal (``AuthFlow/Options/proactiveRefresh``,
/// which the flow must have on): one timer per provider, due shortly before the token would be
/// refreshed on demand, sharing the single-flight refresh. The scheduler adds what a service needs
/// around it:
///
/// - ``start()`` asks every provider for a token once, so unattended grants (client credentials,
///   the JWT-bearer grant) and expired refreshable tokens are renewed before anyone asks;
/// - every new token set (restored, refreshed, fetched, logged in) is handed to the event handler
///   in order, as ``Event/authorized(_:)``, for a ``TokenSink`` or a cache of your own;
/// - a failed renewal that may pass (network, 5xx, a lock), or that a fixed configuration can
///   end (a refused service-account key, client secret or subject token: recovery
///   ``OAuthError/Recovery/fixConfiguration``), is reported as ``Event/failed(provider:_:)`` and
///   tried again after ``retryDelay``, doubling up to ``maximumRetryDelay``, instead of waiting
///   for a caller;
/// - a failure only a person can fix (recovery ``OAuthError/Recovery/reauthorize``: a refused
///   refresh token, nothing stored for a person's grant) is reported once as
///   ``Event/needsAuthorization(provider:_:)`` and not retried;
/// - ``statuses`` counts refreshes and failures per provider, for metrics.
///
/// ```swift
/// let flow = try await AuthFlow(providers: providers, store: store, options: .init(proactiveRefresh: true))
/// let sink = try TokenSink(providerID: "billing-api", path: "/run/billing/token")
/// let scheduler = try RefreshScheduler(flow: flow) { event in
///     if case .authorized(let set) = event, set.providerID == sink.providerID { try? sink.write(set) }
/// }
/// await scheduler.start()
/// ```
///
/// A rotated refresh token is stored before the flow caches or publishes the new access token, so
/// nothing the handler or a caller sees is ahead of the store. Call ``stop()`` when done; the
/// scheduler holds its flow until then.
public final class RefreshScheduler: Sendable {
    /// What happened to a provider's tokens.
    public enum Event: Sendable {
        /// A new token set is in the flow: restored at start, refreshed, fetched again, or logged in.
        case authorized(TokenSet)
        /// A renewal failed in a way that may pass, or that fixing the configuration or a refused
        /// credential ends (a service account's key: no person logs in for it); it is tried again
        /// after a delay.
        case failed(provider: String, OAuthError)
        /// Only a person can help (the error's recovery is ``OAuthError/Recovery/reauthorize``): the
        /// refresh token was refused, or nothing is stored for a grant that needs a user. Reported
        /// once until the provider is authorized again.
        case needsAuthorization(provider: String, OAuthError)
    }

    /// One provider's counters, for metrics and status pages; no token.
    public struct Status: Sendable, Equatable {
        /// When the current access token expires; nil without one or for a token without expiry.
        public var expiresAt: Date?
        /// Token requests that succeeded (refreshes and client-credentials or JWT-bearer fetches).
        public var refreshes: Int = 0
        /// Failures by error: the server's RFC 6749 §5.2 code (`invalid_grant`) or the library's
        /// ``OAuthError/Code`` name (`transport`). At most 16 distinct names; more count as `other`.
        public var failures: [String: Int] = [:]
        /// How long the last successful token request took, in seconds.
        public var lastRefreshDuration: TimeInterval?
        /// True while only a person can make the provider usable again.
        public var needsAuthorization = false
        /// True while a token request is in flight.
        public var refreshing = false
        /// When the last token request began, while one is in flight.
        var requestStarted: Date?

        /// No token, no request, no failure yet.
        public init() {}
    }

    /// The flow whose providers are kept fresh.
    public let flow: AuthFlow
    /// The first delay before a failed renewal is tried again.
    public let retryDelay: Duration
    /// The longest delay between two tries.
    public let maximumRetryDelay: Duration

    private enum Input: Sendable {
        case state(AuthFlow.State)
        case deliver(TokenSet)
    }

    private struct Inner {
        var statuses: [String: Status] = [:]
        var delivered: [String: (issuedAt: Date, token: Secret)] = [:]
        var retries: [String: Task<Void, Never>] = [:]
        var backoff: [String: Duration] = [:]
        var tasks: [Task<Void, Never>] = []
        var stopped = false
    }

    private let inner = Mutex(Inner())
    private let handler: @Sendable (Event) async -> Void
    private let inputs: AsyncStream<Input>
    private let continuation: AsyncStream<Input>.Continuation

    /// A scheduler for `flow`'s providers; nothing runs until ``start()``.
    ///
    /// - Parameters:
    ///   - flow: a flow made with ``AuthFlow/Options/proactiveRefresh`` on.
    ///   - retryDelay: the first wait before a failed renewal is tried again (default 30 s),
    ///     doubled after each failure up to `maximumRetryDelay` (default 10 minutes); slept on
    ///     the flow's ``AuthFlow/Options/clock``.
    ///   - onEvent: called for every event, one at a time, in order.
    /// - Throws: ``OAuthError`` `.configuration` when the flow's proactive refresh is off.
    public init(
        flow: AuthFlow, retryDelay: Duration = .seconds(30), maximumRetryDelay: Duration = .seconds(600),
        onEvent: @escaping @Sendable (Event) async -> Void
    ) throws(OAuthError) {
        guard flow.options.proactiveRefresh else {
            throw OAuthError(.configuration, message: "RefreshScheduler needs a flow made with Options(proactiveRefresh: true)")
        }
        self.flow = flow
        self.retryDelay = retryDelay
        self.maximumRetryDelay = max(maximumRetryDelay, retryDelay)
        self.handler = onEvent
        (inputs, continuation) = AsyncStream.makeStream(of: Input.self)
        inner.withLock { inner in
            for id in flow.providers.keys { inner.statuses[id] = Status() }
        }
    }

    /// Follows the flow's states and asks every provider for a token once; returns when each has
    /// been tried (its result is an event).
    ///
    /// Call it once. A provider whose stored token is fresh is not sent anything; its token set
    /// is delivered as ``Event/authorized(_:)`` all the same, so a sink is written at start.
    /// Make the flow with ``AuthFlow/Options/restoresAtStart`` off to have it restored here, after
    /// the scheduler subscribed: a stored token that is due at once is then renewed while the
    /// scheduler listens, and its outcome is not missed.
    public func start() async {
        let states = flow.states   // subscribed before anything is asked, so no transition is missed
        let forwarder = Task { [continuation] in
            for await state in states { continuation.yield(.state(state)) }
        }
        let consumer = Task { [inputs, weak self] in
            for await input in inputs {
                guard let self else { return }
                await self.handle(input)
            }
        }
        let stopped = inner.withLock { inner -> Bool in
            inner.tasks += [forwarder, consumer]
            return inner.stopped
        }
        guard !stopped else { return stop() }
        let flow = flow
        let continuation = continuation
        // A flow made with restoresAtStart off restores now, while this scheduler listens: every
        // restored set and every failure (and the first background renewal it schedules) is seen.
        if !flow.options.restoresAtStart { _ = try? await flow.restore() }
        await withTaskGroup(of: Void.self) { group in
            for id in flow.providers.keys.sorted() {
                group.addTask {
                    // A failure is published by the flow as .error and handled from the stream.
                    if let set = try? await flow.tokenSet(for: id) { continuation.yield(.deliver(set)) }
                }
            }
        }
    }

    /// Stops following the flow and cancels pending retries; the flow's own timers stay as they are.
    public func stop() {
        let tasks = inner.withLock { inner -> [Task<Void, Never>] in
            inner.stopped = true
            defer { inner.tasks = []; inner.retries = [:] }
            return inner.tasks + Array(inner.retries.values)
        }
        for task in tasks { task.cancel() }
        continuation.finish()
    }

    /// Hands over `set`, which the flow took from the store without a transition (another
    /// process's login or refresh picked up by ``AuthFlow/tokenSet(for:)``), as
    /// ``Event/authorized(_:)``, in order with the other events; a usable set clears the
    /// provider's need for a person.
    public func adopt(_ set: TokenSet) {
        continuation.yield(.deliver(set))
    }

    /// Every provider's counters, by provider id.
    public var statuses: [String: Status] { inner.withLock { $0.statuses } }

    /// Waits until no token request is in flight, or `timeout` has passed on the continuous clock.
    /// - Returns: true when none is in flight.
    public func waitUntilIdle(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while inner.withLock({ $0.statuses.values.contains { $0.refreshing } }) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    // MARK: Handling

    private func handle(_ input: Input) async {
        switch input {
        case .deliver(let set):
            await deliver(set)
        case .state(.requestingAccessToken(let id)):
            let now = flow.options.now()
            update(id) { status in
                status.refreshing = true
                status.requestStarted = now
            }
        case .state(.authorized(let id, let authorization)):
            let now = flow.options.now()
            update(id) { status in
                if let started = status.requestStarted {
                    status.refreshes += 1
                    status.lastRefreshDuration = max(now.timeIntervalSince(started), 0)
                }
                status.requestStarted = nil
                status.refreshing = false
                status.expiresAt = authorization.expiresAt
                // A set marked for reauthorization (restored so) raises the need through the failure
                // that follows when it is used, which reports it once; a usable one ends the need.
                if !authorization.needsReauthorization { status.needsAuthorization = false }
            }
            let retry = inner.withLock { inner -> Task<Void, Never>? in
                inner.backoff[id] = nil
                return inner.retries.removeValue(forKey: id)
            }
            retry?.cancel()
            if let set = flow.tokens[id] { await deliver(set) }
        case .state(.error(let id?, let error)):
            await failed(id, error)
        case .state(.empty(let id)):
            let ids = id.map { [$0] } ?? Array(flow.providers.keys)
            for id in ids {
                update(id) { $0.expiresAt = nil }
                inner.withLock { _ = $0.delivered.removeValue(forKey: id) }
            }
        case .state:
            break
        }
    }

    /// Hands `set` to the handler unless a set issued as late or later was already handed over.
    private func deliver(_ set: TokenSet) async {
        let id = set.providerID
        let isNew = inner.withLock { inner -> Bool in
            if let last = inner.delivered[id], last.issuedAt > set.issuedAt || last.token.constantTimeEquals(set.accessToken) {
                return false
            }
            inner.delivered[id] = (set.issuedAt, set.accessToken)
            inner.statuses[id]?.expiresAt = set.expiresAt
            if !set.needsReauthorization { inner.statuses[id]?.needsAuthorization = false }
            return true
        }
        if isNew { await handler(.authorized(set)) }
    }

    private func failed(_ id: String, _ error: OAuthError) async {
        guard flow.providers[id] != nil else { return }
        let name = error.response?.code.rawValue ?? error.code.description
        var firstNeed = false
        update(id) { status in
            status.requestStarted = nil
            status.refreshing = false
            let key = status.failures[name] != nil || status.failures.count < 16 ? name : "other"
            status.failures[key, default: 0] += 1
            if error.recovery == .reauthorize {
                firstNeed = !status.needsAuthorization
                status.needsAuthorization = true
            }
        }
        switch error.recovery {
        case .reauthorize:
            if firstNeed { await handler(.needsAuthorization(provider: id, error)) }
        case .none:
            await handler(.failed(provider: id, error))
        case .retryLater, .fixConfiguration:
            await handler(.failed(provider: id, error))
            scheduleRetry(id)
        }
    }

    private func scheduleRetry(_ id: String) {
        let clock = flow.options.clock
        let flow = flow
        inner.withLock { inner in
            guard !inner.stopped else { return }
            let delay = inner.backoff[id] ?? retryDelay
            inner.backoff[id] = min(delay * 2, maximumRetryDelay)
            inner.retries[id]?.cancel()
            inner.retries[id] = Task {
                do { try await clock.sleep(for: delay) } catch { return }
                // Forced while the token is still fresh (a background renewal failed); otherwise on demand.
                if let set = flow.tokens[id], flow.isFresh(set) {
                    _ = try? await flow.refresh(provider: id)
                } else {
                    _ = try? await flow.tokenSet(for: id)
                }
            }
        }
    }

    private func update(_ id: String, _ body: (inout Status) -> Void) {
        inner.withLock { inner in
            guard inner.statuses[id] != nil else { return }
            body(&inner.statuses[id]!)
        }
    }

    deinit { continuation.finish() }
}

extension RefreshScheduler: CustomStringConvertible {
    /// `RefreshScheduler(providers: a, b)`: no token.
    public var description: String { "RefreshScheduler(providers: \(flow.providers.keys.sorted().joined(separator: ", ")))" }
}
