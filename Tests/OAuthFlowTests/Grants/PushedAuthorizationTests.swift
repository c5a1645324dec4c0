import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// Pushed authorization requests (RFC 9126) through a scripted server: the exact form pushed, the
/// browser URL, the request_uri's lifetime on the test clock, discovery's requirement, and
/// hostile answers.
@Suite("Pushed authorization requests (RFC 9126)", .timeLimit(.minutes(1)))
struct PushedAuthorizationTests {
    static let requestURI = "urn:ietf:params:oauth:request_uri:bwc4JK-ESC0w8acc191e-Y1LTC2"
    let clock = TestClock()

    func provider(secret: String? = "s3cret", pushed: Bool = true) -> Provider {
        var provider = scriptedProvider(id: "par", secret: secret)
        provider.pushedAuthorization = pushed
        provider.pushedAuthorizationURL = URL(string: "https://as.test/par")
        return provider
    }

    func flow(_ provider: Provider, _ transport: ScriptedTransport, log: LogCollector? = nil) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider], transport: transport, options: options(clock, log: log))
    }

    static func answer(_ json: String, status: Int = 201) -> ScriptedTransport.Step { .status(status, json: json) }

    static func pairs(_ request: HTTPRequest) -> [(String, String)] {
        FormEncoding.decode(String(decoding: request.body ?? Data(), as: UTF8.self))
    }

    @Test("The parameters are pushed with client_secret_basic; the browser URL holds only client_id and request_uri (RFC 9126 §2.1, §4)")
    func pushesAndSendsOnlyRequestURI() async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(#"{"request_uri":"\#(Self.requestURI)","expires_in":60}"#)])
        let log = LogCollector()
        let flow = try await flow(provider(), transport, log: log)
        let request = try await flow.authorizationRequest(provider: "par", scopes: ["openid", "read"], parameters: ["login_hint": "ann"])

        let pushed = try #require(transport.requests("/par").first)
        #expect(transport.requests().count == 1)
        #expect(pushed.method == "POST")
        #expect(pushed.headerValues("Authorization") == [ClientAuthenticator.basicAuthorization(clientID: "cli-1", secret: Secret("s3cret"))])
        #expect(pushed.headerValues("Content-Type") == ["application/x-www-form-urlencoded"])
        let fields = Self.pairs(pushed)
        #expect(fields.map(\.0) == ["client_id", "response_type", "redirect_uri", "scope", "state", "code_challenge",
                                    "code_challenge_method", "nonce", "login_hint"])
        #expect(fields.first { $0.0 == "client_id" }?.1 == "cli-1")
        #expect(fields.first { $0.0 == "state" }?.1 == request.state.reveal())
        #expect(fields.first { $0.0 == "nonce" }?.1 == request.nonce?.reveal())
        #expect(fields.first { $0.0 == "code_challenge" }?.1 == (try PKCE(verifier: try #require(request.codeVerifier))).challenge)
        #expect(fields.first { $0.0 == "scope" }?.1 == "openid read")

        let browser = queryPairs(request.url)
        #expect(browser.map(\.0) == ["client_id", "request_uri"])
        #expect(browser.map(\.1) == ["cli-1", Self.requestURI])
        #expect(request.url.path == "/authorize")
        #expect(!request.url.absoluteString.contains(request.state.reveal()))
        #expect(request.requestURIExpiresAt == clock.date.addingTimeInterval(60))
        #expect(request.expiresAt == clock.date.addingTimeInterval(60), "expires_in bounds the pending request")
        #expect(log.all.allSatisfy { !$0.message.contains(request.state.reveal()) && !$0.message.contains(Self.requestURI) })
    }

    @Test("The callback keeps every check: a forged state is refused; the right one exchanges the code with the verifier")
    func callbackChecksStay() async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(#"{"request_uri":"\#(Self.requestURI)","expires_in":90}"#)])
        transport.script("/token", [.token("at-1")])
        let flow = try await flow(provider(), transport)
        let request = try await flow.authorizationRequest(provider: "par")

        let forged = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "code=c&state=forged"))
        }
        #expect(forged?.code == .stateMismatch)
        clock.advance(by: .seconds(89))
        try await flow.completeAuthorization(callbackURL: callback(request, code: "code-1"))
        let exchange = try #require(transport.requests("/token").first)
        #expect(exchange.form["code"] == "code-1")
        #expect(exchange.form["code_verifier"] == request.codeVerifier?.reveal())
        #expect(exchange.form["redirect_uri"] == "http://127.0.0.1:8765/callback")
    }

    @Test("Resource indicators are pushed, kept on the request (the URL has none) and sent again with the code exchange (RFC 8707 §2)")
    func resourcesGoThroughThePushedRequest() async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(#"{"request_uri":"\#(Self.requestURI)","expires_in":90}"#)])
        transport.script("/token", [.token("at-1")])
        var provider = provider()
        provider.resources = [URL(string: "https://a.example/")!, URL(string: "https://b.example/v1")!]
        let flow = try await flow(provider, transport)
        let request = try await flow.authorizationRequest(provider: "par")

        let pushed = Self.pairs(try #require(transport.requests("/par").first))
        #expect(pushed.filter { $0.0 == "resource" }.map(\.1) == ["https://a.example/", "https://b.example/v1"])
        #expect(queryPairs(request.url).map(\.0) == ["client_id", "request_uri"])
        #expect(request.resources == ["https://a.example/", "https://b.example/v1"])
        // A web back end keeps the request in its session and finishes it elsewhere.
        let decoded = try JSONDecoder().decode(AuthorizationRequest.self, from: try JSONEncoder().encode(request))
        #expect(decoded.resources == request.resources)

        try await flow.completeAuthorization(callbackURL: callback(decoded, code: "code-1"), request: decoded)
        let exchange = try #require(transport.requests("/token").first)
        #expect(Self.pairs(exchange).filter { $0.0 == "resource" }.map(\.1) == ["https://a.example/", "https://b.example/v1"])
    }

    @Test("A callback after the request_uri expired is .expired and exchanges nothing (RFC 9126 §2.2)", arguments: [
        (false, 61), (true, 60), (false, 600),
    ])
    func expiredRequestURI(keptRequest: Bool, seconds: Int) async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(#"{"request_uri":"\#(Self.requestURI)","expires_in":60}"#)])
        transport.script("/token", [.token("at-1")])
        let flow = try await flow(provider(), transport)
        let request = try await flow.authorizationRequest(provider: "par")
        clock.advance(by: .seconds(seconds))
        let error = await #expect(throws: OAuthError.self) {
            if keptRequest {
                try await flow.completeAuthorization(callbackURL: callback(request), request: request)
            } else {
                try await flow.completeAuthorization(callbackURL: callback(request))
            }
        }
        #expect(error?.code == .expired)
        #expect(error?.endpoint == .pushedAuthorization)
        #expect(error?.message?.contains("request_uri expired") == true)
        #expect(error?.recovery == .reauthorize)
        #expect(transport.requests("/token").isEmpty)
    }

    @Test("Without a pushed authorization request endpoint, pushing is .configuration before anything is sent")
    func missingEndpoint() async throws {
        let transport = ScriptedTransport()
        var provider = provider()
        provider.pushedAuthorizationURL = nil
        let flow = try await flow(provider, transport)
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }
        #expect(error?.code == .configuration)
        #expect(error?.endpoint == .pushedAuthorization)
        #expect(error?.message?.contains("pushedAuthorizationURL") == true)
        #expect(transport.requests().isEmpty)
    }

    static func discovery(requires: Bool, endpoint: Bool) -> String {
        var members = [#""issuer":"https://as.test""#, #""authorization_endpoint":"https://as.test/authorize""#,
                       #""token_endpoint":"https://as.test/token""#, #""require_pushed_authorization_requests":\#(requires)"#]
        if endpoint { members.append(#""pushed_authorization_request_endpoint":"https://as.test/par""#) }
        return "{\(members.joined(separator: ","))}"
    }

    func discoveredProvider() -> Provider {
        Provider(id: "par", issuer: "https://as.test", clientID: "cli-1", clientSecret: Secret("s3cret"),
                 redirectURI: URL(string: "http://127.0.0.1:8765/callback"), scopes: ["read"])
    }

    @Test("Discovery's require_pushed_authorization_requests pushes to pushed_authorization_request_endpoint (RFC 9126 §5)")
    func discoveryRequires() async throws {
        let transport = ScriptedTransport()
        transport.script("/.well-known/openid-configuration", [.status(200, json: Self.discovery(requires: true, endpoint: true))])
        transport.script("/par", [Self.answer(#"{"request_uri":"\#(Self.requestURI)","expires_in":30}"#)])
        let flow = try await flow(discoveredProvider(), transport)
        let request = try await flow.authorizationRequest(provider: "par")
        #expect(transport.requests("/par").count == 1)
        #expect(queryPairs(request.url).map(\.0) == ["client_id", "request_uri"])
        #expect(request.expiresAt == clock.date.addingTimeInterval(30))
    }

    @Test("Discovery requires PAR but names no endpoint: .configuration naming pushed_authorization_request_endpoint")
    func discoveryRequiresWithoutEndpoint() async throws {
        let transport = ScriptedTransport()
        transport.script("/.well-known/openid-configuration", [.status(200, json: Self.discovery(requires: true, endpoint: false))])
        let flow = try await flow(discoveredProvider(), transport)
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains("pushed_authorization_request_endpoint") == true)
        #expect(transport.requests("/par").isEmpty)
    }

    @Test("Discovery that does not require PAR: the plain URL, nothing pushed")
    func discoveryDoesNotRequire() async throws {
        let transport = ScriptedTransport()
        transport.script("/.well-known/openid-configuration", [.status(200, json: Self.discovery(requires: false, endpoint: true))])
        let flow = try await flow(discoveredProvider(), transport)
        let request = try await flow.authorizationRequest(provider: "par")
        #expect(transport.requests("/par").isEmpty)
        #expect(query(request.url)?["state"] == request.state.reveal())
        #expect(request.requestURIExpiresAt == nil)
    }

    @Test("A provider with every endpoint written costs no discovery request to learn it need not push")
    func noDiscoveryWhenWritten() async throws {
        let transport = ScriptedTransport()
        var provider = provider(pushed: false)
        provider.issuer = "https://as.test"
        let flow = try await flow(provider, transport)
        _ = try await flow.authorizationRequest(provider: "par")
        #expect(transport.requests().isEmpty)
    }

    @Test("Hostile answers are .invalidResponse and leave nothing pending", arguments: [
        #"{"request_uri":"urn:x:1","expires_in":1e308}"#,
        #"{"request_uri":"urn:x:1","expires_in":9223372036854775808}"#,
        #"{"request_uri":"urn:x:1","expires_in":86401}"#,
        #"{"request_uri":"urn:x:1","expires_in":0}"#,
        #"{"request_uri":"urn:x:1","expires_in":-5}"#,
        #"{"request_uri":"urn:x:1","expires_in":1.5}"#,
        #"{"request_uri":"urn:x:1","expires_in":"60"}"#,
        #"{"request_uri":"urn:x:1"}"#,
        #"{"request_uri":42,"expires_in":60}"#,
        #"{"request_uri":"","expires_in":60}"#,
        #"{"request_uri":"no-scheme","expires_in":60}"#,
        #"{"request_uri":"urn:x: 1","expires_in":60}"#,
        #"{"request_uri":"urn:x:\u0000","expires_in":60}"#,
        #"{"request_uri":"urn:x:é","expires_in":60}"#,
        #"{"expires_in":60}"#,
        #"[]"#,
        #"{"request_uri":"urn:x:1","request_uri":"urn:x:2","expires_in":60}"#,
    ])
    func hostileAnswer(json: String) async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(json)])
        let flow = try await flow(provider(), transport)
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .pushedAuthorization)
        let callbackError = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "code=c&state=x"))
        }
        #expect(callbackError?.code == .stateMismatch)
    }

    @Test("A very long request_uri is refused")
    func longRequestURI() async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(#"{"request_uri":"urn:x:\#(String(repeating: "a", count: 2_100))","expires_in":60}"#)])
        let flow = try await flow(provider(), transport)
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }
        #expect(error?.code == .invalidResponse)
    }

    @Test("An HTML page, an error body and a 5xx are typed errors naming the endpoint")
    func htmlAndErrors() async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [
            ScriptedTransport.Step(outcome: .success(HTTPResponse(status: 200, headers: ["Content-Type": "text/html"],
                                                                  body: Data("<html>login</html>".utf8)))),
            .oauthError("invalid_request"),
            .status(503, json: nil),
        ])
        let flow = try await flow(provider(), transport)
        let html = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }
        #expect(html?.code == .invalidResponse)
        #expect(html?.message?.contains("HTML page") == true)
        let rejected = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }
        #expect(rejected?.code == .serverRejected)
        #expect(rejected?.response?.code == .invalidRequest)
        #expect(rejected?.endpoint == .pushedAuthorization)
        let unavailable = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }
        #expect(unavailable?.code == .httpStatus)
    }

    @Test("A public client pushes its client_id in the body, once")
    func publicClient() async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(#"{"request_uri":"\#(Self.requestURI)","expires_in":60}"#)])
        let flow = try await flow(provider(secret: nil), transport)
        _ = try await flow.authorizationRequest(provider: "par")
        let fields = Self.pairs(try #require(transport.requests("/par").first))
        #expect(fields.filter { $0.0 == "client_id" }.count == 1)
        #expect(try #require(transport.requests("/par").first).headerValues("Authorization").isEmpty)
    }

    @Test("A request kept across instances (Codable) keeps its request_uri expiry")
    func codableKeepsExpiry() async throws {
        let transport = ScriptedTransport()
        transport.script("/par", [Self.answer(#"{"request_uri":"\#(Self.requestURI)","expires_in":60}"#)])
        let flow = try await flow(provider(), transport)
        let request = try await flow.authorizationRequest(provider: "par")
        let decoded = try JSONDecoder().decode(AuthorizationRequest.self, from: try JSONEncoder().encode(request))
        #expect(decoded.requestURIExpiresAt == request.requestURIExpiresAt)
        #expect(!String(reflecting: request).contains(request.state.reveal()))
    }
}
