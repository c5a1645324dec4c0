import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

/// `Options.proactiveRefresh` (Flow/ProactiveRefresh.swift): background renewal on the injected
/// clock. The ``ManualClock`` keeps each timer asleep until the test moves time past it.
@Suite("Proactive refresh", .timeLimit(.minutes(1)))
struct ProactiveRefreshTests {
    let clock = ManualClock()
    let server = ScriptedTransport()

    /// Options on the manual clock with background renewal on and a constant jitter draw.
    func options(jitter: Double = 0.5, margin: TimeInterval = 60, proactive: Bool = true) -> AuthFlow.Options {
        AuthFlow.Options(clock: clock, now: { [clock] in clock.date }, refreshMargin: margin, proactiveRefresh: proactive,
                         jitter: { jitter })
    }

    /// A flow restored from a store holding at-1 / rt-1 issued now for `lifetime` seconds.
    func flow(jitter: Double = 0.5, lifetime: TimeInterval = 3600, refresh: String? = "rt-1", proactive: Bool = true) async throws -> AuthFlow {
        let store = MemorySecretStore(["app": storedEntry(provider: "app", refresh: refresh, issuedAt: clock.date, lifetime: lifetime)])
        return try await AuthFlow(providers: [scriptedProvider(secret: "s3cret")], store: store, transport: server,
                                  options: options(jitter: jitter, proactive: proactive))
    }

    @Test("the renewal is due at expiry − margin − (margin/8 + jitter·margin/8)", arguments: [
        (0.0, 3532.5), (0.5, 3528.75), (1.0, 3525.0),
    ])
    func delay(jitter: Double, seconds: Double) async throws {
        let flow = try await flow(jitter: jitter)
        #expect(await waitUntil { clock.sleepers == 1 })
        #expect(clock.sleeps == [.seconds(seconds)])
        #expect(server.requests().isEmpty)
        withExtendedLifetime(flow) {}   // a released flow cancels its timers
    }

    @Test("the timer renews in the background when due: one refresh_token request, requestingAccessToken → authorized")
    func renewsWhenDue() async throws {
        let flow = try await flow()
        #expect(await waitUntil { clock.sleepers == 1 })
        server.script("/token", [.token("at-2", refresh: "rt-2")])
        let recorders = recordStates(flow)
        let before = flow.state

        // Durations add exactly: the two steps end on the timer's deadline.
        clock.advance(by: .seconds(3528.75) - .milliseconds(10))
        try await Task.sleep(for: .milliseconds(50))
        #expect(server.requests().isEmpty, "not before it is due")
        clock.advance(by: .milliseconds(10))

        // Restoring published .authorized already: wait for a different one.
        guard await waitUntil({ flow.state.isAuthorized && flow.state != before }) else {
            Issue.record("no background renewal: \(flow.state)")
            return
        }
        let seen = await collected(recorders)
        let authorization = try #require(await flow.authorization(for: "app"))
        let expected: [State] = [before, .requestingAccessToken(provider: "app"), .authorized(provider: "app", authorization)]
        for states in seen { #expect(states == expected) }
        let sent = try #require(server.requests("/token").only)
        #expect(sent.form["grant_type"] == "refresh_token")
        #expect(sent.form["refresh_token"] == "rt-1")
        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")
        // The new token gets its own timer: issued at 3528.75 s, due 3528.75 s later.
        #expect(await waitUntil { clock.sleepers == 1 && clock.sleeps.count == 2 })
        #expect(clock.sleeps.last == .seconds(3528.75))
    }

    @Test("callers never wait: during the background refresh accessToken(for:) answers at once from the cache")
    func callersNeverWait() async throws {
        let flow = try await flow()
        #expect(await waitUntil { clock.sleepers == 1 })
        let gate = Gate()
        server.script("/token", [ScriptedTransport.Step.token("at-2").gated(gate)])

        clock.advance(by: .seconds(3528.75))
        #expect(await waitUntil { gate.arrivals == 1 }, "the background request is in flight")
        #expect(flow.state == .requestingAccessToken(provider: "app"))

        // Held at the gate, a caller that waited for the refresh would never return.
        let answered = Mutex<String?>(nil)
        let caller = Task {
            let token = try await flow.accessToken(for: "app").reveal()
            answered.withLock { $0 = token }
        }
        #expect(await waitUntil { answered.withLock { $0 } != nil })
        #expect(answered.withLock { $0 } == "at-1")
        #expect(try await flow.tokenSource(for: "app").token().reveal() == "at-1")
        #expect(server.requests("/token").count == 1)

        gate.open()
        _ = try await caller.value
        #expect(await waitUntil { flow.state.isAuthorized })
        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")
        #expect(server.requests("/token").count == 1)
    }

    @Test("clear(provider:) cancels the timer: nothing is sent when its time comes")
    func cancelledByClear() async throws {
        let flow = try await flow()
        #expect(await waitUntil { clock.sleepers == 1 })

        try await flow.clear(provider: "app")

        #expect(await waitUntil { clock.sleepers == 0 })
        clock.advance(by: .seconds(7200))
        try await Task.sleep(for: .milliseconds(50))
        #expect(server.requests().isEmpty)
        #expect(flow.state == .empty(provider: "app"))
    }

    @Test("no refresh after the flow is gone: its timers are cancelled with it")
    func flowGone() async throws {
        weak var weakFlow: AuthFlow?
        do {
            let flow = try await flow()
            weakFlow = flow
            #expect(await waitUntil { clock.sleepers == 1 })
        }

        #expect(await waitUntil { weakFlow == nil }, "the timer holds the flow only weakly")
        #expect(await waitUntil { clock.sleepers == 0 })
        clock.advance(by: .seconds(7200))
        try await Task.sleep(for: .milliseconds(50))
        #expect(server.requests().isEmpty)
    }

    @Test("a token renewed on demand first replaces the timer; the old one sends nothing")
    func onDemandFirst() async throws {
        let flow = try await flow()
        #expect(await waitUntil { clock.sleepers == 1 })
        server.script("/token", [.token("at-2")])

        try await flow.refresh(provider: "app")
        #expect(await waitUntil { clock.sleeps.count == 2 && clock.sleepers == 1 }, "one timer: the new token's")

        clock.advance(by: .seconds(3528.75))
        #expect(await waitUntil { server.requests("/token").count == 2 })
        try await Task.sleep(for: .milliseconds(50))
        #expect(server.requests("/token").count == 2, "the refresh, then the new token's timer; the old timer sent nothing")
    }

    @Test("a failed background renewal publishes .error; the next caller refreshes on demand")
    func failureThenOnDemand() async throws {
        let log = LogCollector()
        var settings = options()
        settings.log = log.sink
        let store = MemorySecretStore(["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let flow = try await AuthFlow(providers: [scriptedProvider(secret: "s3cret", debug: true)], store: store, transport: server,
                                      options: settings)
        #expect(await waitUntil { clock.sleepers == 1 })
        server.script("/token", [.oauthError("invalid_client", status: 401), .token("at-2")])

        clock.advance(by: .seconds(3528.75))
        // Logged once the renewal is over (its error is published a moment before): a caller
        // arriving in between would share the failed refresh.
        #expect(await waitUntil { log.all.contains { $0.message.contains("background renewal failed") } })
        if case .error(let provider, let error) = flow.state {
            #expect(provider == "app")
            #expect(error.response?.code == .invalidClient)
        } else {
            Issue.record("expected .error, got \(flow.state)")
        }
        #expect(try await flow.accessToken(for: "app").reveal() == "at-1", "still fresh: the failure did not drop it")

        clock.advance(by: .seconds(20))   // past expiry − margin
        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")
        #expect(server.requests("/token").count == 2)
    }

    @Test("tokens that cannot be renewed in the background get no timer: no refresh token, or born expired", arguments: [
        (3600.0, nil as String?), (0.0, "rt-1"),
    ])
    func noTimer(lifetime: TimeInterval, refresh: String?) async throws {
        let flow = try await flow(lifetime: lifetime, refresh: refresh)
        try await Task.sleep(for: .milliseconds(50))
        #expect(clock.sleepers == 0)
        #expect(clock.sleeps.isEmpty)
        withExtendedLifetime(flow) {}
    }

    @Test("off by default: no timer")
    func offByDefault() async throws {
        let flow = try await flow(proactive: false)
        try await Task.sleep(for: .milliseconds(50))
        #expect(clock.sleeps.isEmpty)
        #expect(AuthFlow.Options().proactiveRefresh == false)
        withExtendedLifetime(flow) {}
    }

    @Test("client-credentials tokens are fetched again in the background (no refresh token needed)")
    func clientCredentials() async throws {
        let flow = try await AuthFlow(providers: [scriptedProvider(secret: "s3cret")], transport: server, options: options(jitter: 0))
        server.script("/token", [.token("at-1"), .token("at-2")])
        try await flow.clientCredentials(provider: "app")
        let first = flow.state
        #expect(await waitUntil { clock.sleepers == 1 })
        #expect(clock.sleeps == [.seconds(3532.5)])

        clock.advance(by: .seconds(3532.5))

        #expect(await waitUntil { server.requests("/token").count == 2 })
        #expect(server.requests("/token").map { $0.form["grant_type"] } == ["client_credentials", "client_credentials"])
        #expect(await waitUntil { flow.state.isAuthorized && flow.state != first })
        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")
    }
}

extension AuthFlow.State {
    /// True for `.authorized`.
    var isAuthorized: Bool {
        if case .authorized = self { return true }
        return false
    }
}
