#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

extension AuthFlow {
    /// Where a flow is; published through ``AuthFlow/states`` on every transition.
    ///
    /// No case carries a token: ``Authorization``, ``DeviceCode`` and ``BackchannelAuthentication``
    /// show only what a person or a log may see, and ``OAuthError`` never prints a secret.
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Nothing is authorized for `provider`: after ``AuthFlow/clear(provider:)``,
        /// ``AuthFlow/revoke(provider:)``, or a logout another process made. With `provider` nil,
        /// for no provider: at start, and after ``AuthFlow/clear()`` (every provider). Other
        /// providers may still be authorized; read ``AuthFlow/authorizations`` to know.
        case empty(provider: String?)
        /// An interactive grant started: the user is at the authorization URL, or (CIBA, with
        /// `backchannel`) the person is being asked on their own device; show its binding message
        /// and expiry. Published again when `slow_down` raises a CIBA request's interval.
        case authorizing(provider: String, grant: GrantType, backchannel: BackchannelAuthentication? = nil)
        /// A token request is in flight (code exchange, client credentials, refresh).
        case requestingAccessToken(provider: String)
        /// The device authorization request is in flight (RFC 8628 §3.1).
        case requestingDeviceCode(provider: String)
        /// The device code arrived; show it and wait (RFC 8628 §3.2). Published again when `slow_down` raises the interval.
        case receivedDeviceCode(provider: String, DeviceCode)
        /// Tokens are stored and usable.
        case authorized(provider: String, Authorization)
        /// The last operation failed. `provider` is nil when the failure is not one provider's:
        /// the store could not list its entries (``AuthFlow/restore()``, ``AuthFlow/clear()``), or a
        /// callback could not be matched to a pending request (no state, one that matches none, or a
        /// URL that is not a callback).
        case error(provider: String?, OAuthError)

        /// `.empty(provider: nil)`: nothing is authorized, for no provider in particular (the state
        /// at start, and after ``AuthFlow/clear()``). As a pattern, `case .empty:` matches every
        /// `.empty`, whatever its provider.
        public static var empty: State { .empty(provider: nil) }

        /// The provider the state is about; nil for `.empty` and `.error` that are no one provider's.
        public var providerID: String? {
            switch self {
            case .empty(let provider), .error(let provider, _): return provider
            case .authorizing(let provider, _, _), .requestingAccessToken(let provider),
                 .requestingDeviceCode(let provider), .receivedDeviceCode(let provider, _),
                 .authorized(let provider, _):
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
            case .empty(let provider): return provider.map { "empty(\($0))" } ?? "empty"
            case .authorizing(let provider, let grant, nil): return "authorizing(\(provider), \(grant.rawValue))"
            case .authorizing(let provider, let grant, let backchannel?): return "authorizing(\(provider), \(grant.rawValue), \(backchannel))"
            case .requestingAccessToken(let provider): return "requestingAccessToken(\(provider))"
            case .requestingDeviceCode(let provider): return "requestingDeviceCode(\(provider))"
            case .receivedDeviceCode(let provider, let code): return "receivedDeviceCode(\(provider), \(code))"
            case .authorized(let provider, let auth):
                return "authorized(\(provider), scopes: \(auth.scopes.joined(separator: " ")), expiresAt: \(auth.expiresAt.map { "\($0)" } ?? "never"))"
            case .error(let provider?, let error): return "error(\(provider), \(error))"
            case .error(nil, let error): return "error(\(error))"
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
