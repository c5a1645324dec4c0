#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The characters a token may hold before it is stored, printed or put in a header.
///
/// - `access_token`: one or more visible ASCII characters, 0x21–0x7E. RFC 6749 App. A.12 allows
///   VSCHAR (0x20–0x7E); the space is refused too, because the token goes after `Bearer ` in a
///   header and `$(authflow token P)` splits on it. RFC 6750 §2.1's stricter `b64token` is not
///   required: real providers use other visible characters (Facebook's tokens contain `|`).
///   CR, LF, NUL and every other control character are refused, so a token can never inject a
///   header line or reach a terminal as a control sequence.
/// - `refresh_token`: VSCHAR, 0x20–0x7E (RFC 6749 App. A.17); it only travels form-encoded.
/// - `id_token`: the JWS/JWE compact alphabet, base64url characters and `.` (RFC 7515 §7.1).
enum TokenSyntax {
    static func isAccessToken(_ text: String) -> Bool { allBytes(of: text, in: 0x21...0x7E) }

    static func isRefreshToken(_ text: String) -> Bool { allBytes(of: text, in: 0x20...0x7E) }

    /// True when `text` is not empty and each of its UTF-8 bytes is in `range`: one pass over the
    /// contiguous bytes (`utf8.allSatisfy` walks a `String.UTF8View` index by index: about four
    /// times the instructions, on every fetch).
    private static func allBytes(of text: String, in range: ClosedRange<UInt8>) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard !bytes.isEmpty else { return false }
            let low = range.lowerBound
            let width = range.upperBound &- low
            // Every byte looked at, without a branch per byte (the compiler vectorizes it); a byte
            // below `low` wraps around to above `width`.
            var outside: UInt8 = 0
            for byte in bytes { outside |= byte &- low > width ? 1 : 0 }
            return outside == 0
        }
    }

    static func isCompactJOSE(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                return true
            default:
                return false
            }
        }
    }

    /// True for `Bearer` in any case (RFC 6750 §4, RFC 6749 §7.1): the only type OAuthFlow can use.
    static func isBearer(_ tokenType: String) -> Bool { tokenType.lowercased() == "bearer" }

    /// True for `DPoP` in any case (RFC 9449 §5, §7.1).
    static func isDPoP(_ tokenType: String) -> Bool { tokenType.lowercased() == "dpop" }

    /// Checks a token set's tokens and type; `fail` builds the error from a reason that names
    /// the member, never its value (a `token_type` is shown escaped and shortened).
    /// `DPoP` (RFC 9449 §5) passes only with `allowsDPoP` (a proof was sent, or a stored set).
    static func check(
        accessToken: String, tokenType: String, refreshToken: String?, idToken: String?,
        names: (access: String, type: String, refresh: String, id: String), allowsDPoP: Bool = false, fail: (String) -> OAuthError
    ) throws(OAuthError) {
        guard isAccessToken(accessToken) else {
            throw fail("\(names.access) holds characters outside visible ASCII 0x21-0x7E (RFC 6749 A.12)")
        }
        guard isBearer(tokenType) || (allowsDPoP && isDPoP(tokenType)) else {
            if isDPoP(tokenType) {
                throw fail("\(names.type) is DPoP, but no DPoP proof was sent (RFC 9449 §5; set \"dpop\" for the provider)")
            }
            throw fail("\(names.type) \"\(DisplayText.escape(String(tokenType.prefix(32))))\" is not supported: OAuthFlow uses Bearer and DPoP tokens (RFC 6750, RFC 9449)")
        }
        if let refreshToken, !isRefreshToken(refreshToken) {
            throw fail("\(names.refresh) holds characters outside VSCHAR 0x20-0x7E (RFC 6749 A.17)")
        }
        if let idToken, !isCompactJOSE(idToken) {
            throw fail("\(names.id) is not in the JWS compact alphabet (RFC 7515 §7.1)")
        }
    }
}
