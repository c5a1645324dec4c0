import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// The coarse system clock (System/SystemClock.swift) and when a cached token's freshness is read from it.
@Suite("System clock: the coarse clock of the freshness check", .timeLimit(.minutes(1)))
struct SystemClockTests {
    @Test("the coarse system clock is used only while Options.now is the system clock")
    func systemClockFlag() {
        #expect(AuthFlow.Options().readsSystemClock)
        #expect(!AuthFlow.Options(now: { Date() }).readsSystemClock)
        var options = AuthFlow.Options()
        options.now = { Date(timeIntervalSince1970: 0) }
        #expect(!options.readsSystemClock)
        // Read between two readings of the wall clock, so a pause between the reads (a busy machine)
        // cannot make it fail (issue 21): never ahead of the wall clock (1 ms for its rounding), and
        // less than 1 s behind.
        let before = Date().timeIntervalSince1970
        let coarse = SystemClock.coarseSeconds()
        let after = Date().timeIntervalSince1970
        #expect(coarse > before - 1 && coarse <= after + 0.001, "CLOCK_REALTIME_COARSE is the wall clock, a tick behind at most: \(before) \(coarse) \(after)")
    }

    @Test("with the system clock, a token valid for an hour is answered from memory and an expired one is renewed")
    func systemClockFreshness() async throws {
        let mock = MockProvider()
        let now = Date()
        let fresh = TokenSet(providerID: "fresh", accessToken: Secret("at-fresh"), issuedAt: now, expiresAt: now.addingTimeInterval(3600),
                             grant: .authorizationCode)
        let stale = TokenSet(providerID: "stale", accessToken: Secret("at-stale"), issuedAt: now.addingTimeInterval(-3600),
                             expiresAt: now.addingTimeInterval(-1), grant: .authorizationCode)
        let store = MemorySecretStore(["fresh": StoredEntry.encode(fresh), "stale": StoredEntry.encode(stale)])
        let flow = try await AuthFlow(providers: [mock.provider(id: "fresh"), mock.provider(id: "stale")], store: store,
                                      transport: mock.transport())
        #expect(flow.options.readsSystemClock)
        #expect(try await flow.tokenSource(for: "fresh").token().reveal() == "at-fresh")
        #expect(try await flow.accessToken(for: "fresh").reveal() == "at-fresh")
        let error = await #expect(throws: OAuthError.self) { try await flow.tokenSource(for: "stale").token() }
        #expect(error?.code == .reauthorizationRequired, "expired, and no refresh token to renew it with")
        #expect(mock.requests().isEmpty)
    }
}
