import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

@Suite("State stream and stored authorizations", .timeLimit(.minutes(1)))
struct StateStreamTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = MemorySecretStore()
    let log = LogCollector()

    func flow(_ ids: String...) async throws -> AuthFlow {
        try await AuthFlow(
            providers: ids.map { mock.provider(id: $0, clientSecret: "s-\($0)") }, store: store, transport: mock.transport(),
            options: options(clock, log: log))
    }

    // MARK: Subscribers

    @Test("a new subscriber first gets the current state")
    func startsWithCurrent() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow("svc")
        let authorization = try await flow.clientCredentials(provider: "svc")
        let seen = await collected(recordStates(flow, count: 1, limit: 1))
        #expect(seen == [[.authorized(provider: "svc", authorization)]])
        #expect(flow.state == .authorized(provider: "svc", authorization))
    }

    @Test("any number of subscribers each see every transition in order")
    func manySubscribers() async throws {
        mock.script(.token, [.token(access: "at-1"), .oauthError("invalid_client", status: 401)])
        let flow = try await flow("a", "b")
        let recorders = recordStates(flow, count: 25, limit: 5) { _ in false }
        let authorization = try await flow.clientCredentials(provider: "a")
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "b") })
        let expected: [State] = [
            .empty, .requestingAccessToken(provider: "a"), .authorized(provider: "a", authorization),
            .requestingAccessToken(provider: "b"), .error(provider: "b", error),
        ]
        let all = await collected(recorders)
        #expect(all.count == 25)
        for seen in all { #expect(seen == expected) }
    }

    @Test("a subscriber that never reads does not stall the flow and still gets everything")
    func idleSubscriber() async throws {
        mock.script(.token, [.token(access: "at-1"), .token(access: "at-2")])
        let flow = try await flow("a")
        let idle = flow.states
        let first = try await flow.clientCredentials(provider: "a")
        let second = try await flow.clientCredentials(provider: "a")
        try await flow.clear(provider: "a")
        var seen: [State] = []
        for await state in idle {
            seen.append(state)
            if seen.count == 6 { break }
        }
        #expect(seen == [
            .empty, .requestingAccessToken(provider: "a"), .authorized(provider: "a", first), .requestingAccessToken(provider: "a"),
            .authorized(provider: "a", second), .empty(provider: "a"),
        ])
    }

    @Test("a cancelled or dropped subscriber is removed")
    func cancelledSubscriberRemoved() async throws {
        let broadcaster = StateBroadcaster()
        let kept = broadcaster.subscribe()
        let cancelled = broadcaster.subscribe()
        #expect(broadcaster.subscriberCount == 2)

        let listener = Task { for await _ in cancelled {} }
        listener.cancel()
        await listener.value
        #expect(broadcaster.subscriberCount == 1)

        do { _ = broadcaster.subscribe() }  // dropped without iterating
        #expect(broadcaster.subscriberCount == 1)

        broadcaster.publish(.requestingAccessToken(provider: "x"))
        var iterator = kept.makeAsyncIterator()
        #expect(await iterator.next() == .empty)
        #expect(await iterator.next() == .requestingAccessToken(provider: "x"))
    }

    @Test("after one subscriber is cancelled the flow goes on and the others see every state")
    func othersContinue() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow("svc")
        let gone = recordStates(flow, count: 1)[0]
        let staying = recordStates(flow)
        gone.cancel()
        let goneSaw = await gone.value
        let authorization = try await flow.clientCredentials(provider: "svc")
        #expect(goneSaw.count <= 1, "a cancelled subscriber stops receiving")
        let expected: [State] = [.empty, .requestingAccessToken(provider: "svc"), .authorized(provider: "svc", authorization)]
        for seen in await collected(staying) { #expect(seen == expected) }
    }

    @Test("every stream finishes when the flow goes away")
    func streamsFinishWithFlow() async throws {
        var flow: AuthFlow? = try await flow("svc")
        let stream = try #require(flow?.states)
        flow = nil
        var count = 0
        for await _ in stream {
            count += 1
            if count > 10 { break }
        }
        #expect(count == 1, "the current state, then the end of the stream")
    }

    // MARK: Restore, clear

    /// Stores client-credentials tokens for `ids` through a first flow, as a previous run would.
    func previousRun(_ ids: String...) async throws -> [String: Authorization] {
        let first = try await AuthFlow(
            providers: ids.map { mock.provider(id: $0, clientSecret: "s-\($0)") }, store: store, transport: mock.transport(),
            options: options(clock))
        var result: [String: Authorization] = [:]
        for id in ids {
            mock.script(.token, [.token(access: "at-\(id)", expiresIn: 3600, scope: "read")])
            result[id] = try await first.clientCredentials(provider: id)
        }
        mock.clearRequests()
        return result
    }

    @Test("at start the flow restores stored authorizations and publishes .authorized")
    func restore() async throws {
        let stored = try await previousRun("alpha", "gamma")
        let flow = try await flow("alpha", "gamma")
        #expect(await flow.authorizations == stored)
        #expect(flow.state == .authorized(provider: "gamma", try #require(stored["gamma"])), "the last one restored is current")
        #expect(try await flow.accessToken(for: "alpha").reveal() == "at-alpha")
        #expect(try await flow.accessToken(for: "gamma").reveal() == "at-gamma")
        #expect(mock.requests().isEmpty, "restored tokens are used without a request")
    }

    @Test("a corrupted entry is published as .error(.storage), left untouched, and the others still restore")
    func corruptedEntry() async throws {
        let stored = try await previousRun("alpha", "beta")
        let garbage = Data("{\"version\":1,\"tokens\":{\"providerID\":".utf8)
        try await store.save(garbage, for: "zeta")
        let flow = try await flow("alpha", "beta", "zeta")

        guard case .error(let provider, let error) = flow.state else {
            Issue.record("expected .error for zeta, got \(flow.state)")
            return
        }
        #expect(provider == "zeta")
        #expect(error.code == .storage)
        #expect(error.providerID == "zeta")
        #expect(error.message?.contains("zeta") == true)
        #expect(await flow.authorizations == stored)
        #expect(try await store.load("zeta") == garbage)
        #expect(log.all.contains { $0.level == .warning && $0.providerID == "zeta" })
        let later = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "zeta") }
        #expect(later?.code == .storage)
        #expect(try await store.load("zeta") == garbage)
        #expect(try await flow.accessToken(for: "alpha").reveal() == "at-alpha")
    }

    @Test("with restoresAtStart off, a subscriber sees one .authorized per stored provider and .error for a corrupted one")
    func restoreAfterSubscribing() async throws {
        let stored = try await previousRun("alpha", "beta")
        try await store.save(Data("not json".utf8), for: "zeta")
        var late = options(clock, log: log)
        late.restoresAtStart = false
        let flow = try await AuthFlow(
            providers: ["alpha", "beta", "zeta"].map { mock.provider(id: $0, clientSecret: "s-\($0)") }, store: store,
            transport: mock.transport(), options: late)
        #expect(flow.state == .empty)
        #expect(await flow.authorizations.isEmpty)
        let recorder = recordStates(flow, count: 1, limit: 4, until: { _ in false })

        let restored = try await flow.restore()

        #expect(restored == stored)
        let seen = await collected(recorder)[0]
        #expect(seen.count == 4)
        #expect(seen.first == .empty)
        #expect(seen.dropFirst().map(\.providerID) == ["alpha", "beta", "zeta"])
        #expect(seen[1] == .authorized(provider: "alpha", try #require(stored["alpha"])))
        #expect(seen[2] == .authorized(provider: "beta", try #require(stored["beta"])))
        #expect(seen[3].name == "error")
        #expect(mock.requests().isEmpty)
    }

    @Test("restore() throws .storage when the store cannot list its entries")
    func restoreListFailure() async throws {
        let failing = FailingListStore()
        let error = await #expect(throws: OAuthError.self) {
            _ = try await AuthFlow(providers: [mock.provider(id: "alpha")], store: failing, transport: mock.transport())
        }
        #expect(error?.code == .storage)
    }

    @Test("an entry stored under another provider's key is refused as .storage")
    func misfiledEntry() async throws {
        _ = try await previousRun("alpha")
        try await store.save(try #require(await store.load("alpha")), for: "omega")
        let flow = try await flow("alpha", "omega")
        #expect(flow.state.name == "error")
        #expect(flow.state.providerID == "omega")
        #expect(await flow.authorization(for: "omega") == nil)
        #expect(await flow.authorization(for: "alpha") != nil)
    }

    @Test("entries of providers not configured are ignored and kept")
    func unknownEntries() async throws {
        _ = try await previousRun("alpha", "other")
        let flow = try await flow("alpha")
        #expect(await flow.authorizations.keys.sorted() == ["alpha"])
        try await flow.clear()
        #expect(try await store.keys() == ["other"])
    }

    @Test("clear(provider:) forgets one provider, removes it from the store and publishes .empty")
    func clearOne() async throws {
        _ = try await previousRun("alpha", "beta")
        let flow = try await flow("alpha", "beta")
        let recorders = recordStates(flow, count: 2, limit: 2)
        try await flow.clear(provider: "alpha")
        for seen in await collected(recorders) { #expect(seen.last == .empty(provider: "alpha")) }
        #expect(try await store.load("alpha") == nil)
        #expect(try await store.load("beta") != nil)
        #expect(await flow.authorization(for: "alpha") == nil)
        #expect(await flow.authorization(for: "beta") != nil)
        let error = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "alpha") }
        #expect(error?.code == .reauthorizationRequired)
        #expect(mock.requests().isEmpty)
    }

    @Test("clear() forgets every provider, empties the store and publishes .empty")
    func clearAll() async throws {
        _ = try await previousRun("alpha", "beta")
        let flow = try await flow("alpha", "beta")
        let recorders = recordStates(flow, count: 2, limit: 2)
        try await flow.clear()
        for seen in await collected(recorders) { #expect(seen.last == .empty) }
        #expect(try await store.keys().isEmpty)
        #expect(await flow.authorizations.isEmpty)
        let restarted = try await self.flow("alpha", "beta")
        #expect(restarted.state == .empty)
        #expect(await restarted.authorizations.isEmpty)
    }
}

/// A store whose listing fails, as a directory that became unreadable would.
private struct FailingListStore: SecretStore {
    func load(_ key: String) async throws(OAuthError) -> Data? { nil }
    func save(_ data: Data, for key: String) async throws(OAuthError) {}
    func delete(_ key: String) async throws(OAuthError) {}
    func keys() async throws(OAuthError) -> [String] { throw OAuthError(.storage, message: "cannot list the directory") }
    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T { try await body() }
}

// MARK: - Every failing public call publishes .error

/// A store whose listing fails, as a vault or a database that is down does.
final class UnlistableStore: SecretStore {
    let base = MemorySecretStore()
    func load(_ key: String) async throws(OAuthError) -> Data? { try await base.load(key) }
    func save(_ data: Data, for key: String) async throws(OAuthError) { try await base.save(data, for: key) }
    func delete(_ key: String) async throws(OAuthError) { try await base.delete(key) }
    func keys() async throws(OAuthError) -> [String] { throw OAuthError(.storage, message: "the vault is sealed") }
    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        try await base.withExclusiveAccess(to: key, body)
    }
}

extension StateStreamTests {
    @Test("restore() whose store cannot list its entries publishes .error (no provider: the store failed) and rethrows")
    func restoreListingFails() async throws {
        var options = options(clock)
        options.restoresAtStart = false
        let flow = try await AuthFlow(providers: [mock.provider(id: "app")], store: UnlistableStore(), transport: mock.transport(),
                                      options: options)
        let recorders = recordStates(flow, count: 1)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.restore() })
        #expect(error.code == .storage)
        #expect(await collected(recorders)[0] == [.empty, .error(provider: nil, error)])
        // In the initializer the same failure is thrown (no one can have subscribed yet).
        let failed = await #expect(throws: OAuthError.self) {
            try await AuthFlow(providers: [mock.provider(id: "app")], store: UnlistableStore(), transport: mock.transport(),
                               options: AuthFlow.Options(clock: clock, now: { clock.date }))
        }
        #expect(failed?.code == .storage)
    }

    @Test("metadata(for:) called directly publishes .error when discovery fails, and nothing when it succeeds")
    func metadataFailurePublishes() async throws {
        let provider = mock.discoveredProvider(id: "op")
        mock.script(.openIDConfiguration, [.html(status: 503), mock.discoveryDocument()])
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))
        let recorders = recordStates(flow, count: 1, limit: 2)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.metadata(for: provider) })
        #expect(error.code == .httpStatus && error.httpStatus == 503)
        #expect(error.providerID == "op")
        #expect(await collected(recorders)[0] == [.empty, .error(provider: "op", error)])
        #expect(try await flow.metadata(for: provider).issuer == mock.issuer)
        #expect(flow.state == .error(provider: "op", error), "a successful call publishes nothing")
    }

    @Test("a flow's own discovery failure is published once, by the call that needed it, not twice")
    func discoveryFailurePublishedOnce() async throws {
        mock.script(.openIDConfiguration, [.html(status: 503)])
        let flow = try await AuthFlow(providers: [mock.discoveredProvider(id: "op")], transport: mock.transport(), options: options(clock))
        let recorders = recordStates(flow, count: 1) { $0.providerID == "nope" }
        let first = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizationRequest(provider: "op") })
        // A second, distinct failure ends the recording.
        let second = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizationRequest(provider: "nope") })
        #expect(await collected(recorders)[0] == [.empty, .error(provider: "op", first), .error(provider: "nope", second)])
    }

    @Test("TokenSource.authorizationHeaderValue() for a set that is not Bearer publishes .error and rethrows")
    func headerValueNotBearer() async throws {
        let flow = try await AuthFlow(providers: [mock.provider(id: "app")], transport: mock.transport(), options: options(clock))
        let set = TokenSet(providerID: "app", accessToken: Secret("at-dpop"), tokenType: "MAC", issuedAt: clock.date,
                           expiresAt: clock.date.addingTimeInterval(3600), grant: .authorizationCode)
        await flow.cache(set)  // a set no grant can produce today: the check is the last line of defence
        let recorders = recordStates(flow, count: 1)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.tokenSource(for: "app").authorizationHeaderValue() })
        #expect(error.code == .invalidResponse)
        #expect(error.message?.contains("MAC") == true)
        #expect(!String(reflecting: error).contains("at-dpop"))
        #expect(await collected(recorders)[0] == [.empty, .error(provider: "app", error)])
        #expect(mock.requests().isEmpty)
    }

    @Test("a refresh whose store lock cannot be taken publishes .error; no token request is sent")
    func lockFailurePublishes() async throws {
        let parent = try TemporaryDirectory("StateStreamTests")
        defer { parent.remove() }
        let directory = parent.url.appendingPathComponent("store", isDirectory: true)
        let fileStore = try FileSecretStore(directory: directory)
        try await fileStore.save(storedEntry(provider: "app", access: "at-old", refresh: "rt-1", issuedAt: clock.date.addingTimeInterval(-7200)),
                                 for: "app")
        // A symbolic link where the lock file belongs: FileSecretStore refuses it before the body runs.
        try FileManager.default.createSymbolicLink(atPath: directory.appendingPathComponent("app.lock").path,
                                                   withDestinationPath: parent.url.appendingPathComponent("elsewhere").path)
        mock.script(.token, [.token(access: "at-new", refresh: "rt-2")])
        let flow = try await AuthFlow(providers: [mock.provider(id: "app")], store: fileStore, transport: mock.transport(),
                                      options: options(clock))
        let restored = try #require(await flow.authorization(for: "app"))
        let recorders = recordStates(flow, count: 1)

        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") })

        #expect(error.code == .storage)
        #expect(error.message?.contains("symbolic link") == true)
        #expect(await collected(recorders)[0] == [.authorized(provider: "app", restored), .error(provider: "app", error)])
        #expect(mock.requests().isEmpty)
    }

    @Test("which provider a state names: .empty and .error carry an optional provider; .empty alone is the nil one")
    func providerInStates() {
        let error = OAuthError(.storage, message: "cannot list the store")
        #expect(State.empty == .empty(provider: nil))
        #expect(State.empty != .empty(provider: "a"))
        #expect(State.empty.providerID == nil && State.empty(provider: "a").providerID == "a")
        #expect(State.error(provider: nil, error).providerID == nil && State.error(provider: "a", error).providerID == "a")
        #expect(State.empty.description == "empty" && State.empty(provider: "a").description == "empty(a)")
        #expect(State.error(provider: nil, error).description == "error(\(error))")
        #expect(State.error(provider: "a", error).description == "error(a, \(error))")
        #expect(State.empty(provider: "a").name == "empty" && State.error(provider: nil, error).name == "error")
        var matched = 0
        for state in [State.empty, .empty(provider: "a"), .requestingAccessToken(provider: "a")] {
            if case .empty = state { matched += 1 }
        }
        #expect(matched == 2, "case .empty matches every .empty, whatever its provider")
    }
}
