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
