#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import OAuthFlow
import Synchronization

// Where the store's statements run: the fleet-wide lock's transaction (a task-local scope) or a
// pooled connection, and how a failure there becomes an OAuthError.
extension PostgresSecretStore {
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
    func perform<T: Sendable>(
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
    func failure(_ failure: PostgresStoreFailure, key: String?, action: String) -> OAuthError {
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
    static func rollback(_ connection: PGConnection, statements: Statements, deadline: ContinuousClock.Instant) {
        do { _ = try connection.execute(statements.rollback, deadline: deadline) } catch { connection.markBroken() }
    }
}
