import Foundation
import OAuthFlow

/// The Swift snippets of Documentation/Grants/CIBA.md, compiled with the tests so they stay true to
/// the API (never called: they need a real provider). Change a snippet here when you change it there.
func cibaDocumentationExamples(flow: AuthFlow, authorizationHeader: String?, body: Data) async throws {
    let request = BackchannelAuthenticationRequest(
        hint: .loginHint("alice@example.com"), bindingMessage: "Deploy 4711", requestedExpiry: 300)
    let authorization = try await flow.authorizeWithBackchannel(provider: "corp", request)
    _ = authorization
    let asked = try await flow.requestBackchannelAuthentication(provider: "corp", request)   // .authorizing
    print("Check that your phone shows \(asked.bindingMessage ?? "") (expires \(asked.expiresAt))")
    let approved = try await flow.pollBackchannelAuthentication(asked)   // .requestingAccessToken, .authorized
    _ = approved

    // In the HTTP handler of the notification endpoint:
    let woken = flow.receiveBackchannelNotification(authorization: authorizationHeader, body: body)
    _ = woken
}
