import Foundation
import Glibc
import OAuthFlow
import TestSupport
import Testing

/// The default transport over real loopback sockets: what the URLProtocol mock cannot show.
@Suite("URLSessionTransport over real HTTP on 127.0.0.1")
struct URLSessionTransportTests {
    private func tokenRequest(_ server: TestHTTPServer, path: String = "/token") -> HTTPRequest {
        HTTPRequest(
            method: "POST", url: URL(string: server.baseURL + path)!,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic aWQ6c2VjcmV0")],
            body: Data("grant_type=refresh_token&refresh_token=rt-secret".utf8))
    }

    @Test("a 302 from the token endpoint is returned, never followed (RFC 9700 §4.11)", arguments: [301, 302, 303, 307, 308])
    func redirectNotFollowed(status: Int) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [TestHTTPServer.Reply(status: status, body: "", headers: ["Location": "\(server.baseURL)/elsewhere"])])
        server.script("/elsewhere", [.token("stolen")])

        let response = try await URLSessionTransport().send(tokenRequest(server))

        #expect(response.status == status)
        #expect(server.requests("/elsewhere").isEmpty, "the refresh token and Basic credentials went to the redirect target")
        #expect(server.requests("/token").count == 1)
    }

    @Test("a flow reports a redirected token request as .httpStatus and sends nothing to the target")
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

    @Test("a body over the limit is refused, with and without Content-Length", arguments: [false, true])
    func oversizedBody(closeDelimited: Bool) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let huge = #"{"access_token":""# + String(repeating: "a", count: 2 << 20) + #"","token_type":"Bearer"}"#
        server.script("/token", [TestHTTPServer.Reply(status: 200, body: huge, closeDelimited: closeDelimited)])

        let error = await #expect(throws: OAuthError.self) {
            try await URLSessionTransport(maximumBodySize: 1 << 20).send(tokenRequest(server))
        }

        #expect(error?.code == .invalidResponse)
        #expect(error?.message?.contains("exceeds") == true)
    }

    @Test("a body at the limit is accepted")
    func bodyAtLimit() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let body = String(repeating: "x", count: 4096)
        server.script("/token", [TestHTTPServer.Reply(status: 200, body: body)])

        let response = try await URLSessionTransport(maximumBodySize: 4096).send(tokenRequest(server))

        #expect(response.body.count == 4096)
    }

    @Test("a refused connection is .transport and retryable")
    func connectionRefused() async throws {
        let port = try closedLoopbackPort()
        let request = HTTPRequest(method: "POST", url: URL(string: "http://127.0.0.1:\(port)/token")!)

        let error = await #expect(throws: OAuthError.self) { try await URLSessionTransport(timeout: 5).send(request) }

        #expect(error?.code == .transport)
        #expect(error?.isRetryable == true)
        #expect(error?.description.contains("127.0.0.1") == true)
    }
}

/// A loopback port that was bound and closed without listening: connecting to it is refused.
private func closedLoopbackPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return UInt16(bigEndian: addr.sin_port)
}
