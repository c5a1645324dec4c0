import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OAuthFlow
import OAuthFlowTesting
import OAuthFlowURLSession
import TestSupport
import Testing

/// `URLRequest.authorize(with:)` (OAuthFlowURLSession/URLRequest+Authorization.swift).
@Suite("URLRequest.authorize(with:) (RFC 6750 §2.1)", .timeLimit(.minutes(1)))
struct URLRequestAuthorizationTests {
    let mock = MockProvider()
    let resource = MockProvider()   // the API the request goes to, on a host of its own
    let clock = TestClock()

    /// A flow whose "app" holds at-1 from a client-credentials login, issued `type` as its token_type.
    func flow(type: String = "Bearer") async throws -> AuthFlow {
        let flow = try await AuthFlow(providers: [mock.provider(id: "app", clientSecret: "s3cret")], transport: mock.transport(),
                                      options: options(clock))
        mock.script(.token, [.token(access: "at-1", type: type)])
        try await flow.clientCredentials(provider: "app")
        return flow
    }

    @Test("one line sets Authorization: Bearer <token>, and URLSession sends it")
    func authorizes() async throws {
        let flow = try await flow()
        var request = URLRequest(url: resource.baseURL.appendingPathComponent("invoices"))
        request.setValue("application/json", forHTTPHeaderField: "Accept")

        try await request.authorize(with: flow.tokenSource(for: "app"))

        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer at-1")
        #expect(request.value(forHTTPHeaderField: "Accept") == "application/json")
        resource.script(path: "/invoices", [.json("[]")])
        let session = URLSession(configuration: MockProvider.sessionConfiguration())
        defer { session.finishTasksAndInvalidate() }
        let (_, response) = try await session.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(resource.requests(path: "/invoices").only?.header("Authorization") == "Bearer at-1")
    }

    @Test("a server's lowercase bearer is written Bearer; an Authorization already set is replaced")
    func lowercaseAndReplace() async throws {
        let flow = try await flow(type: "bearer")
        var request = URLRequest(url: resource.baseURL)
        request.setValue("Basic old", forHTTPHeaderField: "Authorization")

        try await request.authorize(with: flow.tokenSource(for: "app"))

        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer at-1")
        #expect(request.allHTTPHeaderFields?.keys.filter { $0.lowercased() == "authorization" }.count == 1)
    }

    @Test("an expired token is refreshed (once) before the header is set")
    func refreshes() async throws {
        let flow = try await flow()
        mock.script(.token, [.token(access: "at-2")])
        clock.advance(by: .seconds(3600))
        var request = URLRequest(url: resource.baseURL)

        try await request.authorize(with: flow.tokenSource(for: "app"))

        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer at-2")
        #expect(mock.requests(.token).count == 2, "the login, then one renewal")
    }

    @Test("when no token can be had the error is thrown and the request is left unchanged")
    func failureLeavesRequest() async throws {
        let flow = try await AuthFlow(providers: [mock.provider(id: "app")], transport: mock.transport(), options: options(clock))
        var request = URLRequest(url: resource.baseURL)
        request.setValue("keep", forHTTPHeaderField: "Authorization")

        let error = try #require(await #expect(throws: OAuthError.self) { try await request.authorize(with: flow.tokenSource(for: "app")) })

        #expect(error.code == .reauthorizationRequired)
        #expect(request.value(forHTTPHeaderField: "Authorization") == "keep")
    }
}

/// `URLRequest.authorize(with:)` for a DPoP-bound token (RFC 9449 §7.1, §9).
@Suite("URLRequest.authorize(with:) with DPoP (RFC 9449)", .timeLimit(.minutes(1)))
struct URLRequestDPoPTests {
    let mock = MockProvider()
    let resource = MockProvider()
    let clock = TestClock()

    @Test("sets Authorization: DPoP and a proof for the request's method and URL; a 401 use_dpop_nonce says retry, and the next proof carries the nonce")
    func dpop() async throws {
        var provider = mock.provider(id: "app", clientSecret: "s3cret")
        provider.dpop = .required
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))
        mock.script(.token, [.token(access: "at-1", type: "DPoP")])
        try await flow.clientCredentials(provider: "app")
        let source = flow.tokenSource(for: "app")
        let url = resource.baseURL.appendingPathComponent("invoices")
        var request = URLRequest(url: url)
        request.httpMethod = "DELETE"

        try await request.authorize(with: source)

        #expect(request.value(forHTTPHeaderField: "Authorization") == "DPoP at-1")
        let claims = try Self.claims(try #require(request.value(forHTTPHeaderField: "DPoP")))
        #expect(claims["htm"] as? String == "DELETE" && claims["htu"] as? String == url.absoluteString && claims["nonce"] == nil)

        let retry = source.shouldRetryWithDPoPNonce(
            status: 401, headers: ["WWW-Authenticate": #"DPoP error="use_dpop_nonce""#, "dpop-nonce": "rs-1"], url: url)
        #expect(retry)
        #expect(!source.shouldRetryWithDPoPNonce(status: 401, headers: ["WWW-Authenticate": #"DPoP error="use_dpop_nonce""#], url: url))
        try await request.authorize(with: source)
        #expect(try Self.claims(try #require(request.value(forHTTPHeaderField: "DPoP")))["nonce"] as? String == "rs-1")
    }

    static func claims(_ proof: String) throws -> [String: Any] { try WireJWS(proof).claims }
}
