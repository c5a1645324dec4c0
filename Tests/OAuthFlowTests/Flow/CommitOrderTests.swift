import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

/// A renewed set reaches callers and subscribers only once the store has made it durable: a
/// fleet store commits the writes made under its lock when the lock is released, so a flow that
/// served the new access token before that could lose the rotated refresh token with a failed
/// commit (found by the loaded runs of issue 21; Testing.md).
@Suite("Commit order: cache and publish after the store's lock commits", .timeLimit(.minutes(1)))
struct CommitOrderTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = TransactionalStore()

    func flow(_ provider: Provider) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider], store: store, transport: mock.transport(), options: options(clock))
    }

    /// "app" logged in with at-1 / rt-1 (committed), the clock past its expiry, and the next commit held.
    func expiredFlow() async throws -> AuthFlow {
        let flow = try await flow(mock.provider(id: "app"))
        try await authorizeByDevice(flow, mock: mock, provider: "app")
        mock.clearRequests()
        clock.advance(by: .seconds(3600))
        mock.script(.token, [.token(access: "at-2", refresh: "rt-2")])
        store.holdNextCommit()
        return flow
    }

    @Test("a refresh's new token is neither cached nor published while the lock's transaction is uncommitted; after the commit it is both")
    func refreshWaitsForTheCommit() async throws {
        let flow = try await expiredFlow()
        let recorders = recordStates(flow, count: 1)
        let fetch = Task { try await flow.accessToken(for: "app").reveal() }
        await store.commitHeld()

        #expect(mock.requests(.token).only?.form["refresh_token"] == "rt-1")
        #expect(flow.tokens["app"]?.accessToken.reveal() == "at-1", "cached before its commit")
        #expect(try await store.committedRefreshToken("app") == "rt-1")

        store.release(failing: false)
        #expect(try await fetch.value == "at-2")
        #expect(try await store.committedRefreshToken("app") == "rt-2")
        #expect(flow.tokens["app"]?.refreshToken?.reveal() == "rt-2")
        let states = try #require(await collected(recorders).only)
        #expect(states.map(\.name) == ["authorized", "requestingAccessToken", "authorized"])
        
    }

    @Test("a failed commit of a refresh is the caller's .storage error: the new token is not served, cached or published, and the stored login is kept")
    func failedRefreshCommit() async throws {
        let flow = try await expiredFlow()
        let recorders = recordStates(flow, count: 1)
        let fetch = Task { try await flow.accessToken(for: "app") }
        await store.commitHeld()
        store.release(failing: true)

        let error = await #expect(throws: OAuthError.self) { try await fetch.value }
        #expect(error?.code == .storage)
        #expect(flow.tokens["app"]?.accessToken.reveal() == "at-1")
        #expect(try await store.committedRefreshToken("app") == "rt-1")
        let states = try #require(await collected(recorders).only)
        #expect(states.map(\.name) == ["authorized", "requestingAccessToken", "error"])
    }

    @Test("a login whose commit fails throws .storage and leaves nothing cached or published as authorized")
    func failedLoginCommit() async throws {
        let flow = try await flow(mock.provider(id: "svc", clientSecret: "s3cret"))
        mock.script(.token, [.token(access: "at-svc")])
        store.holdNextCommit()
        let recorders = recordStates(flow, count: 1)
        let login = Task { try await flow.clientCredentials(provider: "svc") }
        await store.commitHeld()
        #expect(flow.tokens["svc"] == nil, "cached before its commit")
        store.release(failing: true)

        let error = await #expect(throws: OAuthError.self) { try await login.value }
        #expect(error?.code == .storage)
        #expect(flow.tokens["svc"] == nil)
        #expect(try await store.load("svc") == nil)
        let states = try #require(await collected(recorders).only)
        #expect(states.map(\.name) == ["empty", "requestingAccessToken", "error"])
    }
}

/// A store that behaves like a database under its lock: what the body saves or deletes is seen
/// inside the lock and written when the lock is released (the commit), which a test can hold and
/// make fail.
final class TransactionalStore: SecretStore {
    private struct Held {
        var armed = false
        var waiting: CheckedContinuation<Bool, Never>?
        var arrived: CheckedContinuation<Void, Never>?
        var decided: Bool?
    }

    private let committed = MemorySecretStore()
    private let held = Mutex(Held())
    @TaskLocal private static var transaction: Transaction?

    /// The writes of one lock: key → data, nil for a deletion.
    private final class Transaction: Sendable {
        let writes = Mutex<[String: Data?]>([:])
    }

    /// The next lock's commit waits for ``release(failing:)``.
    func holdNextCommit() { held.withLock { $0.armed = true } }

    /// Returns once a held commit is waiting.
    func commitHeld() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = held.withLock { held -> Bool in
                if held.waiting != nil { return true }
                held.arrived = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Lets the held commit go on: it fails with `.storage` when `failing`.
    func release(failing: Bool) {
        let waiting = held.withLock { held -> CheckedContinuation<Bool, Never>? in
            defer { held.waiting = nil }
            if held.waiting == nil { held.decided = failing }
            return held.waiting
        }
        waiting?.resume(returning: failing)
    }

    /// The refresh token of `key`'s committed entry.
    func committedRefreshToken(_ key: String) async throws -> String? {
        guard let data = try await committed.load(key) else { return nil }
        return try StoredEntry.decode(data, key: key).refreshToken?.reveal()
    }

    func load(_ key: String) async throws(OAuthError) -> Data? {
        if let transaction = Self.transaction, let write = transaction.writes.withLock({ $0[key] }) { return write }
        return try await committed.load(key)
    }

    func save(_ data: Data, for key: String) async throws(OAuthError) {
        guard let transaction = Self.transaction else { return try await committed.save(data, for: key) }
        transaction.writes.withLock { $0[key] = .some(data) }
    }

    func delete(_ key: String) async throws(OAuthError) {
        guard let transaction = Self.transaction else { return try await committed.delete(key) }
        transaction.writes.withLock { $0[key] = .some(nil) }
    }

    func keys() async throws(OAuthError) -> [String] { try await committed.keys() }

    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        if Self.transaction != nil { return try await body() }
        return try await committed.withExclusiveAccess(to: key) { () async throws(OAuthError) -> T in
            let transaction = Transaction()
            let result: Result<T, OAuthError> = await Self.$transaction.withValue(transaction) {
                do throws(OAuthError) { return .success(try await body()) } catch { return .failure(error) }
            }
            if await self.commitFails() {
                throw OAuthError(.storage, message: "the commit failed (test)")
            }
            for (key, data) in transaction.writes.withLock({ $0 }) {
                if let data { try await self.committed.save(data, for: key) } else { try await self.committed.delete(key) }
            }
            return try result.get()
        }
    }

    /// Waits for the test's decision when this commit is held; true when it should fail.
    private func commitFails() async -> Bool {
        let armed = held.withLock { held -> Bool in
            defer { held.armed = false }
            return held.armed
        }
        guard armed else { return false }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let (decided, arrived) = held.withLock { held -> (Bool?, CheckedContinuation<Void, Never>?) in
                if let decided = held.decided {
                    held.decided = nil
                    return (decided, nil)
                }
                held.waiting = continuation
                defer { held.arrived = nil }
                return (nil, held.arrived)
            }
            if let decided { continuation.resume(returning: decided) }
            arrived?.resume()
        }
    }
}
