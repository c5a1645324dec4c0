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

    @Test("revoke sends the refresh token, then the access token, each with its token_type_hint and client auth; then forgets (RFC 7009 §2.1)")
    func revokesRefreshThenAccessToken() async throws {
        let flow = try await flow(mock.provider(id: "app", clientID: "cli-1", clientSecret: "s3cret"))
        let authorization = try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: "rt-1")
        mock.script(.revocation, [MockResponse(status: 200), .json("{}")])
        let recorders = recordStates(flow, count: 2, limit: 2)

        let result = try await flow.revoke(provider: "app")

        #expect(result == RevocationResult(refreshTokenRevoked: true, accessTokenRevoked: true, heldTokens: [.refreshToken, .accessToken]))
        #expect(result.isComplete)
        let sent = mock.requests(.revocation)
        try #require(sent.count == 2)
        for request in sent {
            #expect(request.method == "POST")
            #expect(request.url == mock.url(.revocation))
            #expect(request.url.query == nil)
            #expect(request.header("Content-Type") == "application/x-www-form-urlencoded")
            #expect(request.basicCredentials?.id == "cli-1")
            #expect(request.basicCredentials?.secret == "s3cret")
        }
        // The order on the wire: the refresh token first, then the access token.
        #expect(uniqueForm(sent[0]) == ["token": "rt-1", "token_type_hint": "refresh_token"])
        #expect(uniqueForm(sent[1]) == ["token": "at-1", "token_type_hint": "access_token"])
        for seen in await collected(recorders) { #expect(seen == [.authorized(provider: "app", authorization), .empty(provider: "app")]) }
        #expect(await flow.authorization(for: "app") == nil)
        #expect(try await store.load("app") == nil)
    }

    @Test("a public client sends its client_id; without a refresh token only the access token is revoked (RFC 7009 §2.1)")
    func revokesAccessToken() async throws {
        let flow = try await flow(mock.provider(id: "app", clientID: "cli-1"))
        try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: nil)
        mock.script(.revocation, [.json("{}")])
        let result = try await flow.revoke(provider: "app")
        #expect(result == RevocationResult(accessTokenRevoked: true, heldTokens: [.accessToken]))
        #expect(result.isComplete)
        let sent = try #require(mock.requests(.revocation).only)
        #expect(uniqueForm(sent) == ["token": "at-1", "token_type_hint": "access_token", "client_id": "cli-1"])
        #expect(sent.header("Authorization") == nil)
        #expect(await flow.authorization(for: "app") == nil)
    }

    @Test("a refused refresh-token revocation still revokes the access token, forgets locally, and reports it (RFC 7009 §2.2.1)",
          arguments: [
              MockResponse.oauthError("unsupported_token_type"), .oauthError("invalid_client", status: 401), .html(status: 503),
          ])
    func refusalStillForgets(response: MockResponse) async throws {
        let log = LogCollector()
        let flow = try await AuthFlow(providers: [mock.provider(id: "app", clientSecret: "s3cret")], store: store,
                                      transport: mock.transport(), options: options(clock, log: log))
        try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: "rt-1")
        mock.script(.revocation, [response, MockResponse(status: 200)])

        let result = try await flow.revoke(provider: "app")

        #expect(!result.refreshTokenRevoked)
        #expect(result.accessTokenRevoked)
        #expect(!result.isComplete)
        #expect(result.heldTokens == [.refreshToken, .accessToken])
        let error = try #require(result.errors[.refreshToken])
        #expect(result.errors.count == 1)
        #expect(error.endpoint == .revocation)
        #expect(error.providerID == "app")
        #expect(error.httpStatus == response.status)
        let sent = mock.requests(.revocation)
        #expect(sent.map { uniqueForm($0)?["token_type_hint"] } == ["refresh_token", "access_token"])
        // Forgotten locally all the same: memory, store, and state.
        #expect(await flow.authorization(for: "app") == nil)
        #expect(try await store.load("app") == nil)
        #expect(flow.state == .empty(provider: "app"))
        let warning = try #require(log.all.first { $0.level == .warning && $0.message.contains("refresh_token") })
        #expect(!warning.message.contains("rt-1") && !warning.message.contains("at-1"))
        #expect(!String(reflecting: result).contains("rt-1"))
    }

    @Test("an unreachable revocation endpoint: both revocations fail with .transport, the tokens are still forgotten")
    func unreachableStillForgets() async throws {
        var provider = mock.provider(id: "app")
        provider.revocationURL = URL(string: "https://\(UUID().uuidString.lowercased()).oauth.test/revoke")
        let flow = try await flow(provider)
        try await authorizeByDevice(flow, mock: mock, provider: "app", access: "at-1", refresh: "rt-1")

        let result = try await flow.revoke(provider: "app")

        #expect(!result.refreshTokenRevoked && !result.accessTokenRevoked && !result.isComplete)
        #expect(result.errors[.refreshToken]?.code == .transport)
        #expect(result.errors[.accessToken]?.code == .transport)
        #expect(result.errors[.accessToken]?.endpoint == .revocation)
        #expect(await flow.authorization(for: "app") == nil)
        #expect(try await store.load("app") == nil)
        #expect(flow.state == .empty(provider: "app"))
    }

    @Test("without a revocation endpoint the tokens are only forgotten locally, and the result says so")
    func noRevocationEndpoint() async throws {
        var provider = mock.provider(id: "app")
        provider.revocationURL = nil
        let flow = try await flow(provider)
        try await authorizeByDevice(flow, mock: mock, provider: "app")
        let result = try await flow.revoke(provider: "app")
        #expect(result == RevocationResult(heldTokens: [.refreshToken, .accessToken], hasRevocationEndpoint: false))
        #expect(!result.isComplete)
        #expect(mock.requests(.revocation).isEmpty)
        #expect(await flow.authorization(for: "app") == nil)
        #expect(flow.state == .empty(provider: "app"))
    }

    @Test("revoking with nothing stored sends nothing, publishes .empty, and is complete")
    func nothingStored() async throws {
        let flow = try await flow(mock.provider(id: "app"))
        let result = try await flow.revoke(provider: "app")
        #expect(result == RevocationResult())
        #expect(result.isComplete)
        #expect(mock.requests().isEmpty)
        #expect(flow.state == .empty(provider: "app"))
    }

    @Test("an unknown provider is .configuration and publishes .error")
    func unknownProvider() async throws {
        let flow = try await flow(mock.provider(id: "app"))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.revoke(provider: "nope") })
        #expect(error.code == .configuration)
        #expect(flow.state == .error(provider: "nope", error))
        #expect(mock.requests().isEmpty)
    }
}
