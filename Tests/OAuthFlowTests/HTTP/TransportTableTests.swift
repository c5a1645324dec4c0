import Foundation
import Glibc
import OAuthFlow
import OAuthFlowURLSession
import TestSupport
import Testing

/// The two transports OAuthFlow ships, for tests that run the same table through both.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case curl, urlSession

    var testDescription: String { rawValue }

    /// A transport of this kind; no proxy for the curl one, so a proxy in the test environment never intervenes.
    func make(maximumBodySize: Int = 1 << 20, timeout: TimeInterval = 30) -> any HTTPTransport {
        switch self {
        case .curl: CurlTransport(maximumBodySize: maximumBodySize, timeout: timeout, proxy: CurlTransport.Proxy.none)
        case .urlSession: URLSessionTransport(maximumBodySize: maximumBodySize, timeout: timeout)
        }
    }
}

/// Both transports over real loopback sockets: what the URLProtocol mock cannot show.
@Suite("HTTP transports over real HTTP on 127.0.0.1", .timeLimit(.minutes(1)))
struct TransportTableTests {
    static func tokenRequest(_ base: String, path: String = "/token") -> HTTPRequest {
        HTTPRequest(
            method: "POST", url: URL(string: base + path)!,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic aWQ6c2VjcmV0")],
            body: Data("grant_type=refresh_token&refresh_token=rt-secret".utf8))
    }

    @Test("a 3xx from the token endpoint is returned, never followed (RFC 9700 §4.11)",
          arguments: TransportKind.allCases, [301, 302, 303, 307, 308])
    func redirectNotFollowed(kind: TransportKind, status: Int) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [TestHTTPServer.Reply(status: status, body: "", headers: ["Location": "\(server.baseURL)/elsewhere"])])
        server.script("/elsewhere", [.token("stolen")])

        let response = try await kind.make().send(Self.tokenRequest(server.baseURL))

        #expect(response.status == status)
        #expect(response.headers["location"] == "\(server.baseURL)/elsewhere")
        #expect(server.requests("/elsewhere").isEmpty, "the refresh token and Basic credentials went to the redirect target")
        #expect(server.requests("/token").count == 1)
    }

    @Test("a flow with the default transport reports a redirected token request as .httpStatus and sends nothing to the target")
    func redirectThroughFlow() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [TestHTTPServer.Reply(status: 302, body: "", headers: ["Location": "\(server.baseURL)/elsewhere"])])
        let provider = Provider(id: "loop", tokenURL: URL(string: server.baseURL + "/token")!, clientID: "id", clientSecret: Secret("secret"))
        let flow = try await AuthFlow(providers: [provider])

        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "loop") }

        #expect(error?.code == .httpStatus)
        #expect(error?.httpStatus == 302)
        #expect(server.requests("/elsewhere").isEmpty)
    }

    @Test("a body over the limit is refused, with and without Content-Length", arguments: TransportKind.allCases, [false, true])
    func oversizedBody(kind: TransportKind, closeDelimited: Bool) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let huge = #"{"access_token":""# + String(repeating: "a", count: 2 << 20) + #"","token_type":"Bearer"}"#
        server.script("/token", [TestHTTPServer.Reply(status: 200, body: huge, closeDelimited: closeDelimited)])

        let error = await #expect(throws: OAuthError.self) {
            try await kind.make(maximumBodySize: 1 << 20).send(Self.tokenRequest(server.baseURL))
        }

        #expect(error?.code == .invalidResponse)
        #expect(error?.message?.contains("exceeds") == true)
    }

    @Test("a body at the limit is accepted", arguments: TransportKind.allCases)
    func bodyAtLimit(kind: TransportKind) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let body = String(repeating: "x", count: 4096)
        server.script("/token", [TestHTTPServer.Reply(status: 200, body: body)])

        let response = try await kind.make(maximumBodySize: 4096).send(Self.tokenRequest(server.baseURL))

        #expect(response.body.count == 4096)
        #expect(kind.make(maximumBodySize: 4096).maximumBodySize == 4096)
    }

    @Test("the request arrives as sent: method, path, headers and body", arguments: TransportKind.allCases)
    func requestOnTheWire(kind: TransportKind) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [.token("at")])
        let form = "grant_type=client_credentials&pad=" + String(repeating: "p", count: 2048)   // over 1 KiB: no Expect: 100-continue
        let request = HTTPRequest(
            method: "POST", url: URL(string: server.baseURL + "/token?x=1")!,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"), ("User-Agent", "oauthflow-test")],
            body: Data(form.utf8))

        let response = try await kind.make().send(request)

        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/json", "header names are lower-cased")
        let sent = try #require(server.requests("/token").first)
        #expect(sent.method == "POST")
        #expect(sent.body == form)
        #expect(sent.headers["content-type"] == "application/x-www-form-urlencoded")
        #expect(sent.headers["accept"] == "application/json")
        #expect(sent.headers["user-agent"] == "oauthflow-test")
        #expect(sent.headers["expect"] == nil)
    }

    @Test("a refused connection is .transport and retryable, and names no secret", arguments: TransportKind.allCases)
    func connectionRefused(kind: TransportKind) async throws {
        let port = try LoopbackSocket.closedPort()
        let request = Self.tokenRequest("http://127.0.0.1:\(port)")

        let error = await #expect(throws: OAuthError.self) { try await kind.make(timeout: 5).send(request) }

        #expect(error?.code == .transport)
        #expect(error?.isRetryable == true)
        #expect(error?.description.contains("127.0.0.1") == true)
        #expect(!String(reflecting: error).contains("rt-secret") && !String(reflecting: error).contains("aWQ6c2VjcmV0"))
    }
}
