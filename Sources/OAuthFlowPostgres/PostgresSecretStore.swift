#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import OAuthFlow
import Synchronization

/// A ``SecretStore`` in a PostgreSQL table, shared by every process of a fleet, with one refresh
/// per key across all of them.
///
/// Point every instance of a service at the same database and give them the same store key; then
/// ``withExclusiveAccess(to:_:)`` holds a transaction-scoped advisory lock on the key, so when 50
/// machines find a token expired together one refreshes and the other 49 read its result
/// (`AuthFlow` re-reads inside the lock). A process that dies holding the lock releases it when its
/// connection drops.
///
/// ```swift
/// let key = try StoreKey(contentsOf: URL(fileURLWithPath: "/etc/myapp/store.key"))
/// let store = try PostgresSecretStore(connection: "postgresql://app@db.internal/app?sslmode=verify-full",
///                                     encryption: EntryEncryption(key: key))
/// let flow = try await AuthFlow(providers: providers, store: store)
/// ```
///
/// Entries are sealed with ``EntryEncryption`` (AES-256-GCM) before they leave the process; the
/// database and its backups see ciphertext only. Plaintext needs `allowPlaintext: true`.
/// The connection string is anything libpq accepts (a `postgresql://` URI, `key=value` pairs, or
/// a bare database name), so `sslmode`, `PGPASSWORD`, `~/.pgpass` and `PGSERVICE` work as libpq
/// documents them. libpq itself (`libpq.so.5`) is opened on the first store, not linked.
/// Errors, ``description`` and `dump` name the store without its password. See
/// `Documentation/Storage.md` ("Fleet store") for the schema, the locking and the failure behaviour.
public final class PostgresSecretStore: SecretStore, CustomStringConvertible, CustomReflectable {
    /// Limits and names; the defaults suit a service.
    public struct Options: Sendable {
        /// The table (created when missing): lower-case letters, digits and `_`, at most 63 bytes.
        /// Its name is also the `LISTEN`/`NOTIFY` channel.
        public var table: String
        /// The longest ``PostgresSecretStore/withExclusiveAccess(to:_:)`` waits, in all: for a
        /// connection of the pool and for another process's lock together.
        public var lockTimeout: Duration
        /// The server-side `statement_timeout` for every other statement.
        public var statementTimeout: Duration
        /// The longest a lock holder's transaction may sit idle between statements (while its
        /// refresh request runs) before the server ends its session, which frees the lock:
        /// PostgreSQL's `idle_in_transaction_session_timeout`.
        public var holdTimeout: Duration
        /// libpq's `connect_timeout` in seconds (per address tried), unless the connection string sets its own.
        public var connectTimeout: Int
        /// The most connections the store opens (besides one for `LISTEN`).
        public var maximumConnections: Int
        /// Whether ``PostgresSecretStore/invalidations()`` opens a `LISTEN` connection, so that a
        /// logout in another process drops this process's cached token. Turn it off for a
        /// short-lived process, such as one CLI command, which caches nothing worth invalidating:
        /// it then opens only the connections its calls need.
        public var listensForDeletions: Bool

        /// The defaults: table `oauthflow_secrets`, 30 s lock wait, 10 s statements, 120 s hold,
        /// 5 s connect, 4 connections, listening for deletions.
        public init(
            table: String = "oauthflow_secrets", lockTimeout: Duration = .seconds(30), statementTimeout: Duration = .seconds(10),
            holdTimeout: Duration = .seconds(120), connectTimeout: Int = 5, maximumConnections: Int = 4, listensForDeletions: Bool = true
        ) {
            self.table = table
            self.lockTimeout = lockTimeout
            self.statementTimeout = statementTimeout
            self.holdTimeout = holdTimeout
            self.connectTimeout = connectTimeout
            self.maximumConnections = maximumConnections
            self.listensForDeletions = listensForDeletions
        }
    }

    /// The schema version this code writes in every row's `schema_version` and accepts when reading.
    public static let schemaVersion = 1
    /// The largest entry, in bytes, that ``save(_:for:)`` writes and ``load(_:)`` accepts (1 MiB).
    public static let maximumEntrySize = 1 << 20

    /// The store's name for messages: `postgresql://user@host:port/db`, never with the password.
    public let name: String
    /// The limits in force.
    public let options: Options
    private let encryption: EntryEncryption?
    private let redactor: Redactor
    private let lib: LibPQ
    private let pool: ConnectionPool
    private let statements: Statements
    private let parameters: [(String, String)]
    private let listener = Mutex<Listener?>(nil)

    /// Opens a store over `connection`; nothing is connected until the first call.
    ///
    /// - Parameters:
    ///   - connection: a libpq connection string, `postgresql://` URI, or database name.
    ///   - encryption: seals every entry (the usual choice); nil needs `allowPlaintext`.
    ///   - allowPlaintext: store entries unencrypted; only for a database nobody else can read.
    ///   - options: table, timeouts, pool size, listening.
    ///   - environment: read for `PGPASSWORD`, `PGUSER`, `PGHOST`, `PGPORT`, `PGDATABASE` and
    ///     `PGSERVICE` only to name the store and to redact the password (libpq reads its own).
    /// - Throws: ``OAuthError`` `.configuration` without `encryption` and without `allowPlaintext`
    ///   (pass an ``EntryEncryption`` made from a ``StoreKey``), with both, for a connection string
    ///   libpq rejects, for an invalid table name or limit, or when `libpq.so.5` cannot be loaded
    ///   (install libpq; ``PostgresStoreFailure`` `.libraryMissing` in `underlying`).
    public init(
        connection: String, encryption: EntryEncryption?, allowPlaintext: Bool = false, options: Options = Options(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) {
        let lib: LibPQ
        switch LibPQ.shared {
        case .success(let loaded): lib = loaded
        case .failure(let failure):
            throw OAuthError(.configuration, message: "the PostgreSQL store needs libpq: \(failure.message)", underlying: failure)
        }
        guard let info = ConnectionInfo(connection, environment: environment, lib: lib) else {
            throw OAuthError(.configuration, message: """
                the PostgreSQL store's connection string is not one libpq accepts; \
                use postgresql://user@host:port/db, key=value pairs, or a database name
                """)
        }
        switch (encryption, allowPlaintext) {
        case (nil, false):
            throw OAuthError(.configuration, message: """
                refusing to store tokens in \(info.name) unencrypted: give the store a key \
                (EntryEncryption with a StoreKey from a file or a systemd credential), or opt out explicitly with allowPlaintext
                """)
        case (.some, true):
            throw OAuthError(.configuration, message: "the store for \(info.name) has both a key and allowPlaintext; choose one")
        default: break
        }
        guard Self.isValidTable(options.table) else {
            throw OAuthError(.configuration, message: "the table name \"\(options.table)\" must be 1 to 63 lower-case letters, digits or _, not starting with a digit")
        }
        guard options.maximumConnections >= 1, options.connectTimeout >= 1, options.lockTimeout > .zero, options.statementTimeout > .zero,
              options.holdTimeout >= .seconds(1) else {
            throw OAuthError(.configuration, message: """
                the store's pool size, connect timeout, lock timeout and statement timeout must be positive, and the hold timeout at least 1 s
                """)
        }
        self.name = info.name
        self.options = options
        self.encryption = encryption
        self.redactor = info.redactor
        self.lib = lib
        let statements = Statements(table: options.table)
        self.statements = statements
        // Earlier pairs are defaults the connection string may override (libpq keeps the last
        // value). gssencmode=disable: libpq's default (prefer) initialises Kerberos on every
        // connect even when the server offers no GSSAPI; put gssencmode in the string to use it.
        self.parameters = [
            ("connect_timeout", String(options.connectTimeout)),
            ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
            ("gssencmode", "disable"),
            ("fallback_application_name", "oauthflow"),
            ("dbname", connection),
        ]
        let schema = SchemaFlag()
        let settings: [PGParameter] = [
            .text("\(Self.milliseconds(options.statementTimeout))ms"), .text("\(Self.milliseconds(options.statementTimeout))ms"),
            .text("\(Self.milliseconds(options.holdTimeout))ms"),
        ]
        let table = options.table
        let name = info.name
        self.pool = ConnectionPool(parameters: parameters, redactor: info.redactor, lib: lib, capacity: options.maximumConnections) {
            connection throws(PostgresStoreFailure) in
            try await connection.run { connection throws(PostgresStoreFailure) in
                let deadline = ContinuousClock.now + options.statementTimeout + .seconds(3)
                _ = try connection.execute(statements.sessionSettings, settings, deadline: deadline)
                guard !schema.isReady else { return }
                // CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the table
                // exists; a role with only SELECT, INSERT and UPDATE on the table must not need it.
                let exists = try connection.execute(statements.tableExists, [.text("\"\(table)\"")], deadline: deadline)
                if exists.bool(0, 0) == true {
                    schema.markReady()
                    return
                }
                do throws(PostgresStoreFailure) {
                    _ = try connection.execute(statements.begin, deadline: deadline)
                    _ = try connection.execute(statements.schemaLock, [.text(table)], deadline: deadline)
                    _ = try connection.execute(statements.createTable, deadline: deadline)
                    _ = try connection.execute(statements.commit, deadline: deadline)
                } catch {
                    Self.rollback(connection, statements: statements, deadline: deadline)
                    guard error.sqlState == "42501" else { throw error }
                    var refused = error
                    refused.message = """
                        the table "\(table)" does not exist in \(name) and this role may not create it (\(error.message)); \
                        create it once as its owner (see the schema in Documentation/Storage.md) and grant this role SELECT, INSERT, UPDATE on it
                        """
                    throw refused
                }
                schema.markReady()
            }
        }
    }

    deinit { listener.withLock { $0?.stop() } }

    /// `PostgresSecretStore(postgresql://user@host:port/db)`, never with the password.
    public var description: String { "PostgresSecretStore(\(name))" }

    /// The name and the options only: `dump` and `Mirror` never see the connection string, which
    /// may hold a password.
    public var customMirror: Mirror {
        Mirror(self, children: ["name": name, "options": options], displayStyle: .class)
    }

    // MARK: SecretStore

    /// The entry under `key`, opened with the store's key; nil when there is none (or it was deleted).
    ///
    /// Inside ``withExclusiveAccess(to:_:)`` for the same key it reads through the lock's transaction.
    /// - Throws: ``OAuthError`` `.configuration` for an invalid key, or a login the server refused
    ///   (see ``PostgresStoreFailure`` in `underlying`); `.storage` when the database fails, the row
    ///   has a newer schema version, or the entry is plaintext in an encrypted store (or the
    ///   reverse); `.crypto` when it does not open with the store's keys; `.timedOut` when a
    ///   bounded wait runs out; `.cancelled`.
    public func load(_ key: String) async throws(OAuthError) -> Data? {
        try validate(key)
        let statements = self.statements
        let row = try await perform(key, action: "read \"\(key)\"", retry: true) { connection, deadline throws(PostgresStoreFailure) in
            let result = try connection.execute(statements.load, [.text(key)], deadline: deadline)
            guard result.rowCount > 0 else { return Row(value: nil, revision: 0, schemaVersion: Self.schemaVersion) }
            return Row(value: result.bytes(0, 0), revision: result.integer(0, 1) ?? 0,
                       schemaVersion: Int(result.integer(0, 2) ?? 0))
        }
        Self.scope?.observe(row.revision, store: self, key: key)
        guard row.schemaVersion == Self.schemaVersion else {
            throw OAuthError(.storage, providerID: key, message: """
                the entry "\(key)" in \(name) has schema version \(row.schemaVersion); this OAuthFlow reads \(Self.schemaVersion) (upgrade it)
                """)
        }
        guard let stored = row.value else { return nil }
        guard stored.count <= Self.maximumEntrySize else {
            throw OAuthError(.storage, providerID: key, message: "the entry \"\(key)\" in \(name) is \(stored.count) bytes, over the limit; delete it")
        }
        guard let encryption else {
            guard !EntryEncryption.isSealed(stored) else {
                throw OAuthError(.storage, providerID: key, message: "the entry \"\(key)\" in \(name) is encrypted but this store has no key; configure the store key")
            }
            return stored
        }
        guard EntryEncryption.isSealed(stored) else {
            throw OAuthError(.storage, providerID: key, message: """
                refusing the entry "\(key)" in \(name): it is not encrypted, but this store encrypts; delete it and authorize again
                """)
        }
        return try encryption.open(stored, providerID: key)
    }

    /// Seals `data` and stores it under `key`, replacing any entry.
    ///
    /// Inside ``withExclusiveAccess(to:_:)`` for the same key the write is conditional: when another
    /// process deleted (logged out) or replaced the entry since this scope last read it, nothing is
    /// written and the call throws, so a refresh in flight cannot bring back a login that was ended
    /// (also when the deleted row has been purged meanwhile).
    /// - Throws: ``OAuthError`` `.reauthorizationRequired` when the entry was deleted meanwhile;
    ///   `.storage` when it was replaced meanwhile, or the database fails; `.configuration` for an
    ///   invalid key or a refused login; `.crypto` when sealing fails; `.timedOut`; `.cancelled`.
    public func save(_ data: Data, for key: String) async throws(OAuthError) {
        try validate(key)
        guard data.count <= Self.maximumEntrySize else {
            throw OAuthError(.storage, providerID: key, message: "cannot save \"\(key)\": the entry is \(data.count) bytes, over the \(Self.maximumEntrySize)-byte limit")
        }
        let sealed = try encryption?.seal(data, providerID: key) ?? data
        let statements = self.statements
        let version = PGParameter.text(String(Self.schemaVersion))
        if let scope = Self.scope, scope.covers(self, key) {
            let expected = scope.revision
            let outcome = try await perform(key, action: "save \"\(key)\"", retry: false) { connection, deadline throws(PostgresStoreFailure) in
                // Revision 0: the scope saw no row, so only a new row may be written; otherwise only
                // the row at the revision it saw (a purged tombstone is not written back either).
                let result = expected == 0
                    ? try connection.execute(statements.insertIfAbsent, [.text(key), .bytes(sealed), version], deadline: deadline)
                    : try connection.execute(statements.updateIfUnchanged, [.text(key), .bytes(sealed), version, .text(String(expected))],
                                             deadline: deadline)
                if result.rowCount > 0 { return SaveOutcome.saved(result.integer(0, 0) ?? expected + 1) }
                let check = try connection.execute(statements.isDeleted, [.text(key)], deadline: deadline)
                return check.bool(0, 0) ?? true ? .deleted : .replaced
            }
            switch outcome {
            case .saved(let revision):
                scope.observe(revision, store: self, key: key)
            case .deleted:
                throw OAuthError(.reauthorizationRequired, providerID: key, message: """
                    "\(key)" was logged out (deleted from \(name)) by another process during this refresh; \
                    the new tokens were discarded; authorize again
                    """)
            case .replaced:
                throw OAuthError(.storage, providerID: key, message: """
                    "\(key)" was replaced in \(name) by another process during this refresh; the new tokens were discarded; retry
                    """)
            }
            return
        }
        _ = try await perform(key, action: "save \"\(key)\"", retry: true) { connection, deadline throws(PostgresStoreFailure) in
            _ = try connection.execute(statements.save, [.text(key), .bytes(sealed), version], deadline: deadline)
        }
    }

    /// Deletes the entry under `key` and notifies every other store listening on the table.
    ///
    /// The row stays as a tombstone (no value, a new revision), so a refresh that was in flight in
    /// another process fails to write back (see ``save(_:for:)``); a later save of the key reuses
    /// it. Deleting a missing entry is not an error. Tombstones may be purged at any time with
    /// `DELETE FROM <table> WHERE value IS NULL` (see `Documentation/Storage.md`).
    /// - Throws: ``OAuthError`` `.storage` when the database fails; `.configuration` for an invalid
    ///   key or a refused login; `.timedOut`; `.cancelled`.
    public func delete(_ key: String) async throws(OAuthError) {
        try validate(key)
        let statements = self.statements
        let channel = options.table
        _ = try await perform(key, action: "delete \"\(key)\"", retry: true) { connection, deadline throws(PostgresStoreFailure) in
            _ = try connection.execute(statements.delete, [.text(key), .text(channel)], deadline: deadline)
        }
    }

    /// Every key that holds an entry, sorted.
    /// - Throws: ``OAuthError`` `.storage` when the database fails; `.configuration` for a refused
    ///   login; `.timedOut`; `.cancelled`.
    public func keys() async throws(OAuthError) -> [String] {
        let statements = self.statements
        let keys = try await perform(nil, action: "list the entries", retry: true) { connection, deadline throws(PostgresStoreFailure) in
            let result = try connection.execute(statements.keys, deadline: deadline)
            return (0..<result.rowCount).compactMap { result.text($0, 0) }
        }
        return keys.sorted()
    }

    /// Runs `body` holding the fleet-wide lock on `key`: a transaction with
    /// `pg_advisory_xact_lock`, on a connection of its own.
    ///
    /// Waits at most ``Options/lockTimeout`` in all, for a pooled connection and for another
    /// process's lock together; cancelling the task ends either wait. The body's ``load(_:)``,
    /// ``save(_:for:)`` and ``delete(_:)`` of `key` go through the same transaction. The
    /// transaction commits after `body`, whether it returned or threw (a save the body made before
    /// failing, such as a "needs reauthorization" mark, is kept). A process that dies inside
    /// releases the lock when its connection closes; one that stays connected but idle longer than
    /// ``Options/holdTimeout`` has its session ended by the server. Calls for the same key nested
    /// inside run directly; tasks created inside `body` that outlive it do not inherit the lock.
    /// - Throws: ``OAuthError`` `.timedOut` when the lock (or a connection) cannot be had in time;
    ///   `.cancelled`; `.storage` when the database fails; `.configuration` for a refused login;
    ///   what `body` throws.
    public func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        try validate(key)
        if let scope = Self.scope, scope.covers(self, key) { return try await body() }
        let statements = self.statements
        let (connection, revision) = try await lock(key, deadline: ContinuousClock.now + options.lockTimeout)
        defer { pool.release(connection) }
        let scope = Scope(store: self, key: key, connection: connection, revision: revision)
        let result: Result<T, OAuthError> = await Self.$scope.withValue(scope) {
            do throws(OAuthError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        // Closed before the commit: a task the body created (a proactive-refresh timer) inherits
        // the task-local scope, and must take the lock itself when it runs.
        scope.close()
        let timeout = options.lockTimeout + .seconds(3)
        do {
            try await connection.run { connection throws(PostgresStoreFailure) in
                _ = try connection.execute(statements.commit, deadline: ContinuousClock.now + timeout)
            }
        } catch {
            if error.kind == .connectionLost { pool.discardIdle() }
            // The body's writes are lost with the transaction; say so even when the body failed too.
            throw failure(error, key: key, action: "commit the writes made under the lock on \"\(key)\"")
        }
        return try result.get()
    }

    /// Takes the lock on `key` on a pooled connection by `deadline`: `BEGIN`, the wait, and the
    /// revision the transaction sees. A pooled connection the server dropped meanwhile (a restart)
    /// is replaced once: nothing ran on it.
    private func lock(_ key: String, deadline: ContinuousClock.Instant) async throws(OAuthError) -> (PGConnection, Int64) {
        let statements = self.statements
        let table = options.table
        var attempts = 2
        while true {
            attempts -= 1
            let connection: PGConnection
            do {
                connection = try await pool.acquire(deadline: deadline)
            } catch {
                throw failure(error, key: key, action: "lock \"\(key)\"")
            }
            do {
                let revision = try await connection.runCancellable { connection throws(PostgresStoreFailure) in
                    let remaining = ContinuousClock.now.duration(to: deadline)
                    guard remaining > .zero else {
                        throw PostgresStoreFailure(kind: .timedOut, message: "the lock wait ran out while waiting for a connection")
                    }
                    let quick = ContinuousClock.now + .seconds(5)
                    _ = try connection.execute(statements.begin, deadline: quick)
                    do throws(PostgresStoreFailure) {
                        // The server ends the lock wait at the deadline (lock_timeout, 55P03), a
                        // second before the statement timeout and three before the client gives up.
                        _ = try connection.execute(statements.lockScope, [.text("\(Self.milliseconds(remaining))ms"),
                                                                         .text("\(Self.milliseconds(remaining + .seconds(1)))ms")],
                                                   deadline: quick)
                        _ = try connection.execute(statements.lock, [.text(table), .text(key)], deadline: deadline + .seconds(3), cancellable: true)
                        let result = try connection.execute(statements.revision, [.text(key)], deadline: deadline + .seconds(3))
                        return result.rowCount > 0 ? result.integer(0, 0) ?? 0 : 0
                    } catch {
                        Self.rollback(connection, statements: statements, deadline: quick)
                        throw error
                    }
                }
                return (connection, revision)
            } catch where error.kind == .connectionLost && attempts > 0 {
                pool.release(connection)
                pool.discardIdle()
            } catch {
                pool.release(connection)
                if error.kind == .connectionLost { pool.discardIdle() }
                throw failure(error, key: key, action: "lock \"\(key)\"")
            }
        }
    }

    /// What other processes change, as the database notifies it: the keys they delete (log out),
    /// and ``StoreInvalidation/resync`` whenever notifications may have been missed.
    ///
    /// `AuthFlow` subscribes and drops its in-memory copy of a deleted key, so a logout anywhere
    /// ends the cached token everywhere. Uses one extra connection that `LISTEN`s on the table's
    /// channel; it reconnects with backoff. The server does not replay deletions made while it was
    /// disconnected, so each time `LISTEN` takes effect (the first time too) the stream yields
    /// `.resync` and `AuthFlow` re-reads the keys it caches. Deletions made by this store itself
    /// are not reported. Nil when ``Options/listensForDeletions`` is off.
    public func invalidations() -> AsyncStream<StoreInvalidation>? {
        guard options.listensForDeletions else { return nil }
        let (stream, continuation) = AsyncStream.makeStream(of: StoreInvalidation.self, bufferingPolicy: .bufferingNewest(256))
        let listener = self.listener.withLock { listener -> Listener in
            if let listener { return listener }
            let created = Listener(parameters: parameters, redactor: redactor, lib: lib, listen: statements.listen, pool: pool)
            listener = created
            created.start()
            return created
        }
        let id = listener.add(continuation)
        continuation.onTermination = { [weak listener] _ in listener?.remove(id) }
        return stream
    }

    // MARK: For tests and diagnostics

    /// Connections of the pool open now (leased or idle), not counting the `LISTEN` one.
    var openConnections: Int { pool.openCount }

    /// How many times the `LISTEN` connection took effect (0 before the first).
    var listenCount: Int { listener.withLock { $0?.listenCount ?? 0 } }

    /// The values of server settings as a pooled connection's session sees them.
    func sessionSettings(_ names: [String]) async throws(OAuthError) -> [String] {
        let statements = self.statements
        return try await perform(nil, action: "read its session settings", retry: true) { connection, deadline throws(PostgresStoreFailure) in
            var values: [String] = []
            for name in names { values.append(try connection.execute(statements.setting, [.text(name)], deadline: deadline).text(0, 0) ?? "") }
            return values
        }
    }

    /// The statements prepared in a pooled connection's session, sorted.
    func preparedStatements() async throws(OAuthError) -> [String] {
        let statements = self.statements
        return try await perform(nil, action: "list its prepared statements", retry: true) { connection, deadline throws(PostgresStoreFailure) in
            let result = try connection.execute(statements.prepared, deadline: deadline)
            return (0..<result.rowCount).compactMap { result.text($0, 0) }
        }
    }

    // MARK: Internals

    private enum SaveOutcome: Sendable {
        case saved(Int64)
        case deleted
        case replaced
    }

    private struct Row: Sendable {
        var value: Data?
        var revision: Int64
        var schemaVersion: Int
    }

    /// The lock held by the current task: its key, its connection, and the revision it last saw.
    ///
    /// Task-local, so `Task {}` inside the body inherits it; ``close()`` (before the commit) makes
    /// every copy inert, and ``covers(_:_:)`` is false from then on.
    final class Scope: Sendable {
        private let store: ObjectIdentifier
        let key: String
        let connection: PGConnection
        private let state: Mutex<(revision: Int64, open: Bool)>

        init(store: PostgresSecretStore, key: String, connection: PGConnection, revision: Int64) {
            self.store = ObjectIdentifier(store)
            self.key = key
            self.connection = connection
            self.state = Mutex((revision, true))
        }

        /// True while the lock's transaction is open, for `key` of `store`.
        func covers(_ store: PostgresSecretStore, _ key: String) -> Bool {
            self.store == ObjectIdentifier(store) && self.key == key && state.withLock { $0.open }
        }

        var revision: Int64 { state.withLock { $0.revision } }

        func observe(_ revision: Int64, store: PostgresSecretStore, key: String) {
            guard covers(store, key) else { return }
            state.withLock { $0.revision = revision }
        }

        /// Ends the scope: the transaction is about to commit and its connection goes back to the pool.
        func close() { state.withLock { $0.open = false } }
    }

    @TaskLocal static var scope: Scope?

    /// Runs one unit of work on the scope's connection (same key) or a pooled one; a pooled
    /// connection that turns out lost closes every idle one and is replaced once when `retry`
    /// allows (idempotent work only).
    private func perform<T: Sendable>(
        _ key: String?, action: String, retry: Bool,
        _ work: @escaping @Sendable (PGConnection, ContinuousClock.Instant) throws(PostgresStoreFailure) -> T
    ) async throws(OAuthError) -> T {
        let statementWait = options.statementTimeout + .seconds(3)
        if let key, let scope = Self.scope, scope.covers(self, key) {
            let wait = max(statementWait, options.lockTimeout + .seconds(3))
            do {
                return try await scope.connection.run { connection throws(PostgresStoreFailure) in
                    try work(connection, ContinuousClock.now + wait)
                }
            } catch {
                throw failure(error, key: key, action: action)
            }
        }
        var attempts = retry ? 2 : 1
        while true {
            attempts -= 1
            do {
                let connection = try await pool.acquire(deadline: ContinuousClock.now + statementWait)
                defer { pool.release(connection) }
                return try await connection.run { connection throws(PostgresStoreFailure) in
                    try work(connection, ContinuousClock.now + statementWait)
                }
            } catch where error.kind == .connectionLost && attempts > 0 {
                pool.discardIdle()
                continue
            } catch {
                if error.kind == .connectionLost { pool.discardIdle() }
                throw failure(error, key: key, action: action)
            }
        }
    }

    /// The ``OAuthError`` for a failure: `.timedOut`, `.cancelled`, `.configuration` (a refused
    /// login, no libpq), or `.storage`; the failure stays in `underlying`.
    private func failure(_ failure: PostgresStoreFailure, key: String?, action: String) -> OAuthError {
        let code: OAuthError.Code
        switch failure.kind {
        case .timedOut: code = .timedOut
        case .cancelled: code = .cancelled
        case .authenticationFailed, .libraryMissing: code = .configuration
        case .unreachable, .connectionLost, .rejected: code = .storage
        }
        return OAuthError(code, providerID: key,
                          message: "the fleet store \(name) could not \(action): \(redactor.clean(failure.message))", underlying: failure)
    }

    /// Ends a failed transaction; a connection that cannot even roll back is not reused.
    private static func rollback(_ connection: PGConnection, statements: Statements, deadline: ContinuousClock.Instant) {
        do { _ = try connection.execute(statements.rollback, deadline: deadline) } catch { connection.markBroken() }
    }

    private func validate(_ key: String) throws(OAuthError) {
        guard FileSecretStore.isValidKey(key) else {
            throw OAuthError(.configuration, providerID: nil, message: "\"\(key.prefix(64))\" is not a valid store key (1 to 128 letters, digits, '.', '_' or '-')")
        }
    }

    static func isValidTable(_ table: String) -> Bool {
        let bytes = Array(table.utf8)
        guard (1...63).contains(bytes.count), !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[0]) else { return false }
        return bytes.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_") }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}

/// Set once the table is known to exist, so later connections skip the check.
private final class SchemaFlag: Sendable {
    private let ready = Mutex(false)
    var isReady: Bool { ready.withLock { $0 } }
    func markReady() { ready.withLock { $0 = true } }
}

/// Every statement the store runs, each prepared once per connection. Values are always
/// parameters; the only text spliced in is the table name, checked by
/// ``PostgresSecretStore/isValidTable(_:)`` and quoted as an identifier.
struct Statements: Sendable {
    let createTable, tableExists, schemaLock, sessionSettings, load, save, insertIfAbsent, updateIfUnchanged, isDeleted, delete, keys,
        lockScope, lock, revision, listen, begin, commit, rollback, setting, prepared: PGStatement

    init(table: String) {
        let t = "\"\(table)\""
        func statement(_ name: String, _ count: Int, _ sql: String) -> PGStatement {
            PGStatement(name: "oauthflow_\(name)", sql: sql, parameterCount: count)
        }
        createTable = statement("create_table", 0, """
            CREATE TABLE IF NOT EXISTS \(t) (
                key text PRIMARY KEY,
                value bytea,
                revision bigint NOT NULL,
                schema_version integer NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        tableExists = statement("table_exists", 1, "SELECT to_regclass($1) IS NOT NULL")
        schemaLock = statement("schema_lock", 1, "SELECT pg_advisory_xact_lock(hashtext('oauthflow.schema'), hashtext($1))")
        sessionSettings = statement("session", 3, """
            SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $2, false),
                   set_config('idle_in_transaction_session_timeout', $3, false),
                   set_config('tcp_keepalives_idle', '10', false), set_config('tcp_keepalives_interval', '5', false),
                   set_config('tcp_keepalives_count', '3', false)
            """)
        load = statement("load", 1, "SELECT value, revision, schema_version FROM \(t) WHERE key = $1")
        save = statement("save", 3, """
            INSERT INTO \(t) AS s (key, value, revision, schema_version, updated_at) VALUES ($1, $2, 1, $3::integer, now())
            ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, revision = s.revision + 1, schema_version = EXCLUDED.schema_version,
                updated_at = now()
            """)
        insertIfAbsent = statement("insert_if_absent", 3, """
            INSERT INTO \(t) (key, value, revision, schema_version, updated_at) VALUES ($1, $2, 1, $3::integer, now())
            ON CONFLICT (key) DO NOTHING
            RETURNING revision
            """)
        updateIfUnchanged = statement("update_if_unchanged", 4, """
            UPDATE \(t) SET value = $2, revision = revision + 1, schema_version = $3::integer, updated_at = now()
            WHERE key = $1 AND revision = $4::bigint
            RETURNING revision
            """)
        isDeleted = statement("is_deleted", 1, "SELECT COALESCE((SELECT value IS NULL FROM \(t) WHERE key = $1), true)")
        delete = statement("delete", 2, """
            WITH gone AS (
                UPDATE \(t) SET value = NULL, revision = revision + 1, updated_at = now() WHERE key = $1 AND value IS NOT NULL RETURNING key
            )
            SELECT pg_notify($2, key) FROM gone
            """)
        keys = statement("keys", 0, "SELECT key FROM \(t) WHERE value IS NOT NULL")
        lockScope = statement("lock_scope", 2, "SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)")
        lock = statement("lock", 2, "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))")
        revision = statement("revision", 1, "SELECT revision FROM \(t) WHERE key = $1")
        listen = statement("listen", 0, "LISTEN \(t)")
        begin = statement("begin", 0, "BEGIN")
        commit = statement("commit", 0, "COMMIT")
        rollback = statement("rollback", 0, "ROLLBACK")
        setting = statement("setting", 1, "SELECT current_setting($1)")
        prepared = statement("prepared", 0, "SELECT name FROM pg_prepared_statements ORDER BY name")
    }
}
