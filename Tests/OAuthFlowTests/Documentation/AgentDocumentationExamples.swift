import Foundation
import OAuthFlow

/// The Swift snippets of Documentation/Agent.md ("The library side") and of RefreshScheduler's
/// and TokenSink's doc comments, compiled with the tests so they stay true to the API (never
/// called: they need real providers). Change a snippet here when you change it there.
func agentDocumentationExamples(providers: [Provider], store: any SecretStore) async throws {
    // Agent.md: the library side
    do {
        let flow = try await AuthFlow(providers: providers, store: store, options: .init(restoresAtStart: false, proactiveRefresh: true))
        let sink = try TokenSink(providerID: "billing-api", path: "/run/billing/token", mode: 0o640)
        let scheduler = try RefreshScheduler(flow: flow) { event in
            switch event {
            case .authorized(let set) where set.providerID == sink.providerID: try? sink.write(set)
            case .needsAuthorization(let provider, let error): print("\(provider) needs a person: \(error)")
            default: break
            }
        }
        await scheduler.start()          // every provider tried once
        let counters = scheduler.statuses // refreshes, failures by code, last duration, needsAuthorization
        _ = counters
    }

    // TokenSink's doc comment
    do {
        let flow = try await AuthFlow(providers: providers, store: store)
        let sink = try TokenSink(providerID: "billing-api", path: "/run/billing/token", mode: 0o640, format: .raw)
        try sink.write(try await flow.tokenSet(for: "billing-api"))
    }
}
