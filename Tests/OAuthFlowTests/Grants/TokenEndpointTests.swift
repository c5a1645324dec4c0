import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OAuthFlow
import OAuthFlowURLSession
import OAuthFlowTesting
import Testing

@Suite("Token endpoint requests and responses (RFC 6749 §5)", .timeLimit(.minutes(1)))
struct TokenEndpointTests {
    let mock = MockProvider()
    let clock = TestClock()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, transport: mock.transport(), options: options(clock))
    }

    /// Runs client credentials against one scripted token response.
    func fetch(_ response: MockResponse) async throws(OAuthError) -> (AuthFlow, TokenSet) {
        mock.script(.token, [response])
        let flow: AuthFlow
        do { flow = try await self.flow(mock.provider(id: "svc", clientSecret: "s", scopes: ["requested"])) } catch {
            Issue.record(error)
            throw OAuthError(.configuration)
        }
        _ = try await flow.clientCredentials(provider: "svc")
        return (flow, try await flow.tokenSet(for: "svc"))
    }

    struct Success: Sendable, CustomTestStringConvertible {
        var name: String
        var response: MockResponse
        var expiresIn: Int?
        var scopes: [String]
        var testDescription: String { name }
    }

    static let successes: [Success] = [
        Success(name: "JSON", response: .json(#"{"access_token":"AT","token_type":"Bearer","expires_in":3600,"scope":"read write"}"#),
                expiresIn: 3600, scopes: ["read", "write"]),
        Success(name: "form-encoded (GitHub)", response: .form("access_token=AT&scope=repo%2Cuser&token_type=bearer"),
                expiresIn: nil, scopes: ["repo", "user"]),
        Success(name: "expires_in as a numeric string (Azure)",
                response: .json(#"{"access_token":"AT","token_type":"Bearer","expires_in":"3599"}"#),
                expiresIn: 3599, scopes: ["requested"]),
        Success(name: "expires_in absent", response: .json(#"{"access_token":"AT","token_type":"Bearer"}"#),
                expiresIn: nil, scopes: ["requested"]),
        Success(name: "expires_in null", response: .json(#"{"access_token":"AT","token_type":"Bearer","expires_in":null}"#),
                expiresIn: nil, scopes: ["requested"]),
        Success(name: "token_type lower case", response: .json(#"{"access_token":"AT","token_type":"bearer","expires_in":60}"#),
                expiresIn: 60, scopes: ["requested"]),
        Success(name: "token_type upper case", response: .json(#"{"access_token":"AT","token_type":"BEARER","expires_in":60}"#),
                expiresIn: 60, scopes: ["requested"]),
        Success(name: "JSON with a charset and unknown members",
                response: MockResponse(status: 200, headers: ["Content-Type": "application/json; charset=utf-8"],
                                       body: Data(#"{"access_token":"AT","token_type":"Bearer","expires_in":10,"ext":{"a":[1]}}"#.utf8)),
                expiresIn: 10, scopes: ["requested"]),
        Success(name: "201 Created", response: .json(#"{"access_token":"AT","token_type":"Bearer"}"#, status: 201),
                expiresIn: nil, scopes: ["requested"]),
    ]

    @Test("token responses are parsed from JSON or forms; expires_in, token_type and scope as providers send them (RFC 6749 §5.1)",
          arguments: successes)
    func parsesTokenResponse(_ example: Success) async throws {
        let (_, set) = try await fetch(example.response)
        #expect(set.accessToken.reveal() == "AT")
        #expect(set.isBearer)
        #expect(set.expiresAt == example.expiresIn.map { clock.date.addingTimeInterval(TimeInterval($0)) })
        #expect(set.scopes == example.scopes)
        #expect(set.issuedAt == clock.date)
    }

    struct Failure: Sendable, CustomTestStringConvertible {
        var name: String
        var response: MockResponse
        var code: OAuthError.Code
        var status: Int
        var error: ErrorResponse? = nil
        var testDescription: String { name }
    }

    /// Every body holds BODY-MARKER where it is not a §5.2 field, so a leak into a message shows.
    static let failures: [Failure] = [
        Failure(name: "§5.2 JSON with description and URI",
                response: .json(
                    #"{"error":"invalid_request","error_description":"missing x","error_uri":"https://idp.example/e","x":"BODY-MARKER"}"#,
                    status: 400),
                code: .serverRejected, status: 400,
                error: ErrorResponse(code: .invalidRequest, errorDescription: "missing x", errorURI: "https://idp.example/e")),
        Failure(name: "§5.2 form-encoded", response: .form("error=invalid_scope&error_description=bad+scope&x=BODY-MARKER", status: 400),
                code: .serverRejected, status: 400, error: ErrorResponse(code: .invalidScope, errorDescription: "bad scope")),
        Failure(name: "§5.2 with HTTP 200", response: .json(#"{"error":"unsupported_grant_type","x":"BODY-MARKER"}"#),
                code: .serverRejected, status: 200, error: ErrorResponse(code: .unsupportedGrantType)),
        Failure(name: "HTML 502 from a proxy", response: .html("<html><body><h1>502 Bad Gateway</h1>BODY-MARKER</body></html>"),
                code: .httpStatus, status: 502),
        Failure(name: "HTML without Content-Type",
                response: MockResponse(status: 503, body: Data("  <!DOCTYPE html><p>BODY-MARKER a=b</p>".utf8)),
                code: .httpStatus, status: 503),
        Failure(name: "HTML 200 (captive portal)", response: .html("<html>BODY-MARKER</html>", status: 200),
                code: .invalidResponse, status: 200),
        Failure(name: "empty 200", response: MockResponse(status: 200), code: .invalidResponse, status: 200),
        Failure(name: "empty 500", response: MockResponse(status: 500), code: .httpStatus, status: 500),
        Failure(name: "JSON error without error member", response: .json(#"{"message":"BODY-MARKER"}"#, status: 400),
                code: .httpStatus, status: 400),
        Failure(name: "JSON array", response: .json(#"[{"access_token":"BODY-MARKER","token_type":"Bearer"}]"#),
                code: .invalidResponse, status: 200),
        Failure(name: "JSON null", response: .json("null"), code: .invalidResponse, status: 200),
        Failure(name: "access_token is a number", response: .json(#"{"access_token":12345,"token_type":"Bearer"}"#),
                code: .invalidResponse, status: 200),
        Failure(name: "access_token missing", response: .json(#"{"token_type":"Bearer","x":"BODY-MARKER"}"#),
                code: .invalidResponse, status: 200),
        Failure(name: "access_token empty", response: .json(#"{"access_token":"","token_type":"Bearer"}"#),
                code: .invalidResponse, status: 200),
        Failure(name: "token_type missing", response: .json(#"{"access_token":"BODY-MARKER"}"#), code: .invalidResponse, status: 200),
        Failure(name: "expires_in true", response: .json(#"{"access_token":"BODY-MARKER","token_type":"Bearer","expires_in":true}"#),
                code: .invalidResponse, status: 200),
        Failure(name: "expires_in \"abc\"", response: .json(#"{"access_token":"BODY-MARKER","token_type":"Bearer","expires_in":"abc"}"#),
                code: .invalidResponse, status: 200),
        Failure(name: "expires_in negative", response: .json(#"{"access_token":"BODY-MARKER","token_type":"Bearer","expires_in":-5}"#),
                code: .invalidResponse, status: 200),
        Failure(name: "expires_in an object", response: .json(#"{"access_token":"BODY-MARKER","token_type":"Bearer","expires_in":{}}"#),
                code: .invalidResponse, status: 200),
    ]

    @Test("failures map to typed errors with the status and parsed §5.2 body, never the raw body (RFC 6749 §5.2)",
          arguments: failures)
    func mapsFailures(_ example: Failure) async throws {
        let error = try #require(await #expect(throws: OAuthError.self) { try await fetch(example.response) })
        #expect(error.code == example.code)
        #expect(error.httpStatus == example.status)
        #expect(error.endpoint == .token)
        #expect(error.providerID == "svc")
        #expect(error.response == example.error)
        for text in [error.description, error.message ?? "", String(reflecting: error), error.localizedDescription] {
            #expect(!text.contains("BODY-MARKER"))
        }
        if example.code == .httpStatus {
            #expect(error.recovery == (example.status >= 500 ? .retryLater : .fixConfiguration))
        }
    }

    @Test("an HTML error page names its status and says it is HTML (RFC 6749 §5.2)")
    func htmlErrorPage() async throws {
        let error = try #require(await #expect(throws: OAuthError.self) { try await fetch(.html()) })
        #expect(error.code == .httpStatus)
        #expect(error.httpStatus == 502)
        #expect(error.message?.contains("HTML") == true)
        #expect(error.description.contains("502"))
        #expect(!error.description.contains("Bad Gateway"))
        #expect(error.isRetryable)
    }

    static let limit = CurlTransport.defaultMaximumBodySize

    /// A valid token response of exactly `size` bytes.
    static func paddedToken(size: Int) -> MockResponse {
        let head = #"{"access_token":"AT","token_type":"Bearer","pad":""#
        let tail = #""}"#
        return .json(head + String(repeating: "x", count: size - head.utf8.count - tail.utf8.count) + tail)
    }

    @Test("a body over 1 MiB is refused with .invalidResponse even when it is a valid token", arguments: [limit + 1, 2 * limit])
    func oversizedBody(size: Int) async throws {
        let error = try #require(await #expect(throws: OAuthError.self) { try await fetch(Self.paddedToken(size: size)) })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .token)
        #expect(error.message?.contains("exceeds") == true)
    }

    @Test("a body of exactly 1 MiB is accepted")
    func bodyAtLimit() async throws {
        let (_, set) = try await fetch(Self.paddedToken(size: Self.limit))
        #expect(set.accessToken.reveal() == "AT")
    }

    @Test("a custom transport's oversized body is refused too")
    func oversizedBodyFromCustomTransport() async throws {
        let transport = FixedTransport(response: HTTPResponse(
            status: 200, headers: ["content-type": "application/json"], body: Data(Self.paddedToken(size: 2 * Self.limit).body)))
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "svc", clientSecret: "s")], transport: transport, options: options(clock))
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") }
        #expect(error?.code == .invalidResponse)
    }

    @Test("the limit is the transport's maximumBodySize, not a fixed 1 MiB")
    func limitComesFromTransport() async throws {
        let body = Data(Self.paddedToken(size: 600).body)
        for (limit, accepted) in [(599, false), (600, true)] {
            let transport = FixedTransport(
                response: HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: body), maximumBodySize: limit)
            let flow = try await AuthFlow(
                providers: [mock.provider(id: "svc", clientSecret: "s")], transport: transport, options: options(clock))
            do {
                _ = try await flow.clientCredentials(provider: "svc")
                #expect(accepted)
            } catch {
                #expect(!accepted)
                #expect(error.code == .invalidResponse)
                #expect(error.message?.contains("exceeds 599 bytes") == true)
            }
        }
    }

    @Test("a 3xx is not followed: the other host gets nothing and the error is .httpStatus (RFC 9700 §4.11)", arguments: [
        301, 302, 303, 307, 308,
    ])
    func redirectNotFollowed(status: Int) async throws {
        let other = MockProvider()
        other.script(.token, [.token(access: "stolen")])
        let redirect = MockResponse(status: status, headers: ["Location": other.url(.token).absoluteString])
        let error = try #require(await #expect(throws: OAuthError.self) { try await fetch(redirect) })
        #expect(error.code == .httpStatus)
        #expect(error.httpStatus == status)
        #expect(other.requests().isEmpty, "the client secret must not be replayed to the redirect target")
        #expect(mock.requests(.token).count == 1)
    }

    @Test("no connection is .transport and retryable")
    func transportFailure() async throws {
        var gone: MockProvider? = MockProvider()
        let provider = try #require(gone?.provider(id: "svc", clientSecret: "s"))
        gone = nil  // its host is no longer served: the request fails like an unknown host
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") })
        #expect(error.code == .transport)
        #expect(error.isRetryable)
        #expect(error.recovery == .retryLater)
        #expect(error.endpoint == .token)
        #expect(error.providerID == "svc")
        #expect(error.underlying is URLError)
        #expect(mock.requests().isEmpty)
    }

    @Test("every token request sends User-Agent, the default or the provider's")
    func userAgent() async throws {
        mock.script(.token, [.token(access: "a"), .token(access: "b")])
        var custom = mock.provider(id: "custom", clientSecret: "s")
        custom.userAgent = "MyApp/2.0"
        let flow = try await flow(mock.provider(id: "plain", clientSecret: "s"), custom)
        _ = try await flow.clientCredentials(provider: "plain")
        _ = try await flow.clientCredentials(provider: "custom")
        #expect(mock.requests(.token).map { $0.header("User-Agent") } == ["OAuthFlow/0.1", "MyApp/2.0"])
    }

    @Test("the transport answers non-2xx statuses instead of throwing, and refuses oversized bodies itself")
    func transportContract() async throws {
        mock.script(.token, [.oauthError("invalid_request", status: 400), Self.paddedToken(size: 2 * Self.limit)])
        let transport = mock.transport()
        let request = HTTPRequest(method: "POST", url: mock.url(.token), headers: [("Accept", "application/json")], body: Data("a=b".utf8))
        let response = try await transport.send(request)
        #expect(response.status == 400)
        #expect(response.mediaType == "application/json")
        let error = await #expect(throws: OAuthError.self) { try await transport.send(request) }
        #expect(error?.code == .invalidResponse)
    }
}

/// A transport that answers every request with one response.
struct FixedTransport: HTTPTransport {
    let response: HTTPResponse
    var maximumBodySize = 1 << 20
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse { response }
}
