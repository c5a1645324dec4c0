import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OAuthFlow

/// The Swift snippets of README.md and Documentation/, compiled with the tests so they stay true to the
/// API (never called: they need real providers). Change a snippet here when you change it there.
func documentationExamples(callbackURL: URL, catalogURL: URL) async throws {
    // README.md (ReadmeTests checks that every Swift line of README.md is here or in the other files of this folder)
    let flow = try await AuthFlow(
        catalogURL: URL(fileURLWithPath: "/etc/myservice/providers.json"),
        store: try FileSecretStore()
    )
    try await flow.clientCredentials(provider: "billing-api")
    let code = try await flow.requestDeviceCode(provider: "github")
    print("Open \(code.verificationURI) and enter \(code.userCode)")
    let authorization = try await flow.pollDeviceAuthorization(code)
    _ = authorization
    let request = try await flow.authorizationRequest(provider: "google", parameters: ["login_hint": "user@example.com"])
    _ = request
    let authorization2 = try await flow.completeAuthorization(callbackURL: callbackURL)
    _ = authorization2
    let token = try await flow.accessToken(for: "billing-api")
    _ = token
    // README.md, "Paste-back": the line a person pasted into the app's own UI.
    let pastedText = callbackURL.absoluteString
    let login = try await flow.authorizationRequest(provider: "corp")
    let authorization3 = try await flow.completeAuthorization(pasted: pastedText, request: login)
    _ = authorization3
    Task {
        for await state in flow.states {
            print(state)
        }
    }

    // OIDC.md
    let info = try await flow.userInfo(provider: "google")
    print(info.subject)
    let email = info.claims["email"]?.stringValue
    _ = email
    let introspection = try await flow.introspect(provider: "gitlab", token: .accessToken)
    if introspection.active { print(introspection.scopes, introspection.expiresAt as Any, introspection.clientID as Any) }

    // WorkloadIdentity.md
    var deploy = Provider(id: "deploy", tokenURL: URL(string: "https://sts.example.com/token")!, clientID: "deployer")
    deploy.tokenExchange = Provider.TokenExchange(audience: ["deploy-api"])
    deploy.subjectTokenSource = .githubActions(audience: "https://sts.example.com")
    let deployFlow = try await AuthFlow(providers: [deploy])
    let deployToken = try await deployFlow.accessToken(for: "deploy")
    _ = deployToken

    // Grants/Revocation.md
    let revocation = try await flow.revoke(provider: "gitlab")
    if !revocation.isComplete {
        for (token, error) in revocation.errors { print("not revoked at the provider: \(token.rawValue): \(error)") }
    }

    // GettingStarted.md
    let flow2 = try await AuthFlow(catalogURL: catalogURL, store: try FileSecretStore())
    if flow2.state.name != "authorized" {
        let code = try await flow2.requestDeviceCode(provider: "github")
        print("Open \(code.verificationURI) and enter \(code.userCode)")
        try await flow2.pollDeviceAuthorization(code)
    }
    _ = try await flow2.accessToken(for: "github")
    // Errors.md
    do {
        _ = try await flow.accessToken(for: "github")
    } catch {
        switch error.recovery {
        case .retryLater: break
        case .reauthorize: break
        case .fixConfiguration: print(error.description)
        case .none: break
        }
    }
    // StateStream.md
    let flow3 = try await AuthFlow(providers: [], store: MemorySecretStore(), options: .init(restoresAtStart: false))
    let states = flow3.states
    _ = states
    try await flow3.restore()
}
