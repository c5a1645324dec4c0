import Foundation
@testable import AuthflowAgent
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

/// `AgentServer.Memo`: the token answers a socket loop gives the agent's own uid again without
/// asking the responder, and what makes it stop (Documentation/Agent.md, "Design").
@Suite("The socket loops' remembered answers", .timeLimit(.minutes(1)))
struct AgentMemoTests {
    /// The flow's clock: set by the test.
    final class Now: Sendable {
        let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func advance(_ seconds: TimeInterval) { date.withLock { $0 += seconds } }
    }

    let now = Now()
    let mock = MockProvider()
    let epoch = AgentServer.Epoch()

    /// A flow holding a fresh one-hour client-credentials token for "a" (at-a1) and "b" (at-b1).
    func flow() async throws -> AuthFlow {
        mock.script(.token, [.token(access: "at-a1"), .token(access: "at-b1"), .token(access: "at-a2")])
        let now = now
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "a", clientSecret: "s"), mock.provider(id: "b", clientSecret: "s")], store: MemorySecretStore(),
            transport: mock.transport(), options: AuthFlow.Options(clock: TestClock(), now: { now.date.withLock { $0 } }))
        _ = try await flow.clientCredentials(provider: "a")
        _ = try await flow.clientCredentials(provider: "b")
        return flow
    }

    /// What the responder would attach to a token answer of `provider`.
    func reuse(_ flow: AuthFlow, _ provider: String) throws -> AgentServer.Reuse {
        let stamp = try #require(flow.stampedTokenSet(for: provider)).stamp
        return AgentServer.Reuse(token: stamp, catalog: epoch.current, epoch: epoch)
    }

    func ask(_ memo: inout AgentServer.Memo, _ line: String, uid: UInt32 = 0) -> String? {
        Array(line.utf8).withUnsafeBytes { memo.answer($0, uid: uid) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// A memo holding "answer-a" for ``lineA`` and "answer-b" for ``lineB``, both for uid 0.
    func memoOfBoth(_ flow: AuthFlow) throws -> AgentServer.Memo {
        var memo = AgentServer.Memo()
        memo.keep(Array(Self.lineA.utf8), Array("answer-a\n".utf8), try reuse(flow, "a"), uid: 0)
        memo.keep(Array(Self.lineB.utf8), Array("answer-b\n".utf8), try reuse(flow, "b"), uid: 0)
        return memo
    }

    static let lineA = #"{"v":1,"token":"a"}"#
    static let lineB = #"{"v":1,"token":"b"}"#

    @Test("given again only for the same line from the same uid")
    func sameLineSameUID() async throws {
        let flow = try await flow()
        var memo = AgentServer.Memo()
        memo.keep(Array(Self.lineA.utf8), Array("answer-a\n".utf8), try reuse(flow, "a"), uid: 0)
        #expect(ask(&memo, Self.lineA) == "answer-a\n")
        #expect(ask(&memo, Self.lineA) == "answer-a\n")
        #expect(ask(&memo, Self.lineA, uid: 1000) == nil, "another uid is asked about by the responder")
        #expect(ask(&memo, Self.lineA + " ") == nil)
        #expect(ask(&memo, String(Self.lineA.dropLast())) == nil)
        #expect(ask(&memo, Self.lineB) == nil)
        #expect(memo.entries.count == 1)
    }

    @Test("no longer given, and dropped when its line comes: the flow holds another set, the set is due, another catalog")
    func stale() async throws {
        let flow = try await flow()
        var memo = try memoOfBoth(flow)

        // Another set for "a" (a renewal, as a refresh or another process's store gives): "b" stays.
        _ = try await flow.clientCredentials(provider: "a")
        #expect(ask(&memo, Self.lineA) == nil)
        #expect(memo.entries.count == 1)
        #expect(ask(&memo, Self.lineB) == "answer-b\n")

        // Due: one second before the renewal time (expiry minus 60 s) it is given, at it not.
        memo.keep(Array(Self.lineA.utf8), Array("answer-a2\n".utf8), try reuse(flow, "a"), uid: 0)
        now.advance(3539)
        #expect(ask(&memo, Self.lineA) == "answer-a2\n")
        now.advance(1)
        #expect(ask(&memo, Self.lineA) == nil)
        now.advance(-3540)

        // Another catalog (SIGHUP).
        #expect(ask(&memo, Self.lineB) == "answer-b\n")
        epoch.advance()
        #expect(ask(&memo, Self.lineB) == nil)
        #expect(memo.entries.isEmpty)
    }

    @Test("a logout: the flow lets the set go, so does the memo; dropStale drops only what is no longer current")
    func logoutAndDropStale() async throws {
        let flow = try await flow()
        var memo = try memoOfBoth(flow)
        try await flow.clear(provider: "a")
        memo.dropStale()
        #expect(memo.entries.map { String(decoding: $0.line, as: UTF8.self) } == [Self.lineB])
        #expect(ask(&memo, Self.lineA) == nil)
        #expect(ask(&memo, Self.lineB) == "answer-b\n")
    }

    @Test("at most 16 lines: the same line's answer is replaced in place; a 17th line takes the oldest place")
    func capacity() async throws {
        let flow = try await flow()
        var memo = AgentServer.Memo()
        let lines = (0..<AgentServer.Memo.capacity).map { #"{"v":1,"token":"a","n":\#($0)}"# }
        for line in lines { memo.keep(Array(line.utf8), Array("\(line)\n".utf8), try reuse(flow, "a"), uid: 0) }
        memo.keep(Array(lines[3].utf8), Array("again\n".utf8), try reuse(flow, "a"), uid: 0)
        #expect(memo.entries.count == 16)
        #expect(ask(&memo, lines[3]) == "again\n")
        memo.keep(Array(Self.lineB.utf8), Array("answer-b\n".utf8), try reuse(flow, "b"), uid: 0)
        #expect(memo.entries.count == 16)
        #expect(ask(&memo, lines[0]) == nil, "the oldest place was taken")
        #expect(ask(&memo, Self.lineB) == "answer-b\n")
        for line in lines.dropFirst() where line != lines[3] { #expect(ask(&memo, line) == "\(line)\n") }
    }
}
