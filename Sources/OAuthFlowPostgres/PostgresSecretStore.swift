public import Foundation
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
/// The connection string is anything libpq accepts (a `postgresql://` URI or `key=value` pairs),
/// so `sslmode`, `PGPASSWORD`, `~/.pgpass` and `PGSERVICE` work as libpq documents them.
/// Errors and ``description`` name the store without its password. See `Documentation/Storage.md`
/// ("Fleet store") for the schema, the locking and the failure behaviour.
public final class PostgresSecretStore: SecretStore, CustomStringConvertible {
    /// Limits and names; the defaults suit a service.
    public struct Options: Sendable {
        /// The table (created when missing): lower-case letters, digits and `_`, at most 63 bytes.
        /// Its name is also the `LISTEN`/`NOTIFY` channel.
        public var table: String
        /// How long ``PostgresSecretStore/withExclusiveAccess(to:_:)`` waits for another process's lock.
        public var lockTimeout: Duration
        /// The server-side `statement_timeout` for every other statement.
        public var statementTimeout: Duration
        /// libpq's `connect_timeout` in seconds (per host), unless the connection string sets its own.
        public var connectTimeout: Int
        /// The most connections the store opens (besides one for `LISTEN`).
        public var maximumConnections: Int

        /// The defaults: table `oauthflow_secrets`, 30 s lock wait, 10 s statements, 5 s connect, 4 connections.
        public init(
            table: String = "oauthflow_secrets", lockTimeout: Duration = .seconds(30), statementTimeout: Duration = .seconds(10),
            connectTimeout: Int = 5, maximumConnections: Int = 4
        ) {
            self.table = table
            self.lockTimeout = lockTimeout
            self.statementTimeout = statementTimeout
            self.connectTimeout = connectTimeout
            self.maximumConnections = maximumConnections
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
    private let pool: ConnectionPool
    private let statements: Statements
    private let parameters: [(String, String)]
    private let listener = Mutex<Listener?>(nil)

    /// Opens a store over `connection`; nothing is connected until the first call.
    ///
    /// - Parameters:
    ///   - connection: a libpq connection string or `postgresql://` URI.
    ///   - encryption: seals every entry (the usual choice); nil needs `allowPlaintext`.
    ///   - allowPlaintext: store entries unencrypted; only for a database nobody else can read.
    ///   - options: table, timeouts, pool size.
    ///   - environment: read for `PGPASSWORD`, `PGUSER`, `PGHOST`, `PGPORT`, `PGDATABASE` and
    ///     `PGSERVICE` only to name the store and to redact the password (libpq reads its own).
    /// - Throws: ``OAuthError`` `.configuration` without `encryption` and without `allowPlaintext`
    ///   (pass an ``EntryEncryption`` made from a ``StoreKey``), with both, for a connection string
    ///   libpq rejects, or for an invalid table name or limit.
    public init(
        connection: String, encryption: EntryEncryption?, allowPlaintext: Bool = false, options: Options = Options(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) {
        guard let info = ConnectionInfo(connection, environment: environment) else {
            throw OAuthError(.configuration, message: """
                the PostgreSQL store's connection string is not one libpq accepts; \
                use postgresql://user@host:port/db or key=value pairs
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
        guard options.maximumConnections >= 1, options.connectTimeout >= 1, options.lockTimeout > .zero, options.statementTimeout > .zero else {
            throw OAuthError(.configuration, message: "the store's pool size, connect timeout, lock timeout and statement timeout must be positive")
        }
        self.name = info.name
        self.options = options
        self.encryption = encryption
        self.redactor = info.redactor
        let statements = Statements(table: options.table)
        self.statements = statements
        // Earlier pairs are defaults the connection string may override (libpq keeps the last value).
        self.parameters = [
            ("connect_timeout", String(options.connectTimeout)),
            ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
            ("fallback_application_name", "oauthflow"),
            ("dbname", connection),
        ]
        let schema = SchemaFlag()
        let statementMilliseconds = Self.milliseconds(options.statementTimeout)
        let lockMilliseconds = Self.milliseconds(options.lockTimeout)
        self.pool = ConnectionPool(parameters: parameters, redactor: info.redactor, capacity: options.maximumConnections) {
            connection throws(PostgresStoreFailure) in
            try await connection.run { connection throws(PostgresStoreFailure) in
                let deadline = ContinuousClock.now + options.statementTimeout + .seconds(3)
                _ = try connection.execute(statements.sessionSettings, [.text("\(statementMilliseconds)ms"), .text("\(lockMilliseconds)ms")],
                                           deadline: deadline)
                guard !schema.isReady else { return }
                do throws(PostgresStoreFailure) {
                    _ = try connection.execute("BEGIN", deadline: deadline)
                    _ = try connection.execute(statements.schemaLock, [.text(options.table)], deadline: deadline)
                    _ = try connection.execute(statements.createTable, deadline: deadline)
                    _ = try connection.execute("COMMIT", deadline: deadline)
                } catch {
                    _ = try? connection.execute("ROLLBACK", deadline: deadline)
                    throw error
                }
                schema.markReady()
            }
        }
    }

    deinit { listener.withLock { $0?.stop() } }

    /// `PostgresSecretStore(postgresql://user@host:port/db)`, never with the password.
    public var description: String { "PostgresSecretStore(\(name))" }

    // MARK: SecretStore

    /// The entry under `key`, opened with the store's key; nil when there is none (or it was deleted).
    ///
    /// Inside ``withExclusiveAccess(to:_:)`` for the same key it reads through the lock's transaction.
    /// - Throws: ``OAuthError`` `.configuration` for an invalid key; `.storage` when the database
    ///   fails (see ``PostgresStoreFailure`` in `underlying`), the row has a newer schema version, or
    ///   the entry is plaintext in an encrypted store (or the reverse); `.crypto` when it does not open
    ///   with the store's keys; `.timedOut` when a bounded wait runs out.
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
    /// written and the call throws, so a refresh in flight cannot bring back a login that was ended.
    /// - Throws: ``OAuthError`` `.reauthorizationRequired` when the entry was deleted meanwhile;
    ///   `.storage` when it was replaced meanwhile, or the database fails; `.configuration` for an
    ///   invalid key; `.crypto` when sealing fails; `.timedOut`.
    public func save(_ data: Data, for key: String) async throws(OAuthError) {
        try validate(key)
        guard data.count <= Self.maximumEntrySize else {
            throw OAuthError(.storage, providerID: key, message: "cannot save \"\(key)\": the entry is \(data.count) bytes, over the \(Self.maximumEntrySize)-byte limit")
        }
        let sealed = try encryption?.seal(data, providerID: key) ?? data
        let statements = self.statements
        if let scope = Self.scope, scope.covers(self, key) {
            let expected = scope.revision
            let outcome = try await perform(key, action: "save \"\(key)\"", retry: false) { connection, deadline throws(PostgresStoreFailure) in
                let result = try connection.execute(
                    statements.saveIfUnchanged, [.text(key), .bytes(sealed), .text(String(expected))], deadline: deadline)
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
            _ = try connection.execute(statements.save, [.text(key), .bytes(sealed)], deadline: deadline)
        }
    }

    /// Deletes the entry under `key` and notifies every other store listening on the table.
    ///
    /// The row stays as a tombstone (no value, a new revision), so a refresh that was in flight in
    /// another process fails to write back (see ``save(_:for:)``). Deleting a missing entry is not an error.
    /// - Throws: ``OAuthError`` `.storage` when the database fails; `.configuration` for an invalid key; `.timedOut`.
    public func delete(_ key: String) async throws(OAuthError) {
        try validate(key)
        let statements = self.statements
        let channel = options.table
        _ = try await perform(key, action: "delete \"\(key)\"", retry: true) { connection, deadline throws(PostgresStoreFailure) in
            _ = try connection.execute(statements.delete, [.text(key), .text(channel)], deadline: deadline)
        }
    }

    /// Every key that holds an entry, sorted.
    /// - Throws: ``OAuthError`` `.storage` when the database fails; `.timedOut`.
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
    /// Waits at most ``Options/lockTimeout`` for another process to finish. The body's ``load(_:)``,
    /// ``save(_:for:)`` and ``delete(_:)`` of `key` go through the same transaction. The transaction
    /// commits after `body`, whether it returned or threw (a save the body made before failing,
    /// such as a "needs reauthorization" mark, is kept). A process that dies inside releases the
    /// lock when its connection closes. Calls for the same key nested inside run directly.
    /// - Throws: ``OAuthError`` `.timedOut` when the lock (or a connection) cannot be had in time;
    ///   `.storage` when the database fails; what `body` throws.
    public func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        try validate(key)
        if let scope = Self.scope, scope.covers(self, key) { return try await body() }
        let statements = self.statements
        let table = options.table
        let lockWait = options.lockTimeout
        let connection: PGConnection
        do {
            connection = try await pool.acquire(deadline: ContinuousClock.now + lockWait)
        } catch {
            throw failure(error, key: key, action: "lock \"\(key)\"")
        }
        defer { pool.release(connection) }
        let revision: Int64
        do {
            revision = try await connection.run { connection throws(PostgresStoreFailure) in
                let quick = ContinuousClock.now + .seconds(5)
                _ = try connection.execute("BEGIN", deadline: quick)
                do throws(PostgresStoreFailure) {
                    _ = try connection.execute(statements.lockScope, [.text("\(Self.milliseconds(lockWait + .seconds(1)))ms")], deadline: quick)
                    _ = try connection.execute(statements.lock, [.text(table), .text(key)],
                                               deadline: ContinuousClock.now + lockWait + .seconds(3))
                    let result = try connection.execute(statements.revision, [.text(key)], deadline: ContinuousClock.now + lockWait + .seconds(3))
                    return result.rowCount > 0 ? result.integer(0, 0) ?? 0 : 0
                } catch {
                    _ = try? connection.execute("ROLLBACK", deadline: quick)
                    throw error
                }
            }
        } catch {
            throw failure(error, key: key, action: "lock \"\(key)\"")
        }
        let scope = Scope(store: self, key: key, connection: connection, revision: revision)
        let result: Result<T, OAuthError> = await Self.$scope.withValue(scope) {
            do throws(OAuthError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        let timeout = lockWait + .seconds(3)
        do {
            try await connection.run { connection throws(PostgresStoreFailure) in
                _ = try connection.execute("COMMIT", deadline: ContinuousClock.now + timeout)
            }
        } catch {
            // The body's writes are lost with the transaction; say so even when the body failed too.
            throw failure(error, key: key, action: "commit the writes made under the lock on \"\(key)\"")
        }
        return try result.get()
    }

    /// The keys other processes delete (log out), as the database notifies them.
    ///
    /// `AuthFlow` subscribes and drops its in-memory copy, so a logout anywhere ends the cached
    /// token everywhere. Uses one extra connection that `LISTEN`s on the table's channel; it
    /// reconnects with backoff, and deletions made while it was disconnected are not replayed.
    /// Deletions made by this store itself are not reported.
    public func invalidations() -> AsyncStream<String>? {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(256))
        let listener = self.listener.withLock { listener -> Listener in
            if let listener { return listener }
            let created = Listener(parameters: parameters, redactor: redactor, channel: options.table, pool: pool)
            listener = created
            created.start()
            return created
        }
        let id = listener.add(continuation)
        continuation.onTermination = { [weak listener] _ in listener?.remove(id) }
        return stream
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
    final class Scope: Sendable {
        private let store: ObjectIdentifier
        let key: String
        let connection: PGConnection
        private let seen: Mutex<Int64>

        init(store: PostgresSecretStore, key: String, connection: PGConnection, revision: Int64) {
            self.store = ObjectIdentifier(store)
            self.key = key
            self.connection = connection
            self.seen = Mutex(revision)
        }

        func covers(_ store: PostgresSecretStore, _ key: String) -> Bool { self.store == ObjectIdentifier(store) && self.key == key }
        var revision: Int64 { seen.withLock { $0 } }
        func observe(_ revision: Int64, store: PostgresSecretStore, key: String) {
            guard covers(store, key) else { return }
            seen.withLock { $0 = revision }
        }
    }

    @TaskLocal static var scope: Scope?

    /// Runs one unit of work on the scope's connection (same key) or a pooled one; a pooled
    /// connection that turns out broken is replaced once when `retry` allows (idempotent work only).
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
                continue
            } catch {
                throw failure(error, key: key, action: action)
            }
        }
    }

    private func failure(_ failure: PostgresStoreFailure, key: String?, action: String) -> OAuthError {
        OAuthError(failure.kind == .timedOut ? .timedOut : .storage, providerID: key,
                   message: "the fleet store \(name) could not \(action): \(redactor.clean(failure.message))", underlying: failure)
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

/// Set once the table is known to exist, so later connections skip `CREATE TABLE`.
private final class SchemaFlag: Sendable {
    private let ready = Mutex(false)
    var isReady: Bool { ready.withLock { $0 } }
    func markReady() { ready.withLock { $0 = true } }
}

/// Every statement the store runs. Values are always parameters; the only text spliced in is the
/// table name, checked by ``PostgresSecretStore/isValidTable(_:)`` and quoted as an identifier.
struct Statements: Sendable {
    let createTable, schemaLock, sessionSettings, load, save, saveIfUnchanged, isDeleted, delete, keys, lockScope, lock, revision: String

    init(table: String) {
        let t = "\"\(table)\""
        createTable = """
            CREATE TABLE IF NOT EXISTS \(t) (
                key text PRIMARY KEY,
                value bytea,
                revision bigint NOT NULL,
                schema_version integer NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """
        schemaLock = "SELECT pg_advisory_xact_lock(hashtext('oauthflow.schema'), hashtext($1))"
        sessionSettings = "SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $2, false)"
        load = "SELECT value, revision, schema_version FROM \(t) WHERE key = $1"
        save = """
            INSERT INTO \(t) AS s (key, value, revision, schema_version, updated_at) VALUES ($1, $2, 1, 1, now())
            ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, revision = s.revision + 1, schema_version = 1, updated_at = now()
            """
        saveIfUnchanged = """
            INSERT INTO \(t) AS s (key, value, revision, schema_version, updated_at) VALUES ($1, $2, 1, 1, now())
            ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, revision = s.revision + 1, schema_version = 1, updated_at = now()
            WHERE s.revision = $3::bigint
            RETURNING revision
            """
        isDeleted = "SELECT COALESCE((SELECT value IS NULL FROM \(t) WHERE key = $1), true)"
        delete = """
            WITH gone AS (
                UPDATE \(t) SET value = NULL, revision = revision + 1, updated_at = now() WHERE key = $1 AND value IS NOT NULL RETURNING key
            )
            SELECT pg_notify($2, key) FROM gone
            """
        keys = "SELECT key FROM \(t) WHERE value IS NOT NULL"
        lockScope = "SELECT set_config('statement_timeout', $1, true)"
        lock = "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))"
        revision = "SELECT revision FROM \(t) WHERE key = $1"
    }
}
