import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Client credentials (RFC 6749 §4.4)", .timeLimit(.minutes(1)))
struct ClientCredentialsTests {
    let mock = MockProvider()
    let clock = TestClock()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, transport: mock.transport(), options: options(clock))
    }

    /// (id, secret, id form-encoded, secret form-encoded), the expectations written out by hand.
    static let credentials = [
        ("client:id", "s3cr:et", "client%3Aid", "s3cr%3Aet"),
        ("my client", "pa ss%word", "my+client", "pa+ss%25word"),
        ("clïent", "sécret€", "cl%C3%AFent", "s%C3%A9cret%E2%82%AC"),
        ("a+b/c=", "x&y=z~", "a%2Bb%2Fc%3D", "x%26y%3Dz%7E"),
    ]

    @Test("client_secret_basic form-encodes id and secret before base64 (RFC 6749 §2.3.1)", arguments: credentials)
    func basic(id: String, secret: String, encodedID: String, encodedSecret: String) async throws {
        mock.script(.token, [.token(access: "at-1", scope: "read")])
        let flow = try await flow(mock.provider(id: "svc", clientID: id, clientSecret: secret))
        _ = try await flow.clientCredentials(provider: "svc")

        let sent = try #require(mock.requests(.token).only)
        #expect(sent.method == "POST")
        #expect(sent.url == mock.url(.token))
        #expect(sent.url.query == nil)
        #expect(sent.header("Authorization") == "Basic " + Data("\(encodedID):\(encodedSecret)".utf8).base64EncodedString())
        #expect(sent.basicCredentials?.id == id)
        #expect(sent.basicCredentials?.secret == secret)
        #expect(sent.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(sent.header("Accept") == "application/json")
        #expect(uniqueForm(sent) == ["grant_type": "client_credentials", "scope": "read"])
        #expect(!sent.url.absoluteString.contains(encodedSecret))
    }

    @Test("client_secret_post sends client_id and client_secret in the body only (RFC 6749 §2.3.1)", arguments: credentials)
    func post(id: String, secret: String, encodedID: String, encodedSecret: String) async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "svc", clientID: id, clientSecret: secret, clientAuthentication: .clientSecretPost))
        _ = try await flow.clientCredentials(provider: "svc", scopes: ["a", "b"])

        let sent = try #require(mock.requests(.token).only)
        #expect(sent.header("Authorization") == nil)
        #expect(uniqueForm(sent) == ["grant_type": "client_credentials", "scope": "a b", "client_id": id, "client_secret": secret])
        #expect(String(decoding: sent.body, as: UTF8.self).contains("client_secret=\(encodedSecret)"))
        #expect(sent.url == mock.url(.token))
        #expect(sent.url.query == nil, "secrets never go in a URL")
    }

    @Test("no scope parameter when no scopes are configured (RFC 6749 §4.4.2)")
    func noScope() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "svc", clientSecret: "s", scopes: []))
        let authorization = try await flow.clientCredentials(provider: "svc")
        #expect(uniqueForm(try #require(mock.requests(.token).only)) == ["grant_type": "client_credentials"])
        #expect(authorization.scopes.isEmpty)
        #expect(!authorization.isRefreshable)
        #expect(authorization.grant == .clientCredentials)
    }

    @Test("a public client is refused with .configuration and sends nothing (RFC 6749 §4.4)")
    func publicRefused() async throws {
        let flow = try await flow(mock.provider(id: "public"))
        let states = flow.states
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "public") }
        #expect(error?.code == .configuration)
        // Refused before anything is published as in flight.
        var seen: [AuthFlow.State] = []
        for await state in states {
            seen.append(state)
            if seen.count == 2 { break }
        }
        #expect(seen.map(\.name) == ["empty", "error"])
        #expect(error?.recovery == .fixConfiguration)
        #expect(mock.requests().isEmpty)
        #expect(await flow.authorization(for: "public") == nil)
    }

    @Test("invalid_client is .serverRejected with the §5.2 body and fixConfiguration (RFC 6749 §5.2)", arguments: [
        [:], ["WWW-Authenticate": #"Basic realm="token""#], ["WWW-Authenticate": #"Bearer error="invalid_client""#],
    ])
    func invalidClient(extraHeaders: [String: String]) async throws {
        let body = #"{"error":"invalid_client","error_description":"Client authentication failed","#
            + #""error_uri":"https://idp.example/errors#client"}"#
        mock.script(.token, [MockResponse(
            status: 401, headers: extraHeaders.merging(["Content-Type": "application/json"]) { a, _ in a }, body: Data(body.utf8))])
        let flow = try await flow(mock.provider(id: "svc", clientSecret: "wrong"))
        let recorders = recordStates(flow)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") })
        #expect(error.code == .serverRejected)
        #expect(error.httpStatus == 401)
        #expect(error.endpoint == .token)
        #expect(error.providerID == "svc")
        #expect(error.response == ErrorResponse(
            code: .invalidClient, errorDescription: "Client authentication failed", errorURI: "https://idp.example/errors#client"))
        #expect(error.recovery == .fixConfiguration)
        #expect(!error.isRetryable)
        let expected: [State] = [.empty, .requestingAccessToken(provider: "svc"), .error(provider: "svc", error)]
        for seen in await collected(recorders) { #expect(seen == expected) }
    }

    @Test("two concurrent subscribers see empty → requestingAccessToken → authorized")
    func stateSequence() async throws {
        mock.script(.token, [.token(access: "at-1", expiresIn: 60)])
        let flow = try await flow(mock.provider(id: "svc", clientSecret: "s"))
        let recorders = recordStates(flow)
        let authorization = try await flow.clientCredentials(provider: "svc")
        let expected: [State] = [.empty, .requestingAccessToken(provider: "svc"), .authorized(provider: "svc", authorization)]
        for seen in await collected(recorders) { #expect(seen == expected) }
        #expect(authorization.expiresAt == clock.date.addingTimeInterval(60))
    }

    @Test("accessToken(for:) answers from memory while valid and fetches again once expired")
    func refetchWhenExpired() async throws {
        mock.script(.token, [.token(access: "at-1", expiresIn: 3600), .token(access: "at-2", expiresIn: 3600)])
        let flow = try await flow(mock.provider(id: "svc", clientSecret: "s", scopes: ["read"]))
        _ = try await flow.clientCredentials(provider: "svc")
        clock.advance(by: .seconds(3000))
        #expect(try await flow.accessToken(for: "svc").reveal() == "at-1")
        #expect(mock.requests(.token).count == 1)

        clock.advance(by: .seconds(600))
        #expect(try await flow.accessToken(for: "svc").reveal() == "at-2")
        let requests = mock.requests(.token)
        #expect(requests.count == 2)
        #expect(requests.last.flatMap(uniqueForm) == ["grant_type": "client_credentials", "scope": "read"])
        #expect(requests.last?.basicCredentials?.secret == "s")
        #expect(try await flow.accessToken(for: "svc").reveal() == "at-2")
        #expect(mock.requests(.token).count == 2)
    }

    @Test("a client-credentials-only provider fetches its first token on accessToken(for:)")
    func firstTokenOnDemand() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let provider = Provider(id: "api", tokenURL: mock.url(.token), clientID: "svc", clientSecret: Secret("s"), scopes: ["x"])
        let flow = try await flow(provider)
        #expect(try await flow.accessToken(for: "api").reveal() == "at-1")
        #expect(mock.requests(.token).only?.form["grant_type"] == "client_credentials")
    }

    @Test("accessToken(for:) with nothing stored and an interactive provider is .reauthorizationRequired, with no request")
    func nothingStored() async throws {
        let flow = try await flow(mock.provider(id: "web", clientSecret: "s"))
        let error = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "web") }
        #expect(error?.code == .reauthorizationRequired)
        #expect(mock.requests().isEmpty)
    }
}
