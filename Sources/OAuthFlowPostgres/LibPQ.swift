internal import CLibPQ
import Dispatch
import Foundation
import Glibc

/// Why a PostgreSQL operation failed; the ``OAuthError/underlying`` of the store's errors.
///
/// Read ``isTemporary`` to decide whether to retry (the `authflow` CLI exits 75 then). The
/// ``message`` is libpq's or the server's text with every known password removed.
public struct PostgresStoreFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: String, Sendable, Hashable {
        /// No connection could be made (server down, refused, DNS, authentication at connect).
        case unreachable
        /// An open connection broke during a statement; the statement may or may not have run.
        case connectionLost
        /// A bounded wait ran out: the lock, a statement, the pool, or the network.
        case timedOut
        /// The server refused the statement (permissions, schema, constraint); see ``sqlState``.
        case rejected
    }

    /// What kind of failure.
    public var kind: Kind
    /// The five-character SQLSTATE the server sent, when it sent one (`55P03` for a lock timeout).
    public var sqlState: String?
    /// A human sentence without passwords.
    public var message: String

    /// True when the same call can succeed later (the database restarts, the lock frees up).
    ///
    /// Authentication failures at connect time count as temporary too: libpq cannot tell a wrong
    /// password from a server that is still starting, and a fleet keeps running either way.
    public var isTemporary: Bool {
        switch kind {
        case .unreachable, .connectionLost, .timedOut: return true
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

/// Removes passwords from libpq's and the server's texts before they reach an error.
struct Redactor: Sendable {
    let secrets: [String]

    init(_ secrets: [String?]) {
        // Longest first, so a password that contains another is removed whole.
        self.secrets = Array(Set(secrets.compactMap { $0 }.filter { !$0.isEmpty })).sorted { $0.count > $1.count }
    }

    /// `text` on one line, bounded, without any known secret.
    func clean(_ text: String) -> String {
        var text = text.trimmingCharacters(in: .whitespacesAndNewlines)
            .split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: "; ")
        for secret in secrets { text = text.replacingOccurrences(of: secret, with: "<redacted>") }
        let printable = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        return String(printable.prefix(600))
    }
}

/// One statement parameter: text, or raw bytes sent in binary format (for `bytea`).
enum PGParameter: Sendable {
    case text(String)
    case bytes(Data)
}

/// Owns one `PGresult`; clears it exactly once.
final class PGResult {
    private let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { PQclear(pointer) }

    var status: ExecStatusType { PQresultStatus(pointer) }
    var rowCount: Int { Int(PQntuples(pointer)) }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(pointer, Int32(row), Int32(column)) == 1 }

    /// The raw (binary-format) value; nil for SQL NULL or a cell that does not exist.
    func bytes(_ row: Int, _ column: Int) -> Data? {
        guard row < rowCount, column < Int(PQnfields(pointer)), !isNull(row, column),
              let value = PQgetvalue(pointer, Int32(row), Int32(column)) else { return nil }
        let length = Int(PQgetlength(pointer, Int32(row), Int32(column)))
        return Data(bytes: value, count: max(0, length))
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

    func field(_ code: UInt8) -> String? { PQresultErrorField(pointer, Int32(code)).map { String(cString: $0) } }
}

/// Owns one libpq connection and the serial queue every call on it runs on.
///
/// libpq blocks; the queue keeps it off the cooperative thread pool. One lease holder at a time
/// uses a connection (the pool hands it out), and every wait is bounded by a deadline: the
/// statement is sent, then the socket is polled until the result arrives or the deadline passes.
final class PGConnection: @unchecked Sendable {  // the PGconn is only touched on `queue`, by one lease holder at a time
    private let conn: OpaquePointer
    private let queue: DispatchQueue
    private let redactor: Redactor
    /// The server process serving this connection (to recognise our own notifications).
    let backendPID: Int32
    /// Set on the queue when the connection can no longer be trusted (lost, timed out mid-statement).
    private var broken = false

    private init(conn: OpaquePointer, queue: DispatchQueue, redactor: Redactor) {
        self.conn = conn
        self.queue = queue
        self.redactor = redactor
        self.backendPID = PQbackendPID(conn)
    }

    deinit { PQfinish(conn) }

    /// Connects on a new queue; `parameters` are libpq keyword/value pairs in order (later ones win).
    static func open(_ parameters: [(String, String)], redactor: Redactor) async throws(PostgresStoreFailure) -> PGConnection {
        let queue = DispatchQueue(label: "OAuthFlowPostgres.connection")
        let result: Result<PGConnection, PostgresStoreFailure> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(PostgresStoreFailure) -> PGConnection in
                    try connect(parameters, queue: queue, redactor: redactor)
                })
            }
        }
        return try result.get()
    }

    /// Connects, blocking the calling thread (bounded by `connect_timeout`); use the result only on `queue`.
    static func connect(
        _ parameters: [(String, String)], queue: DispatchQueue, redactor: Redactor
    ) throws(PostgresStoreFailure) -> PGConnection {
        let keywords: [UnsafePointer<CChar>?] = parameters.map { UnsafePointer(strdup($0.0)) } + [nil]
        let values: [UnsafePointer<CChar>?] = parameters.map { UnsafePointer(strdup($0.1)) } + [nil]
        defer {
            for pointer in keywords + values { free(UnsafeMutablePointer(mutating: pointer)) }
        }
        guard let conn = PQconnectdbParams(keywords, values, 1) else {
            throw PostgresStoreFailure(kind: .unreachable, message: "libpq could not allocate a connection")
        }
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = redactor.clean(PQerrorMessage(conn).map { String(cString: $0) } ?? "connection failed")
            PQfinish(conn)
            throw PostgresStoreFailure(kind: .unreachable, message: message)
        }
        c_oauthflow_pq_silence(conn)
        return PGConnection(conn: conn, queue: queue, redactor: redactor)
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

    /// True when the connection must not be reused. Read only on the queue or by the lease holder after `run`.
    var isBroken: Bool { broken || PQstatus(conn) != CONNECTION_OK }

    /// One parameterised statement (`PQsendQueryParams`), results in binary format, bounded by `deadline`.
    ///
    /// Call only inside ``run(_:)``. Throws `.rejected` with the SQLSTATE for a server error,
    /// `.connectionLost` when the connection broke, `.timedOut` when the deadline passed (the
    /// connection is then marked broken: its state is unknown).
    func execute(_ sql: String, _ parameters: [PGParameter] = [], deadline: ContinuousClock.Instant) throws(PostgresStoreFailure) -> PGResult {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !isBroken else {
            broken = true
            throw PostgresStoreFailure(kind: .connectionLost, message: "the connection is closed")
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
        let sent = PQsendQueryParams(conn, sql, Int32(parameters.count), nil, values, lengths, formats, 1)
        guard sent == 1 else { throw lost() }
        var outcome: PGResult?
        var failure: PGResult?
        while true {
            try waitForInput(until: deadline)
            guard let raw = PQgetResult(conn) else { break }
            let result = PGResult(raw)
            switch result.status {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK: if outcome == nil { outcome = result }
            default: if failure == nil { failure = result }
            }
        }
        if let failure {
            if isBroken { throw lost(failure.field(UInt8(ascii: "M"))) }
            let state = failure.field(UInt8(ascii: "C"))
            let message = redactor.clean(failure.field(UInt8(ascii: "M")) ?? "the server refused the statement")
            // 55P03 lock_not_available (lock_timeout), 57014 query_canceled (statement_timeout).
            let kind: PostgresStoreFailure.Kind
            switch state {
            case "55P03", "57014": kind = .timedOut
            case let code? where code.hasPrefix("08") || code == "57P01" || code == "57P02" || code == "57P03":
                kind = .connectionLost
                broken = true
            default: kind = .rejected
            }
            throw PostgresStoreFailure(kind: kind, sqlState: state, message: message)
        }
        guard let outcome else { throw lost() }
        return outcome
    }

    /// Polls the socket until libpq has a whole result, or the deadline passes.
    private func waitForInput(until deadline: ContinuousClock.Instant) throws(PostgresStoreFailure) {
        while PQisBusy(conn) == 1 {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else {
                broken = true
                throw PostgresStoreFailure(kind: .timedOut, message: "no answer from the server in time; the connection is dropped")
            }
            let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
            var ready = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
            let count = poll(&ready, 1, Int32(clamping: min(max(milliseconds, 1), 1000)))
            if count < 0, errno != EINTR { throw lost() }
            if count > 0, PQconsumeInput(conn) != 1 { throw lost() }
        }
    }

    private func lost(_ detail: String? = nil) -> PostgresStoreFailure {
        broken = true
        let text = detail ?? PQerrorMessage(conn).map { String(cString: $0) } ?? ""
        let message = redactor.clean(text)
        return PostgresStoreFailure(kind: .connectionLost, message: message.isEmpty ? "the connection to the server was lost" : message)
    }

    // MARK: LISTEN

    /// Waits up to `timeout` for input and returns the notifications that arrived (channel payloads).
    /// Call only inside ``run(_:)``.
    func notifications(waiting timeout: Duration) throws(PostgresStoreFailure) -> [(payload: String, backendPID: Int32)] {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !isBroken else { throw lost() }
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        var ready = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
        let count = poll(&ready, 1, Int32(clamping: max(milliseconds, 0)))
        if count < 0, errno != EINTR { throw lost() }
        if count > 0, PQconsumeInput(conn) != 1 { throw lost() }
        var received: [(String, Int32)] = []
        while let notify = PQnotifies(conn) {
            let payload = notify.pointee.extra.map { String(cString: $0) } ?? ""
            received.append((payload, notify.pointee.be_pid))
            PQfreemem(notify)
        }
        if PQstatus(conn) != CONNECTION_OK { throw lost() }
        return received
    }
}

/// The parts of a connection string that name a store, parsed by libpq itself.
struct ConnectionInfo: Sendable {
    /// `postgresql://user@host:port/db` (or `service=…`), never with a password.
    let name: String
    /// The passwords to redact: the string's own and `$PGPASSWORD`.
    let redactor: Redactor

    /// Parses `conninfo` with `PQconninfoParse`; nil when libpq rejects it.
    init?(_ conninfo: String, environment: [String: String]) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            return nil
        }
        defer { PQconninfoFree(options) }
        var fields: [String: String] = [:]
        var index = 0
        while let keyword = options[index].keyword {
            if let value = options[index].val { fields[String(cString: keyword)] = String(cString: value) }
            index += 1
        }
        let redactor = Redactor([fields["password"], environment["PGPASSWORD"]])
        var name = "postgresql://"
        if let user = fields["user"] ?? environment["PGUSER"] { name += "\(user)@" }
        name += fields["host"] ?? fields["hostaddr"] ?? environment["PGHOST"] ?? "localhost"
        if let port = fields["port"] ?? environment["PGPORT"] { name += ":\(port)" }
        name += "/\(fields["dbname"] ?? environment["PGDATABASE"] ?? "")"
        if let service = fields["service"] ?? environment["PGSERVICE"] { name += "?service=\(service)" }
        self.name = redactor.clean(name)
        self.redactor = redactor
    }
}
