import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `AuthorizingTransport` (HTTP/AuthorizingTransport.swift): the requests its base transport
/// receives, exactly, for each answer a resource server can give (RFC 6750 §2.1, §3.1).
@Suite("Authorizing transport (RFC 6750)", .timeLimit(.minutes(1)))
struct AuthorizingTransportTests {
    let clock = TestClock()
    /// The authorization server the flow talks to.
    let authServer = ScriptedTransport()
    /// The resource server the service calls through the authorizing transport.
    let api = ScriptedTransport()
    let invoices = URL(string: "https://api.test/invoices")!

    static let invalidToken = ["WWW-Authenticate": #"Bearer realm="api", error="invalid_token", error_description="The access token expired""#]

    /// A flow holding at-1 / rt-1 for "app", and the authorizing transport over ``api``.
    func setUp(access: String = "at-1") async throws -> (AuthFlow, AuthorizingTransport) {
        let store = MemorySecretStore(["app": storedEntry(provider: "app", access: access, issuedAt: clock.date)])
        let flow = try await AuthFlow(providers: [scriptedProvider()], store: store, transport: authServer, options: options(clock))
        return (flow, AuthorizingTransport(base: api, source: flow.tokenSource(for: "app")))
    }

    func post(_ body: String) -> HTTPRequest {
        HTTPRequest(method: "POST", url: invoices, headers: [("Content-Type", "application/json"), ("X-Request-ID", "r-1")],
                    body: Data(body.utf8))
    }

    @Test("each request gets Authorization: Bearer <token>; the other headers and the body pass unchanged")
    func authorizes() async throws {
        let (_, transport) = try await setUp()
        api.script("/invoices", [.status(200, json: "[]")])

        let response = try await transport.send(post(#"{"amount":1}"#))

        #expect(response.status == 200)
        let sent = try #require(api.requests().only)
        #expect(sent.headerValues("Authorization") == ["Bearer at-1"])
        #expect(sent.header("X-Request-ID") == "r-1")
        #expect(sent.header("Content-Type") == "application/json")
        #expect(sent.body == Data(#"{"amount":1}"#.utf8))
        #expect(sent.method == "POST" && sent.url == invoices)
        #expect(authServer.requests().isEmpty, "a fresh token needs no request to the authorization server")
    }

    @Test("a server's token_type \"bearer\" is sent as \"Bearer\" (RFC 6750 §2.1, RFC 6749 §5.1)")
    func lowercaseBearer() async throws {
        let (_, transport) = try await setUp()
        clock.advance(by: .seconds(3600))
        authServer.script("/token", [.token("at-2", type: "bearer")])
        api.script("/invoices", [.status(200)])

        _ = try await transport.send(HTTPRequest(method: "GET", url: invoices))

        #expect(api.requests().only?.headerValues("Authorization") == ["Bearer at-2"])
    }

    @Test("a 401 with Bearer error=\"invalid_token\" renews once and retries once with the new token and the same body")
    func invalidTokenRenewsAndRetries() async throws {
        let (flow, transport) = try await setUp()
        authServer.script("/token", [.token("at-2", refresh: "rt-2")])
        api.script("/invoices", [.status(401, headers: Self.invalidToken), .status(201, json: #"{"id":7}"#)])
        let recorders = recordStates(flow)
        let before = flow.state

        let response = try await transport.send(post(#"{"amount":2}"#))

        #expect(response.status == 201)
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"id":7}"#)
        let sent = api.requests("/invoices")
        #expect(sent.map { $0.headerValues("Authorization") } == [["Bearer at-1"], ["Bearer at-2"]])
        #expect(sent.map(\.body) == [Data(#"{"amount":2}"#.utf8), Data(#"{"amount":2}"#.utf8)], "the body is sent again intact")
        #expect(sent[0].headers.map(\.name) == sent[1].headers.map(\.name))
        #expect(authServer.requests("/token").map { $0.form["refresh_token"] } == ["rt-1"])
        let authorization = try #require(await flow.authorization(for: "app"))
        let expected: [State] = [before, .requestingAccessToken(provider: "app"), .authorized(provider: "app", authorization)]
        for seen in await collected(recorders) { #expect(seen == expected) }
    }

    @Test("a second 401 invalid_token is returned as is: one renewal, two requests, no loop")
    func secondRejectionReturned() async throws {
        let (_, transport) = try await setUp()
        authServer.script("/token", [.token("at-2"), .token("at-3")])
        api.script("/invoices", [.status(401, headers: Self.invalidToken)])

        let response = try await transport.send(HTTPRequest(method: "GET", url: invoices))

        #expect(response.status == 401)
        #expect(Challenge.isInvalidBearerToken(response.headers["www-authenticate"]))
        #expect(api.requests("/invoices").count == 2)
        #expect(authServer.requests("/token").count == 1)
    }

    @Test("a 401 or 403 that is neither invalid_token nor a step-up is returned unchanged, without a renewal or a retry", arguments: [
        (401, [:]), (401, ["WWW-Authenticate": #"Bearer realm="api""#]),
        (401, ["WWW-Authenticate": #"Basic realm="api", error="invalid_token""#]),
        (401, ["WWW-Authenticate": #"Bearer error_description="invalid_token""#]),
        (403, ["WWW-Authenticate": #"Bearer error="invalid_token""#]),
        (400, ["WWW-Authenticate": #"Bearer error="invalid_request""#]),
    ] as [(Int, [String: String])])
    func otherRefusalsReturned(status: Int, headers: [String: String]) async throws {
        let (_, transport) = try await setUp()
        authServer.script("/token", [.token("at-2")])
        api.script("/invoices", [.status(status, headers: headers), .status(200)])

        let response = try await transport.send(HTTPRequest(method: "GET", url: invoices))

        #expect(response.status == status)
        #expect(api.requests("/invoices").count == 1)
        #expect(authServer.requests().isEmpty)
    }

    @Test("concurrent 401 invalid_token answers for the same token make one renewal; every request is retried once")
    func concurrentRejections() async throws {
        let (_, transport) = try await setUp()
        authServer.script("/token", [.token("at-2"), .token("at-3")])
        let gate = Gate()
        // Every first attempt (with at-1) is refused together, once all ten are in flight.
        api.script("/invoices", (0..<10).map { _ in ScriptedTransport.Step.status(401, headers: Self.invalidToken).gated(gate) })
        api.script("/invoices", [.status(200)])

        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<10 { group.addTask { try await transport.send(HTTPRequest(method: "GET", url: self.invoices)).status } }
            #expect(await waitUntil { gate.arrivals == 10 })
            gate.open()
            var all: [Int] = []
            for try await status in group { all.append(status) }
            return all
        }

        #expect(statuses == Array(repeating: 200, count: 10))
        #expect(authServer.requests("/token").count == 1)
        let sent = api.requests("/invoices").map { $0.headerValues("Authorization") }
        #expect(sent.count == 20)
        #expect(sent.filter { $0 == ["Bearer at-1"] }.count == 10)
        #expect(sent.filter { $0 == ["Bearer at-2"] }.count == 10)
    }

    @Test("a request that already carries Authorization is sent unchanged: no token fetched, none added, no retry")
    func callerAuthorizationWins() async throws {
        let (_, transport) = try await setUp()
        clock.advance(by: .seconds(3600))   // expired: a fetch would show as a token request
        api.script("/invoices", [.status(401, headers: Self.invalidToken), .status(200)])
        let request = HTTPRequest(method: "GET", url: invoices, headers: [("authorization", "Basic dXNlcjpwYXNz")])

        let response = try await transport.send(request)

        #expect(response.status == 401)
        let sent = try #require(api.requests().only)
        #expect(sent.headerValues("Authorization") == ["Basic dXNlcjpwYXNz"])
        #expect(authServer.requests().isEmpty)
    }

    @Test("when the token cannot be had, the error is thrown and nothing reaches the resource server")
    func noToken() async throws {
        let (flow, transport) = try await setUp()
        clock.advance(by: .seconds(3600))
        authServer.script("/token", [.oauthError("invalid_grant")])

        let error = try #require(await #expect(throws: OAuthError.self) { try await transport.send(HTTPRequest(method: "GET", url: invoices)) })

        #expect(error.code == .reauthorizationRequired)
        #expect(api.requests().isEmpty)
        #expect(flow.state == .error(provider: "app", error))
    }

    @Test("when the renewal after a 401 invalid_token fails, its error is thrown instead of the 401")
    func renewalFails() async throws {
        let (_, transport) = try await setUp()
        authServer.script("/token", [.oauthError("invalid_grant")])
        api.script("/invoices", [.status(401, headers: Self.invalidToken)])

        let error = try #require(await #expect(throws: OAuthError.self) { try await transport.send(HTTPRequest(method: "GET", url: invoices)) })

        #expect(error.code == .reauthorizationRequired)
        #expect(api.requests("/invoices").count == 1)
    }

    @Test("a token endpoint answering a token_type other than Bearer fails with .invalidResponse; nothing is sent to the API")
    func nonBearerRefused() async throws {
        let (_, transport) = try await setUp()
        clock.advance(by: .seconds(3600))
        authServer.script("/token", [.token("at-2", type: "DPoP")])

        let error = try #require(await #expect(throws: OAuthError.self) { try await transport.send(HTTPRequest(method: "GET", url: invoices)) })

        #expect(error.code == .invalidResponse)
        #expect(error.message?.contains("DPoP") == true)
        #expect(api.requests().isEmpty)
    }

    @Test("the base transport's errors pass through; its body limit is the wrapper's")
    func baseErrors() async throws {
        let (_, transport) = try await setUp()
        api.script("/invoices", [.curlFailure(7)])

        let error = try #require(await #expect(throws: OAuthError.self) { try await transport.send(HTTPRequest(method: "GET", url: invoices)) })

        #expect(error.code == .transport)
        #expect(api.requests().count == 1, "a transport error is not the server refusing the token: no renewal, no retry")
        #expect(authServer.requests().isEmpty)
        #expect(transport.maximumBodySize == api.maximumBodySize)
        #expect(AuthorizingTransport(base: CurlTransport(maximumBodySize: 4096), source: transport.source).maximumBodySize == 4096)
    }

    @Test("over real sockets with CurlTransport: the retry after 401 invalid_token carries the new token and the same body")
    func overCurl() async throws {
        let server = try TestHTTPServer(keepAlive: true)
        defer { server.stop() }
        server.script("/token", [.token("at-2", refresh: "rt-2")])
        server.script("/api/invoices", [
            TestHTTPServer.Reply(status: 401, body: "", headers: Self.invalidToken), .json(#"{"ok":true}"#),
        ])
        let curl = CurlTransport(timeout: 10, proxy: .none)
        let provider = Provider(id: "app", tokenURL: URL(string: server.baseURL + "/token"), clientID: "cli-1")
        let store = MemorySecretStore(["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let flow = try await AuthFlow(providers: [provider], store: store, transport: curl, options: options(clock))
        let api = AuthorizingTransport(base: curl, source: flow.tokenSource(for: "app"))
        let body = "amount=12&note=" + String(repeating: "x", count: 3000)   // larger than one small write

        let response = try await api.send(HTTPRequest(
            method: "POST", url: URL(string: server.baseURL + "/api/invoices")!,
            headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Data(body.utf8)))

        #expect(response.status == 200)
        let sent = server.requests("/api/invoices")
        #expect(sent.map { $0.headers["authorization"] } == ["Bearer at-1", "Bearer at-2"])
        #expect(sent.map(\.body) == [body, body])
        #expect(server.requests("/token").map { $0.form["refresh_token"] } == ["rt-1"])
    }
}
