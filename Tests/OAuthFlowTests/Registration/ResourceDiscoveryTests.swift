import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// `AuthFlow.resourceMetadata(for:)` and `authorizationServer(for:issuer:)` (Registration/,
/// Flow/AuthFlow+Registration.swift): the requests on the wire, the checks of RFC 9728 §3.3 and
/// §7.6, and every hostile document a typed error.
@Suite("Protected-resource discovery (RFC 9728)", .timeLimit(.minutes(1)))
struct ResourceDiscoveryTests {
    static let resource = URL(string: "https://api.test/mcp")!
    static let wellKnown = "/.well-known/oauth-protected-resource/mcp"
    static let challenge = ["WWW-Authenticate": #"Bearer resource_metadata="https://api.test/.well-known/oauth-protected-resource/mcp", scope="openid""#]
    static let document = #"{"resource":"https://api.test/mcp","authorization_servers":["https://as.test"],"scopes_supported":["openid","api"],"resource_name":"Test API"}"#

    let clock = TestClock()
    let wire = ScriptedTransport()

    func flow() async throws -> AuthFlow {
        try await AuthFlow(providers: [], store: MemorySecretStore(), transport: wire, options: options(clock))
    }

    @Test("RFC 9728 §3.1: the well-known URL goes between the host and the path; a lone '/' is dropped", arguments: [
        ("https://resource.example.com/resource1", "https://resource.example.com/.well-known/oauth-protected-resource/resource1"),
        ("https://resource.example.com", "https://resource.example.com/.well-known/oauth-protected-resource"),
        ("https://resource.example.com/", "https://resource.example.com/.well-known/oauth-protected-resource"),
        ("https://api.example.com:8443/v1/mcp", "https://api.example.com:8443/.well-known/oauth-protected-resource/v1/mcp"),
        ("http://127.0.0.1:9000/mcp?tenant=a", "http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp?tenant=a"),
    ])
    func wellKnownURL(resource: String, expected: String) throws {
        let url = try #require(URL(string: resource))
        #expect(ProtectedResourceMetadata.wellKnownURL(for: url)?.absoluteString == expected)
    }

    @Test("from the 401 challenge's resource_metadata (§5.1): a GET without a token, then the document; cached afterwards")
    func fromChallenge() async throws {
        wire.script("/mcp", [.status(401, headers: Self.challenge)])
        wire.script(Self.wellKnown, [.status(200, json: Self.document)])
        let flow = try await flow()

        let metadata = try await flow.resourceMetadata(for: Self.resource)

        #expect(metadata.resource == Self.resource)
        #expect(metadata.authorizationServers == ["https://as.test"])
        #expect(metadata.scopesSupported == ["openid", "api"])
        #expect(metadata.challengeScopes == ["openid"])
        #expect(metadata.resourceName == "Test API")
        #expect(metadata.source == .challenge)
        let sent = wire.requests()
        #expect(sent.map { "\($0.method) \($0.url.absoluteString)" } == [
            "GET https://api.test/mcp", "GET https://api.test/.well-known/oauth-protected-resource/mcp",
        ])
        #expect(sent.allSatisfy { $0.header("Authorization") == nil }, "discovery sends no token anywhere")
        _ = try await flow.resourceMetadata(for: Self.resource)
        #expect(wire.requests().count == 2, "the second call is answered from the cache")
    }

    @Test("without a challenge naming it, the well-known URL (§3.1)")
    func fromWellKnown() async throws {
        wire.script("/mcp", [.status(200, json: "{}")])
        wire.script(Self.wellKnown, [.status(200, json: Self.document)])
        let metadata = try await flow().resourceMetadata(for: Self.resource)
        #expect(metadata.source == .wellKnown)
        #expect(metadata.challengeScopes.isEmpty)
        #expect(wire.requests().map(\.url.path) == ["/mcp", Self.wellKnown])
    }

    @Test("a hostile or wrong document is a typed error naming the member, never used", arguments: [
        (#"{"resource":"https://api.test/other","authorization_servers":["https://as.test"]}"#, "is not the URL asked about"),
        (#"{"resource":"https://api.test/mcp/","authorization_servers":["https://as.test"]}"#, "is not the URL asked about"),
        (#"{"authorization_servers":["https://as.test"]}"#, "resource is missing"),
        (#"{"resource":"https://api.test/mcp"}"#, "authorization_servers is missing or empty"),
        (#"{"resource":"https://api.test/mcp","authorization_servers":[]}"#, "authorization_servers is missing or empty"),
        (#"{"resource":"https://api.test/mcp","authorization_servers":["http://as.evil.example"]}"#, "authorization_servers holds an entry"),
        (#"{"resource":"https://api.test/mcp","authorization_servers":["https://as.test?x=1"]}"#, "authorization_servers holds an entry"),
        (#"{"resource":"https://api.test/mcp","authorization_servers":[1]}"#, "authorization_servers must hold only strings"),
        (#"{"resource":"https://api.test/mcp","authorization_servers":["https://as.test"],"scopes_supported":["a b"]}"#, "scopes_supported"),
        (#"{"resource":"https://api.test/mcp","authorization_servers":["https://as.test"],"resource_name":"\u001b]0;pwned\u0007"}"#, "resource_name"),
        (#"["https://as.test"]"#, "must be a JSON object"),
        ("{\"resource\":\"https://api.test/mcp\",\"authorization_servers\":[" + (0..<17).map { _ in "\"https://as.test\"" }.joined(separator: ",") + "]}",
         "more than 16"),
        ("{\"resource\":\"https://api.test/mcp\",\"authorization_servers\":[\"https://as.test\"],\"scopes_supported\":["
            + (0..<300).map { "\"s\($0)\"" }.joined(separator: ",") + "]}", "more than 256"),
    ])
    func hostileDocuments(body: String, reason: String) async throws {
        wire.script("/mcp", [.status(401, headers: Self.challenge)])
        wire.script(Self.wellKnown, [.status(200, json: body)])
        let error = await #expect(throws: OAuthError.self) { try await flow().resourceMetadata(for: Self.resource) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .resource)
        #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "")")
        #expect(!(error?.description.contains("pwned") ?? true))
    }

    @Test("a document over the transport's body limit (1 MiB) is refused, never parsed")
    func hugeDocument() async throws {
        wire.script("/mcp", [.status(401, headers: Self.challenge)])
        let padding = String(repeating: " ", count: HTTPTransportDefaults.maximumBodySize)
        wire.script(Self.wellKnown, [.status(200, json: Self.document + padding)])
        let error = await #expect(throws: OAuthError.self) { try await flow().resourceMetadata(for: Self.resource) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message?.contains("exceeds") == true)
    }

    @Test("a challenge with control characters is refused before anything is fetched from it")
    func hostileChallenge() async throws {
        wire.script("/mcp", [.status(401, headers: ["WWW-Authenticate": "Bearer resource_metadata=\"https://api.test/m\u{1B}[2J\""])])
        let error = await #expect(throws: OAuthError.self) { try await flow().resourceMetadata(for: Self.resource) }
        #expect(error?.code == .invalidResponse)
        #expect(wire.requests().count == 1)
    }

    @Test("redirects: followed on the document's origin; one to another origin is refused; more than three are refused")
    func redirects() async throws {
        wire.script("/mcp", [.status(200)])
        wire.script(Self.wellKnown, [.status(302, headers: ["Location": "/moved"])])
        wire.script("/moved", [.status(200, json: Self.document)])
        _ = try await flow().resourceMetadata(for: Self.resource)
        #expect(wire.requests().map(\.url.absoluteString).last == "https://api.test/moved")

        let other = ScriptedTransport()
        other.script("/mcp", [.status(200)])
        other.script(Self.wellKnown, [.status(301, headers: ["Location": "https://evil.test/.well-known/oauth-protected-resource/mcp"])])
        let flow = try await AuthFlow(providers: [], store: MemorySecretStore(), transport: other, options: options(clock))
        let error = await #expect(throws: OAuthError.self) { try await flow.resourceMetadata(for: Self.resource) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message?.contains("another origin") == true)
        #expect(!other.requests().contains { $0.url.host == "evil.test" }, "nothing is sent to the other origin")

        let loop = ScriptedTransport()
        loop.script("/mcp", [.status(200)])
        loop.script(Self.wellKnown, [.status(302, headers: ["Location": Self.wellKnown])])
        let looping = try await AuthFlow(providers: [], store: MemorySecretStore(), transport: loop, options: options(clock))
        let tooMany = await #expect(throws: OAuthError.self) { try await looping.resourceMetadata(for: Self.resource) }
        #expect(tooMany?.code == .invalidResponse)
        #expect(loop.requests(Self.wellKnown).count == 4)
    }

    @Test("no document: .httpStatus; a resource URL neither https nor loopback: .configuration before any request")
    func missing() async throws {
        wire.script("/mcp", [.status(404)])
        wire.script(Self.wellKnown, [.status(404)])
        let error = await #expect(throws: OAuthError.self) { try await flow().resourceMetadata(for: Self.resource) }
        #expect(error?.code == .httpStatus)
        #expect(error?.httpStatus == 404)
        let plain = await #expect(throws: OAuthError.self) { try await flow().resourceMetadata(for: URL(string: "http://api.example/mcp")!) }
        #expect(plain?.code == .configuration)
        #expect(wire.requests().count == 2)
    }

    @Test("the server: the first listed, or one named that the resource lists; its metadata's issuer must be exactly it")
    func authorizationServer() async throws {
        wire.script("/mcp", [.status(401, headers: Self.challenge)])
        wire.script(Self.wellKnown, [.status(200, json: Self.document)])
        wire.script("/.well-known/openid-configuration", [
            .status(200, json: #"{"issuer":"https://as.test","authorization_endpoint":"https://as.test/authorize","token_endpoint":"https://as.test/token","registration_endpoint":"https://as.test/register"}"#),
        ])
        let flow = try await flow()
        let metadata = try await flow.resourceMetadata(for: Self.resource)
        let server = try await flow.authorizationServer(for: metadata)
        #expect(server.issuer == "https://as.test")
        #expect(server.registrationEndpoint?.absoluteString == "https://as.test/register")

        let unlisted = await #expect(throws: OAuthError.self) { try await flow.authorizationServer(for: metadata, issuer: "https://other.test") }
        #expect(unlisted?.code == .configuration)
        #expect(unlisted?.message?.contains("not one the resource") == true)

        let disagreeing = ScriptedTransport()
        disagreeing.script("/mcp", [.status(401, headers: Self.challenge)])
        disagreeing.script(Self.wellKnown, [.status(200, json: Self.document)])
        disagreeing.script("/.well-known/openid-configuration", [.status(200, json: #"{"issuer":"https://as.test/"}"#)])
        let other = try await AuthFlow(providers: [], store: MemorySecretStore(), transport: disagreeing, options: options(clock))
        let mismatch = await #expect(throws: OAuthError.self) {
            try await other.authorizationServer(for: try await other.resourceMetadata(for: Self.resource))
        }
        #expect(mismatch?.code == .invalidResponse)
        #expect(mismatch?.endpoint == .discovery)
    }
}
