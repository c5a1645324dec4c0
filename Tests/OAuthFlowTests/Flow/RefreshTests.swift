import Foundation
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

@Suite("Refresh (RFC 6749 §6)", .timeLimit(.minutes(1)))
struct RefreshTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = MemorySecretStore()

    func flow(_ providers: Provider..., retry: RetryPolicy = RetryPolicy()) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, store: store, transport: mock.transport(), options: options(clock, retry: retry))
    }

    /// A flow whose provider "app" holds at-1 / rt-1, expiring in an hour, with the clock past expiry.
    func expiredFlow(_ provider: Provider? = nil, scope: String? = "read write", retry: RetryPolicy = RetryPolicy()) async throws -> AuthFlow {
        let flow = try await flow(provider ?? mock.provider(id: "app", clientID: "cli-1", scopes: ["read", "write"]), retry: retry)
        try await authorizeByDevice(flow, mock: mock, provider: "app", scope: scope)
        mock.clearRequests()
        clock.advance(by: .seconds(3600))
        return flow
    }

    @Test("a refresh POSTs grant_type=refresh_token to the token endpoint, never the authorization URL (RFC 6749 §6)")
    func refreshRequest() async throws {
        let flow = try await expiredFlow()
        mock.script(.token, [.token(access: "at-2")])
        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")

        let sent = try #require(mock.requests().only)
        #expect(sent.method == "POST")
        #expect(sent.url == mock.url(.token))
        #expect(sent.url.query == nil)
        #expect(sent.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(sent.header("Accept") == "application/json")
        #expect(uniqueForm(sent) == ["grant_type": "refresh_token", "refresh_token": "rt-1", "client_id": "cli-1"])
        #expect(mock.requests(.authorization).isEmpty)
    }

    @Test("a confidential client authenticates its refresh with Basic (RFC 6749 §6)")
    func confidentialRefresh() async throws {
        let flow = try await expiredFlow(mock.provider(id: "app", clientID: "cli-1", clientSecret: "s3cret"))
        mock.script(.token, [.token(access: "at-2")])
        _ = try await flow.accessToken(for: "app")
        let sent = try #require(mock.requests(.token).only)
        #expect(sent.basicCredentials?.secret == "s3cret")
        #expect(uniqueForm(sent) == ["grant_type": "refresh_token", "refresh_token": "rt-1"])
    }

    @Test("the token is refreshed within the refresh margin before expiry, not earlier", arguments: [(3539, false), (3541, true)])
    func refreshMargin(seconds: Int, refreshes: Bool) async throws {
        let flow = try await flow(mock.provider(id: "app"))
        try await authorizeByDevice(flow, mock: mock, provider: "app")
        mock.clearRequests()
        mock.script(.token, [.token(access: "at-2")])
        clock.advance(by: .seconds(seconds))  // margin 60 s before a 3600 s lifetime
        let token = try await flow.accessToken(for: "app").reveal()
        #expect(token == (refreshes ? "at-2" : "at-1"))
        #expect(mock.requests(.token).count == (refreshes ? 1 : 0))
    }

    @Test("a returned refresh_token replaces the old one in the store (rotation, RFC 6749 §6, RFC 9700 §4.14.2)")
    func rotation() async throws {
        let flow = try await expiredFlow()
        mock.script(.token, [.token(access: "at-2", refresh: "rt-2"), .token(access: "at-3", refresh: "rt-3")])
        _ = try await flow.accessToken(for: "app")
        #expect(try await flow.tokenSet(for: "app").refreshToken?.reveal() == "rt-2")

        // What another process (or the next start) finds in the store.
        let restarted = try await self.flow(mock.provider(id: "app", clientID: "cli-1"))
        let stored = try await restarted.tokenSet(for: "app")
        #expect(stored.refreshToken?.reveal() == "rt-2")
        #expect(stored.accessToken.reveal() == "at-2")
        let raw = String(decoding: try #require(await store.load("app")), as: UTF8.self)
        #expect(raw.contains("rt-2"))
        #expect(!raw.contains("rt-1"))

        clock.advance(by: .seconds(3600))
        _ = try await flow.accessToken(for: "app")
        #expect(mock.requests(.token).last?.form["refresh_token"] == "rt-2", "the next refresh uses the rotated token")
    }

    @Test("without a returned refresh_token the old one is kept (RFC 6749 §6)")
    func noRotation() async throws {
        let flow = try await expiredFlow()
        mock.script(.token, [.token(access: "at-2", refresh: nil)])
        _ = try await flow.accessToken(for: "app")
        #expect(try await flow.tokenSet(for: "app").refreshToken?.reveal() == "rt-1")
        #expect(await flow.authorization(for: "app")?.isRefreshable == true)
        let restarted = try await self.flow(mock.provider(id: "app"))
        #expect(try await restarted.tokenSet(for: "app").refreshToken?.reveal() == "rt-1")
        #expect(try await restarted.tokenSet(for: "app").accessToken.reveal() == "at-2")
    }

    @Test("an absent scope keeps the granted scopes; a present one replaces them (RFC 6749 §5.1)", arguments: [
        (nil, ["read", "write"]), ("read", ["read"]),
    ] as [(String?, [String])])
    func scopes(returned: String?, expected: [String]) async throws {
        let flow = try await expiredFlow()
        mock.script(.token, [.token(access: "at-2", scope: returned)])
        _ = try await flow.accessToken(for: "app")
        #expect(await flow.authorization(for: "app")?.scopes == expected)
    }

    @Test("refresh publishes requestingAccessToken then authorized, with the new expiry")
    func stateSequence() async throws {
        let flow = try await expiredFlow()
        mock.script(.token, [.token(access: "at-2", expiresIn: 120)])
        let recorders = recordStates(flow)
        let before = flow.state
        _ = try await flow.accessToken(for: "app")
        let authorization = try #require(await flow.authorization(for: "app"))
        #expect(authorization.expiresAt == clock.date.addingTimeInterval(120))
        let expected: [State] = [before, .requestingAccessToken(provider: "app"), .authorized(provider: "app", authorization)]
        for seen in await collected(recorders) { #expect(seen == expected) }
    }

    @Test("invalid_grant marks the authorization for reauthorization, persists it, and stops further requests (RFC 6749 §5.2)")
    func invalidGrant() async throws {
        let flow = try await expiredFlow()
        mock.script(.token, [.oauthError("invalid_grant", description: "refresh token revoked")])
        let recorders = recordStates(flow)
        let before = flow.state
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") })
        #expect(error.code == .reauthorizationRequired)
        #expect(error.response?.code == .invalidGrant)
        #expect(error.response?.errorDescription == "refresh token revoked")
        #expect(error.httpStatus == 400)
        #expect(error.recovery == .reauthorize)
        #expect(error.providerID == "app")
        #expect(await flow.authorization(for: "app")?.needsReauthorization == true)
        let expected: [State] = [before, .requestingAccessToken(provider: "app"), .error(provider: "app", error)]
        for seen in await collected(recorders) { #expect(seen == expected) }

        let again = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") }
        #expect(again?.code == .reauthorizationRequired)
        #expect(mock.requests(.token).count == 1, "no second request for a rejected refresh token")

        let restarted = try await self.flow(mock.provider(id: "app"))
        #expect(await restarted.authorization(for: "app")?.needsReauthorization == true)
        let afterRestart = await #expect(throws: OAuthError.self) { try await restarted.accessToken(for: "app") }
        #expect(afterRestart?.code == .reauthorizationRequired)
        #expect(mock.requests(.token).count == 1)
    }

    @Test("a 400 or 401 without an OAuth error body marks the login for reauthorization too, and is not retried", arguments: [
        MockResponse(status: 400, headers: ["Content-Type": "text/plain"], body: Data("bad request".utf8)),
        MockResponse(status: 401, headers: [:], body: Data()),
        MockResponse.html("<html><body>Unauthorized</body></html>", status: 401),
    ])
    func deadRefreshWithoutBody(response: MockResponse) async throws {
        let flow = try await expiredFlow()
        mock.script(.token, [response])
        let recorders = recordStates(flow)
        let before = flow.state
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") })
        #expect(error.code == .reauthorizationRequired)
        #expect(error.recovery == .reauthorize)
        #expect(error.httpStatus == response.status)
        #expect(await flow.authorization(for: "app")?.needsReauthorization == true)
        let expected: [State] = [before, .requestingAccessToken(provider: "app"), .error(provider: "app", error)]
        for seen in await collected(recorders) { #expect(seen == expected) }
        await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") }
        #expect(mock.requests(.token).count == 1, "the dead refresh token is not posted again")
    }

    @Test("a failure other than invalid_grant keeps the tokens for a retry (RFC 6749 §5.2)", arguments: [
        MockResponse.oauthError("temporarily_unavailable", status: 503), .html(), .oauthError("invalid_client", status: 401),
    ])
    func otherFailuresKeepTokens(response: MockResponse) async throws {
        // Retries off: this is about what a failed refresh leaves behind (RetryTests covers retries).
        let flow = try await expiredFlow(retry: .none)
        mock.script(.token, [response, .token(access: "at-2")])
        await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") }
        #expect(await flow.authorization(for: "app")?.needsReauthorization == false)
        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")
        #expect(mock.requests(.token).map { $0.form["refresh_token"] } == ["rt-1", "rt-1"])
    }

    @Test("an expired token without a refresh token is .reauthorizationRequired with no request")
    func noRefreshToken() async throws {
        let flow = try await flow(mock.provider(id: "app"))
        try await authorizeByDevice(flow, mock: mock, provider: "app", refresh: nil)
        mock.clearRequests()
        clock.advance(by: .seconds(3600))
        let error = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") }
        #expect(error?.code == .reauthorizationRequired)
        #expect(mock.requests().isEmpty)
    }

    @Test("100 concurrent accessToken(for:) calls on an expired token make exactly one refresh request")
    func singleFlight() async throws {
        let counting = CountingStore(base: store)
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "app")], store: counting, transport: mock.transport(), options: options(clock))
        try await authorizeByDevice(flow, mock: mock, provider: "app")
        let loginAccesses = counting.exclusiveAccesses  // the login stores under the lock too
        mock.clearRequests()
        clock.advance(by: .seconds(3600))
        mock.script(.token, [.token(access: "at-2", refresh: "rt-2"), .token(access: "at-3", refresh: "rt-3")])
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 { group.addTask { try await flow.accessToken(for: "app").reveal() } }
            var tokens: [String] = []
            for try await token in group { tokens.append(token) }
            return tokens
        }
        #expect(tokens.count == 100)
        #expect(Set(tokens) == ["at-2"])
        #expect(mock.requests(.token).count == 1)
        #expect(counting.exclusiveAccesses - loginAccesses == 1, "the callers share one renewal, not one each behind the store's lock")
        #expect(try await flow.tokenSet(for: "app").refreshToken?.reveal() == "rt-2")
    }

    @Test("refresh(provider:) refreshes a valid token on demand")
    func forcedRefresh() async throws {
        let flow = try await flow(mock.provider(id: "app"))
        try await authorizeByDevice(flow, mock: mock, provider: "app")
        mock.clearRequests()
        mock.script(.token, [.token(access: "at-2")])
        _ = try await flow.refresh(provider: "app")
        #expect(mock.requests(.token).only?.form["grant_type"] == "refresh_token")
        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")
    }
}

/// A store that counts how often its lock is taken.
final class CountingStore: SecretStore {
    let base: MemorySecretStore
    private let count = Mutex(0)
    init(base: MemorySecretStore) { self.base = base }
    var exclusiveAccesses: Int { count.withLock { $0 } }

    func load(_ key: String) async throws(OAuthError) -> Data? { try await base.load(key) }
    func save(_ data: Data, for key: String) async throws(OAuthError) { try await base.save(data, for: key) }
    func delete(_ key: String) async throws(OAuthError) { try await base.delete(key) }
    func keys() async throws(OAuthError) -> [String] { try await base.keys() }
    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        count.withLock { $0 += 1 }
        return try await base.withExclusiveAccess(to: key, body)
    }
}
