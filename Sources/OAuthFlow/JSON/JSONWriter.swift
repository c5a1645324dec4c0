#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

// Writing JSON text: the one serializer, used for stored entries, ID token claims, the CLI's JSON
// Lines and the testing kit's scripted answers. Every string is escaped the same way: `"`, `\`,
// every control character (C0, DEL, C1), U+2028/U+2029 and the bidirectional controls
// (U+202A–U+202E, U+2066–U+2069), so the text is valid JSON (RFC 8259 §7) that a terminal
// cannot act on, whatever a server put in a claim.
extension JSONValue {
    /// The compact JSON text of this value, object members sorted by name.
    public var jsonText: String {
        var out = ""
        write(into: &out)
        return out
    }

    /// ``jsonText`` as UTF-8 bytes.
    package var jsonData: Data { Data(jsonText.utf8) }

    /// The compact text of an object whose members are written in the order given (for records
    /// read by people, such as JSON Lines that start with `"state"`); each value is written as
    /// ``jsonText`` writes it, so objects nested inside have their members sorted by name.
    /// A name given twice is written twice: give each once.
    package static func text(orderedMembers members: [(String, JSONValue)]) -> String {
        var out = "{"
        for (index, (name, value)) in members.enumerated() {
            if index > 0 { out += "," }
            quote(name, into: &out)
            out += ":"
            value.write(into: &out)
        }
        return out + "}"
    }

    func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): Self.quote(text, into: &out)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out += "," }
                Self.quote(member.key, into: &out)
                out += ":"
                member.value.write(into: &out)
            }
            out += "}"
        }
    }

    static func quote(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where DisplayText.isUnsafe(scalar):
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// A JSON number for `value`.
    package static func number(_ value: Int) -> JSONValue { .number(String(value)) }

    /// A JSON number's text for `value`, exact for every finite double (shortest round-trip form);
    /// `null` for an infinity or NaN, which JSON cannot hold.
    static func number(_ value: Double) -> JSONValue {
        guard value.isFinite else { return .null }
        if value.rounded(.towardZero) == value, abs(value) < 1e15 { return .number(String(Int64(value))) }
        return .number("\(value)")
    }
}
