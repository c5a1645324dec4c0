import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing
import TestSupport

/// ``RenewalTiming`` (Flow/RenewalTiming.swift): the margin scales with the token's lifetime, so
/// a token is renewed ahead of expiry whatever it lives; and through the flow's background
/// renewal, a ``RefreshScheduler`` writing a ``TokenSink``, and a ``TokenSource``, on the manual clock.
@Suite("Renewal timing", .timeLimit(.minutes(1)))
struct RenewalTimingTests {
    let clock = ManualClock()
    let server = ScriptedTransport()

    func set(lifetime: TimeInterval?) -> TokenSet {
        TokenSet(providerID: "svc", accessToken: Secret("at"), issuedAt: clock.date,
                 expiresAt: lifetime.map { clock.date.addingTimeInterval($0) }, grant: .clientCredentials)
    }

    @Test("the margin is refreshMargin capped at a third of the lifetime; the lead is an eighth of it plus a jitter share of another eighth",
          arguments: [(5.0, 5.0 / 3), (30, 10), (90, 30), (180, 60), (3600, 60)])
    func margin(lifetime: TimeInterval, margin: TimeInterval) {
        let set = set(lifetime: lifetime)
        let issued = set.issuedAt.timeIntervalSince1970
        let expiry = issued + lifetime
        #expect(abs(RenewalTiming.margin(of: set, refreshMargin: 60) - margin) < 1e-9)
        #expect(abs(RenewalTiming.renewalTime(of: set, refreshMargin: 60) - (expiry - margin)) < 1e-6)
        // Out-of-range draws are clamped: −3 and NaN count as 0, 7 as 1.
        for (draw, eighths) in [(0.0, 1.0), (0.5, 1.5), (1, 2), (-3, 1), (.nan, 1), (7, 2)] {
            let due = RenewalTiming.backgroundRenewalTime(of: set, refreshMargin: 60, jitter: { draw })
            #expect(abs((due ?? 0) - (expiry - margin - margin * eighths / 8)) < 1e-6, "jitter \(draw)")
            // Two thirds of the life at least, minus the lead: never at once, always before expiry.
            #expect((due ?? 0) > issued + lifetime / 2 && (due ?? .infinity) < expiry - margin)
        }
    }

    @Test("no expiry: never due, no background time; born expired: due at once, no background time, no jitter drawn")
    func noRenewalAhead() {
        let forever = set(lifetime: nil)
        #expect(RenewalTiming.renewalTime(of: forever, refreshMargin: 60) == .infinity)
        #expect(RenewalTiming.backgroundRenewalTime(of: forever, refreshMargin: 60, jitter: { Issue.record("drawn"); return 0 }) == nil)
        let expired = set(lifetime: 0)
        #expect(RenewalTiming.renewalTime(of: expired, refreshMargin: 60) == expired.issuedAt.timeIntervalSince1970)
        #expect(RenewalTiming.backgroundRenewalTime(of: expired, refreshMargin: 60, jitter: { Issue.record("drawn"); return 0 }) == nil)
    }

    /// The sets the scheduler handed over, in order, each written to the sink first.
    final class Written: Sendable {
        private let sets = Mutex<[TokenSet]>([])
        var all: [TokenSet] { sets.withLock { $0 } }
        func append(_ set: TokenSet) { sets.withLock { $0.append(set) } }
    }

    @Test("5 s, 30 s and 3,600 s tokens are renewed in the background before expiry: the sink never holds an expired token and TokenSource answers a fresh one at once",
          arguments: [5, 30, 3600])
    func renewalAhead(lifetime: Int) async throws {
        let directory = try TemporaryDirectory("renewal")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("token").path
        let sink = try TokenSink(providerID: "svc", path: path)
        let service = Provider(id: "svc", tokenURL: URL(string: "https://as.test/token"), clientID: "cli-svc", clientSecret: Secret("s3cret"))
        server.script("/token", (1...4).map { ScriptedTransport.Step.token("at-\($0)", expiresIn: lifetime) })
        let flow = try await AuthFlow(
            providers: [service], transport: server,
            options: AuthFlow.Options(clock: clock, now: { [clock] in clock.date }, proactiveRefresh: true,
                                      retry: RetryPolicy(maximumAttempts: 1), jitter: { 0.5 }))
        let written = Written()
        let scheduler = try RefreshScheduler(flow: flow) { event in
            guard case .authorized(let set) = event else { return }
            try? sink.write(set)
            written.append(set)
        }
        await scheduler.start()
        let source = flow.tokenSource(for: "svc")
        let margin = min(60, Double(lifetime) / 3)
        for round in 1...3 {
            let token = "at-\(round)"
            #expect(await waitUntil { written.all.count == round && (try? String(contentsOfFile: path, encoding: .utf8)) == token },
                    "round \(round): the sink holds \(token)")
            let held = try #require(written.all.last)
            let expiry = try #require(held.expiresAt).timeIntervalSince1970
            #expect(held.accessToken.reveal() == token && expiry > clock.date.timeIntervalSince1970, "not expired when written")

            // One timer per token, due before expiry with room for the request (at least an eighth of the margin).
            #expect(await waitUntil { clock.sleeps.count == round && clock.sleepers == 1 }, "round \(round): the background timer")
            let due = try #require(clock.sleeps.last)
            let seconds = Double(due.components.seconds) + Double(due.components.attoseconds) / 1e18
            #expect(clock.date.timeIntervalSince1970 + seconds <= expiry - margin - margin / 8 + 1e-6, "round \(round): due \(seconds) s")

            // Half way, a caller gets the held token from memory: no request, no wait.
            clock.advance(by: due / 2)
            #expect(try await source.token().reveal() == token)
            #expect(server.requests("/token").count == round)

            clock.advance(by: due - due / 2)
            #expect(await waitUntil { server.requests("/token").count == round + 1 }, "round \(round): renewed when due")
            #expect(clock.date.timeIntervalSince1970 < expiry, "renewed while \(token) was still valid")
            #expect(await waitUntil { (try? String(contentsOfFile: path, encoding: .utf8)) == "at-\(round + 1)" })
            #expect(try await source.token().reveal() == "at-\(round + 1)", "the new token, fresh")
            #expect(server.requests("/token").count == round + 1)
        }
        #expect(server.requests("/token").map { $0.form["grant_type"] } == Array(repeating: "client_credentials", count: 4))
        scheduler.stop()
    }
}
