// callback: a redirect URL checked against a pending authorization request — parsing
// (Callback/Callback.swift), state matching, RFC 9207 `iss`, error responses, then the code
// exchange (Flow/AuthFlow.swift completeAuthorization).
//
// Input: one mode byte, then the callback URL as text; every `@STATE@` in it is replaced by the
// pending request's real `state` (the fuzzer cannot guess 256 random bits, but must be able to
// send the right one). Mode bit 0: the provider (0: plain OAuth, 1: an issuer whose metadata
// advertises `authorization_response_iss_parameter_supported`); bit 1: the API
// (0: `completeAuthorization(callbackURL:)`, 1: `completeAuthorization(callbackURL:request:)`).
import Foundation

enum CallbackTarget {
    static let issuer = "https://issuer.example"
    static let redirect = URL(string: "http://127.0.0.1:8765/callback")!
    static let plain = Provider(
        id: "plain", authorizationURL: URL(string: "https://idp.example/authorize")!, tokenURL: URL(string: "https://idp.example/token")!,
        clientID: "fuzz-client", redirectURI: redirect, scopes: ["read"])
    static let oidc = Provider(
        id: "oidc", authorizationURL: URL(string: "https://issuer.example/authorize")!, tokenURL: URL(string: "https://issuer.example/token")!,
        issuer: issuer, clientID: "fuzz-client", redirectURI: redirect, scopes: ["read"])

    // Bytes, not Data: a global Data's storage pointer hides in enum spare bits, which LeakSanitizer
    // cannot see, so it would be reported as a leak. Each answer builds its own Data.
    static let metadata = Array(#"""
        {"issuer":"https://issuer.example","authorization_endpoint":"https://issuer.example/authorize",
         "token_endpoint":"https://issuer.example/token","authorization_response_iss_parameter_supported":true}
        """#.utf8)
    static let tokenAnswer = Array(#"{"access_token":"fuzz-access-token","token_type":"Bearer","expires_in":3600}"#.utf8)

    static func answer(_ request: HTTPRequest) -> HTTPResponse {
        if request.url.path.hasPrefix("/.well-known/") {
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(metadata))
        }
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(tokenAnswer))
    }

    static func run(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let template = String(decoding: bytes.dropFirst(), as: UTF8.self)
        let provider = mode & 1 == 0 ? plain : oidc
        let withRequest = mode & 2 != 0
        blocking { await complete(template, provider: provider, withRequest: withRequest) }
    }

    static func complete(_ template: String, provider: Provider, withRequest: Bool) async {
        let transport = ScriptedTransport(answer)
        let flow: AuthFlow
        let request: AuthorizationRequest
        do {
            flow = try await AuthFlow(providers: [plain, oidc], store: MemorySecretStore(), transport: transport, options: fuzzOptions())
            request = try await flow.authorizationRequest(provider: provider.id)
        } catch {
            invariant(false, "setting up the flow failed: \(error)")
            return
        }
        let text = template.replacingOccurrences(of: "@STATE@", with: request.state.reveal())
        guard let url = URL(string: text) else { return }
        // What the library itself reads from this URL, for the checks below.
        let parsed: AuthorizationResponse?
        do {
            parsed = try AuthorizationResponse(callbackURL: url)
            _ = parsed?.description
        } catch {
            checkShown(error)
            parsed = nil
        }
        let outcome: Result<Authorization, OAuthError>
        do {
            outcome = .success(withRequest
                ? try await flow.completeAuthorization(callbackURL: url, request: request)
                : try await flow.completeAuthorization(callbackURL: url))
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .failure(let error):
            checkShown(error)
            let exchanged = transport.requests.contains { $0.url.path == "/token" }
            if exchanged { invariant(parsed?.code != nil, "a code was exchanged for a callback without one") }
        case .success(let authorization):
            guard let parsed else { return invariant(false, "a callback the parser refuses completed the login") }
            invariant(template.contains("@STATE@"), "a callback without the request's state completed the login")
            invariant(parsed.state?.constantTimeEquals(request.state) == true, "the completed callback's state is not the request's")
            invariant(parsed.error == nil, "a callback carrying an error completed the login")
            if provider.issuer != nil { invariant(parsed.issuer == issuer, "a callback without the issuer's iss completed the login (RFC 9207)") }
            invariant(authorization.providerID == provider.id, "the login completed for another provider")
            let exchanges = transport.requests.filter { $0.url.path == "/token" }
            invariant(exchanges.count == 1, "one login sent \(exchanges.count) code exchanges")
            let form = FormEncoding.decode(exchanges.first.flatMap { $0.body.map { String(decoding: $0, as: UTF8.self) } } ?? "")
            let sentCode = form.first { $0.0 == "code" }?.1
            invariant(sentCode != nil && sentCode == parsed.code?.reveal(), "the code exchanged is not the callback's first code")
            invariant(form.first { $0.0 == "code_verifier" }?.1 == request.codeVerifier?.reveal(), "the PKCE verifier was not sent")
            // The request is single use: the same callback again is refused.
            do {
                _ = try await flow.completeAuthorization(callbackURL: url)
                invariant(false, "a callback was accepted twice")
            } catch {
                invariant(error.code == .stateMismatch, "a replayed callback failed with \(error.code), not stateMismatch")
            }
        }
    }
}
