import OAuthFlow

/// Removes passwords from libpq's and the server's texts before they reach an error.
struct Redactor: Sendable {
    let secrets: [String]

    init(_ secrets: [String?]) {
        // Longest first, so a password that contains another is removed whole.
        self.secrets = Array(Set(secrets.compactMap { $0 }.filter { !$0.isEmpty })).sorted { $0.count > $1.count }
    }

    /// `text` on one line, bounded, without any known secret.
    func clean(_ text: String) -> String {
        var text = ASCIIText.trimmingBlanksAndNewlines(text)
            .split(whereSeparator: \.isNewline).map { ASCIIText.trimmingBlanks($0) }.joined(separator: "; ")
        for secret in secrets { text = ASCIIText.replacing(secret, in: text, with: "<redacted>") }
        let printable = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        return String(printable.prefix(600))
    }
}
