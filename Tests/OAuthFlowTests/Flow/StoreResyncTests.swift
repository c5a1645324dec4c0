import Foundation
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

/// What the flow does with a shared store's `.resync` (``SecretStore/invalidations()``): it
/// re-reads every cached key, forgets the keys the store no longer holds, and keeps the copies of
/// keys the store cannot answer for. The notices come from the test, in order (the flow handles
/// them one after the other), so every interleaving is fixed: no sleeps, no database.
@Suite("Store resync", .timeLimit(.minutes(1)))
struct StoreResyncTests {
    let mock = MockProvider()
    let clock = TestClock()

    /// A flow on `store` holding at-app for "app" and at-marker for "marker", both fresh for an hour.
    func authorized(_ store: ResyncStore, log: LogCollector? = nil) async throws -> AuthFlow {
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "app", clientID: "cli-1"), mock.provider(id: "marker", clientID: "cli-2")],
            store: store, transport: mock.transport(), options: options(clock, log: log))
        try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-app", refresh: "rt-app")
        try await authorizeByDevice(flow, mock: mock, provider: "marker", access: "at-marker", refresh: "rt-marker")
        mock.clearRequests()
        store.clearLoads()
        return flow
    }

    /// Sends `.resync`, then `.deleted("marker")`, and returns once the flow has handled the second
    /// (it publishes `.empty` for "marker"): the resync before it is over by then.
    func resyncAndWait(_ flow: AuthFlow, _ store: ResyncStore) async throws {
        let recorder = recordStates(flow, count: 1, until: { $0 == .empty(provider: "marker") })
        store.notify(.resync)
        store.notify(.deleted("marker"))
        let seen = try #require(await raceCollected(recorder).first)
        try #require(seen.last == .empty(provider: "marker"), "the flow never handled the notices: \(seen)")
    }

    @Test("a resync while the store cannot be read keeps the cached copy: the fresh token is still served from memory, and nothing is published for it")
    func unreadableKeyIsKept() async throws {
        let store = ResyncStore()
        let log = LogCollector()
        let flow = try await authorized(store, log: log)
        let before = try #require(await flow.authorization(for: "app"))
        let recorder = recordStates(flow, count: 1, limit: 3, until: { $0 == .empty(provider: "marker") })
        store.failReads(of: "app")  // as a database that went down while the listener reconnected

        try await resyncAndWait(flow, store)

        #expect(store.loads == ["app", "marker"], "the resync read each cached key once")
        #expect(await flow.authorization(for: "app") == before)
        #expect(try await flow.accessToken(for: "app").reveal() == "at-app")
        #expect(try await flow.accessToken(for: "app").reveal() == "at-app")
        #expect(store.loads == ["app", "marker"], "the token came from memory: the store was not read again")
        #expect(mock.requests().isEmpty)
        #expect(await raceCollected(recorder).first?.dropFirst() == [.empty(provider: "marker")], "nothing published for app")
        let warnings = log.all.filter { $0.level == .warning && $0.providerID == "app" }.map(\.message)
        #expect(warnings == ["could not re-check the local copy against the store (storage); it is kept"])
        #expect(!log.all.contains { $0.message.contains("at-app") || $0.message.contains("rt-app") })
    }

    @Test("a resync forgets a cached key the store no longer holds: .empty is published and the next call needs a new login")
    func missingKeyIsForgotten() async throws {
        let store = ResyncStore()
        let flow = try await authorized(store)
        try await store.deleteUnannounced("app")  // a logout elsewhere whose notice was missed
        let recorder = recordStates(flow, count: 1, until: { $0 == .empty(provider: "marker") })

        try await resyncAndWait(flow, store)

        #expect(await flow.authorization(for: "app") == nil)
        #expect(await flow.authorization(for: "marker") == nil)
        #expect(await raceCollected(recorder).first?.dropFirst() == [.empty(provider: "app"), .empty(provider: "marker")])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") })
        #expect(error.code == .reauthorizationRequired)
        #expect(mock.requests().isEmpty)
    }

    @Test("a resync keeps a key the store still holds, even when another process refreshed it: the local copy stays valid until it expires")
    func presentKeyIsKept() async throws {
        let store = ResyncStore()
        let flow = try await authorized(store)
        let before = try #require(await flow.authorization(for: "app"))
        let other = try #require(try await store.load("marker"))
        try await store.save(other, for: "app")  // different bytes under "app", as after a refresh elsewhere
        store.clearLoads()

        try await resyncAndWait(flow, store)

        #expect(store.loads == ["app", "marker"])
        #expect(await flow.authorization(for: "app") == before)
        #expect(try await flow.accessToken(for: "app").reveal() == "at-app")
        #expect(store.loads == ["app", "marker"])
    }
}

/// A memory store that reports invalidations as a shared store does (the test sends them) and
/// whose reads of chosen keys fail with `.storage`, as those of a database that is down do. It
/// records the keys it is asked to load.
final class ResyncStore: SecretStore {
    private let memory = MemorySecretStore()
    private let failing = Mutex<Set<String>>([])
    private let loaded = Mutex<[String]>([])
    private let stream: AsyncStream<StoreInvalidation>
    private let continuation: AsyncStream<StoreInvalidation>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream(of: StoreInvalidation.self) }

    var loads: [String] { loaded.withLock { $0 } }
    func clearLoads() { loaded.withLock { $0 = [] } }
    func failReads(of key: String) { _ = failing.withLock { $0.insert(key) } }
    func notify(_ change: StoreInvalidation) { continuation.yield(change) }
    /// Deletes `key` without a notice, as a deletion made while the notifications were interrupted.
    func deleteUnannounced(_ key: String) async throws { try await memory.delete(key) }

    func load(_ key: String) async throws(OAuthError) -> Data? {
        loaded.withLock { $0.append(key) }
        if failing.withLock({ $0.contains(key) }) {
            throw OAuthError(.storage, providerID: key, message: "the database is unreachable")
        }
        return try await memory.load(key)
    }
    func save(_ data: Data, for key: String) async throws(OAuthError) { try await memory.save(data, for: key) }
    func delete(_ key: String) async throws(OAuthError) { try await memory.delete(key) }
    func keys() async throws(OAuthError) -> [String] { try await memory.keys() }
    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T { try await memory.withExclusiveAccess(to: key, body) }
    func invalidations() -> AsyncStream<StoreInvalidation>? { stream }
}
