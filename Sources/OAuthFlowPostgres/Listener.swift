import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow
import Synchronization

/// One `LISTEN` connection per store: delivers the keys other processes delete to every subscriber.
///
/// Runs as a loop of short steps on a serial queue of its own (never on the cooperative pool):
/// each step waits at most 250 ms for a notification, so ``stop()`` takes effect within that.
/// A lost connection is reopened with backoff (50 ms doubling to 2 s). Each time `LISTEN` takes
/// effect (the first time and after every reconnect) subscribers get ``StoreInvalidation/resync``:
/// deletions made while nobody listened are not replayed by the server, so they must re-check.
final class Listener: @unchecked Sendable {  // `connection`, `failures` and `retryAt` are only touched on `queue`
    private let parameters: [(String, String)]
    private let redactor: Redactor
    private let lib: LibPQ
    private let listen: PGStatement
    private let pool: ConnectionPool
    private let queue = DispatchQueue(label: "OAuthFlowPostgres.listener")
    private let subscribers = Mutex<(next: UInt64, continuations: [UInt64: AsyncStream<StoreInvalidation>.Continuation], stopped: Bool)>(
        (0, [:], false))
    private var connection: PGConnection?
    private var failures = 0
    private var retryAt = ContinuousClock.now
    /// How many times `LISTEN` took effect (for tests: 2 after one reconnect).
    private let listens = Atomic<Int>(0)

    init(parameters: [(String, String)], redactor: Redactor, lib: LibPQ, listen: PGStatement, pool: ConnectionPool) {
        self.parameters = parameters
        self.redactor = redactor
        self.lib = lib
        self.listen = listen
        self.pool = pool
    }

    var listenCount: Int { listens.load(ordering: .sequentiallyConsistent) }

    func start() { queue.async { self.step() } }

    /// Ends every subscriber's stream and closes the connection within one step.
    func stop() {
        let continuations = subscribers.withLock { state -> [AsyncStream<StoreInvalidation>.Continuation] in
            state.stopped = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }

    func add(_ continuation: AsyncStream<StoreInvalidation>.Continuation) -> UInt64 {
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

    private func deliver(_ events: [StoreInvalidation]) {
        guard !events.isEmpty else { return }
        let continuations = subscribers.withLock { Array($0.continuations.values) }
        for event in events { for continuation in continuations { continuation.yield(event) } }
    }

    private func step() {
        guard !isStopped else {
            connection = nil
            return
        }
        if let connection, !connection.isBroken {
            do {
                let received = try connection.notifications(waiting: .milliseconds(250))
                let own = received.isEmpty ? [] : pool.backendPIDs
                deliver(received.filter { !own.contains($0.backendPID) }.map { StoreInvalidation.deleted($0.payload) })
            } catch {
                self.connection = nil
            }
        } else {
            connection = nil
            let wait = ContinuousClock.now.duration(to: retryAt)
            if wait > .zero {
                usleep(UInt32(max(1, min(250, PostgresSecretStore.milliseconds(wait)))) * 1000)
            } else {
                do {
                    let opened = try PGConnection.connect(parameters, queue: queue, redactor: redactor, lib: lib)
                    _ = try opened.execute(listen, deadline: ContinuousClock.now + .seconds(10))
                    connection = opened
                    failures = 0
                    listens.add(1, ordering: .sequentiallyConsistent)
                    deliver([.resync])
                } catch {
                    failures += 1
                    retryAt = ContinuousClock.now + .milliseconds(min(50 << min(failures - 1, 10), 2000))
                }
            }
        }
        queue.async { self.step() }
    }
}
