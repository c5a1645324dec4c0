#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A few connections shared by a store's calls, with reconnect backoff.
///
/// A caller leases a connection, uses it, and gives it back (``release(_:)``); a broken one is
/// dropped and its slot freed. When every connection is leased, callers wait in order, up to their
/// deadline. After a failed connect the next attempt waits a backoff (50 ms, doubling, at most 2 s);
/// callers arriving meanwhile fail at once rather than hammering a database that is down.
/// When a leased connection turns out lost, every idle one is closed too (``discardIdle()``):
/// after a database restart they are all dead, and each would otherwise fail one call.
/// Cancelling a waiting task ends its wait at once.
final class ConnectionPool: Sendable {
    private enum Handoff {
        case connection(PGConnection)
        case slot
        case timedOut
        case cancelled
    }

    private struct State {
        var idle: [PGConnection] = []
        var open = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Handoff, Never>)] = []
        var nextWaiter: UInt64 = 0
        var failures = 0
        var retryAt: ContinuousClock.Instant?
        var lastFailure: PostgresStoreFailure?
        var backendPIDs: Set<Int32> = []
    }

    private let state = Mutex(State())
    private let parameters: [(String, String)]
    private let redactor: Redactor
    private let lib: LibPQ
    private let capacity: Int
    /// Runs on each new connection before first use (session settings); throws to reject it.
    private let prepare: @Sendable (PGConnection) async throws(PostgresStoreFailure) -> Void

    init(
        parameters: [(String, String)], redactor: Redactor, lib: LibPQ, capacity: Int,
        prepare: @escaping @Sendable (PGConnection) async throws(PostgresStoreFailure) -> Void
    ) {
        self.parameters = parameters
        self.redactor = redactor
        self.lib = lib
        self.capacity = max(1, capacity)
        self.prepare = prepare
    }

    /// The backend process ids of this pool's connections (notifications from them are our own).
    var backendPIDs: Set<Int32> { state.withLock { $0.backendPIDs } }

    /// The number of connections open now, leased or idle (for tests and diagnostics).
    var openCount: Int { state.withLock { $0.open } }

    /// A connection: an idle one, a new one while under capacity, or the next one released.
    /// - Throws: `.timedOut` at `deadline`; `.cancelled` when the task is cancelled while it waits;
    ///   a connect failure, or the last one while the backoff runs.
    func acquire(deadline: ContinuousClock.Instant) async throws(PostgresStoreFailure) -> PGConnection {
        while true {
            guard !Task.isCancelled else { throw PostgresStoreFailure(kind: .cancelled, message: "the task was cancelled before it had a connection") }
            enum Step {
                case use(PGConnection)
                case connect
                case wait
                case backoff(PostgresStoreFailure, Duration)
            }
            let step = state.withLock { state -> Step in
                while let connection = state.idle.popLast() {
                    if !connection.isBroken { return .use(connection) }
                    state.open -= 1
                    state.backendPIDs.remove(connection.backendPID)
                }
                if state.open < capacity {
                    if let retryAt = state.retryAt, ContinuousClock.now < retryAt, let failure = state.lastFailure {
                        return .backoff(failure, ContinuousClock.now.duration(to: retryAt))
                    }
                    state.open += 1
                    return .connect
                }
                return .wait
            }
            switch step {
            case .use(let connection):
                return connection
            case .backoff(let failure, let remaining):
                var failure = failure
                let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
                failure.message += " (next connection attempt in \(max(milliseconds, 1)) ms)"
                throw failure
            case .connect:
                return try await connect()
            case .wait:
                switch await wait(until: deadline) {
                case .connection(let connection): return connection
                case .slot: continue
                case .timedOut:
                    throw PostgresStoreFailure(kind: .timedOut, message: "every connection of the pool (\(capacity)) stayed busy until the deadline")
                case .cancelled:
                    throw PostgresStoreFailure(kind: .cancelled, message: "the task was cancelled while it waited for a connection")
                }
            }
        }
    }

    private func connect() async throws(PostgresStoreFailure) -> PGConnection {
        do {
            let connection = try await PGConnection.open(parameters, redactor: redactor, lib: lib)
            try await prepare(connection)
            state.withLock { state in
                state.failures = 0
                state.retryAt = nil
                state.lastFailure = nil
                state.backendPIDs.insert(connection.backendPID)
            }
            return connection
        } catch {
            let next = state.withLock { state -> CheckedContinuation<Handoff, Never>? in
                state.open -= 1
                state.failures += 1
                let delay = min(0.05 * Double(1 << min(state.failures - 1, 10)), 2.0)
                state.retryAt = ContinuousClock.now + .milliseconds(Int(delay * 1000))
                state.lastFailure = error
                return state.waiters.isEmpty ? nil : state.waiters.removeFirst().continuation
            }
            next?.resume(returning: .slot)
            throw error
        }
    }

    private func wait(until deadline: ContinuousClock.Instant) async -> Handoff {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            guard let self else { return }
            let waiter = self.state.withLock { state -> CheckedContinuation<Handoff, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: .timedOut)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let immediate = state.withLock { state -> Handoff? in
                    if let connection = state.idle.popLast() { return .connection(connection) }
                    if state.open < capacity { return .slot }
                    if ContinuousClock.now >= deadline { return .timedOut }
                    if Task.isCancelled { return .cancelled }
                    state.waiters.append((id, continuation))
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Handoff, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: .cancelled)
        }
    }

    /// Closes every idle connection (after one turned out lost: the server restarted or the
    /// network broke, so the others are most likely dead too).
    func discardIdle() {
        let dropped = state.withLock { state -> [PGConnection] in
            let idle = state.idle
            state.idle = []
            state.open -= idle.count
            for connection in idle { state.backendPIDs.remove(connection.backendPID) }
            return idle
        }
        _ = dropped  // closed here, outside the lock, as the last references go
    }

    /// Gives a leased connection back; a broken one is closed and its slot handed on.
    func release(_ connection: PGConnection) {
        let broken = connection.isBroken
        let next = state.withLock { state -> (CheckedContinuation<Handoff, Never>, Handoff)? in
            if broken {
                state.open -= 1
                state.backendPIDs.remove(connection.backendPID)
                guard !state.waiters.isEmpty else { return nil }
                return (state.waiters.removeFirst().continuation, .slot)
            }
            guard !state.waiters.isEmpty else {
                state.idle.append(connection)
                return nil
            }
            return (state.waiters.removeFirst().continuation, .connection(connection))
        }
        if let (continuation, handoff) = next { continuation.resume(returning: handoff) }
    }
}
