#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import Synchronization

/// Follows a flow's state stream on a task of its own and hands each state to a handler, in order.
///
/// ``waitUntilHandled(_:timeout:)`` lets the command (or the demo's transport) wait until a given state has
/// been printed, so output from different places comes out in the order things happened.
final class StateReporter: Sendable {
    private struct Progress {
        var last: AuthFlow.State?
        var waiters: [(id: Int, target: AuthFlow.State, continuation: CheckedContinuation<Void, Never>)] = []
        var nextID = 0
    }
    private let progress = Mutex(Progress())
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Starts following `stream`. With `skipFirst`, the stream's first element (the state current
    /// when subscribing, not a transition) is counted as handled but not passed to `handle`.
    init(_ stream: AsyncStream<AuthFlow.State>, skipFirst: Bool, handle: @escaping @Sendable (AuthFlow.State) async -> Void) {
        let follower = Task { [self] in
            var first = skipFirst
            for await state in stream {
                if first {
                    first = false
                } else {
                    await handle(state)
                }
                let ready = self.progress.withLock { progress -> [CheckedContinuation<Void, Never>] in
                    progress.last = state
                    let ready = progress.waiters.filter { $0.target == state }
                    progress.waiters.removeAll { $0.target == state }
                    return ready.map(\.continuation)
                }
                for continuation in ready { continuation.resume() }
            }
        }
        task.withLock { $0 = follower }
    }

    /// Returns once `target` has been handled, or after `timeout` at the latest.
    func waitUntilHandled(_ target: AuthFlow.State, timeout: Duration = .seconds(2)) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let id = progress.withLock { progress -> Int? in
                if progress.last == target { return nil }
                progress.nextID += 1
                progress.waiters.append((progress.nextID, target, continuation))
                return progress.nextID
            }
            guard let id else {
                continuation.resume()
                return
            }
            Task { [self] in
                try? await Task.sleep(for: timeout)
                let late = self.progress.withLock { progress -> CheckedContinuation<Void, Never>? in
                    guard let index = progress.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return progress.waiters.remove(at: index).continuation
                }
                late?.resume()
            }
        }
    }

    /// Stops following the stream.
    func stop() {
        task.withLock { $0?.cancel() }
    }
}

/// How a state reads as a JSON Lines record: `state` (its name), `provider`, and its data. Never a token.
enum StateJSON {
    /// The record of `state`; an error's fields (its `exit_code` from ``ErrorAdvice``) come from `context`.
    static func record(_ state: AuthFlow.State, context: Context, authorizationURL: URL? = nil, redirectURI: URL? = nil) -> [(String, JSONValue)] {
        var pairs: [(String, JSONValue)] = [("state", .string(state.name))]
        if let provider = state.providerID { pairs.append(("provider", .string(provider))) }
        switch state {
        case .empty, .requestingAccessToken, .requestingDeviceCode:
            break
        case .authorizing(_, let grant, let backchannel):
            pairs.append(("grant", .string(grant.rawValue)))
            if let authorizationURL { pairs.append(("authorization_url", .string(authorizationURL.absoluteString))) }
            if let redirectURI { pairs.append(("redirect_uri", .string(redirectURI.absoluteString))) }
            if let backchannel {
                pairs += [
                    ("binding_message", .string(backchannel.bindingMessage)),
                    ("expires_in", .int(backchannel.expiresIn)),
                    ("interval", .int(backchannel.interval)),
                    ("delivery_mode", .string(backchannel.deliveryMode.rawValue)),
                ]
            }
        case .receivedDeviceCode(_, let code):
            pairs += [
                ("user_code", .string(code.userCode)),
                ("verification_uri", .string(code.verificationURI.absoluteString)),
                ("verification_uri_complete", .string(code.verificationURIComplete?.absoluteString)),
                ("expires_in", .int(code.expiresIn)),
                ("interval", .int(code.interval)),
            ]
        case .authorized(_, let authorization):
            pairs += [
                ("grant", .string(authorization.grant.rawValue)),
                ("expires_at", .date(authorization.expiresAt)),
                ("scopes", .strings(authorization.scopes)),
                ("refreshable", .bool(authorization.isRefreshable)),
            ]
        case .error(let provider, let error):
            pairs += context.jsonFields(error, provider: provider)
        }
        return pairs
    }
}
