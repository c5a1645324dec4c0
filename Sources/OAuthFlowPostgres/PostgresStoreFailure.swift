/// Why a PostgreSQL operation failed; the ``OAuthError/Fields/underlying`` of the store's errors.
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
