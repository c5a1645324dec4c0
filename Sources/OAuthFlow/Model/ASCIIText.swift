/// Byte-level text helpers for the ASCII syntax of HTTP, URLs and forms.
///
/// The library builds on FoundationEssentials alone, which has no `CharacterSet`,
/// `trimmingCharacters(in:)` or `removingPercentEncoding`; protocol syntax is ASCII anyway, so
/// these work on UTF-8 bytes: an ASCII byte never occurs inside a multi-byte character, so every
/// index they cut at is a character boundary.
package enum ASCIIText {
    /// True for an ASCII space or horizontal tab: HTTP's optional whitespace (RFC 9110 §5.6.3).
    @inline(__always)
    package static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// True for a space, tab, carriage return or line feed.
    @inline(__always)
    package static func isBlankOrNewline(_ byte: UInt8) -> Bool { isBlank(byte) || byte == 0x0D || byte == 0x0A }

    /// True for `0`–`9`, `A`–`Z` and `a`–`z`.
    @inline(__always)
    package static func isAlphanumeric(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"): true
        default: false
        }
    }

    /// True for a `tchar` of RFC 9110 §5.6.2, what a method, a field name or an auth scheme is made of:
    /// a letter, a digit, a backtick or one of `!#$%&'*+-.^_|~`.
    package static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }

    /// True for an RFC 9110 token: one or more ``isTokenCharacter(_:)``.
    package static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy(isTokenCharacter)
    }

    /// `text` without the bytes `drop` matches at either end.
    package static func trimming(_ text: Substring, where drop: (UInt8) -> Bool) -> String {
        let bytes = text.utf8
        guard let first = bytes.firstIndex(where: { !drop($0) }), let last = bytes.lastIndex(where: { !drop($0) }) else { return "" }
        return String(text[first...last])
    }

    /// `text` without the bytes `drop` matches at either end.
    package static func trimming(_ text: String, where drop: (UInt8) -> Bool) -> String { trimming(text[...], where: drop) }

    /// `text` without spaces and tabs at either end.
    package static func trimmingBlanks(_ text: Substring) -> String { trimming(text, where: isBlank) }

    /// `text` without spaces and tabs at either end.
    package static func trimmingBlanks(_ text: String) -> String { trimming(text[...], where: isBlank) }

    /// `text` without spaces, tabs, carriage returns and line feeds at either end.
    package static func trimmingBlanksAndNewlines(_ text: String) -> String { trimming(text[...], where: isBlankOrNewline) }

    /// True when `a` and `b` are equal ignoring the case of ASCII letters (header names, RFC 9110 §5.1).
    package static func equalsIgnoringCase<A: StringProtocol, B: StringProtocol>(_ a: A, _ b: B) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { lowercase($0) == lowercase($1) }
    }

    /// `byte` with an ASCII capital letter made small; any other byte as it is.
    @inline(__always)
    package static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    /// `text` with every `byte` replaced by `replacement`.
    package static func replacing(_ byte: UInt8, in text: String, with replacement: String) -> String {
        guard text.utf8.contains(byte) else { return text }
        return String(decoding: replacingBytes(CollectionOfOne(byte), in: text, with: replacement), as: UTF8.self)
    }

    /// `text` with every occurrence of `needle` replaced by `replacement`, compared as UTF-8 bytes
    /// (never as `Character`s: a combining mark after a match must not hide it, as it would in a
    /// grapheme-wise search; a match of valid UTF-8 always starts and ends on scalar boundaries).
    package static func replacing(_ needle: String, in text: String, with replacement: String) -> String {
        guard !needle.isEmpty else { return text }
        return String(decoding: replacingBytes(needle.utf8, in: text, with: replacement), as: UTF8.self)
    }

    private static func replacingBytes<Needle: Collection<UInt8>>(_ needle: Needle, in text: String, with replacement: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        let pattern = Array(needle)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == pattern[0], bytes.count - index >= pattern.count, bytes[index..<index + pattern.count].elementsEqual(pattern) {
                out.append(contentsOf: replacement.utf8)
                index += pattern.count
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    /// The range of the first occurrence of the ASCII `needle` in `text`, or nil.
    package static func firstRange(of needle: StaticString, in text: Substring) -> Range<Substring.Index>? {
        let pattern = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        guard let head = pattern.first else { return nil }
        let bytes = text.utf8
        var start = bytes.startIndex
        while let candidate = bytes[start...].firstIndex(of: head) {
            var end = candidate
            var matched = true
            for byte in pattern {
                guard end < bytes.endIndex, bytes[end] == byte else { matched = false; break }
                end = bytes.index(after: end)
            }
            if matched { return candidate..<end }
            start = bytes.index(after: candidate)
        }
        return nil
    }

    /// `text` with `%XX` escapes decoded; nil when an escape is malformed (not two hex digits) or the
    /// decoded bytes are not UTF-8: what `removingPercentEncoding` answered.
    package static func removingPercentEncoding(_ text: String) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The value of one hex digit, or nil.
    package static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
