import Dispatch
import Foundation
import Synchronization

/// One `LISTEN` connection per store: delivers the keys other processes delete to every subscriber.
///
/// Runs as a loop of short steps on a serial queue of its own (never on the cooperative pool):
/// each step waits at most 250 ms for a notification, so ``stop()`` takes effect within that.
/// A lost connection is reopened with backoff (50 ms doubling to 2 s).
final class Listener: @unchecked Sendable {  // `connection`, `failures` and `retryAt` are only touched on `queue`
    private let parameters: [(String, String)]
    private let redactor: Redactor
    private let channel: String
    private let pool: ConnectionPool
    private let queue = DispatchQueue(label: "OAuthFlowPostgres.listener")
    private let subscribers = Mutex<(next: UInt64, continuations: [UInt64: AsyncStream<String>.Continuation], stopped: Bool)>((0, [:], false))
    private var connection: PGConnection?
    private var failures = 0
    private var retryAt = ContinuousClock.now

    init(parameters: [(String, String)], redactor: Redactor, channel: String, pool: ConnectionPool) {
        self.parameters = parameters
        self.redactor = redactor
        self.channel = channel
        self.pool = pool
    }

    func start() { queue.async { self.step() } }

    /// Ends every subscriber's stream and closes the connection within one step.
    func stop() {
        let continuations = subscribers.withLock { state -> [AsyncStream<String>.Continuation] in
            state.stopped = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }

    func add(_ continuation: AsyncStream<String>.Continuation) -> UInt64 {
        let (id, stopped) = subscribers.withLock { state -> (UInt64, Bool) in
            state.next += 1
            if !state.stopped { state.continuations[state.next] = continuation }
            return (state.next, state.stopped)
        }
        if stopped { continuation.finish() }
        return id
    }

    func remove(_ id: UInt64) { _ = subscribers.withLock { $0.continuations.removeValue(forKey: id) } }

    private var isStopped: Bool { subscribers.withLock { $0.stopped } }

    private func step() {
        guard !isStopped else {
            connection = nil
            return
        }
        if let connection, !connection.isBroken {
            do {
                let received = try connection.notifications(waiting: .milliseconds(250))
                let own = received.isEmpty ? [] : pool.backendPIDs
                let keys = received.filter { !own.contains($0.backendPID) }.map(\.payload)
                if !keys.isEmpty {
                    let continuations = subscribers.withLock { Array($0.continuations.values) }
                    for key in keys { for continuation in continuations { continuation.yield(key) } }
                }
            } catch {
                self.connection = nil
            }
        } else {
            connection = nil
            let wait = ContinuousClock.now.duration(to: retryAt)
            if wait > .zero {
                Thread.sleep(forTimeInterval: min(0.25, Double(PostgresSecretStore.milliseconds(wait)) / 1000))
            } else {
                do {
                    let opened = try PGConnection.connect(parameters, queue: queue, redactor: redactor)
                    _ = try opened.execute("LISTEN \"\(channel)\"", deadline: ContinuousClock.now + .seconds(10))
                    connection = opened
                    failures = 0
                } catch {
                    failures += 1
                    retryAt = ContinuousClock.now + .milliseconds(min(50 << min(failures - 1, 10), 2000))
                }
            }
        }
        queue.async { self.step() }
    }
}
