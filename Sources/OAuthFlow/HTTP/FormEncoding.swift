#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `application/x-www-form-urlencoded` as RFC 6749 Appendix B and the WHATWG URL spec define it.
enum FormEncoding {
    /// Unreserved characters stay; space becomes `+`; every other byte is percent-encoded.
    static func escape(_ string: String) -> String {
        var contiguous = string
        if contiguous.withUTF8(isAllUnreserved) { return string }   // nothing to escape: the common case
        var out: [UInt8] = []
        appendEscaped(string, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes pairs in order as `a=b&c=d`.
    static func encode(_ fields: [(String, String)]) -> String {
        String(decoding: bytes(fields), as: UTF8.self)
    }

    /// The bytes of ``encode(_:)`` as a request body (written straight into one buffer: a `String`
    /// grown and then copied into `Data` cost about 2 500 instructions more on every token request).
    static func body(_ fields: [(String, String)]) -> Data {
        Data(copying: bytes(fields))
    }

    /// ``encode(_:)``'s bytes.
    private static func bytes(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "&")) }
            appendEscaped(field.0, to: &out)
            out.append(UInt8(ascii: "="))
            appendEscaped(field.1, to: &out)
        }
        return out
    }

    /// ``escape(_:)`` of `string`, appended as bytes.
    private static func appendEscaped(_ string: String, to out: inout [UInt8]) {
        var string = string
        string.withUTF8 { bytes in
            if isAllUnreserved(bytes) {
                out.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                if isUnreserved(byte) {
                    out.append(byte)
                } else if byte == UInt8(ascii: " ") {
                    out.append(UInt8(ascii: "+"))
                } else {
                    out.append(UInt8(ascii: "%"))
                    out.append(hexDigit(byte >> 4))
                    out.append(hexDigit(byte & 0x0F))
                }
            }
        }
    }

    /// True when no byte of `bytes` needs escaping: every byte looked at, without a branch per byte.
    private static func isAllUnreserved(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var escapes: UInt8 = 0
        for byte in bytes { escapes |= isUnreserved(byte) ? 0 : 1 }
        return escapes == 0
    }

    /// An ASCII letter or digit, `-`, `.`, `_` or `*`.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        let letter = (byte | 0x20) &- UInt8(ascii: "a") < 26
        let digit = byte &- UInt8(ascii: "0") < 10
        let mark = byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "*")
        return letter || digit || mark
    }

    /// The upper-case hex digit of `value` (0–15).
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    /// Decodes `a=b&c=d` into ordered pairs; `+` is a space; malformed escapes are kept literally.
    static func decode(_ string: String) -> [(String, String)] {
        string.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = unescape(String(parts[0]))
            let value = parts.count > 1 ? unescape(String(parts[1])) : ""
            return (name, value)
        }
    }

    /// Encodes pairs in order for a URL query (RFC 3986 §3.4): as ``encode(_:)``, with a space as `%20`.
    static func encodeQuery(_ fields: [(String, String)]) -> String {
        ASCIIText.replacing(UInt8(ascii: "+"), in: encode(fields), with: "%20")
    }

    static func unescape(_ string: String) -> String {
        let spaced = ASCIIText.replacing(UInt8(ascii: "+"), in: string, with: " ")
        return ASCIIText.removingPercentEncoding(spaced) ?? spaced
    }
}

extension Data {
    /// `bytes` copied in one go (`Data(bytes)` goes through the generic sequence initializer, and
    /// `Data(buffer:)` costs twice `Data(bytes:count:)`).
    init(copying bytes: [UInt8]) {
        self = bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return Data() }
            return Data(bytes: base, count: buffer.count)
        }
    }

    /// The UTF-8 bytes of `text`, copied in one go (`Data(text.utf8)` takes them one at a time
    /// through a generic initializer: about 1 400 instructions for a short string).
    init(utf8Of text: String) {
        var text = text
        self = text.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return Data() }
            return Data(bytes: base, count: bytes.count)
        }
    }
}
