import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

/// ``RefreshScheduler`` (Flow/RefreshScheduler.swift) over the flow's own background renewal, on
/// the manual clock: what start fetches, which sets reach the handler, and how failures are handled.
@Suite("Refresh scheduler", .timeLimit(.minutes(1)))
struct RefreshSchedulerTests {
    let clock = ManualClock()
    let server = ScriptedTransport()

    /// A client-credentials provider (no user, no redirect): fetched on demand.
    var service: Provider {
        Provider(id: "svc", tokenURL: URL(string: "https://as.test/token"), clientID: "cli-svc", clientSecret: Secret("s3cret"), scopes: ["read"])
    }

    func flow(_ providers: [Provider], stored: [String: Data] = [:], proactive: Bool = true) async throws -> AuthFlow {
        try await AuthFlow(
            providers: providers, store: MemorySecretStore(stored), transport: server,
            options: AuthFlow.Options(clock: clock, now: { [clock] in clock.date }, proactiveRefresh: proactive,
                                      retry: RetryPolicy(maximumAttempts: 1), jitter: { 0.5 }))
    }

    /// Records every event as a line: `authorized svc at-1`, `failed svc transport`, `needs app invalid_grant`.
    final class Events: Sendable {
        private let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func record(_ event: RefreshScheduler.Event) {
            let line: String
            switch event {
            case .authorized(let set): line = "authorized \(set.providerID) \(set.accessToken.reveal())"
            case .failed(let id, let error): line = "failed \(id) \(error.response?.code.rawValue ?? error.code.description)"
            case .needsAuthorization(let id, let error): line = "needs \(id) \(error.response?.code.rawValue ?? error.code.description)"
            }
            lines.withLock { $0.append(line) }
        }
    }

    @Test("start fetches an unattended provider once and hands over its set; a fresh restored set is handed over without a request")
    func startFetchesAndDelivers() async throws {
        server.script("/token", [.token("at-svc")])
        let flow = try await flow([service, scriptedProvider(id: "app", secret: "s3cret")],
                                  stored: ["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let events = Events()
        let scheduler = try RefreshScheduler(flow: flow) { events.record($0) }
        await scheduler.start()
        #expect(await waitUntil { events.all.count == 2 })
        #expect(Set(events.all) == ["authorized app at-1", "authorized svc at-svc"])
        let sent = try #require(server.requests("/token").only)
        #expect(sent.form["grant_type"] == "client_credentials")
        #expect(scheduler.statuses["svc"]?.refreshes == 1)
        #expect(scheduler.statuses["app"]?.refreshes == 0)
        #expect(scheduler.statuses["svc"]?.expiresAt == clock.date.addingTimeInterval(3600))
        #expect(!String(describing: scheduler).contains("at-"))
        scheduler.stop()
    }

    @Test("the flow's background renewal reaches the handler; invalid_grant is reported once as needsAuthorization and not retried")
    func renewalAndInvalidGrant() async throws {
        let flow = try await flow([scriptedProvider(id: "app", secret: "s3cret")],
                                  stored: ["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let events = Events()
        let scheduler = try RefreshScheduler(flow: flow) { events.record($0) }
        await scheduler.start()
        #expect(await waitUntil { events.all == ["authorized app at-1"] && clock.sleepers == 1 })

        server.script("/token", [.token("at-2", refresh: "rt-2")])
        clock.advance(by: .seconds(3528.75))   // the flow's timer: expiry − 60 − 7.5 − 3.75
        #expect(await waitUntil { events.all == ["authorized app at-1", "authorized app at-2"] })
        #expect(await waitUntil { scheduler.statuses["app"]?.refreshes == 1 })
        #expect(scheduler.statuses["app"]?.lastRefreshDuration == 0)

        server.script("/token", [.oauthError("invalid_grant")])
        _ = try? await flow.refresh(provider: "app")
        _ = try? await flow.refresh(provider: "app")
        #expect(await waitUntil { scheduler.statuses["app"]?.failures["invalid_grant"] == 1 && scheduler.statuses["app"]?.needsAuthorization == true })
        // The second call fails without a request (the flow marked the tokens); one event in all.
        #expect(await waitUntil { scheduler.statuses["app"]?.failures.values.reduce(0, +) == 2 })
        #expect(events.all.filter { $0.hasPrefix("needs") } == ["needs app invalid_grant"])
        #expect(server.requests("/token").count == 2)
        scheduler.stop()
    }

    @Test("a transport failure is tried again after retryDelay on the flow's clock, and the delay doubles")
    func retriesTransportFailures() async throws {
        server.script("/token", [.curlFailure(7), .curlFailure(7), .token("at-svc")])
        let flow = try await flow([service])
        let events = Events()
        let scheduler = try RefreshScheduler(flow: flow, retryDelay: .seconds(30)) { events.record($0) }
        await scheduler.start()
        #expect(await waitUntil { events.all == ["failed svc transport"] && clock.sleepers == 1 })
        #expect(clock.sleeps == [.seconds(30)])
        clock.advance(by: .seconds(30))
        #expect(await waitUntil { events.all.count == 2 && clock.sleepers == 1 })
        #expect(clock.sleeps == [.seconds(30), .seconds(60)])
        clock.advance(by: .seconds(60))
        #expect(await waitUntil { events.all == ["failed svc transport", "failed svc transport", "authorized svc at-svc"] })
        #expect(server.requests("/token").count == 3)
        #expect(scheduler.statuses["svc"]?.failures == ["transport": 2])
        scheduler.stop()
    }

    @Test("nothing stored for a person's grant is reported once; adopt hands over a set taken from the store and clears the need")
    func adoptsStoredLogin() async throws {
        let flow = try await flow([scriptedProvider(id: "app", secret: "s3cret")])
        let events = Events()
        let scheduler = try RefreshScheduler(flow: flow) { events.record($0) }
        await scheduler.start()
        #expect(await waitUntil { events.all == ["needs app reauthorizationRequired"] })
        #expect(scheduler.statuses["app"]?.needsAuthorization == true)
        #expect(server.requests().isEmpty)
        scheduler.adopt(TokenSet(providerID: "app", accessToken: Secret("at-elsewhere"), issuedAt: clock.date,
                                 expiresAt: clock.date.addingTimeInterval(3600), grant: .deviceCode))
        #expect(await waitUntil { events.all == ["needs app reauthorizationRequired", "authorized app at-elsewhere"] })
        #expect(scheduler.statuses["app"]?.needsAuthorization == false)
        scheduler.stop()
    }

    @Test("a restored login marked for reauthorization (restoresAtStart off: restored by start) is reported once as needsAuthorization")
    func markedLoginRestoredByStart() async throws {
        let marked = StoredEntry.encode(TokenSet(
            providerID: "app", accessToken: Secret("at-old"), refreshToken: Secret("rt-dead"), issuedAt: clock.date.addingTimeInterval(-7200),
            expiresAt: clock.date.addingTimeInterval(-3600), grant: .deviceCode, needsReauthorization: true))
        let flow = try await AuthFlow(
            providers: [scriptedProvider(id: "app", secret: "s3cret")], store: MemorySecretStore(["app": marked]), transport: server,
            options: AuthFlow.Options(clock: clock, now: { [clock] in clock.date }, restoresAtStart: false, proactiveRefresh: true,
                                      retry: RetryPolicy(maximumAttempts: 1), jitter: { 0.5 }))
        #expect(await flow.authorization(for: "app") == nil, "not restored before start")
        let events = Events()
        let scheduler = try RefreshScheduler(flow: flow) { events.record($0) }
        await scheduler.start()
        #expect(await waitUntil { events.all.contains("needs app reauthorizationRequired") })
        #expect(events.all.filter { $0.hasPrefix("needs") }.count == 1)
        #expect(scheduler.statuses["app"]?.needsAuthorization == true)
        #expect(server.requests().isEmpty, "a marked login is not sent to the server")
        scheduler.stop()
    }

    /// A grant no person logs in to, as a catalog entry whose token endpoint is the scripted one.
    enum UnattendedGrant: String, CaseIterable, Sendable {
        case clientCredentials, serviceAccount, tokenExchange

        var grant: GrantType { self == .clientCredentials ? .clientCredentials : self == .serviceAccount ? .jwtBearer : .tokenExchange }

        func provider(_ files: KeyFiles) throws -> Provider {
            let entry: String
            switch self {
            case .clientCredentials:
                entry = #"{"id": "svc", "tokenURL": "https://as.test/token", "clientID": "cli-svc", "clientSecret": "s3cret"}"#
            case .serviceAccount:
                _ = try ServiceAccountKeyTests.accountFile(files, members: ["token_uri": "https://as.test/token"])
                entry = #"{"id": "svc", "serviceAccountFile": "sa.json"}"#
            case .tokenExchange:
                _ = try files.write("subject-token", "subject-token-value")
                entry = #"{"id": "svc", "tokenURL": "https://as.test/token", "clientID": "cli-svc", "subjectTokenFile": "subject-token"}"#
            }
            return try ProviderCatalog.load(data: Data("[\(entry)]".utf8), baseDirectory: files.directory, environment: [:], strict: true)[0]
        }
    }

    @Test("a refused credential of a grant no person logs in to (invalid_grant) is a failure to fix and retry, never needsAuthorization",
          arguments: UnattendedGrant.allCases)
    func refusedCredentialIsNotAPersonsToFix(_ kind: UnattendedGrant) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        server.script("/token", [.oauthError("invalid_grant")])
        let flow = try await flow([try kind.provider(files)])
        let errors = Mutex<[OAuthError]>([])
        let events = Events()
        let scheduler = try RefreshScheduler(flow: flow, retryDelay: .seconds(30)) { event in
            events.record(event)
            if case .failed(_, let error) = event { errors.withLock { $0.append(error) } }
        }
        await scheduler.start()
        #expect(await waitUntil { events.all == ["failed svc invalid_grant"] && clock.sleepers == 1 }, "\(events.all)")
        #expect(clock.sleeps == [.seconds(30)], "tried again after retryDelay")
        let error = try #require(errors.withLock { $0.first })
        #expect(error.grant == kind.grant)
        #expect(error.recovery == .fixConfiguration)
        #expect(scheduler.statuses["svc"]?.needsAuthorization == false)
        #expect(scheduler.statuses["svc"]?.failures == ["invalid_grant": 1])
        #expect(server.requests("/token").only?.form["grant_type"] == kind.grant.rawValue)
        scheduler.stop()
    }

    @Test("a flow without proactive refresh is refused (.configuration)")
    func needsProactiveFlow() async throws {
        let flow = try await flow([service], proactive: false)
        let error = #expect(throws: OAuthError.self) { try RefreshScheduler(flow: flow) { _ in } }
        #expect(error?.code == .configuration)
    }
}
