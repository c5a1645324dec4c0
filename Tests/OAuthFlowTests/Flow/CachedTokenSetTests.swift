import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// `flow.cachedTokenSet(for:)`: the fresh set in memory, for a caller that must not wait
/// (Flow/CachedTokenSet.swift; what `authflow agent`'s socket loop answers from).
@Suite("Cached token set", .timeLimit(.minutes(1)))
struct CachedTokenSetTests {
    let clock = TestClock()
    let server = ScriptedTransport()

    /// A flow over `server` holding at-1 / rt-1 for "app", issued at the clock's start for an hour.
    func flow() async throws -> AuthFlow {
        try await AuthFlow(providers: [scriptedProvider()], store: MemorySecretStore(["app": storedEntry(provider: "app", issuedAt: clock.date)]),
                           transport: server, options: options(clock))
    }

    @Test("the fresh set while tokenSet(for:) would answer it from memory; nil from the renewal time on; never a request")
    func freshUntilDue() async throws {
        let flow = try await flow()
        let before = flow.state
        #expect(flow.cachedTokenSet(for: "app")?.accessToken.reveal() == "at-1")
        #expect(flow.cachedTokenSet(for: "app")?.refreshToken?.reveal() == "rt-1")
        clock.advance(by: .seconds(3539))   // one second before the 60 s margin
        #expect(flow.cachedTokenSet(for: "app")?.accessToken.reveal() == "at-1")
        #expect(try await flow.tokenSet(for: "app").accessToken.reveal() == "at-1")
        clock.advance(by: .seconds(1))      // due: tokenSet(for:) would refresh now
        #expect(flow.cachedTokenSet(for: "app") == nil)
        #expect(flow.cachedTokenSet(for: "app") == nil)
        #expect(server.requests().isEmpty, "it never renews")
        #expect(flow.state == before, "and publishes nothing")
    }

    @Test("after tokenSet(for:) renews, the new set; a provider that is not configured gives nil")
    func followsRenewal() async throws {
        let flow = try await flow()
        clock.advance(by: .seconds(3600))
        server.script("/token", [.token("at-2", refresh: "rt-2")])
        #expect(flow.cachedTokenSet(for: "app") == nil)
        #expect(try await flow.tokenSet(for: "app").accessToken.reveal() == "at-2")
        #expect(flow.cachedTokenSet(for: "app")?.accessToken.reveal() == "at-2")
        #expect(server.requests("/token").count == 1)
        #expect(flow.cachedTokenSet(for: "nobody") == nil)
    }

    /// A flow over `server` holding at-1 / rt-1 for "app" and for "other".
    func twoProviderFlow() async throws -> AuthFlow {
        let entries = ["app": storedEntry(provider: "app", issuedAt: clock.date), "other": storedEntry(provider: "other", issuedAt: clock.date)]
        return try await AuthFlow(providers: [scriptedProvider(), scriptedProvider(id: "other")], store: MemorySecretStore(entries),
                                  transport: server, options: options(clock))
    }

    @Test("a stamp is current while cachedTokenSet(for:) would answer the same set, and not from the renewal time on")
    func stampFollowsTime() async throws {
        let flow = try await flow()
        let (set, stamp) = try #require(flow.stampedTokenSet(for: "app"))
        #expect(set.accessToken.reveal() == "at-1")
        #expect(stamp.isCurrent)
        clock.advance(by: .seconds(3539))   // one second before the 60 s margin
        #expect(stamp.isCurrent)
        clock.advance(by: .seconds(1))
        #expect(!stamp.isCurrent)
        #expect(flow.stampedTokenSet(for: "app") == nil)
        #expect(flow.stampedTokenSet(for: "nobody") == nil)
        #expect(server.requests().isEmpty)
    }

    @Test("a stamp is not current once the flow holds another set: a refresh (even to the same token), a logout; another provider's change leaves it current")
    func stampFollowsTheSlot() async throws {
        let flow = try await twoProviderFlow()
        let app = try #require(flow.stampedTokenSet(for: "app")).stamp
        let other = try #require(flow.stampedTokenSet(for: "other")).stamp
        server.script("/token", [.token("at-1", refresh: "rt-1")])
        _ = try await flow.refresh(provider: "app")
        #expect(!app.isCurrent, "the same token, but stored again: the stamp cannot tell, so it is not current")
        #expect(other.isCurrent)
        let renewed = try #require(flow.stampedTokenSet(for: "app")).stamp
        #expect(renewed.isCurrent)
        try await flow.clear(provider: "app")
        #expect(!renewed.isCurrent)
        #expect(flow.stampedTokenSet(for: "app") == nil)
        #expect(other.isCurrent)
        try await flow.clear(provider: "other")
        #expect(!other.isCurrent)
    }
}
