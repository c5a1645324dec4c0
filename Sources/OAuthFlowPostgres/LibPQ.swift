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

/// Why a PostgreSQL operation failed; the ``OAuthError/underlying`` of the store's errors.
///
/// Read ``isTemporary`` to decide whether to retry (the `authflow` CLI exits 75 then, and 65 for
/// a failure that is not temporary). The ``message`` is libpq's or the server's text with every
/// known password removed.
public struct PostgresStoreFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: String, Sendable, Hashable {
        /// No connection could be made (server down, refused, DNS, a server still starting).
        case unreachable
        /// The server refused the login: a wrong or missing password, a `pg_hba.conf` rule, an
        /// unknown role or database. Fix the connection string, `PGPASSWORD` or `.pgpass`.
        case authenticationFailed
        /// An open connection broke during a statement; the statement may or may not have run.
        case connectionLost
        /// A bounded wait ran out: the lock, a statement, the pool, or the network.
        case timedOut
        /// The server refused the statement (permissions, schema, constraint); see ``sqlState``.
        case rejected
        /// The calling task was cancelled while it waited.
        case cancelled
        /// libpq (`libpq.so.5`) could not be loaded.
        case libraryMissing
    }

    /// What kind of failure.
    public var kind: Kind
    /// The five-character SQLSTATE the server sent, when it sent one (`55P03` for a lock timeout).
    public var sqlState: String?
    /// A human sentence without passwords.
    public var message: String

    /// True when the same call can succeed later (the database restarts, the lock frees up).
    ///
    /// A refused login is not temporary: retrying with the same password cannot help.
    public var isTemporary: Bool {
        switch kind {
        case .unreachable, .connectionLost, .timedOut: return true
        case .authenticationFailed, .cancelled, .libraryMissing: return false
        case .rejected:
            // 40: transaction rollback (serialization, deadlock); 53: insufficient resources; 57: operator intervention.
            guard let state = sqlState else { return false }
            return state.hasPrefix("40") || state.hasPrefix("53") || state.hasPrefix("57")
        }
    }

    /// The kind, the SQLSTATE and the message.
    public var description: String {
        "PostgresStoreFailure.\(kind.rawValue)\(sqlState.map { " [\($0)]" } ?? ""): \(message)"
    }
}

// MARK: - Loading libpq

/// libpq, opened with `dlopen` on first use and kept open (see `Sources/CLibPQ/shim.h`).
///
/// Every call into libpq goes through ``call(_:)``, which counts the threads inside libpq (see
/// ``LibPQGate``), so a process that exits while a background thread is connecting does not tear
/// libpq's dependencies down under that thread.
final class LibPQ: @unchecked Sendable {  // safe: an immutable table of C function pointers, never freed
    let api: UnsafeMutablePointer<c_oauthflow_pq_api>

    private init(api: UnsafeMutablePointer<c_oauthflow_pq_api>) { self.api = api }

    /// The process's libpq, or why it cannot be used.
    static let shared: Result<LibPQ, PostgresStoreFailure> = load()

    /// Opens `name` (nil: `libpq.so.5`, then `libpq.so`). Tests pass a name that does not exist.
    static func load(_ name: String? = nil) -> Result<LibPQ, PostgresStoreFailure> {
        let api = UnsafeMutablePointer<c_oauthflow_pq_api>.allocate(capacity: 1)
        api.initialize(to: c_oauthflow_pq_api())
        let loaded = name.map { name in name.withCString { c_oauthflow_pq_load(api, $0) } } ?? c_oauthflow_pq_load(api, nil)
        guard loaded == 0 else {
            api.deallocate()
            return .failure(PostgresStoreFailure(kind: .libraryMissing, message: """
                \(name ?? "libpq.so.5") could not be loaded; install libpq (Debian and Ubuntu: apt-get install libpq5)
                """))
        }
        return .success(LibPQ(api: api))
    }

    /// Runs `body` with the function table, counted as a thread inside libpq.
    @inline(__always)
    func call<T>(_ body: (c_oauthflow_pq_api) -> T) -> T {
        LibPQGate.enter()
        defer { LibPQGate.leave() }
        return body(api.pointee)
    }

    /// Like ``call(_:)``, with the table itself (for the C helpers in the shim).
    @inline(__always)
    func withTable<T>(_ body: (UnsafePointer<c_oauthflow_pq_api>) -> T) -> T {
        LibPQGate.enter()
        defer { LibPQGate.leave() }
        return body(api)
    }

    var version: Int32 { call { $0.libVersion() } }
}

/// Keeps `exit` from tearing libpq's dependencies down under a thread that is inside libpq.
///
/// At `exit`, OpenSSL's `atexit` handler and the destructors of Kerberos and the other libraries
/// libpq loads free their locks; a store's background thread still inside `PQconnectdbParams`
/// (the `LISTEN` connection starting, a pool connection opening) then crashed on a freed lock
/// (`k5_mutex_lock: Assertion 'r == 0' failed`, or SIGSEGV in `pthread_rwlock_wrlock`). After
/// the first connection attempt an `atexit` handler is registered; handlers run in reverse order
/// of registration, so it runs before those. It closes the gate (a thread that would enter libpq
/// from then on waits for the process to end) and waits until no thread is inside libpq, at most
/// ``exitWait`` (a connection attempt ends within its `connect_timeout`).
enum LibPQGate {
    private static let inside = Atomic<Int>(0)
    private static let closed = Atomic<Bool>(false)
    private static let registered = Atomic<Bool>(false)
    /// The longest `exit` waits for threads inside libpq.
    static let exitWait: Duration = .seconds(30)

    @inline(__always)
    static func enter() {
        inside.add(1, ordering: .sequentiallyConsistent)
        if closed.load(ordering: .sequentiallyConsistent) {
            inside.subtract(1, ordering: .sequentiallyConsistent)
            while true { sleep(3600) }  // the process is exiting; never enter libpq again
        }
    }

    @inline(__always)
    static func leave() { inside.subtract(1, ordering: .sequentiallyConsistent) }

    /// Registers the `atexit` handler, once per process; call after a connection attempt, so
    /// that libpq's own dependencies registered theirs before.
    static func registerAtExit() {
        guard registered.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged else { return }
        atexit { LibPQGate.closeForExit() }
    }

    /// Closes the gate and waits (bounded) until no thread is inside libpq.
    static func closeForExit() {
        closed.store(true, ordering: .sequentiallyConsistent)
        let deadline = ContinuousClock.now + exitWait
        while inside.load(ordering: .sequentiallyConsistent) > 0, ContinuousClock.now < deadline { usleep(1000) }
    }

    /// The number of threads inside libpq now (for tests).
    static var threadsInside: Int { inside.load(ordering: .sequentiallyConsistent) }
}

// MARK: - Redaction

/// Removes passwords from libpq's and the server's texts before they reach an error.
struct Redactor: Sendable {
    let secrets: [String]

    init(_ secrets: [String?]) {
        // Longest first, so a password that contains another is removed whole.
        self.secrets = Array(Set(secrets.compactMap { $0 }.filter { !$0.isEmpty })).sorted { $0.count > $1.count }
    }

    /// `text` on one line, bounded, without any known secret.
    func clean(_ text: String) -> String {
        var text = ASCIIText.trimmingBlanksAndNewlines(text)
            .split(whereSeparator: \.isNewline).map { ASCIIText.trimmingBlanks($0) }.joined(separator: "; ")
        for secret in secrets { text = ASCIIText.replacing(secret, in: text, with: "<redacted>") }
        let printable = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        return String(printable.prefix(600))
    }
}

// MARK: - Statements and results

/// One statement parameter: text, or raw bytes sent in binary format (for `bytea`).
enum PGParameter: Sendable {
    case text(String)
    case bytes(Data)
}

/// A statement the store runs, prepared once per connection under its ``name`` (`PQsendPrepare`)
/// and then executed with parameters (`PQsendQueryPrepared`).
struct PGStatement: Sendable, Hashable {
    /// The prepared statement's name on the server (`oauthflow_<what>`).
    let name: String
    /// The SQL text, with `$1`, `$2`, … for every value.
    let sql: String
    /// How many parameters it takes.
    let parameterCount: Int
}

/// Owns one `PGresult`; clears it exactly once.
final class PGResult {
    private let pointer: OpaquePointer
    private let lib: LibPQ

    init(_ pointer: OpaquePointer, lib: LibPQ) {
        self.pointer = pointer
        self.lib = lib
    }

    deinit { lib.call { $0.clear(pointer) } }

    var status: ExecStatusType { lib.call { $0.resultStatus(pointer) } }
    var rowCount: Int { Int(lib.call { $0.ntuples(pointer) }) }

    /// The raw (binary-format) value; nil for SQL NULL or a cell that does not exist.
    func bytes(_ row: Int, _ column: Int) -> Data? {
        lib.call { pq in
            guard row < Int(pq.ntuples(pointer)), column < Int(pq.nfields(pointer)),
                  pq.getisnull(pointer, Int32(row), Int32(column)) == 0,
                  let value = pq.getvalue(pointer, Int32(row), Int32(column)) else { return nil }
            let length = Int(pq.getlength(pointer, Int32(row), Int32(column)))
            return Data(bytes: value, count: max(0, length))
        }
    }

    func text(_ row: Int, _ column: Int) -> String? { bytes(row, column).map { String(decoding: $0, as: UTF8.self) } }

    /// A binary `int8`, `int4` or `int2` as big-endian bytes.
    func integer(_ row: Int, _ column: Int) -> Int64? {
        guard let data = bytes(row, column), [2, 4, 8].contains(data.count) else { return nil }
        var value: Int64 = data.first.map { $0 & 0x80 != 0 ? -1 : 0 } ?? 0
        for byte in data { value = (value << 8) | Int64(byte) }
        return value
    }

    func bool(_ row: Int, _ column: Int) -> Bool? { bytes(row, column).flatMap { $0.count == 1 ? $0[$0.startIndex] != 0 : nil } }

    func field(_ code: UInt8) -> String? { lib.call { $0.resultErrorField(pointer, Int32(code)).map { String(cString: $0) } } }
}

// MARK: - Connections

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

// MARK: - Connection strings

/// The parts of a connection string that name a store, parsed by libpq itself.
struct ConnectionInfo: Sendable {
    /// `postgresql://user@host:port/db` (`postgresql:///db` for the default Unix socket, with
    /// `?service=…` when a service names it), never with a password.
    let name: String
    /// The passwords to redact: the string's own and `$PGPASSWORD`.
    let redactor: Redactor

    /// Parses `conninfo` with `PQconninfoParse` when it is a connection string (a URI, or
    /// `key=value` pairs: it holds `=`), else takes it as a database name, as libpq does; nil when
    /// libpq rejects it.
    init?(_ conninfo: String, environment: [String: String], lib: LibPQ) {
        var fields: [String: String] = [:]
        let isConnectionString = conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://") || conninfo.contains("=")
        if isConnectionString {
            let parsed: [String: String]? = lib.call { pq in
                var errorMessage: UnsafeMutablePointer<CChar>?
                guard let options = pq.conninfoParse(conninfo, &errorMessage) else {
                    if let errorMessage { pq.freemem(errorMessage) }
                    return nil
                }
                defer { pq.conninfoFree(options) }
                var fields: [String: String] = [:]
                var index = 0
                while let keyword = options[index].keyword {
                    if let value = options[index].val { fields[String(cString: keyword)] = String(cString: value) }
                    index += 1
                }
                return fields
            }
            guard let parsed else { return nil }
            fields = parsed
        } else {
            guard !conninfo.isEmpty else { return nil }
            fields["dbname"] = conninfo
        }
        let redactor = Redactor([fields["password"], environment["PGPASSWORD"]])
        var name = "postgresql://"
        if let user = fields["user"] ?? environment["PGUSER"] { name += "\(user)@" }
        // No host: libpq's default (the Unix socket), written as the URI form does (postgresql:///db).
        // A host list pairs with a port list (or one port for all), as in a multi-host URI.
        let hosts = (fields["host"] ?? fields["hostaddr"] ?? environment["PGHOST"] ?? environment["PGHOSTADDR"] ?? "")
            .split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let ports = (fields["port"] ?? environment["PGPORT"])?.split(separator: ",", omittingEmptySubsequences: false).map(String.init) ?? []
        name += hosts.enumerated().map { index, host in
            var part = host.contains(":") ? "[\(host)]" : host
            let port = ports.count == hosts.count ? ports[index] : ports.count == 1 ? ports[0] : ""
            if !port.isEmpty { part += ":\(port)" }
            return part
        }.joined(separator: ",")
        name += "/\(fields["dbname"] ?? environment["PGDATABASE"] ?? "")"
        if let service = fields["service"] ?? environment["PGSERVICE"] { name += "?service=\(service)" }
        self.name = redactor.clean(name)
        self.redactor = redactor
    }
}
