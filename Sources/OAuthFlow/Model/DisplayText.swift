/// The one escaping function for text shown to a person: server-chosen bytes can never draw on
/// a terminal.
///
/// Use ``escape(_:)`` on anything that came from a server, a file or a flag before printing it:
/// the CLI does for user codes, URLs, scopes, §5.2 errors and messages, and ``OAuthError``'s
/// `description` does for its fields. It throws nothing.
public enum DisplayText {
    /// `text` with every control character written as a visible Swift-style escape such as
    /// `\u{1B}`: C0 (NUL, CR, LF, ESC, …), DEL, C1 (U+0080–U+009F), the bidirectional overrides
    /// and isolates (U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators
    /// (U+2028, U+2029). Other characters, the backslash included, are kept as they are.
    ///
    /// Text made only of control characters therefore prints as something visible, never as nothing.
    public static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            if isUnsafe(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// True for the scalars ``escape(_:)`` rewrites.
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        default: return false
        }
    }
}
