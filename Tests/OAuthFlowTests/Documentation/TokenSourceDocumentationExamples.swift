import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OAuthFlow
import OAuthFlowURLSession

/// The snippets of README.md ("Using tokens in a service") and Documentation/TokenSource.md,
/// compiled with the tests so they stay true to the API (never called: they need real
/// providers). Change a snippet here when you change it there.
func tokenSourceDocumentationExamples(flow: AuthFlow, catalog: URL, providers: [Provider], store: any SecretStore, invoicesURL: URL) async throws {
    // README.md
    do {
        let billing = flow.tokenSource(for: "billing-api")
        let api = AuthorizingTransport(base: CurlTransport(), source: billing)
        let response = try await api.send(HTTPRequest(method: "GET", url: URL(string: "https://billing.example.com/v1/invoices")!))
        var request = URLRequest(url: invoicesURL)
        try await request.authorize(with: billing)
        _ = (response, request)
        _ = AuthFlow.Options(proactiveRefresh: true)
    }

    // TokenSource.md: the token source
    do {
        let billing = flow.tokenSource(for: "billing-api")
        let token = try await billing.token()
        _ = token
    }

    // TokenSource.md: the authorizing transport
    do {
        let flow = try await AuthFlow(catalogURL: catalog, store: try FileSecretStore())
        let transport = CurlTransport(timeout: 10)
        let api = AuthorizingTransport(base: transport, source: flow.tokenSource(for: "billing-api"))

        let request = HTTPRequest(method: "POST", url: URL(string: "https://billing.example.com/v1/invoices")!,
                                  headers: [("Content-Type", "application/json")], body: Data(#"{"amount":12}"#.utf8))
        let response = try await api.send(request)
        switch response.status {
        case 200..<300: print("created")
        case 401, 403: print("refused:", response.headers["www-authenticate"] ?? "")
        default: print("HTTP", response.status)
        }
    }

    // TokenSource.md: the URLRequest one-liner
    do {
        var request = URLRequest(url: invoicesURL)
        try await request.authorize(with: flow.tokenSource(for: "billing-api"))
        let (data, response) = try await URLSession.shared.data(for: request)
        _ = (data, response)
    }

    // TokenSource.md: proactive refresh
    do {
        let flow = try await AuthFlow(providers: providers, store: store, options: AuthFlow.Options(proactiveRefresh: true))
        _ = flow
    }

    // RetryPolicy's doc comment
    _ = AuthFlow.Options(retry: RetryPolicy(maximumAttempts: 2, maximumTotalTime: .seconds(5)))
}
