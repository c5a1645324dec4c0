#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

// The CLI's JSON output goes through the library's one JSON writer (OAuthFlow's JSON/ folder),
// which escapes every control and bidirectional character, so a JSON line on a terminal cannot draw.
extension JSONValue {
    /// A string, or `null` for nil.
    static func string(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
    /// An array of strings.
    static func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
    /// An ISO 8601 time (`2026-05-01T12:00:00Z`), or `null` for nil.
    static func date(_ value: Date?) -> JSONValue { value.map { .string(Timestamps.iso8601($0)) } ?? .null }
    /// A whole number.
    static func int(_ value: Int) -> JSONValue { .number(value) }

    /// One JSON Lines record: an object with its members in the order given, and a newline.
    static func line(_ members: [(String, JSONValue)]) -> String { text(orderedMembers: members) + "\n" }
}

enum Timestamps {
    /// `2026-05-01T12:00:00Z`.
    static func iso8601(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle())
    }

    /// `in 59m`, `3h ago`, `in 2d`: a short distance for people.
    static func relative(_ date: Date, now: Date) -> String {
        let seconds = wholeSeconds(date.timeIntervalSince(now).rounded())
        let magnitude = abs(seconds)
        let text: String
        switch magnitude {
        case ..<60: text = "\(magnitude)s"
        case ..<3600: text = "\(magnitude / 60)m"
        case ..<86_400: text = "\(magnitude / 3600)h\(magnitude % 3600 / 60 > 0 ? "\(magnitude % 3600 / 60)m" : "")"
        default: text = "\(magnitude / 86_400)d"
        }
        return seconds >= 0 ? "in \(text)" : "\(text) ago"
    }

    /// `interval` as whole seconds, clamped to ±10^15 (about 30 million years) and 0 for NaN, so
    /// no date a server or a file chose can trap the conversion to `Int`.
    static func wholeSeconds(_ interval: Double) -> Int {
        guard interval.isFinite else { return 0 }
        return Int(min(max(interval, -1e15), 1e15))
    }

    /// `14:59` or `1:02:03`: a countdown.
    static func clock(_ seconds: Int) -> String {
        let seconds = max(0, seconds)
        let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return h > 0 ? "\(h):\(two(m)):\(two(s))" : "\(m):\(two(s))"
    }
}
