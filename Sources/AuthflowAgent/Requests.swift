#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import Synchronization

// A request line to its answer line: parse, check the peer against the access lists, take the
// token from the flow's memory (or have it fetched), encode.
extension AgentService {
    /// What a request gets: its answer line now (with what keeps it right when the socket loop
    /// may give it again), or a token the flow must fetch first.
    private enum Reply {
        case line([UInt8], reuse: AgentServer.Reuse? = nil)
        case fetch(AuthFlow, String)
    }

    /// The answer line for one request, on the socket loop's thread, without waiting: nil when the
    /// token must be fetched (not in the flow's memory, or due for renewal), for ``answer(_:_:)``.
    func immediateAnswer(_ line: [UInt8], _ peer: Peer) -> AgentServer.Answer? {
        switch reply(line, peer) {
        case .line(let bytes, let reuse): return AgentServer.Answer(line: bytes, reuse: reuse)
        case .fetch: return nil
        }
    }

    /// The answer line for one request, fetching the token when it must.
    func answer(_ line: [UInt8], _ peer: Peer) async -> [UInt8] {
        switch reply(line, peer) {
        case .line(let bytes, _):
            return bytes
        case .fetch(let flow, let id):
            do {
                return answerLines.line(for: try await flow.tokenSet(for: id))
            } catch {
                return Array(AgentProtocol.Failure(error, message: host.explain(error)).line.utf8)
            }
        }
    }

    private func reply(_ line: [UInt8], _ peer: Peer) -> Reply {
        func failure(_ code: String, _ message: String, recovery: String) -> Reply {
            .line(Array(AgentProtocol.failure(code, message, recovery: recovery).utf8))
        }
        let catalog = catalogEpoch.current   // before the runtime: a reload after this read makes it stale
        guard let runtime = runtime.withLock({ $0 }) else {
            return failure("unavailable", "the agent is starting", recovery: "retry_later")
        }
        let request: AgentProtocol.Request
        switch AgentProtocol.parse(line) {
        case .failure(let failure): return .line(Array(failure.line.utf8))
        case .success(let parsed): request = parsed
        }
        switch request {
        case .metrics:
            guard runtime.access.isOwner(peer) else {
                log("refused \(peer): the metrics are served to uid \(runtime.access.agentUID) only")
                return failure("access_denied", "the metrics are served to the agent's own user only", recovery: "none")
            }
            return .line(Array(AgentProtocol.metrics(AgentMetrics.render(runtime.scheduler.statuses, now: host.now(), started: started)).utf8))
        case .token(let id):
            // An unknown provider and a refused one look the same to a peer that may not ask.
            let known = runtime.flow.providers[id] != nil
            guard known || runtime.access.isOwner(peer) else {
                log("refused \(peer) for \"\(id)\": no such provider")
                return failure("access_denied", "uid \(peer.uid) may not have the token of \"\(id)\"", recovery: "none")
            }
            guard known else {
                return failure("unknown_provider", "no provider \"\(id)\" is configured in this agent", recovery: "fix_configuration")
            }
            guard runtime.access.allows(peer, id) else {
                log("refused \(peer) for \"\(id)\": not in its agentAllow list")
                return failure("access_denied", "uid \(peer.uid) may not have the token of \"\(id)\"; the agent's catalog must list it in agentAllow", recovery: "none")
            }
            // The flow's fresh token in memory (what tokenSet(for:) answers without waiting), read
            // without a hop onto its actor; a token that is missing or due is fetched in a task.
            guard let (set, stamp) = runtime.flow.stampedTokenSet(for: id) else {
                answerLines.remove(id)   // the flow let it go (due, or logged out): so does this
                return .fetch(runtime.flow, id)
            }
            // The agent's own uid is allowed every provider whatever its groups, so its answer
            // depends on nothing else of the peer: the loop may give it to that uid again.
            let reuse = runtime.access.isOwner(peer) ? AgentServer.Reuse(token: stamp, catalog: catalog, epoch: catalogEpoch) : nil
            return .line(answerLines.line(for: set), reuse: reuse)
        }
    }
}

/// The answer line of the last token set answered, per provider: the same set gets the same
/// bytes, so a cached token costs no encoding. Holds tokens, like the flow's own cache, and lets
/// a provider's go when the flow no longer holds a fresh one (and all on reload).
final class AnswerLines: Sendable {
    private let lines = Mutex<[String: (set: TokenSet, line: [UInt8])]>([:])

    /// The answer line for `set` (a failure for a token no header can carry).
    func line(for set: TokenSet) -> [UInt8] {
        if let last = lines.withLock({ $0[set.providerID] }), Self.sameAnswer(last.set, set) { return last.line }
        let line: [UInt8]
        if AgentProtocol.isHeaderSafe(set.accessToken) {
            line = Array(AgentProtocol.token(set).utf8)
        } else {
            line = Array(AgentProtocol.failure("storage", "the access token holds characters a token cannot have", recovery: "reauthorize").utf8)
        }
        lines.withLock { $0[set.providerID] = (set, line) }
        return line
    }

    func remove(_ provider: String) {
        lines.withLock { _ = $0.removeValue(forKey: provider) }
    }

    func removeAll() {
        lines.withLock { $0 = [:] }
    }

    /// True when `a` and `b` give the same answer line (what ``AgentProtocol/token(_:)`` writes).
    private static func sameAnswer(_ a: TokenSet, _ b: TokenSet) -> Bool {
        a.expiresAt == b.expiresAt && a.tokenType == b.tokenType && a.scopes == b.scopes && a.accessToken.constantTimeEquals(b.accessToken)
    }
}
