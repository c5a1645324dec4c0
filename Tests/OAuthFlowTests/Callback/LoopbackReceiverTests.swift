import Foundation
import Glibc
import OAuthFlow
import TestSupport
import Testing

/// `LoopbackReceiver` (RFC 8252 §7.3) with scripted HTTP requests over real loopback sockets.
@Suite("Loopback receiver", .timeLimit(.minutes(1)))
struct LoopbackReceiverTests {
    /// Starts `receive` in a task; the handler records the URL and returns it (or throws `failure`).
    private func start(_ receiver: LoopbackReceiver, timeout: Duration = .seconds(60), failure: OAuthError? = nil)
        -> Task<Result<URL, OAuthError>, Never>
    {
        Task {
            await capture { () async throws(OAuthError) -> URL in
                try await receiver.receive(timeout: timeout) { url async throws(OAuthError) -> URL in
                    if let failure { throw failure }
                    return url
                }
            }
        }
    }

    private func capture<T>(_ body: () async throws(OAuthError) -> T) async -> Result<T, OAuthError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    private func url(_ receiver: LoopbackReceiver, _ pathAndQuery: String) -> URL {
        URL(string: "http://127.0.0.1:\(receiver.redirectURI.port!)\(pathAndQuery)")!
    }

    @Test("a non-loopback or missing redirect URI gives 127.0.0.1, an ephemeral port and /callback")
    func defaultAddress() throws {
        for uri in [nil, URL(string: "https://app.example.com/callback"), URL(string: "http://example.com/cb")] {
            let receiver = try LoopbackReceiver(redirectURI: uri)
            #expect(receiver.redirectURI.scheme == "http")
            #expect(receiver.redirectURI.host == "127.0.0.1")
            #expect(receiver.redirectURI.path == "/callback")
            #expect((receiver.redirectURI.port ?? 0) > 0)
            receiver.close()
        }
    }

    @Test("a loopback http redirect URI is used exactly: host, port and path")
    func exactAddress() throws {
        let probe = try LoopbackReceiver()
        let port = probe.redirectURI.port!
        probe.close()
        let receiver = try LoopbackReceiver(redirectURI: URL(string: "http://127.0.0.1:\(port)/oauth/done"))
        #expect(receiver.redirectURI.absoluteString == "http://127.0.0.1:\(port)/oauth/done")
        receiver.close()
        let ephemeral = try LoopbackReceiver(redirectURI: URL(string: "http://localhost/cb"))
        #expect(ephemeral.redirectURI.host == "localhost" && ephemeral.redirectURI.path == "/cb" && ephemeral.redirectURI.port != nil)
        ephemeral.close()
    }

    @Test("only loopback hosts are accepted", arguments: ["0.0.0.0", "192.168.1.10", "example.com", "::"])
    func loopbackOnly(host: String) {
        let error = #expect(throws: OAuthError.self) { try LoopbackReceiver(host: host) }
        #expect(error?.code == .configuration)
    }

    @Test("the callback on the exact path ends the wait with the full URL and a success page")
    func callback() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        let answer = try await httpGET(url(receiver, "/callback?code=abc&state=xyz&iss=https%3A%2F%2Fidp"))
        #expect(answer.status == 200)
        #expect(answer.body.contains("signed in"))
        let received = try await task.value.get()
        #expect(received.absoluteString == "\(receiver.redirectURI.absoluteString)?code=abc&state=xyz&iss=https%3A%2F%2Fidp")
    }

    @Test("stray requests get 404 (or 400 without a query) and the wait goes on")
    func strayRequests() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        #expect(try await httpGET(url(receiver, "/favicon.ico")).status == 404)
        #expect(try await httpGET(url(receiver, "/callback/extra?code=1")).status == 404)
        #expect(try await httpGET(url(receiver, "/")).status == 404)
        #expect(try await httpGET(url(receiver, "/callback")).status == 400)
        #expect(try await httpGET(url(receiver, "/callback?code=1&state=2")).status == 200)
        #expect(try await task.value.get().query == "code=1&state=2")
    }

    @Test("an oversized request gets 431 and the wait goes on")
    func oversized() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        let huge = String(repeating: "a", count: LoopbackReceiver.maximumRequestSize + 100)
        #expect(try await httpGET(url(receiver, "/callback?x=\(huge)")).status == 431)
        #expect(try await httpGET(url(receiver, "/callback?code=ok")).status == 200)
        _ = try await task.value.get()
    }

    @Test("a connection that sends nothing does not block the callback")
    func silentConnection() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        let idle = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(idle) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(receiver.redirectURI.port!).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(idle, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(connected == 0)
        #expect(try await httpGET(url(receiver, "/callback?code=1")).status == 200)
        _ = try await task.value.get()
    }

    @Test("when the handler throws, the browser gets an escaped error page and receive rethrows")
    func handlerError() async throws {
        let receiver = try LoopbackReceiver()
        let failure = OAuthError(.accessDenied, response: ErrorResponse(code: .accessDenied, errorDescription: "user said <no>"))
        let task = start(receiver, failure: failure)
        let answer = try await httpGET(url(receiver, "/callback?error=access_denied&state=s"))
        #expect(answer.status == 400)
        #expect(answer.body.contains("access_denied"))
        #expect(answer.body.contains("user said &lt;no&gt;"))
        #expect(!answer.body.contains("<no>"))
        guard case .failure(let error) = await task.value else { Issue.record("expected a failure"); return }
        #expect(error == failure)
    }

    @Test("no callback in time: .timedOut")
    func timeout() async throws {
        let receiver = try LoopbackReceiver()
        guard case .failure(let error) = await start(receiver, timeout: .milliseconds(300)).value else {
            Issue.record("expected a timeout")
            return
        }
        // No wall-clock bound (issue 21): the code says the wait's own timeout ended it; a wait that
        // never ends is caught by the suite's time limit.
        #expect(error.code == .timedOut)
    }

    @Test("cancelling the waiting task ends the wait promptly with .cancelled and stops listening")
    func cancellation() async throws {
        let receiver = try LoopbackReceiver()
        // A wait far beyond the suite's time limit: a missed cancellation fails there (and would end in
        // .timedOut, not .cancelled), with no wall-clock bound that a busy machine could exceed (issue 21).
        let task = start(receiver, timeout: .seconds(600))
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        guard case .failure(let error) = await task.value else { Issue.record("expected cancellation"); return }
        #expect(error.code == .cancelled)
        await #expect(throws: (any Error).self) { try await httpGET(url(receiver, "/callback?code=late")) }
    }

    @Test("a receiver is single use")
    func singleUse() async throws {
        let receiver = try LoopbackReceiver()
        let task = start(receiver)
        _ = try await httpGET(url(receiver, "/callback?code=1"))
        _ = try await task.value.get()
        guard case .failure(let error) = await start(receiver).value else { Issue.record("expected a failure"); return }
        #expect(error.code == .configuration)
    }
}
