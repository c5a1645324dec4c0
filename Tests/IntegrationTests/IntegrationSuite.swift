import Foundation
import OAuthFlow
import Testing

/// Every grant against a real authorization server: django-oauth-toolkit 3.4.1 on 127.0.0.1,
/// started once for this suite by ``IntegrationServerTrait`` (see `Server/README.md` and this
/// folder's README). Each test asserts the server's own answer (introspection, userinfo, a direct
/// token request), not only what the library reports.
///
/// Serialized: the server is one gunicorn worker over SQLite, and the suite finishes in well under
/// a minute anyway; the device tests, which wait on the server's 1 s polling interval, dominate.
/// Skipped only with `OAUTHFLOW_SKIP_INTEGRATION=1`, and never when `CI` is set.
@Suite(
    "Integration: OAuth 2.0 / OIDC against django-oauth-toolkit on loopback (RFC 6749, RFC 8252 §7.3)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .integrationServer,
    .serialized,
    .timeLimit(.minutes(2))
)
struct Integration {}

/// Outside the gated suite, so it runs even when the suite is skipped.
@Suite("Integration gate: CI never skips the server tests")
struct IntegrationGate {
    @Test("OAUTHFLOW_SKIP_INTEGRATION=1 is refused when CI is set")
    func ciNeverSkips() {
        if IntegrationEnvironment.isCI && IntegrationEnvironment.skipRequested {
            Issue.record("""
                OAUTHFLOW_SKIP_INTEGRATION=1 is set in CI (CI=\(ProcessInfo.processInfo.environment["CI"] ?? "")): \
                the integration suite is not skippable there, so it ran anyway; remove the variable from the CI environment.
                """)
        }
    }
}

// MARK: - Shared steps

extension AuthFlow.State {
    /// The device code of a `receivedDeviceCode` state.
    var deviceCode: DeviceCode? {
        if case .receivedDeviceCode(_, let code) = self { return code }
        return nil
    }

    /// The error of an `error` state.
    var error: OAuthError? {
        if case .error(_, let error) = self { return error }
        return nil
    }

    /// The authorization of an `authorized` state.
    var authorization: Authorization? {
        if case .authorized(_, let authorization) = self { return authorization }
        return nil
    }
}

/// Plays the user in the browser: opens the library's authorization URL, logs in as alice, answers
/// consent, and returns the redirect to the client (never requested).
func userAuthorizes(_ request: AuthorizationRequest, approve: Bool = true) async throws -> URL {
    try await TestBrowser().authorize(
        url: request.url, username: Fixture.username, password: Fixture.password,
        redirectURIPrefix: request.redirectURI.absoluteString, approve: approve)
}

/// Replaces one query parameter of `url`.
func replacingQuery(_ url: URL, _ name: String, with value: String) throws -> URL {
    var components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
    components.percentEncodedQueryItems = components.percentEncodedQueryItems?.map {
        $0.name == name ? URLQueryItem(name: name, value: Form.escape(value)) : $0
    }
    return try #require(components.url)
}

/// The form fields a direct code exchange for `request` sends as the public PKCE client.
func directExchange(code: String, request: AuthorizationRequest, clientID: String = Fixture.publicPKCEClient) -> [(String, String)] {
    var fields = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI.absoluteString),
                  ("client_id", clientID)]
    if let verifier = request.codeVerifier { fields.append(("code_verifier", verifier.reveal())) }
    return fields
}
