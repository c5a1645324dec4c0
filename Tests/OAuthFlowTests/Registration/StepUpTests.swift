import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// A resource asking for more (RFC 6750 §3.1 `insufficient_scope`, RFC 9470 §3): the typed error
/// `AuthorizingTransport` and `TokenSource` give, and the login again that
/// `AuthFlow.stepUpRequest(provider:challenge:)` builds — never run without a person.
@Suite("Step-up at the resource (RFC 6750 §3.1, RFC 9470)", .timeLimit(.minutes(1)))
struct StepUpTests {
    let clock = TestClock()
    let authServer = ScriptedTransport()
    let api = ScriptedTransport()
    let items = URL(string: "https://api.test/items")!

    func setUp() async throws -> (AuthFlow, AuthorizingTransport) {
        let store = MemorySecretStore(["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let flow = try await AuthFlow(providers: [scriptedProvider()], store: store, transport: authServer, options: options(clock))
        return (flow, AuthorizingTransport(base: api, source: flow.tokenSource(for: "app")))
    }

    @Test("a 403 insufficient_scope is thrown as .stepUpRequired with the scope asked; one request, no renewal, published as .error", arguments: [
        (403, #"Bearer error="insufficient_scope", scope="read write""#, ["read", "write"], [String](), nil as Int?),
        (401, #"Bearer error="insufficient_user_authentication", acr_values="phr", max_age="0""#, [], ["phr"], 0),
        (403, #"Basic realm="x", DPoP error="insufficient_scope", scope="admin""#, ["admin"], [], nil),
    ] as [(Int, String, [String], [String], Int?)])
    func thrown(status: Int, header: String, scope: [String], acr: [String], maxAge: Int?) async throws {
        let (flow, transport) = try await setUp()
        api.script("/items", [.status(status, json: #"{"error":"no"}"#, headers: ["WWW-Authenticate": header])])

        let error = await #expect(throws: OAuthError.self) { try await transport.send(HTTPRequest(method: "GET", url: items)) }

        #expect(error?.code == .stepUpRequired)
        #expect(error?.recovery == .reauthorize)
        #expect(error?.httpStatus == status)
        #expect(error?.challenge?.scope == scope)
        #expect(error?.challenge?.acrValues == acr)
        #expect(error?.challenge?.maxAge == maxAge)
        #expect(api.requests().count == 1)
        #expect(authServer.requests().isEmpty, "nothing is renewed and no login starts by itself")
        // Published before it is thrown: the flow's state is that error now.
        guard case .error(let provider, let published) = flow.state else {
            Issue.record("the step-up was not published: \(flow.state)")
            return
        }
        #expect(provider == "app" && published.code == .stepUpRequired)
    }

    @Test("a refusal whose challenge holds a control character is .invalidResponse, not returned")
    func hostileChallenge() async throws {
        let (_, transport) = try await setUp()
        api.script("/items", [.status(403, headers: ["WWW-Authenticate": "Bearer error=\"insufficient_scope\", scope=\"a\u{1B}[31m\""])])
        let error = await #expect(throws: OAuthError.self) { try await transport.send(HTTPRequest(method: "GET", url: items)) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .resource)
    }

    @Test("TokenSource.stepUpError: the same error for another HTTP client; nil for a 200 or an invalid_token 401")
    func tokenSource() async throws {
        let (flow, _) = try await setUp()
        let source = flow.tokenSource(for: "app")
        let error = try await source.stepUpError(status: 403, headers: ["www-authenticate": #"Bearer error="insufficient_scope", scope="admin""#])
        #expect(error?.code == .stepUpRequired)
        #expect(error?.providerID == "app")
        #expect(try await source.stepUpError(status: 200, headers: [:]) == nil)
        #expect(try await source.stepUpError(status: 401, headers: ["www-authenticate": #"Bearer error="invalid_token""#]) == nil)
    }

    @Test("stepUpRequest: the provider's and the held scopes plus those asked, and acr_values and max_age, in the authorization URL (RFC 9470 §4)")
    func stepUpRequest() async throws {
        let (flow, _) = try await setUp()
        let challenge = ResourceChallenge(httpStatus: 401, error: .insufficientUserAuthentication, scope: ["read", "admin"],
                                          acrValues: ["phr", "phrh"], maxAge: 0)
        let request = try await flow.stepUpRequest(provider: "app", challenge: challenge)
        let parameters = try #require(query(request.url))
        #expect(parameters["scope"] == "read openid admin", "the provider's (read), the held (openid), then the asked one missing (admin)")
        #expect(parameters["acr_values"] == "phr phrh")
        #expect(parameters["max_age"] == "0")
        #expect(request.scopes == ["read", "openid", "admin"])
        #expect(authServer.requests().isEmpty, "building the request sends nothing; the person opens it")
    }
}
