#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

extension AuthFlow {
    /// Where a flow is; published through ``AuthFlow/states`` on every transition.
    ///
    /// No case carries a token: ``Authorization`` and ``DeviceCode`` show only what a person
    /// or a log may see, and ``OAuthError`` never prints a secret.
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Nothing is authorized (at start with an empty store, or after ``AuthFlow/clear()``).
        case empty
        /// An interactive grant started: the user is at the authorization URL.
        case authorizing(provider: String, grant: GrantType)
        /// A token request is in flight (code exchange, client credentials, refresh).
        case requestingAccessToken(provider: String)
        /// The device authorization request is in flight (RFC 8628 §3.1).
        case requestingDeviceCode(provider: String)
        /// The device code arrived; show it and wait (RFC 8628 §3.2). Published again when `slow_down` raises the interval.
        case receivedDeviceCode(provider: String, DeviceCode)
        /// Tokens are stored and usable.
        case authorized(provider: String, Authorization)
        /// The last operation failed.
        case error(provider: String, OAuthError)

        /// The provider the state is about (`nil` for `.empty`).
        public var providerID: String? {
            switch self {
            case .empty: return nil
            case .authorizing(let provider, _), .requestingAccessToken(let provider),
                 .requestingDeviceCode(let provider), .receivedDeviceCode(let provider, _),
                 .authorized(let provider, _), .error(let provider, _):
                return provider
            }
        }

        /// The case's name, such as `receivedDeviceCode` (what `authflow --json` prints as `state`).
        public var name: String {
            switch self {
            case .empty: return "empty"
            case .authorizing: return "authorizing"
            case .requestingAccessToken: return "requestingAccessToken"
            case .requestingDeviceCode: return "requestingDeviceCode"
            case .receivedDeviceCode: return "receivedDeviceCode"
            case .authorized: return "authorized"
            case .error: return "error"
            }
        }

        /// A one-line summary without secrets.
        public var description: String {
            switch self {
            case .empty: return "empty"
            case .authorizing(let provider, let grant): return "authorizing(\(provider), \(grant.rawValue))"
            case .requestingAccessToken(let provider): return "requestingAccessToken(\(provider))"
            case .requestingDeviceCode(let provider): return "requestingDeviceCode(\(provider))"
            case .receivedDeviceCode(let provider, let code): return "receivedDeviceCode(\(provider), \(code))"
            case .authorized(let provider, let auth):
                return "authorized(\(provider), scopes: \(auth.scopes.joined(separator: " ")), expiresAt: \(auth.expiresAt.map { "\($0)" } ?? "never"))"
            case .error(let provider, let error): return "error(\(provider), \(error))"
            }
        }
    }
}

/// Fans states out to any number of subscribers, in order, without ever blocking the publisher.
///
/// Each subscriber's stream is unbounded: transitions are rare and every one matters, so a slow
/// subscriber buffers rather than stalls the flow. The lock makes "current state, then every
/// later one" atomic for a new subscriber.
final class StateBroadcaster: Sendable {
    private struct Inner {
        var current: AuthFlow.State = .empty
        var subscribers: [UInt64: AsyncStream<AuthFlow.State>.Continuation] = [:]
        var nextID: UInt64 = 0
    }
    private let inner = Mutex(Inner())

    var current: AuthFlow.State { inner.withLock { $0.current } }
    var subscriberCount: Int { inner.withLock { $0.subscribers.count } }

    func subscribe() -> AsyncStream<AuthFlow.State> {
        let (stream, continuation) = AsyncStream.makeStream(of: AuthFlow.State.self, bufferingPolicy: .unbounded)
        let id = inner.withLock { inner -> UInt64 in
            let id = inner.nextID
            inner.nextID += 1
            inner.subscribers[id] = continuation
            continuation.yield(inner.current)
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.inner.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ state: AuthFlow.State) {
        inner.withLock { inner in
            inner.current = state
            for continuation in inner.subscribers.values { continuation.yield(state) }
        }
    }

    func finish() {
        let all = inner.withLock { inner in
            defer { inner.subscribers.removeAll() }
            return Array(inner.subscribers.values)
        }
        for continuation in all { continuation.finish() }
    }

    deinit { finish() }
}
