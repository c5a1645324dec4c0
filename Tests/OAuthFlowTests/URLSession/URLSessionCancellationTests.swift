import Foundation
import OAuthFlow
import OAuthFlowTesting
import OAuthFlowURLSession
import Testing

/// A cancelled request answers `.cancelled` at once, whenever the cancellation comes. swift-corelibs-foundation
/// never reports some cancelled tasks (one cancelled before its protocol started), which left the caller
/// waiting for the whole total deadline: 30 s of a Ctrl-C'd `authflow login` under load.
@Suite("URLSessionTransport: cancellation", .timeLimit(.minutes(1)))
struct URLSessionCancellationTests {
    /// The outcome of one request, by its error code ("ok" when it completed).
    static func outcome(_ transport: URLSessionTransport, _ url: URL) async -> String {
        do {
            _ = try await transport.send(HTTPRequest(method: "POST", url: url, body: Data("grant_type=x".utf8)))
            return "ok"
        } catch {
            return "\(error.code)"
        }
    }

    @Test("a request whose task is already cancelled answers .cancelled and is never sent")
    func cancelledBeforeSending() async throws {
        let mock = MockProvider()
        mock.script(.token, [.oauthError("authorization_pending")])
        // A deadline beyond the suite's time limit: a cancellation the transport missed fails the test
        // (at the time limit, and as a `.transport` outcome once the deadline passes).
        let transport = URLSessionTransport(configuration: MockProvider.sessionConfiguration(), timeout: 120)
        var outcomes: [String] = []
        for _ in 0..<50 {
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return await Self.outcome(transport, mock.url(.token))
            }
            outcomes.append(await task.value)
        }
        #expect(outcomes == Array(repeating: "cancelled", count: 50))
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("a request cancelled at any point of its flight answers .cancelled or its response, never a transport failure",
          arguments: 0..<8)
    func cancelledInFlight(yields: Int) async throws {
        let mock = MockProvider()
        mock.script(.token, [.oauthError("authorization_pending")])
        let transport = URLSessionTransport(configuration: MockProvider.sessionConfiguration(), timeout: 120)
        var outcomes: Set<String> = []
        for _ in 0..<25 {
            let task = Task { await Self.outcome(transport, mock.url(.token)) }
            for _ in 0..<yields { await Task.yield() }
            task.cancel()
            outcomes.insert(await task.value)
        }
        // The mock answers 400 authorization_pending, which the transport returns as a response ("ok").
        #expect(outcomes.isSubset(of: ["ok", "cancelled"]), "\(outcomes)")
    }
}
