import Foundation
@testable import OAuthFlow
import Synchronization
import Testing

/// The browser path and mutual TLS against a real authorization server: glewlwyd 2.7.5 from Debian
/// (`Server/par/`), on https://127.0.0.1 with its own TLS listener that verifies client
/// certificates, started once for this suite. Pushed authorization requests (RFC 9126), signed
/// request objects (RFC 9101), tls_client_auth and self_signed_tls_client_auth (RFC 8705 §2) and
/// certificate-bound tokens (RFC 8705 §3). Every request goes through the library's CurlTransport;
/// a recording wrapper keeps what was sent, so the exact pushed fields on the wire are asserted.
@Suite(
    "Integration: PAR, request objects and mutual TLS against glewlwyd on loopback (RFC 9126, RFC 9101, RFC 8705)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .glewlwydServer,
    .serialized,
    .timeLimit(.minutes(3))
)
struct PushedAuthorizationIntegration {
    static let redirect = URL(string: "https://client.oauthflow.test/callback")!

    /// A transport that keeps every request it sends.
    final class Recording: HTTPTransport {
        let base: any HTTPTransport
        private let sent = Mutex<[HTTPRequest]>([])
        init(_ base: any HTTPTransport) { self.base = base }
        var maximumBodySize: Int { base.maximumBodySize }
        func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
            sent.withLock { $0.append(request) }
            return try await base.send(request)
        }
        func requests(path: String) -> [HTTPRequest] { sent.withLock { $0 }.filter { $0.url.path == path } }
    }

    static func fields(_ request: HTTPRequest) -> [(String, String)] {
        FormEncoding.decode(String(decoding: request.body ?? Data(), as: UTF8.self))
    }

    func provider(
        _ server: GlewlwydServer, clientID: String, secret: String? = nil, method: Provider.ClientAuthentication,
        key: String? = nil, certificate: String? = nil, pushed: Bool = true, requestObject: Bool = false
    ) throws -> Provider {
        var provider = Provider(
            id: "glewlwyd", issuer: server.issuer, clientID: clientID, clientSecret: secret.map(Secret.init), clientAuthentication: method,
            redirectURI: Self.redirect, scopes: ["openid"], clientKey: try key.map { try ClientKey(contentsOfFile: server.pki($0)) },
            clientCertificate: try certificate.map { try ClientCertificate(contentsOfFile: server.pki($0)) })
        provider.pushedAuthorization = pushed
        provider.requestObject = requestObject
        try provider.validate()
        return provider
    }

    /// The transport of a flow: CurlTransport trusting the test CA, presenting `identity` when given.
    static func transport(_ server: GlewlwydServer, identity: (certificate: String, key: String)? = nil) -> Recording {
        Recording(CurlTransport(timeout: 30, proxy: .none, caFile: URL(fileURLWithPath: server.pki("ca.crt")),
                                clientIdentity: identity.map { ClientTLSIdentity(certificateFile: server.pki($0.certificate), keyFile: server.pki($0.key)) }))
    }

    /// Runs the browser part as glewlwyd's login page would: the user logs in, the authorization
    /// URL is opened with `g_continue` (what login.html appends when it sends the browser back),
    /// and the redirect to the client is returned.
    static func approve(_ server: GlewlwydServer, _ url: URL) async throws -> URL {
        let (browser, cookie) = try await server.loggedInBrowser()
        let answer = try await browser.send(HTTPRequest(method: "GET", url: URL(string: url.absoluteString + "&g_continue")!,
                                                        headers: [("Cookie", cookie)]))
        try #require(answer.status == 302, "glewlwyd answered \(answer.status)")
        let location = try #require(answer.headers["location"].flatMap { URL(string: $0) })
        try #require(location.absoluteString.hasPrefix(Self.redirect.absoluteString), "redirected to \(location)")
        return location
    }

    /// Starts a browser login, approves it, completes it; returns the request.
    func login(_ flow: AuthFlow, _ server: GlewlwydServer) async throws -> AuthorizationRequest {
        let request = try await flow.authorizationRequest(provider: "glewlwyd")
        let callback = try await Self.approve(server, request.url)
        try await flow.completeAuthorization(callbackURL: callback)
        return request
    }

    @Test("PAR with client_secret_basic: the pushed fields on the wire, a URL of client_id and request_uri only, then the code exchange and ID token")
    func pushedWithSecret() async throws {
        let server = try GlewlwydServer.require()
        let transport = Self.transport(server)
        let provider = try provider(server, clientID: "par-secret", secret: "par-secret-value-0123456789abcdef", method: .clientSecretBasic)
        let flow = try await AuthFlow(providers: [provider], transport: transport)
        let request = try await login(flow, server)

        let pushed = try #require(transport.requests(path: "/api/oidc/par").first)
        #expect(transport.requests(path: "/api/oidc/par").count == 1)
        #expect(pushed.headerValue("Authorization")?.hasPrefix("Basic ") == true)
        #expect(Self.fields(pushed).map(\.0) == ["client_id", "response_type", "redirect_uri", "scope", "state", "code_challenge",
                                                 "code_challenge_method", "nonce"])
        let browser = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(browser.map(\.name) == ["client_id", "request_uri"])
        #expect(browser.last?.value?.hasPrefix("urn:ietf:params:oauth:request_uri:") == true)
        #expect(request.requestURIExpiresAt != nil)
        let authorization = try #require(await flow.authorization(for: "glewlwyd"))
        #expect(authorization.scopes.contains("openid"))
        #expect(try await flow.tokenSet(for: "glewlwyd").validatedIDToken != nil, "the ID token was validated (nonce, iss, aud, RS256)")
    }

    @Test("A signed request object alone (no PAR): glewlwyd verifies it with the client's key and issues a code; response_type and scope repeated in the URL (OpenID Connect Core §6.1) do not disturb it")
    func requestObjectInURL() async throws {
        let server = try GlewlwydServer.require()
        let provider = try provider(server, clientID: "par-jwt", method: .privateKeyJWT, key: "client.key", pushed: false, requestObject: true)
        let flow = try await AuthFlow(providers: [provider], transport: Self.transport(server))
        let request = try await login(flow, server)
        #expect((URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map(\.name)
                == ["client_id", "response_type", "scope", "request"])
        #expect(await flow.authorization(for: "glewlwyd") != nil)
    }

    @Test("PAR with a signed request object and private_key_jwt: the body is request plus the assertion fields")
    func pushedRequestObject() async throws {
        let server = try GlewlwydServer.require()
        let transport = Self.transport(server)
        // The assertion's aud is the PAR endpoint (the default, "endpoint"): glewlwyd wants exactly that.
        let provider = try provider(server, clientID: "par-jwt", method: .privateKeyJWT, key: "client.key", requestObject: true)
        let flow = try await AuthFlow(providers: [provider], transport: transport)
        _ = try await login(flow, server)
        let pushed = try #require(transport.requests(path: "/api/oidc/par").first)
        #expect(Self.fields(pushed).map(\.0) == ["request", "client_id", "client_assertion_type", "client_assertion"])
        #expect(await flow.authorization(for: "glewlwyd") != nil)
    }

    // PAR without a request object: glewlwyd 2.7.5 takes a signed `request` pushed by a client as
    // that client's authentication by signature, which a tls_client_auth client is not registered
    // for (its log: "authentication method is invalid"); see Documentation/Testing.md.
    @Test("tls_client_auth: PAR and the code exchange over mutual TLS, a token bound to our certificate (cnf checked), introspection too")
    func mutualTLS() async throws {
        let server = try GlewlwydServer.require()
        let transport = Self.transport(server, identity: ("client.crt", "client.key"))
        let provider = try provider(server, clientID: "mtls-ca", method: .tlsClientAuth, key: "client.key", certificate: "client.crt")
        let flow = try await AuthFlow(providers: [provider], transport: transport)
        _ = try await login(flow, server)
        let pushed = try #require(transport.requests(path: "/api/oidc/par").first)
        #expect(Self.fields(pushed).map(\.0) == ["response_type", "redirect_uri", "scope", "state", "code_challenge",
                                                 "code_challenge_method", "nonce", "client_id"])
        #expect(pushed.headerValue("Authorization") == nil)
        let set = try await flow.tokenSet(for: "glewlwyd")
        #expect(CertificateBinding.confirmation(inJWT: set.accessToken.reveal()) == .thumbprint(try #require(provider.clientCertificate).thumbprint),
                "glewlwyd bound the token to the certificate presented")
        let exchange = try #require(transport.requests(path: "/api/oidc/token").first)
        #expect(exchange.headerValue("Authorization") == nil)
        #expect(Self.fields(exchange).first { $0.0 == "client_id" }?.1 == "mtls-ca")
        let introspection = try await flow.introspect(provider: "glewlwyd")
        #expect(introspection.active)
        #expect(introspection.certificateThumbprint == provider.clientCertificate?.thumbprint)

        try await flow.clientCredentials(provider: "glewlwyd")
        #expect(await flow.authorization(for: "glewlwyd")?.grant == .clientCredentials)
    }

    @Test("self_signed_tls_client_auth: client credentials with the registered self-signed certificate; the token is bound to it")
    func selfSigned() async throws {
        let server = try GlewlwydServer.require()
        let provider = try provider(server, clientID: "mtls-self", method: .selfSignedTLSClientAuth, key: "self.key", certificate: "self.crt")
        let flow = try await AuthFlow(providers: [provider], transport: Self.transport(server, identity: ("self.crt", "self.key")))
        try await flow.clientCredentials(provider: "glewlwyd")
        let set = try await flow.tokenSet(for: "glewlwyd")
        #expect(CertificateBinding.confirmation(inJWT: set.accessToken.reveal()) == .thumbprint(try #require(provider.clientCertificate).thumbprint))
    }

    @Test("A token glewlwyd bound to another client's certificate is refused, as a token and in glewlwyd's introspection answer (RFC 8705 §3)")
    func boundToAnotherCertificate() async throws {
        let server = try GlewlwydServer.require()
        let bound = try provider(server, clientID: "mtls-ca", method: .tlsClientAuth, key: "client.key", certificate: "client.crt", pushed: false)
        let boundFlow = try await AuthFlow(providers: [bound], transport: Self.transport(server, identity: ("client.crt", "client.key")))
        try await boundFlow.clientCredentials(provider: "glewlwyd")
        let token = try await boundFlow.tokenSet(for: "glewlwyd").accessToken

        // The self-signed client: glewlwyd lets it introspect the other client's token, and says
        // to which certificate that token is bound.
        let other = try provider(server, clientID: "mtls-self", method: .selfSignedTLSClientAuth, key: "self.key", certificate: "self.crt",
                                 pushed: false)
        let refused = #expect(throws: OAuthError.self) { try CertificateBinding.check(accessToken: token, provider: other) }
        #expect(refused?.code == .invalidResponse)
        let client = EndpointClient(provider: other, transport: Self.transport(server, identity: ("self.crt", "self.key")),
                                    userAgent: "oauthflow-it", log: Logger(sink: nil))
        let answer = try await OAuthFlow.Introspection.introspect(token, kind: .accessToken, url: try #require(URL(string: "\(server.issuer)/introspect")),
                                                        client: client)
        #expect(answer.active)
        #expect(answer.certificateThumbprint == bound.clientCertificate?.thumbprint)
        let mismatch = #expect(throws: OAuthError.self) { try CertificateBinding.check(answer, provider: other) }
        #expect(mismatch?.code == .invalidResponse)
        #expect(mismatch?.endpoint == .introspection)
    }

    @Test("glewlwyd refuses tls_client_auth with another certificate, and without one")
    func wrongCertificate() async throws {
        let server = try GlewlwydServer.require()
        for identity in [("other.crt", "other.key"), nil] as [(certificate: String, key: String)?] {
            let provider = try provider(server, clientID: "mtls-ca", method: .tlsClientAuth, key: identity?.key ?? "client.key",
                                        certificate: identity?.certificate ?? "client.crt", pushed: false)
            let flow = try await AuthFlow(providers: [provider], transport: Self.transport(server, identity: identity))
            let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "glewlwyd") }
            #expect(error?.code == .httpStatus || error?.code == .serverRejected)
            #expect(error?.httpStatus == 403 || error?.httpStatus == 401 || error?.httpStatus == 400)
        }
    }
}

extension HTTPRequest {
    /// The first value of header `name` (case-insensitive).
    func headerValue(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
}

// MARK: - The server

/// The running glewlwyd of this suite.
struct GlewlwydServer: Sendable {
    let port: Int
    let home: String
    var base: String { "https://127.0.0.1:\(port)" }
    var issuer: String { "\(base)/api/oidc" }
    func pki(_ name: String) -> String { "\(home)/pki/\(name)" }

    /// A browser logged in as alice through glewlwyd's login API, as its login page does: the
    /// transport and the session cookie to send with the next request.
    func loggedInBrowser() async throws -> (browser: CurlTransport, cookie: String) {
        let browser = CurlTransport(timeout: 30, proxy: .none, caFile: URL(fileURLWithPath: pki("ca.crt")))
        let login = try await browser.send(HTTPRequest(
            method: "POST", url: URL(string: "\(base)/api/auth/")!, headers: [("Content-Type", "application/json")],
            body: Data(#"{"username":"alice","password":"alice-password"}"#.utf8)))
        try #require(login.status == 200)
        return (browser, try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init)))
    }

    @TaskLocal static var current: GlewlwydServer?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> GlewlwydServer {
        try #require(current, "run inside the .glewlwydServer suite", sourceLocation: sourceLocation)
    }
}

extension Trait where Self == ScriptedServerTrait {
    /// Runs the suite against one glewlwyd started for it (Server/par/start.sh on a free port, stop.sh after).
    static var glewlwydServer: Self {
        let home = ProcessInfo.processInfo.environment["OAUTHFLOW_PAR_HOME"] ?? "/tmp/oauthflow-par"
        let server = ScriptedServer(directory: "par", logPrefix: "oauthflow-par", portVariable: "OAUTHFLOW_PAR_PORT", environment: ["OAUTHFLOW_PAR_HOME": home])
        return Self(server: server) { port, suite in
            try await GlewlwydServer.$current.withValue(GlewlwydServer(port: port, home: home)) { try await suite() }
        }
    }
}
