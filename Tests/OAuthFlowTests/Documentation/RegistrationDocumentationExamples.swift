import Foundation
import OAuthFlow

/// The snippets of Documentation/Registration.md and README.md ("Start from a URL"), compiled with
/// the tests so they stay true to the API (never called: they need a real resource). Change a
/// snippet here when you change it there.
func registrationDocumentationExamples(store: any SecretStore, api: AuthorizingTransport, request: HTTPRequest) async throws {
    // Registration.md: the resource and its server
    let flow = try await AuthFlow(providers: [], store: store)
    let resource = try await flow.resourceMetadata(for: URL(string: "https://api.example.com/mcp")!)
    let server = try await flow.authorizationServer(for: resource)     // the first it lists
    print(resource.authorizationServers, resource.scopesSupported ?? [], server.registrationEndpoint as Any)

    // Registration.md: registration
    do {
        var provider = Provider(id: "api", issuer: server.issuer, clientID: "", redirectURI: URL(string: "http://127.0.0.1:53682/callback"),
                                scopes: resource.challengeScopes)
        provider.resources = [resource.resource]
        provider.dynamicRegistration = Provider.DynamicRegistration()
        let registration = try await AuthFlow(providers: [provider], store: store).registerClient(provider: "api")
        let flow = try await AuthFlow(providers: [provider], store: store)   // applies the stored registration
        _ = (registration, flow)
    }

    // Registration.md: step-up
    do {
        let answer = try await api.send(request)
        _ = answer
    } catch {
        guard error.code == .stepUpRequired, let challenge = error.challenge else { throw error }
        print("the API asks for \(challenge.asked)")
        let login = try await flow.stepUpRequest(provider: "api", challenge: challenge)
        // send the person to login.url; then flow.completeAuthorization(callbackURL:)
        _ = login
    }
}
