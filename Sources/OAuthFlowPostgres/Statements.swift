import Synchronization

/// Set once the table is known to exist, so later connections skip the check.
final class SchemaFlag: Sendable {
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
