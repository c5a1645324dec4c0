import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Synchronization

/// An ``HTTPTransport`` that answers each path from a script and records every request exactly as
/// it was handed over (method, URL, headers in order, body): the wire as the base of an
/// ``AuthorizingTransport`` or a flow sees it. A step can fail as a transport does, take virtual
/// time, or wait at a ``Gate`` until the test opens it.
final class ScriptedTransport: HTTPTransport {
    struct Step: Sendable {
        var outcome: Result<HTTPResponse, OAuthError>
        var gate: Gate?
        /// Runs when the request arrives, before the gate (to advance a test clock, say).
        var before: (@Sendable () -> Void)?

        /// A JSON (or empty) answer with `status` and `headers`.
        static func status(_ status: Int, json: String? = nil, headers: [String: String] = [:]) -> Step {
            var all = headers
            if json != nil { all["Content-Type"] = "application/json" }
            return Step(outcome: .success(HTTPResponse(status: status, headers: all, body: Data((json ?? "").utf8))))
        }

        /// A token response (RFC 6749 §5.1).
        static func token(_ access: String, type: String = "Bearer", expiresIn: Int? = 3600, refresh: String? = nil) -> Step {
            var members = [#""access_token":"\#(access)""#, #""token_type":"\#(type)""#]
            if let expiresIn { members.append(#""expires_in":\#(expiresIn)"#) }
            if let refresh { members.append(#""refresh_token":"\#(refresh)""#) }
            return .status(200, json: "{\(members.joined(separator: ","))}")
        }

        /// An RFC 6749 §5.2 error body.
        static func oauthError(_ code: String, status: Int = 400, headers: [String: String] = [:]) -> Step {
            .status(status, json: #"{"error":"\#(code)"}"#, headers: headers)
        }

        /// A transport failure carrying a libcurl code, as ``CurlTransport`` reports one.
        static func curlFailure(_ code: Int, _ text: String = "scripted failure") -> Step {
            Step(outcome: .failure(OAuthError(.transport, message: "scripted: \(text)", underlying: CurlError(code: code, text: text))))
        }

        /// A failure with `error` as is.
        static func failure(_ error: OAuthError) -> Step { Step(outcome: .failure(error)) }

        /// The same step, answered only once `gate` opens.
        func gated(_ gate: Gate) -> Step {
            var copy = self
            copy.gate = gate
            return copy
        }

        /// The same step, taking `duration` of `clock`'s virtual time before it answers.
        func taking(_ duration: Duration, on clock: TestClock) -> Step {
            var copy = self
            copy.before = { clock.advance(by: duration) }
            return copy
        }
    }

    private struct Inner {
        var scripts: [String: [Step]] = [:]
        var last: [String: Step] = [:]
        var requests: [HTTPRequest] = []
    }
    private let inner = Mutex(Inner())

    /// Appends steps for `path`, served in order; the last one repeats.
    func script(_ path: String, _ steps: [Step]) {
        inner.withLock { $0.scripts[path, default: []] += steps }
    }

    /// Every request received (for `path`, when given), oldest first.
    func requests(_ path: String? = nil) -> [HTTPRequest] {
        inner.withLock { $0.requests }.filter { path == nil || $0.url.path == path }
    }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let step = inner.withLock { inner -> Step in
            inner.requests.append(request)
            let path = request.url.path
            if var queue = inner.scripts[path], !queue.isEmpty {
                let next = queue.removeFirst()
                inner.scripts[path] = queue
                inner.last[path] = next
                return next
            }
            return inner.last[path] ?? .status(500, json: #"{"error":"unscripted"}"#)
        }
        step.before?()
        if let gate = step.gate { await gate.wait() }
        return try step.outcome.get()
    }
}

extension HTTPRequest {
    /// The form body keyed by name (first value wins).
    var form: [String: String] {
        let text = String(decoding: body ?? Data(), as: UTF8.self)
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if fields[parts[0]] == nil { fields[parts[0]] = parts.count > 1 ? parts[1] : "" }
        }
        return fields
    }

    /// Every value of the header `name` (case-insensitive), in order.
    func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }
}

/// A one-way latch: ``wait()`` suspends until ``open()``; counts arrivals.
final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var arrivals = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    /// How many callers reached ``wait()``.
    var arrivals: Int { state.withLock { $0.arrivals } }

    func wait() async {
        await withCheckedContinuation { continuation in
            let proceed = state.withLock { state -> Bool in
                state.arrivals += 1
                if state.isOpen { return true }
                state.waiters.append(continuation)
                return false
            }
            if proceed { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Polls `condition` every 5 ms of real time, at most 6,000 times (30 s or more: generous for a busy
/// machine, and it ends as soon as the condition holds); returns whether it held.
func waitUntil(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<6000 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// A provider whose endpoints are on `as.test`, for a ``ScriptedTransport`` (never resolved).
func scriptedProvider(id: String = "app", secret: String? = nil, debug: Bool = false) -> Provider {
    Provider(
        id: id, authorizationURL: URL(string: "https://as.test/authorize"), tokenURL: URL(string: "https://as.test/token"),
        clientID: "cli-1", clientSecret: secret.map(Secret.init), redirectURI: URL(string: "http://127.0.0.1:8765/callback"),
        scopes: ["read"], debug: debug)
}

/// Jitter draws from a list, in order (the last repeats); counts the draws.
final class JitterSequence: Sendable {
    private let state: Mutex<(values: [Double], draws: Int)>
    init(_ values: [Double]) { state = Mutex((values, 0)) }
    var draws: Int { state.withLock { $0.draws } }
    var source: @Sendable () -> Double {
        { [self] in
            state.withLock { state in
                defer { state.draws += 1 }
                return state.values[min(state.draws, state.values.count - 1)]
            }
        }
    }
}

/// A clock whose sleeps wait until the test moves time past their deadline with ``advance(by:)``
/// (``TestClock`` returns from every sleep at once). For background timers: a test sees a timer
/// asleep (``sleepers``), moves time, and sees it fire — or cancels it and sees it gone.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol, Sendable {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let id: Int
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }
    private struct Inner {
        var offset: Duration = .zero
        var sleepers: [Sleeper] = []
        var requested: [Duration] = []
        var cancelled: Set<Int> = []
        var nextID = 0
    }
    private let inner = Mutex(Inner())
    let start: Date

    init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { self.start = start }

    var now: Instant { Instant(offset: inner.withLock { $0.offset }) }
    var minimumResolution: Duration { .zero }
    /// The virtual wall-clock date.
    var date: Date {
        let offset = inner.withLock { $0.offset }
        return start.addingTimeInterval(Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18)
    }
    /// Every duration a sleep asked for, in order.
    var sleeps: [Duration] { inner.withLock { $0.requested } }
    /// How many sleeps are waiting now.
    var sleepers: Int { inner.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = inner.withLock { inner -> Int in
            inner.requested.append(deadline.offset - inner.offset)
            inner.nextID += 1
            return inner.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let verdict = inner.withLock { inner -> Bool? in
                    if inner.cancelled.remove(id) != nil { return false }
                    if deadline.offset <= inner.offset { return true }
                    inner.sleepers.append(Sleeper(id: id, deadline: deadline.offset, continuation: continuation))
                    return nil
                }
                switch verdict {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let sleeper = inner.withLock { inner -> Sleeper? in
                if let index = inner.sleepers.firstIndex(where: { $0.id == id }) { return inner.sleepers.remove(at: index) }
                inner.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleep whose deadline has come.
    func advance(by duration: Duration) {
        let due = inner.withLock { inner -> [Sleeper] in
            inner.offset += duration
            let offset = inner.offset
            let due = inner.sleepers.filter { $0.deadline <= offset }
            inner.sleepers.removeAll { $0.deadline <= offset }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
