#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// The agent's metrics in the Prometheus text exposition format (version 0.0.4), which node
/// exporter's textfile collector reads. No token, no user code, only ids, counts and times.
enum AgentMetrics {
    /// The text for `statuses` at `now`; `started` is when the agent started.
    static func render(_ statuses: [String: RefreshScheduler.Status], now: Date, started: Date) -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
            let text = labels.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",")
            out += name + (text.isEmpty ? "" : "{\(text)}") + " " + number(value) + "\n"
        }
        let providers = statuses.keys.sorted()
        family("authflow_agent_start_time_seconds", "gauge", "When the agent started, in seconds since 1970.")
        sample("authflow_agent_start_time_seconds", [], started.timeIntervalSince1970.rounded())
        family("authflow_token_expiry_seconds", "gauge", "Seconds until the access token expires (negative: expired); absent without a token or an expiry.")
        for id in providers { if let expiry = statuses[id]?.expiresAt { sample("authflow_token_expiry_seconds", [("provider", id)], expiry.timeIntervalSince(now).rounded()) } }
        family("authflow_token_expiry_timestamp_seconds", "gauge", "When the access token expires, in seconds since 1970.")
        for id in providers { if let expiry = statuses[id]?.expiresAt { sample("authflow_token_expiry_timestamp_seconds", [("provider", id)], expiry.timeIntervalSince1970.rounded()) } }
        family("authflow_refreshes_total", "counter", "Token requests that succeeded (refreshes and client-credentials or JWT-bearer fetches).")
        for id in providers { sample("authflow_refreshes_total", [("provider", id)], Double(statuses[id]?.refreshes ?? 0)) }
        family("authflow_refresh_failures_total", "counter", "Failures by error code (the server's RFC 6749 error, or the library's code).")
        for id in providers {
            for (code, count) in (statuses[id]?.failures ?? [:]).sorted(by: { $0.key < $1.key }) {
                sample("authflow_refresh_failures_total", [("provider", id), ("error", code)], Double(count))
            }
        }
        family("authflow_last_refresh_duration_seconds", "gauge", "How long the last successful token request took.")
        for id in providers { if let duration = statuses[id]?.lastRefreshDuration { sample("authflow_last_refresh_duration_seconds", [("provider", id)], duration) } }
        family("authflow_needs_person", "gauge", "1 while only a person can make the provider usable again (a login or an approval).")
        for id in providers { sample("authflow_needs_person", [("provider", id)], statuses[id]?.needsAuthorization == true ? 1 : 0) }
        return out
    }

    /// A label value: backslash, double quote and line feed escaped; other control characters
    /// dropped; at most 64 characters (error codes come from servers).
    static func escape(_ value: String) -> String {
        var out = ""
        for scalar in value.unicodeScalars.prefix(64) {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: if scalar.value >= 0x20, scalar.value != 0x7F { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }

    /// `12`, `0.125`: whole numbers without a fraction.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "NaN" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
