import Foundation
import OAuthFlow

/// A JSON value with ordered object keys, so every line starts with `"state"`.
enum JSON: Sendable, Equatable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case null
    case array([JSON])
    case object([(String, JSON)])

    static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.text == rhs.text }

    static func string(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }
    static func strings(_ values: [String]) -> JSON { .array(values.map(JSON.string)) }
    static func date(_ value: Date?) -> JSON { value.map { .string(Timestamps.iso8601($0)) } ?? .null }

    /// Compact JSON on one line.
    var text: String {
        switch self {
        case .string(let value): return Self.quote(value)
        case .int(let value): return String(value)
        case .bool(let value): return value ? "true" : "false"
        case .null: return "null"
        case .array(let values): return "[" + values.map(\.text).joined(separator: ",") + "]"
        case .object(let pairs): return "{" + pairs.map { Self.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    /// The text and a newline: one JSON Lines record.
    var line: String { text + "\n" }

    private static func quote(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{2028}": out += "\\u2028"
            case "\u{2029}": out += "\\u2029"
            default:
                // Control characters, C1 and bidi overrides too: a JSON line on a terminal cannot draw.
                if DisplayText.isUnsafe(scalar) {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

enum Timestamps {
    /// `2026-05-01T12:00:00Z`.
    static func iso8601(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date)
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
