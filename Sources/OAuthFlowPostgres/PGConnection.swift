internal import CLibPQ
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow
import Synchronization

/// Owns one libpq connection and the serial queue every call on it runs on.
///
/// libpq blocks; the queue keeps it off the cooperative thread pool. One lease holder at a time
/// uses a connection (the pool hands it out), and every wait is bounded by a deadline: the
/// statement is sent, then the socket is polled until the result arrives or the deadline passes.
/// Statements are prepared on first use and executed by name afterwards.
final class PGConnection: @unchecked Sendable {  // `conn`, `broken` and `prepared` are only touched on `queue`, by one lease holder at a time
    private let conn: OpaquePointer
    private let queue: DispatchQueue
    private let redactor: Redactor
    private let lib: LibPQ
    /// The server process serving this connection (to recognise our own notifications).
    let backendPID: Int32
    /// Set on the queue when the connection can no longer be trusted (lost, timed out mid-statement).
    private var broken = false
    /// The statements prepared on this connection's session.
    private var prepared: Set<String> = []
    /// Set from any thread to end a cancellable wait (see ``execute(_:_:deadline:cancellable:)``).
    private let cancelRequested = Atomic<Bool>(false)

    private init(conn: OpaquePointer, queue: DispatchQueue, redactor: Redactor, lib: LibPQ) {
        self.conn = conn
        self.queue = queue
        self.redactor = redactor
        self.lib = lib
        self.backendPID = lib.call { $0.backendPID(conn) }
    }

    deinit { lib.call { $0.finish(conn) } }

    /// Connects on a new queue; `parameters` are libpq keyword/value pairs in order (later ones win).
    static func open(_ parameters: [(String, String)], redactor: Redactor, lib: LibPQ) async throws(PostgresStoreFailure) -> PGConnection {
        let queue = DispatchQueue(label: "OAuthFlowPostgres.connection")
        let result: Result<PGConnection, PostgresStoreFailure> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(PostgresStoreFailure) -> PGConnection in
                    try connect(parameters, queue: queue, redactor: redactor, lib: lib)
                })
            }
        }
        return try result.get()
    }

    /// Connects, blocking the calling thread (bounded by `connect_timeout` per address tried); use
    /// the result only on `queue`.
    static func connect(
        _ parameters: [(String, String)], queue: DispatchQueue, redactor: Redactor, lib: LibPQ
    ) throws(PostgresStoreFailure) -> PGConnection {
        let keywords: [UnsafePointer<CChar>?] = parameters.map { UnsafePointer(strdup($0.0)) } + [nil]
        let values: [UnsafePointer<CChar>?] = parameters.map { UnsafePointer(strdup($0.1)) } + [nil]
        defer {
            for pointer in keywords + values { free(UnsafeMutablePointer(mutating: pointer)) }
        }
        let opened = lib.call { $0.connectdbParams(keywords, values, 1) }
        LibPQGate.registerAtExit()
        guard let conn = opened else {
            throw PostgresStoreFailure(kind: .unreachable, message: "libpq could not allocate a connection")
        }
        let (status, text, needsPassword) = lib.call { pq in
            (pq.status(conn), pq.errorMessage(conn).map { String(cString: $0) } ?? "connection failed", pq.connectionNeedsPassword(conn) == 1)
        }
        guard status == CONNECTION_OK else {
            lib.call { $0.finish(conn) }
            let message = redactor.clean(text)
            let refused = needsPassword || Self.isLoginRejection(text)
            throw PostgresStoreFailure(kind: refused ? .authenticationFailed : .unreachable, message: message)
        }
        lib.withTable { c_oauthflow_pq_silence($0, conn) }
        return PGConnection(conn: conn, queue: queue, redactor: redactor, lib: lib)
    }

    /// A login the server refused, from its (English) message: libpq gives no SQLSTATE for a
    /// failed connection. A server that sends its messages in another language has a wrong
    /// password reported as unreachable (temporary); a missing password is recognised in any
    /// language (`PQconnectionNeedsPassword`).
    static func isLoginRejection(_ text: String) -> Bool {
        ["authentication failed", "no password supplied", "pg_hba.conf", "does not exist", "permission denied for database"]
            .contains { text.contains($0) }
    }

    /// Runs `work` on the connection's queue and returns its result to the calling task.
    func run<T: Sendable>(
        _ work: @escaping @Sendable (PGConnection) throws(PostgresStoreFailure) -> T
    ) async throws(PostgresStoreFailure) -> T {
        let result: Result<T, PostgresStoreFailure> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(PostgresStoreFailure) -> T in try work(self) })
            }
        }
        return try result.get()
    }

    /// Like ``run(_:)``, but cancelling the calling task ends a cancellable wait inside `work`
    /// (``execute(_:_:deadline:cancellable:)`` with `cancellable: true`) within 100 ms; the
    /// connection is then dropped, since the server may still be running the statement.
    func runCancellable<T: Sendable>(
        _ work: @escaping @Sendable (PGConnection) throws(PostgresStoreFailure) -> T
    ) async throws(PostgresStoreFailure) -> T {
        cancelRequested.store(false, ordering: .sequentiallyConsistent)
        let result: Result<T, PostgresStoreFailure> = await withTaskCancellationHandler {
            do throws(PostgresStoreFailure) { return .success(try await run(work)) } catch { return .failure(error) }
        } onCancel: {
            cancelRequested.store(true, ordering: .sequentiallyConsistent)
        }
        return try result.get()
    }

    /// True when the connection must not be reused. Read only on the queue or by the lease holder after `run`.
    var isBroken: Bool { broken || lib.call { $0.status(conn) } != CONNECTION_OK }

    /// Marks the connection unusable (the pool closes it when it is released).
    func markBroken() { broken = true }

    /// One prepared, parameterised statement, results in binary format, bounded by `deadline`.
    ///
    /// Call only inside ``run(_:)``. Prepares `statement` on this connection first when it has not
    /// been. Throws `.rejected` with the SQLSTATE for a server error, `.connectionLost` when the
    /// connection broke, `.timedOut` when the deadline passed, `.cancelled` when `cancellable`
    /// and the task was cancelled (in both cases the connection is marked broken: its state is unknown).
    func execute(
        _ statement: PGStatement, _ parameters: [PGParameter] = [], deadline: ContinuousClock.Instant, cancellable: Bool = false
    ) throws(PostgresStoreFailure) -> PGResult {
        dispatchPrecondition(condition: .onQueue(queue))
        precondition(parameters.count == statement.parameterCount, "\(statement.name) takes \(statement.parameterCount) parameters")
        guard !isBroken else {
            broken = true
            throw PostgresStoreFailure(kind: .connectionLost, message: "the connection is closed")
        }
        if !prepared.contains(statement.name) {
            let sent = lib.call { $0.sendPrepare(conn, statement.name, statement.sql, Int32(statement.parameterCount), nil) }
            guard sent == 1 else { throw lost() }
            _ = try collect(until: deadline, cancellable: cancellable)
            prepared.insert(statement.name)
        }
        var values: [UnsafePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        for parameter in parameters {
            switch parameter {
            case .text(let text):
                values.append(UnsafePointer(strdup(text)))
                lengths.append(0)
                formats.append(0)
            case .bytes(let data):
                let buffer = malloc(max(data.count, 1))?.assumingMemoryBound(to: CChar.self)
                if let buffer { data.withUnsafeBytes { raw in if let base = raw.baseAddress { memcpy(buffer, base, data.count) } } }
                values.append(UnsafePointer(buffer))
                lengths.append(Int32(clamping: data.count))
                formats.append(1)
            }
        }
        defer {
            for pointer in values { free(UnsafeMutablePointer(mutating: pointer)) }
        }
        guard !values.contains(where: { $0 == nil }) else {
            throw PostgresStoreFailure(kind: .rejected, message: "out of memory for a statement parameter")
        }
        let sent = lib.call { $0.sendQueryPrepared(conn, statement.name, Int32(parameters.count), values, lengths, formats, 1) }
        guard sent == 1 else { throw lost() }
        return try collect(until: deadline, cancellable: cancellable)
    }

    /// Reads every result of the statement just sent; the first success, or throws the first error.
    private func collect(until deadline: ContinuousClock.Instant, cancellable: Bool) throws(PostgresStoreFailure) -> PGResult {
        var outcome: PGResult?
        var failure: PGResult?
        while true {
            try waitForInput(until: deadline, cancellable: cancellable)
            guard let raw = lib.call({ $0.getResult(conn) }) else { break }
            let result = PGResult(raw, lib: lib)
            switch result.status {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK: if outcome == nil { outcome = result }
            default: if failure == nil { failure = result }
            }
        }
        if let failure {
            if isBroken { throw lost(failure.field(UInt8(ascii: "M"))) }
            let state = failure.field(UInt8(ascii: "C"))
            let message = redactor.clean(failure.field(UInt8(ascii: "M")) ?? "the server refused the statement")
            // 55P03 lock_not_available (lock_timeout), 57014 query_canceled (statement_timeout),
            // 25P03 idle_in_transaction_session_timeout.
            let kind: PostgresStoreFailure.Kind
            switch state {
            case "55P03", "57014": kind = .timedOut
            case let code? where code.hasPrefix("08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "25P03":
                kind = .connectionLost
                broken = true
            default: kind = .rejected
            }
            throw PostgresStoreFailure(kind: kind, sqlState: state, message: message)
        }
        guard let outcome else { throw lost() }
        return outcome
    }

    /// Polls the socket until libpq has a whole result, or the deadline passes (or a cancellable wait is cancelled).
    private func waitForInput(until deadline: ContinuousClock.Instant, cancellable: Bool) throws(PostgresStoreFailure) {
        while lib.call({ $0.isBusy(conn) }) == 1 {
            if cancellable, cancelRequested.load(ordering: .sequentiallyConsistent) {
                broken = true
                throw PostgresStoreFailure(kind: .cancelled, message: "the wait was cancelled; the connection is dropped")
            }
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else {
                broken = true
                throw PostgresStoreFailure(kind: .timedOut, message: "no answer from the server in time; the connection is dropped")
            }
            let slice: Int64 = cancellable ? 100 : 1000
            let milliseconds = PostgresSecretStore.milliseconds(remaining)
            var ready = pollfd(fd: lib.call { $0.socket(conn) }, events: Int16(POLLIN), revents: 0)
            let count = poll(&ready, 1, Int32(clamping: min(max(milliseconds, 1), slice)))
            if count < 0, errno != EINTR { throw lost() }
            if count > 0, lib.call({ $0.consumeInput(conn) }) != 1 { throw lost() }
        }
    }

    private func lost(_ detail: String? = nil) -> PostgresStoreFailure {
        broken = true
        let text = detail ?? lib.call { $0.errorMessage(conn).map { String(cString: $0) } } ?? ""
        let message = redactor.clean(text)
        return PostgresStoreFailure(kind: .connectionLost, message: message.isEmpty ? "the connection to the server was lost" : message)
    }

    // MARK: LISTEN

    /// Waits up to `timeout` for input and returns the notifications that arrived (channel payloads).
    /// Call only inside ``run(_:)``.
    func notifications(waiting timeout: Duration) throws(PostgresStoreFailure) -> [(payload: String, backendPID: Int32)] {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !isBroken else { throw lost() }
        var ready = pollfd(fd: lib.call { $0.socket(conn) }, events: Int16(POLLIN), revents: 0)
        let count = poll(&ready, 1, Int32(clamping: max(PostgresSecretStore.milliseconds(timeout), 0)))
        if count < 0, errno != EINTR { throw lost() }
        if count > 0, lib.call({ $0.consumeInput(conn) }) != 1 { throw lost() }
        let received: [(String, Int32)] = lib.call { pq in
            var received: [(String, Int32)] = []
            while let notify = pq.notifies(conn) {
                let payload = notify.pointee.extra.map { String(cString: $0) } ?? ""
                received.append((payload, notify.pointee.be_pid))
                pq.freemem(notify)
            }
            return received
        }
        if lib.call({ $0.status(conn) }) != CONNECTION_OK { throw lost() }
        return received
    }
}
