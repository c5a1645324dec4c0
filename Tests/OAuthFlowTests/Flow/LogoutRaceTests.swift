import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import TestSupport
import Testing

/// The logout race: `clear`, `revoke` and `clear()` against refreshes and grants that are already
/// in flight, in this flow and in another one sharing the store directory (another process, as far
/// as the file store can tell: `flock(2)` locks belong to open files, not processes).
///
/// Every interleaving is forced with gates, never sleeps: a scripted transport holds a token
/// answer until the test releases it, and a watched store says when a lock is asked for. Each
/// test is bounded by the suite's time limit.
@Suite("Logout race", .timeLimit(.minutes(1)))
struct LogoutRaceTests {
    let mock = MockProvider()  // only for URLs: the scripted transport below answers every request
    let clock = TestClock()

    func provider() -> Provider { mock.provider(id: "app", clientID: "cli-1", clientSecret: "s3cret") }

    func flow(_ store: any SecretStore, _ transport: RaceTransport) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider()], store: store, transport: transport, options: options(clock))
    }

    /// A flow holding at-1 / rt-1 for "app", stored by a device login, so that ``AuthFlow/refresh(provider:)``
    /// posts a refresh token (what the races need).
    func authorized(_ store: any SecretStore, _ transport: RaceTransport) async throws -> (AuthFlow, Authorization) {
        let flow = try await flow(store, transport)
        transport.script("/device/code", [.reply(.deviceCode)])
        transport.script("/token", [.reply(.token("at-1", refresh: "rt-1"))])
        let authorization = try await flow.authorizeWithDeviceCode(provider: "app")
        return (flow, authorization)
    }

    // MARK: In this flow

    @Test("a refresh whose answer arrives after clear(provider:) began is discarded: nothing saved, file gone, states end in .empty")
    func refreshRacingClear() async throws {
        try await withRaceStoreDirectory { directory in
            let store = try RaceWatchedStore(directory)
            let transport = RaceTransport()
            let (flow, authorization) = try await authorized(store, transport)
            let hold = RaceHold()
            transport.script("/token", [.held(hold, .token("at-2", refresh: "rt-2"))])
            let savesBefore = store.saves.count
            let locksBefore = store.lockRequests.value
            let recorder = recordStates(flow, count: 1, until: { $0 == .empty(provider: "app") })

            let refreshing = Task { try await flow.refresh(provider: "app") }
            // The refresh holds the lock, and its request is out.
            #expect(await hold.arrived.reach(1), "the request never reached the transport")
            let clearing = Task { try await flow.clear(provider: "app") }
            // clear() has bumped the generation and waits for the lock.
            #expect(await store.lockRequests.reach(locksBefore + 2), "the logout never asked for the lock")
            hold.release.increment()                           // now the answer (rotated tokens) arrives

            let error = try #require(await #expect(throws: OAuthError.self) { try await refreshing.value })
            #expect(error.code == .reauthorizationRequired)
            #expect(error.message?.contains("logged out") == true)
            try await clearing.value

            #expect(store.saves.count == savesBefore, "the discarded refresh saved nothing")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("app.json").path))
            #expect(try await store.load("app") == nil)
            #expect(await flow.authorization(for: "app") == nil)
            let seen = try #require(await raceCollected(recorder).first)
            #expect(seen == [.authorized(provider: "app", authorization), .requestingAccessToken(provider: "app"),
                             .error(provider: "app", error), .empty(provider: "app")])
            #expect(flow.state == .empty(provider: "app"))
            // Nothing stale is served afterwards either.
            let after = try #require(await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") })
            #expect(after.code == .reauthorizationRequired)
            #expect(transport.requests("/token").count == 2)
        }
    }

    /// The grants that store tokens, each started and held at its token request.
    enum Grant: String, CaseIterable, Sendable {
        case clientCredentials, deviceCode, authorizationCode

        func start(_ flow: AuthFlow, _ transport: RaceTransport, answer: RaceHold) async throws -> Task<Authorization, any Error> {
            switch self {
            case .clientCredentials:
                transport.script("/token", [.held(answer, .token("at-9", refresh: "rt-9"))])
                return Task { try await flow.clientCredentials(provider: "app") }
            case .deviceCode:
                transport.script("/device/code", [.reply(.deviceCode)])
                transport.script("/token", [.held(answer, .token("at-9", refresh: "rt-9"))])
                return Task { try await flow.authorizeWithDeviceCode(provider: "app") }
            case .authorizationCode:
                let request = try await flow.authorizationRequest(provider: "app")
                transport.script("/token", [.held(answer, .token("at-9", refresh: "rt-9"))])
                return Task { try await flow.completeAuthorization(callbackURL: callback(request, code: "code-9")) }
            }
        }
    }

    @Test("a grant whose answer arrives after clear(provider:) finished is discarded; .empty stays the last state",
          arguments: Grant.allCases)
    func grantRacingClear(grant: Grant) async throws {
        try await withRaceStoreDirectory { directory in
            let store = try RaceWatchedStore(directory)
            let transport = RaceTransport()
            let flow = try await flow(store, transport)
            let hold = RaceHold()
            let empties = RaceCounter()
            let recorder = recordStates(flow, count: 1, until: { state in
                guard state == .empty(provider: "app") else { return false }
                empties.increment()
                return empties.value == 2
            })

            let granting = try await grant.start(flow, transport, answer: hold)
            #expect(await hold.arrived.reach(1), "the request never reached the transport")
            try await flow.clear(provider: "app")              // the logout completes while the answer is held
            hold.release.increment()

            let error = try #require(await #expect(throws: OAuthError.self) { try await granting.value })
            #expect(error.code == .reauthorizationRequired)
            #expect(store.saves.isEmpty, "nothing was ever saved")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("app.json").path))
            #expect(await flow.authorization(for: "app") == nil)
            let seen = try #require(await raceCollected(recorder).first)
            let firstEmpty = try #require(seen.dropFirst().firstIndex(of: .empty(provider: "app")))
            #expect(!seen[firstEmpty...].contains { $0.name == "authorized" }, "\(seen)")
            #expect(Array(seen.suffix(3)) == [.empty(provider: "app"), .error(provider: "app", error), .empty(provider: "app")])
            #expect(flow.state == .empty(provider: "app"))
        }
    }

    @Test("revoke(provider:) racing a refresh: the refresh is discarded, and the rotated tokens it received are revoked too (RFC 7009 §2.1)")
    func refreshRacingRevoke() async throws {
        try await withRaceStoreDirectory { directory in
            let store = try RaceWatchedStore(directory)
            let transport = RaceTransport()
            let (flow, authorization) = try await authorized(store, transport)
            let hold = RaceHold()
            transport.script("/token", [.held(hold, .token("at-2", refresh: "rt-2"))])
            transport.script("/revoke", [.reply(.json("{}"))])
            let savesBefore = store.saves.count
            let locksBefore = store.lockRequests.value
            let recorder = recordStates(flow, count: 1, until: { $0 == .empty(provider: "app") })

            let refreshing = Task { try await flow.refresh(provider: "app") }
            #expect(await hold.arrived.reach(1), "the request never reached the transport")
            let revoking = Task { try await flow.revoke(provider: "app") }
            #expect(await store.lockRequests.reach(locksBefore + 2), "the logout never asked for the lock")
            #expect(transport.requests("/revoke").isEmpty, "nothing is revoked before the lock is held")
            hold.release.increment()

            let error = try #require(await #expect(throws: OAuthError.self) { try await refreshing.value })
            #expect(error.code == .reauthorizationRequired)
            let result = try await revoking.value

            #expect(result.isComplete)
            #expect(result.heldTokens == [.refreshToken, .accessToken])
            // Newest first: the rotated pair the discarded refresh received, then the stored one.
            #expect(transport.requests("/revoke").map { Self.form($0) } == [
                ["token": "rt-2", "token_type_hint": "refresh_token"], ["token": "rt-1", "token_type_hint": "refresh_token"],
                ["token": "at-2", "token_type_hint": "access_token"], ["token": "at-1", "token_type_hint": "access_token"],
            ])
            #expect(store.saves.count == savesBefore)
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("app.json").path))
            let seen = try #require(await raceCollected(recorder).first)
            #expect(seen == [.authorized(provider: "app", authorization), .requestingAccessToken(provider: "app"),
                             .error(provider: "app", error), .empty(provider: "app")])
            #expect(flow.state == .empty(provider: "app"))
        }
    }

    @Test("clear() racing a refresh: the refresh is discarded and every entry is gone")
    func refreshRacingClearAll() async throws {
        try await withRaceStoreDirectory { directory in
            let store = try RaceWatchedStore(directory)
            let transport = RaceTransport()
            let (flow, _) = try await authorized(store, transport)
            let hold = RaceHold()
            transport.script("/token", [.held(hold, .token("at-2", refresh: "rt-2"))])
            let locksBefore = store.lockRequests.value

            let refreshing = Task { try await flow.refresh(provider: "app") }
            #expect(await hold.arrived.reach(1), "the request never reached the transport")
            let clearing = Task { try await flow.clear() }
            #expect(await store.lockRequests.reach(locksBefore + 2), "the logout never asked for the lock")
            hold.release.increment()

            let error = try #require(await #expect(throws: OAuthError.self) { try await refreshing.value })
            #expect(error.code == .reauthorizationRequired)
            try await clearing.value
            #expect(try await store.keys().isEmpty)
            #expect(flow.state == .empty)
            #expect(await flow.authorizations.isEmpty)
        }
    }

    // MARK: Across flows sharing the directory (other processes)

    @Test("another flow's logout waits for this flow's refresh under the lock, then deletes what it saved")
    func logoutElsewhereWaitsForRefresh() async throws {
        try await withRaceStoreDirectory { directory in
            let transport = RaceTransport()
            let (refresher, _) = try await authorized(try FileSecretStore(directory: directory), transport)
            let otherStore = try RaceWatchedStore(directory)
            let other = try await flow(otherStore, RaceTransport())
            #expect(await other.authorization(for: "app") != nil)
            let hold = RaceHold()
            transport.script("/token", [.held(hold, .token("at-2", refresh: "rt-2"))])

            let refreshing = Task { try await refresher.refresh(provider: "app") }
            #expect(await hold.arrived.reach(1), "the request never reached the transport")
            let clearing = Task { try await other.clear(provider: "app") }
            #expect(await otherStore.lockRequests.reach(1), "the logout never asked for the lock")
            hold.release.increment()

            // The refresher cannot know: it saved under the lock, and the logout deleted afterwards.
            _ = try await refreshing.value
            try await clearing.value
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("app.json").path))
            #expect(try await FileSecretStore(directory: directory).load("app") == nil)
            // The refresher's next renewal re-reads under the lock and finds the logout.
            let error = try #require(await #expect(throws: OAuthError.self) { try await refresher.refresh(provider: "app") })
            #expect(error.code == .reauthorizationRequired)
        }
    }

    @Test("a login does not undo another flow's logout: the entry it started with was deleted, so its tokens are discarded",
          arguments: Grant.allCases)
    func loginRacingLogoutElsewhere(grant: Grant) async throws {
        try await withRaceStoreDirectory { directory in
            let transport = RaceTransport()
            let (flow, _) = try await authorized(try FileSecretStore(directory: directory), transport)
            let other = try await self.flow(try FileSecretStore(directory: directory), RaceTransport())
            let hold = RaceHold()

            let granting = try await grant.start(flow, transport, answer: hold)
            #expect(await hold.arrived.reach(1), "the request never reached the transport")
            try await other.clear(provider: "app")             // another process logs out
            hold.release.increment()

            let error = try #require(await #expect(throws: OAuthError.self) { try await granting.value })
            #expect(error.code == .reauthorizationRequired)
            #expect(error.message?.contains("another process") == true)
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("app.json").path))
            #expect(await flow.authorization(for: "app") == nil)
        }
    }

    @Test("a first login still completes when another flow's logout found nothing to delete")
    func firstLoginSurvivesEmptyLogoutElsewhere() async throws {
        try await withRaceStoreDirectory { directory in
            let transport = RaceTransport()
            let flow = try await flow(try FileSecretStore(directory: directory), transport)
            let other = try await self.flow(try FileSecretStore(directory: directory), RaceTransport())
            let hold = RaceHold()
            let granting = try await Grant.clientCredentials.start(flow, transport, answer: hold)
            #expect(await hold.arrived.reach(1), "the request never reached the transport")
            try await other.clear(provider: "app")
            hold.release.increment()
            let authorization = try await granting.value
            #expect(flow.state == .authorized(provider: "app", authorization))
            #expect(try await FileSecretStore(directory: directory).load("app") != nil)
        }
    }

    // MARK: The store's own delete

    @Test("FileSecretStore.delete waits for a lock holder (another process) and removes what it saved")
    func storeDeleteWaitsForLock() async throws {
        try await withRaceStoreDirectory { directory in
            let holder = try FileSecretStore(directory: directory)
            let deleter = try FileSecretStore(directory: directory)
            try await holder.save(Data("old".utf8), for: "app")
            let held = RaceHold()
            let holding = Task {
                try await holder.withExclusiveAccess(to: "app") { () async throws(OAuthError) in
                    held.arrived.increment()
                    await held.release.reach(1)
                    try await holder.save(Data("saved under the lock".utf8), for: "app")
                }
            }
            #expect(await held.arrived.reach(1))
            let deleting = Task { try await deleter.delete("app") }
            // The deleter opened the lock file too (it waits on it), or, if it did not wait, it finished.
            let waiting = await raceEventually { raceOpenDescriptors(to: directory.appendingPathComponent("app.lock")) >= 2 }
            #expect(waiting, "the delete never reached the lock")
            held.release.increment()
            try await holding.value
            try await deleting.value
            #expect(try await holder.load("app") == nil)
        }
    }

    // MARK: Failures publish .error

    enum Logout: String, CaseIterable, Sendable {
        case clearOne, clearAll, revoke

        func run(_ flow: AuthFlow) async throws {
            switch self {
            case .clearOne: try await flow.clear(provider: "app")
            case .clearAll: try await flow.clear()
            case .revoke: try await flow.revoke(provider: "app")
            }
        }
    }

    @Test("a failing logout publishes .error with the thrown error and keeps the entry", arguments: Logout.allCases)
    func failingDeletePublishesError(logout: Logout) async throws {
        let store = RaceFailingStore()
        let transport = RaceTransport()
        let (flow, _) = try await authorized(store, transport)
        transport.script("/revoke", [.reply(.json("{}"))])
        let error = try #require(await #expect(throws: OAuthError.self) { try await logout.run(flow) })
        #expect(error.code == .storage)
        #expect(error.providerID == "app")
        #expect(flow.state == .error(provider: "app", error))
        #expect(try await store.load("app") != nil)
    }

    @Test("a logout that cannot get the lock in time publishes .error (.timedOut)", arguments: Logout.allCases)
    func lockTimeoutPublishesError(logout: Logout) async throws {
        try await withRaceStoreDirectory { directory in
            let transport = RaceTransport()
            let (flow, _) = try await authorized(try FileSecretStore(directory: directory, lockTimeout: .milliseconds(200)), transport)
            let holder = try FileSecretStore(directory: directory)
            let held = RaceHold()
            let holding = Task {
                try await holder.withExclusiveAccess(to: "app") { () async throws(OAuthError) in
                    held.arrived.increment()
                    await held.release.reach(1)
                }
            }
            #expect(await held.arrived.reach(1))
            let error = try #require(await #expect(throws: OAuthError.self) { try await logout.run(flow) })
            held.release.increment()
            try await holding.value
            #expect(error.code == .timedOut)
            #expect(flow.state == .error(provider: "app", error))
            #expect(transport.requests("/revoke").isEmpty)
            #expect(try await holder.load("app") != nil)
        }
    }

    @Test("clear() whose listing fails publishes .error and rethrows")
    func failingListPublishesError() async throws {
        let store = RaceFailingStore()
        let transport = RaceTransport()
        let (flow, _) = try await authorized(store, transport)
        store.failListing.withLock { $0 = true }
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clear() })
        #expect(error.code == .storage)
        #expect(flow.state == .error(provider: nil, error))
    }

    static func form(_ request: HTTPRequest) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: request.body ?? Data(), as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if parts.count == 2, parts[0] != "client_id" { fields[parts[0]] = parts[1] }
        }
        return fields
    }
}

// MARK: Support

/// A count that tasks can wait on: `reach(n)` returns true once `increment()` was called `n`
/// times, or false after `limit` (20 s), so a gate that never opens fails the test instead of hanging it.
final class RaceCounter: Sendable {
    private struct Waiter {
        let id: UInt64
        let target: Int
        let continuation: CheckedContinuation<Bool, Never>
    }
    private struct Inner {
        var value = 0
        var nextID: UInt64 = 0
        var waiters: [Waiter] = []
    }
    private let inner = Mutex(Inner())

    var value: Int { inner.withLock { $0.value } }

    func increment() {
        let ready = inner.withLock { inner -> [Waiter] in
            inner.value += 1
            let value = inner.value
            let ready = inner.waiters.filter { $0.target <= value }
            inner.waiters.removeAll { $0.target <= value }
            return ready
        }
        for waiter in ready { waiter.continuation.resume(returning: true) }
    }

    @discardableResult
    func reach(_ target: Int, limit: Duration = .seconds(30)) async -> Bool {
        let id = inner.withLock { inner -> UInt64 in
            inner.nextID += 1
            return inner.nextID
        }
        let timer = Task { [self] in
            try? await Task.sleep(for: limit)
            self.expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now = inner.withLock { inner -> Bool in
                if inner.value >= target { return true }
                inner.waiters.append(Waiter(id: id, target: target, continuation: continuation))
                return false
            }
            if now { continuation.resume(returning: true) }
        }
    }

    /// Ends waiter `id` with false, unless `increment()` already resumed it (each resumes once).
    private func expire(_ id: UInt64) {
        let expired = inner.withLock { inner -> Waiter? in
            guard let index = inner.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return inner.waiters.remove(at: index)
        }
        expired?.continuation.resume(returning: false)
    }
}

/// A held answer: `arrived` counts the request reaching it, `release` lets the answer go.
struct RaceHold: Sendable {
    let arrived = RaceCounter()
    let release = RaceCounter()
}

/// Answers by URL path from scripts, in order (the last repeats); a held answer waits for its release.
final class RaceTransport: HTTPTransport {
    enum Answer: Sendable {
        case reply(HTTPResponse)
        case held(RaceHold, HTTPResponse)
    }
    private struct Inner {
        var scripts: [String: [Answer]] = [:]
        var last: [String: Answer] = [:]
        var requests: [HTTPRequest] = []
    }
    private let inner = Mutex(Inner())

    func script(_ path: String, _ answers: [Answer]) { inner.withLock { $0.scripts[path, default: []] += answers } }

    func requests(_ path: String) -> [HTTPRequest] { inner.withLock { $0.requests }.filter { $0.url.path == path } }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let answer = inner.withLock { inner -> Answer? in
            inner.requests.append(request)
            let path = request.url.path
            if var queue = inner.scripts[path], !queue.isEmpty {
                let next = queue.removeFirst()
                inner.scripts[path] = queue
                if case .reply = next { inner.last[path] = next }
                return next
            }
            return inner.last[path]
        }
        switch answer {
        case .reply(let response): return response
        case .held(let hold, let response):
            hold.arrived.increment()
            await hold.release.reach(1)
            return response
        case nil: return HTTPResponse(status: 404, headers: ["Content-Type": "application/json"], body: Data(#"{"error":"not_found"}"#.utf8))
        }
    }
}

extension HTTPResponse {
    fileprivate static func json(_ text: String) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(text.utf8))
    }
    fileprivate static func token(_ access: String, refresh: String) -> HTTPResponse {
        json(#"{"access_token":"\#(access)","token_type":"Bearer","expires_in":3600,"refresh_token":"\#(refresh)","scope":"read"}"#)
    }
    fileprivate static var deviceCode: HTTPResponse {
        json(#"{"device_code":"dc-1","user_code":"ABCD-EFGH","verification_uri":"https://example.com/device","expires_in":600,"interval":1}"#)
    }
}

/// A ``FileSecretStore`` that counts lock requests (as they are made, before they are granted) and records saves.
final class RaceWatchedStore: SecretStore {
    let inner: FileSecretStore
    let lockRequests = RaceCounter()
    private let saved = Mutex<[String]>([])

    init(_ directory: URL) throws { inner = try FileSecretStore(directory: directory) }

    var saves: [String] { saved.withLock { $0 } }

    func load(_ key: String) async throws(OAuthError) -> Data? { try await inner.load(key) }
    func save(_ data: Data, for key: String) async throws(OAuthError) {
        saved.withLock { $0.append(key) }
        try await inner.save(data, for: key)
    }
    func delete(_ key: String) async throws(OAuthError) { try await inner.delete(key) }
    func keys() async throws(OAuthError) -> [String] { try await inner.keys() }
    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        lockRequests.increment()
        return try await inner.withExclusiveAccess(to: key, body)
    }
}

/// A memory store whose deletes (and optionally listing) fail, as a read-only directory would.
final class RaceFailingStore: SecretStore {
    private let memory = MemorySecretStore()
    /// Set it after the flow restored (its initializer lists the store too).
    let failListing = Mutex(false)

    func load(_ key: String) async throws(OAuthError) -> Data? { try await memory.load(key) }
    func save(_ data: Data, for key: String) async throws(OAuthError) { try await memory.save(data, for: key) }
    func delete(_ key: String) async throws(OAuthError) {
        throw OAuthError(.storage, providerID: key, message: "cannot delete the entry: read-only file system")
    }
    func keys() async throws(OAuthError) -> [String] {
        if failListing.withLock({ $0 }) { throw OAuthError(.storage, message: "cannot list the store") }
        return try await memory.keys()
    }
    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T { try await memory.withExclusiveAccess(to: key, body) }
}

/// Runs `body` with a fresh store directory path (created by the store) inside a private parent, removed afterwards.
func withRaceStoreDirectory(_ body: (URL) async throws -> Void) async throws {
    let parent = try TemporaryDirectory("LogoutRaceTests")
    defer { parent.remove() }
    try await body(parent.url.appendingPathComponent("store", isDirectory: true))
}

/// How many descriptors of this process are open on `file` (from `/proc/self/fd`).
func raceOpenDescriptors(to file: URL) -> Int {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return entries.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == file.path }.count
}

/// Polls `condition` every 5 ms for at most 30 s (generous for a busy machine); true once it holds.
func raceEventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// What the recorders saw; a recorder still waiting after 30 s is cancelled, so a missing state fails the test instead of hanging it.
func raceCollected(_ recorders: [Task<[State], Never>]) async -> [[State]] {
    let timer = Task {
        try? await Task.sleep(for: .seconds(30))
        for recorder in recorders { recorder.cancel() }
    }
    defer { timer.cancel() }
    return await collected(recorders)
}
