import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// `flow.tokenSource(for:)`: what a service's HTTP clients plug in (Flow/TokenSource.swift).
@Suite("Token source", .timeLimit(.minutes(1)))
struct TokenSourceTests {
    let clock = TestClock()
    let server = ScriptedTransport()

    /// A flow over `server` holding at-1 / rt-1 for "app" (an hour from the clock's start) and,
    /// with `second`, at-b / rt-b for "other".
    func flow(second: Bool = false) async throws -> AuthFlow {
        var entries = ["app": storedEntry(provider: "app", issuedAt: clock.date)]
        if second { entries["other"] = storedEntry(provider: "other", access: "at-b", refresh: "rt-b", issuedAt: clock.date) }
        let providers = second ? [scriptedProvider(), scriptedProvider(id: "other")] : [scriptedProvider()]
        return try await AuthFlow(providers: providers, store: MemorySecretStore(entries), transport: server, options: options(clock))
    }

    /// Fails to compile unless `T` is Sendable.
    func requireSendable<T: Sendable>(_ value: T) -> T { value }

    @Test("a token source is a Sendable value bound to one provider; copies share the flow")
    func boundToProvider() async throws {
        let flow = try await flow(second: true)
        let app = requireSendable(flow.tokenSource(for: "app"))
        let other = flow.tokenSource(for: "other")
        let copy = app

        #expect(app.providerID == "app")
        #expect(app.flow === flow && copy.flow === flow)
        #expect(try await app.token().reveal() == "at-1")
        #expect(try await other.token().reveal() == "at-b")
        #expect(try await copy.token().reveal() == "at-1")
        // From another task, as a service's handlers would call it.
        let fromTask = try await Task.detached { try await app.token().reveal() }.value
        #expect(fromTask == "at-1")
        #expect(server.requests().isEmpty)
    }

    @Test("token() is answered from memory while fresh: no request, no state change")
    func cached() async throws {
        let flow = try await flow()
        let source = flow.tokenSource(for: "app")
        let before = flow.state

        for _ in 0..<100 { #expect(try await source.token().reveal() == "at-1") }
        clock.advance(by: .seconds(3539))   // one second before the 60 s margin
        #expect(try await source.token().reveal() == "at-1")

        #expect(server.requests().isEmpty)
        #expect(flow.state == before)
    }

    @Test("an expired token is refreshed once for 200 concurrent callers: exactly 1 request on the wire")
    func singleFlight() async throws {
        let flow = try await flow()
        let source = flow.tokenSource(for: "app")
        clock.advance(by: .seconds(3600))
        let gate = Gate()
        server.script("/token", [ScriptedTransport.Step.token("at-2", refresh: "rt-2").gated(gate), .token("at-3")])

        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { try await source.token().reveal() } }
            // Hold the one refresh until it is in flight, so the callers pile up behind it.
            #expect(await waitUntil { gate.arrivals == 1 })
            try await Task.sleep(for: .milliseconds(50))
            gate.open()
            var tokens: [String] = []
            for try await token in group { tokens.append(token) }
            return tokens
        }

        #expect(tokens.count == 200)
        #expect(Set(tokens) == ["at-2"])
        #expect(server.requests("/token").count == 1)
        #expect(server.requests("/token").first?.form["refresh_token"] == "rt-1")
        #expect(try await source.tokenSet().refreshToken?.reveal() == "rt-2")
    }

    @Test("the state stream shows requestingAccessToken → authorized for each refresh a source makes")
    func statesPerRefresh() async throws {
        let flow = try await flow()
        let source = flow.tokenSource(for: "app")
        server.script("/token", [.token("at-2", expiresIn: 3600), .token("at-3", expiresIn: 3600)])
        let recorders = recordStates(flow, limit: 5, until: { _ in false })
        let before = flow.state

        clock.advance(by: .seconds(3600))
        #expect(try await source.token().reveal() == "at-2")
        let first = try #require(await flow.authorization(for: "app"))
        clock.advance(by: .seconds(3600))
        #expect(try await source.token().reveal() == "at-3")
        let second = try #require(await flow.authorization(for: "app"))

        let expected: [State] = [
            before, .requestingAccessToken(provider: "app"), .authorized(provider: "app", first),
            .requestingAccessToken(provider: "app"), .authorized(provider: "app", second),
        ]
        for seen in await collected(recorders) { #expect(seen == expected) }
        #expect(server.requests("/token").count == 2)
    }

    @Test("tokenSet() and authorizationHeaderValue(): a server's lowercase bearer is written Bearer (RFC 6750 §2.1)")
    func headerValue() async throws {
        let flow = try await flow()
        let source = flow.tokenSource(for: "app")
        clock.advance(by: .seconds(3600))
        server.script("/token", [.token("at-2", type: "bearer")])

        #expect(try await source.authorizationHeaderValue() == "Bearer at-2")
        #expect(try await source.tokenSet().tokenType == "bearer")
        #expect(server.requests("/token").count == 1)
    }

    @Test("a provider that is not configured is reported by the first call, .configuration; nothing is sent")
    func unknownProvider() async throws {
        let flow = try await flow()
        let source = flow.tokenSource(for: "nope")

        let error = try #require(await #expect(throws: OAuthError.self) { try await source.token() })

        #expect(error.code == .configuration)
        #expect(server.requests().isEmpty)
    }

    @Test("renew(rejecting:) refreshes once for many refusals of the same token, and not at all for a stale refusal")
    func renewRejecting() async throws {
        let flow = try await flow()
        let source = flow.tokenSource(for: "app")
        server.script("/token", [.token("at-2"), .token("at-3")])

        let renewed = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await source.renew(rejecting: Secret("at-1")).accessToken.reveal() } }
            var all: [String] = []
            for try await token in group { all.append(token) }
            return all
        }

        #expect(Set(renewed) == ["at-2"])
        #expect(server.requests("/token").count == 1)
        // A refusal of a token that was already replaced returns the current one without a request.
        #expect(try await source.renew(rejecting: Secret("at-1")).accessToken.reveal() == "at-2")
        #expect(server.requests("/token").count == 1)
    }

    @Test("description, debugDescription and dump show the provider, never a token")
    func redaction() async throws {
        let flow = try await flow()
        let source = flow.tokenSource(for: "app")
        _ = try await source.token()
        var dumped = ""
        dump(source, to: &dumped)
        for text in [String(describing: source), String(reflecting: source), dumped] {
            #expect(text.contains("app"))
            #expect(!text.contains("at-1"))
            #expect(!text.contains("rt-1"))
        }
    }

    @Test("a token type other than Bearer or DPoP is refused with .invalidResponse before any header is written")
    func nonBearerRefused() throws {
        let set = TokenSet(providerID: "app", accessToken: Secret("at-1"), tokenType: "MAC", issuedAt: clock.date, grant: .clientCredentials)
        let error = try #require(#expect(throws: OAuthError.self) { try TokenSource.authorizationValue(for: set) })
        #expect(error.code == .invalidResponse)
        #expect(error.message?.contains("MAC") == true)
        // A DPoP-bound set is written with its own scheme (RFC 9449 §7.1); the proof goes beside it.
        let bound = TokenSet(providerID: "app", accessToken: Secret("at-1"), tokenType: "DPoP", issuedAt: clock.date, grant: .clientCredentials)
        #expect(try TokenSource.authorizationValue(for: bound) == "DPoP at-1")
        #expect(!String(describing: error).contains("at-1"))

        let spaced = TokenSet(providerID: "app", accessToken: Secret("at 1"), issuedAt: clock.date, grant: .clientCredentials)
        #expect(throws: OAuthError.self) { try TokenSource.authorizationValue(for: spaced) }
        let bearer = TokenSet(providerID: "app", accessToken: Secret("at-1"), tokenType: "BEARER", issuedAt: clock.date, grant: .clientCredentials)
        #expect(try TokenSource.authorizationValue(for: bearer) == "Bearer at-1")
    }
}
