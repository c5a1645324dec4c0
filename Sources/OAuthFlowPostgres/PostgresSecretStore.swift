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
    let redactor: Redactor
    private let lib: LibPQ
    let pool: ConnectionPool
    let statements: Statements
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

    func validate(_ key: String) throws(OAuthError) {
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
