import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OAuthFlow
import OAuthFlowURLSession
import Synchronization
import TestSupport
import Testing

/// The deadlines and limits both transports promise (Documentation/Transport.md), and errors that
/// never show a URL query.
@Suite("Hostile servers: deadlines, limits and error dumps of both transports", .timeLimit(.minutes(1)))
struct HostileTransportTests {
    static func get(_ base: String, query: String = "") -> HTTPRequest {
        HTTPRequest(method: "GET", url: URL(string: base + "/token" + query)!, headers: [("Authorization", "Bearer at-5ecret")])
    }

    // MARK: The 30 s default

    @Test("the documented default total deadline is 30 s for both transports, connect 10 s for curl")
    func defaultDeadline() {
        #expect(CurlTransport().timeout == 30)
        #expect(CurlTransport().connectTimeout == 10)
        #expect(URLSessionTransport().timeout == 30)
        #expect(URLSessionTransport.defaultTimeout == 30)
        #expect(URLSessionTransport(configuration: .default).timeout == 30)
    }

    @Test("a deadline that is not a positive number means 30 s; one over a day is a day", arguments: TransportKind.allCases,
          [(-1.0, 30.0), (0, 30), (.nan, 30), (.infinity, 30), (1e12, 86_400), (2.5, 2.5)])
    func deadlineNormalised(kind: TransportKind, given: (TimeInterval, TimeInterval)) {
        switch kind {
        case .curl: #expect(CurlTransport(timeout: given.0).timeout == given.1)
        case .urlSession: #expect(URLSessionTransport(timeout: given.0).timeout == given.1)
        }
    }

    @Test("a server that never answers is given up at the configured total deadline, not after 60 s", arguments: TransportKind.allCases)
    func neverAnswering(kind: TransportKind) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        server.script("/token", HostileServer.behaviour(.silent, good: "{}"))
        let started = ContinuousClock.now

        let error = await #expect(throws: OAuthError.self) { try await kind.make(timeout: 1).send(Self.get(server.baseURL)) }

        let elapsed = ContinuousClock.now - started
        #expect(error?.code == .transport)
        #expect(error?.isRetryable == true)
        #expect(error?.message?.contains("total deadline (1 s)") == true, "\(String(describing: error?.message))")
        // A lower bound only (a busy machine makes it longer, never shorter). No upper wall-clock bound
        // (issue 21): the message names the 1 s deadline, and the server holds the connection 30 s and
        // then closes it, which would end the request in another error; a transport that never gives up
        // is caught by the suite's time limit.
        #expect(elapsed >= .milliseconds(900), "ended before the deadline: \(elapsed)")
    }

    @Test("a never-answering token endpoint through a flow: an attempt longer than the retry time is not retried",
          arguments: TransportKind.allCases)
    func neverAnsweringThroughFlow(kind: TransportKind) async throws {
        // The defaults, 30 s per attempt and no retry started after 15 s, scaled down to 1 s and 0.9 s.
        #expect(RetryPolicy().maximumTotalTime == .seconds(15))
        #expect(RetryPolicy().maximumAttempts == 3)
        let server = try HostileServer()
        defer { server.stop() }
        server.script("/token", HostileServer.behaviour(.silent, good: "{}"))
        let provider = Provider(id: "svc", tokenURL: URL(string: server.baseURL + "/token")!, clientID: "c", clientSecret: Secret("s"))
        let flow = try await AuthFlow(providers: [provider], transport: kind.make(timeout: 1),
                                      options: AuthFlow.Options(retry: RetryPolicy(maximumTotalTime: .milliseconds(900))))

        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") }

        // No wall-clock bound (issue 21): the error is the 1 s deadline's, and one request was sent, so
        // no retry was started; a flow that never ends is caught by the suite's time limit.
        #expect(error?.code == .transport)
        #expect(error?.endpoint == .token)
        #expect(error?.message?.contains("total deadline (1 s)") == true, "\(String(describing: error?.message))")
        #expect(server.requests("/token").count == 1)
    }

    @Test("a server trickling a byte every 200 ms cannot extend the total deadline", arguments: TransportKind.allCases,
          [false, true])
    func trickle(kind: TransportKind, headers: Bool) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        let body = #"{"access_token":""# + String(repeating: "a", count: 200) + #"","token_type":"Bearer"}"#
        let behaviour = HostileServer.behaviour(headers ? .trickleHeaders : .trickleBody, good: body)
        server.script("/token", behaviour)
        let answer = behaviour.steps.reduce(0) { total, step in
            switch step {
            case .write(let bytes), .trickle(let bytes, _): total + bytes.count
            default: total
            }
        }

        let error = await #expect(throws: OAuthError.self) { try await kind.make(timeout: 1.5).send(Self.get(server.baseURL)) }

        #expect(error?.code == .transport)
        #expect(error?.message?.contains("total deadline (1.5 s)") == true, "\(String(describing: error?.message))")
        // What the server saw instead of a wall-clock bound (issue 21): the caller was answered while the
        // trickle was still going, short of its last byte. At a byte every 200 ms the trickle lasts 19 s
        // (96 header bytes) or 48 s (241 body bytes), 13 to 32 times the deadline.
        #expect(server.bytesWritten < answer, "\(server.bytesWritten) of \(answer) bytes were sent before the error")
    }

    @Test("an endless body stops at the limit without being read to the end", arguments: TransportKind.allCases,
          [HostileServer.Mode.endlessBody, .endlessChunked])
    func endlessBody(kind: TransportKind, mode: HostileServer.Mode) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        // 1 GiB for curl, which stops reading at the limit; 64 MiB for URLSession, which reads ahead.
        server.script("/token", HostileServer.behaviour(mode, good: "{}", endless: kind == .curl ? 1 << 30 : 64 << 20))

        let error = await #expect(throws: OAuthError.self) {
            try await kind.make(maximumBodySize: 1 << 20, timeout: 20).send(Self.get(server.baseURL))
        }

        // No wall-clock bound (issue 21): the error is the size limit's, not the 20 s deadline's, so the
        // body was cut before the deadline; below, libcurl is shown not to read it to the end.
        #expect(error?.code == .invalidResponse)
        #expect(error?.httpStatus == 200)
        #expect(error?.message?.contains("exceeds 1048576 bytes") == true, "\(String(describing: error?.message))")
        if kind == .curl {
            // libcurl stops reading at the limit. swift-corelibs-foundation hands data to the delegate
            // asynchronously and without back-pressure, so on loopback it may have read far more by
            // the time the delegate sees the limit (Documentation/Transport.md); the caller is still
            // answered at once and nothing past the limit is kept.
            #expect(server.bytesWritten < 256 << 20, "\(server.bytesWritten) bytes were sent before the error")
        }
    }

    @Test("a declared Content-Length over the limit is refused when the headers arrive", arguments: TransportKind.allCases)
    func hugeDeclaredLength(kind: TransportKind) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        server.script("/token", HostileServer.behaviour(.hugeDeclaredLength, good: "{}"))

        let error = await #expect(throws: OAuthError.self) { try await kind.make(timeout: 20).send(Self.get(server.baseURL)) }

        #expect(error?.code == .invalidResponse)
        #expect(error?.httpStatus == 200)
    }

    // MARK: Error dumps

    static let secretQuery = "?client_secret=qu3ry-5ecret&code=c0de-5ecret"

    /// Every rendering of `error` a log or a debugger shows.
    static func renderings(_ error: OAuthError) -> [String] {
        var dumped = ""
        dump(error, to: &dumped)
        var dumpedAny = ""
        dump(error as any Error, to: &dumpedAny)
        return [error.description, error.debugDescription, String(reflecting: error), String(describing: error), "\(error)", dumped,
                dumpedAny, error.localizedDescription, Mirror(reflecting: error).children.map { "\($0.label ?? ""): \($0.value)" }.joined()]
    }

    @Test("an OAuthError whose underlying URLError holds a URL with secrets in its query shows neither URL nor secret")
    func dumpOfURLError() {
        let url = URL(string: "https://idp.example/token" + Self.secretQuery)!
        let underlying = URLError(.timedOut, userInfo: [NSURLErrorFailingURLErrorKey: url, "NSErrorFailingURLStringKey": url.absoluteString,
                                                        NSLocalizedDescriptionKey: "timed out for \(url.absoluteString)"])
        let error = OAuthError(.transport, providerID: "p", endpoint: .token, message: "the request to idp.example timed out",
                               underlying: underlying)

        for text in Self.renderings(error) {
            #expect(!text.contains("5ecret"), "\(text)")
            #expect(!text.contains("client_secret"), "\(text)")
            #expect(!text.contains("?"), "\(text)")
        }
        #expect(error.description.contains("underlying: URLError"))
        var dumped = ""
        dump(error, to: &dumped)
        #expect(dumped.contains("code: \"transport\""), "\(dumped)")
        #expect(dumped.contains("underlying: \"URLError\""), "\(dumped)")
        #expect(dumped.contains("endpoint: \"token\""), "\(dumped)")
    }

    @Test("an error_uri with a query is kept in the response but shown by no rendering of the error")
    func dumpOfErrorURI() {
        let error = OAuthError(.serverRejected, providerID: "p", endpoint: .token, httpStatus: 400,
                               response: ErrorResponse(code: .invalidRequest, errorDescription: "bad", errorURI: "https://idp.example/e?ticket=t1ck3t-5ecret"))

        #expect(error.response?.errorURI?.contains("t1ck3t-5ecret") == true)
        for text in Self.renderings(error) {
            #expect(!text.contains("5ecret"), "\(text)")
        }
    }

    @Test("a failed request to a URL with secrets in its query: no rendering of the error shows them", arguments: TransportKind.allCases,
          [HostileServer.Mode.resetBeforeAnswer, .silent, .garbageStatusLine])
    func dumpOfTransportError(kind: TransportKind, mode: HostileServer.Mode) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        server.script("/token", HostileServer.behaviour(mode, good: "{}"))

        let error = await #expect(throws: OAuthError.self) {
            try await kind.make(timeout: 1).send(Self.get(server.baseURL, query: Self.secretQuery))
        }

        let rendered = try #require(error.map(Self.renderings))
        for text in rendered {
            #expect(!text.contains("5ecret"), "\(text)")
            #expect(!text.contains("client_secret"), "\(text)")
        }
    }

    @Test("a refused connection to a URL with secrets in its query: no rendering shows them", arguments: TransportKind.allCases)
    func dumpOfRefused(kind: TransportKind) async throws {
        let port = try LoopbackSocket.closedPort()

        let error = await #expect(throws: OAuthError.self) {
            try await kind.make(timeout: 5).send(Self.get("http://127.0.0.1:\(port)", query: Self.secretQuery))
        }

        #expect(error?.code == .transport)
        for text in try #require(error.map(Self.renderings)) {
            #expect(!text.contains("5ecret"), "\(text)")
            #expect(!text.contains("client_secret"), "\(text)")
        }
    }
}
