#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
