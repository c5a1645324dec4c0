import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Revocation (RFC 7009)", .timeLimit(.minutes(1)))
struct RevocationTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = MemorySecretStore()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, store: store, transport: mock.transport(), options: options(clock))
    }

    @Test("revoke sends the refresh token with token_type_hint and client auth, then clears and publishes .empty (RFC 7009 §2.1)")
    func revokesRefreshToken() async throws {
        let flow = try await flow(mock.provider(id: "app", clientID: "cli-1", clientSecret: "s3cret"))
        let authorization = try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: "rt-1")
        mock.script(.revocation, [MockResponse(status: 200)])
        let recorders = recordStates(flow, count: 2, limit: 2)

        #expect(try await flow.revoke(provider: "app"))

        let sent = try #require(mock.requests(.revocation).only)
        #expect(sent.method == "POST")
        #expect(sent.url == mock.url(.revocation))
        #expect(sent.url.query == nil)
        #expect(sent.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(sent.basicCredentials?.id == "cli-1")
        #expect(sent.basicCredentials?.secret == "s3cret")
        #expect(uniqueForm(sent) == ["token": "rt-1", "token_type_hint": "refresh_token"])
        for seen in await collected(recorders) { #expect(seen == [.authorized(provider: "app", authorization), .empty]) }
        #expect(await flow.authorization(for: "app") == nil)
        #expect(try await store.load("app") == nil)
    }

    @Test("a public client sends its client_id; without a refresh token the access token is revoked (RFC 7009 §2.1)")
    func revokesAccessToken() async throws {
        let flow = try await flow(mock.provider(id: "app", clientID: "cli-1"))
        try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: nil)
        mock.script(.revocation, [.json("{}")])
        #expect(try await flow.revoke(provider: "app"))
        let sent = try #require(mock.requests(.revocation).only)
        #expect(uniqueForm(sent) == ["token": "at-1", "token_type_hint": "access_token", "client_id": "cli-1"])
        #expect(sent.header("Authorization") == nil)
        #expect(await flow.authorization(for: "app") == nil)
    }

    @Test("a failed revocation keeps the tokens so it can be retried (RFC 7009 §2.2.1)", arguments: [
        MockResponse.oauthError("unsupported_token_type"), .oauthError("invalid_client", status: 401), .html(status: 503),
    ])
    func failureKeepsTokens(response: MockResponse) async throws {
        let flow = try await flow(mock.provider(id: "app", clientSecret: "s3cret"))
        try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: "rt-1")
        mock.script(.revocation, [response])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.revoke(provider: "app") })
        #expect(error.endpoint == .revocation)
        #expect(flow.state == .error(provider: "app", error))
        #expect(await flow.authorization(for: "app") != nil)
        #expect(try await store.load("app") != nil)
        #expect(try await flow.accessToken(for: "app").reveal() == "at-1")

        mock.script(.revocation, [MockResponse(status: 200)])
        #expect(try await flow.revoke(provider: "app"))
        #expect(mock.requests(.revocation).count == 2)
        #expect(await flow.authorization(for: "app") == nil)
    }

    @Test("without a revocation endpoint the tokens are only forgotten locally")
    func noRevocationEndpoint() async throws {
        var provider = mock.provider(id: "app")
        provider.revocationURL = nil
        let flow = try await flow(provider)
        try await authorizeByDevice(flow, mock: mock, provider: "app")
        #expect(try await flow.revoke(provider: "app") == false)
        #expect(mock.requests(.revocation).isEmpty)
        #expect(await flow.authorization(for: "app") == nil)
        #expect(flow.state == .empty)
    }

    @Test("revoking with nothing stored sends nothing and publishes .empty")
    func nothingStored() async throws {
        let flow = try await flow(mock.provider(id: "app"))
        #expect(try await flow.revoke(provider: "app") == false)
        #expect(mock.requests().isEmpty)
        #expect(flow.state == .empty)
    }
}
