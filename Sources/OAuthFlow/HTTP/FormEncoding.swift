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
        if contiguous.withUTF8({ $0.allSatisfy(isUnreserved) }) { return string }   // nothing to escape: the common case
        var out = ""
        out.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            if isUnreserved(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else if byte == UInt8(ascii: " ") {
                out.append("+")
            } else {
                out.append("%")
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return out
    }

    private static let hexDigits = Array("0123456789ABCDEF")

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
             UInt8(ascii: "*"):
            return true
        default:
            return false
        }
    }

    /// Encodes pairs in order as `a=b&c=d`.
    static func encode(_ fields: [(String, String)]) -> String {
        var out = ""
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append("&") }
            out.append(escape(field.0))
            out.append("=")
            out.append(escape(field.1))
        }
        return out
    }

    /// The bytes of ``encode(_:)`` as a request body, written straight into one buffer (the
    /// `String` that ``encode(_:)`` grows, then copied into `Data`, cost about 2 500 instructions
    /// more on every token request).
    static func body(_ fields: [(String, String)]) -> Data {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "&")) }
            appendEscaped(field.0, to: &out)
            out.append(UInt8(ascii: "="))
            appendEscaped(field.1, to: &out)
        }
        return Data(copying: out)
    }

    /// ``escape(_:)`` of `string`, appended as bytes.
    private static func appendEscaped(_ string: String, to out: inout [UInt8]) {
        var string = string
        string.withUTF8 { bytes in
            // Nothing to escape (the common case): the bytes in one go, after a check without a
            // branch per byte.
            var escapes: UInt8 = 0
            for byte in bytes {
                let letter = (byte | 0x20) &- UInt8(ascii: "a") < 26
                let digit = byte &- UInt8(ascii: "0") < 10
                let mark = byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "*")
                escapes |= letter || digit || mark ? 0 : 1
            }
            if escapes == 0 {
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

    /// The upper-case hex digit of `value` (0–15), as ``escape(_:)`` writes it.
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
