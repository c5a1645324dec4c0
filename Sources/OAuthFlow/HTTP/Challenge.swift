/// An authentication challenge from a `WWW-Authenticate` header (RFC 9110 §11.6.1, formerly
/// RFC 7235 §4.1): a scheme and its parameters (names lower-cased, values unquoted), or a token68.
///
/// The one parser of that header: ``AuthorizingTransport`` asks it whether a 401 says
/// `invalid_token`, and ``BearerChallenge`` reads a Bearer challenge's RFC 6750 §3 error from it.
/// Grammar (RFC 9110 §11.2): `challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]`,
/// `auth-param = token BWS "=" BWS ( token / quoted-string )`; several challenges (or several
/// header lines joined by commas) are separated by commas, and a comma inside a quoted string is
/// part of the value. Schemes and parameter names are case-insensitive; the first value of a
/// repeated parameter wins.
struct Challenge: Sendable, Equatable {
    var scheme: String
    var parameters: [String: String] = [:]
    var token68: String?

    /// The longest header value parsed; the rest is ignored (a server cannot make us work harder).
    static let maximumLength = 8192

    /// True for the `Bearer` scheme in any case (RFC 9110 §11.1: schemes are case-insensitive).
    var isBearer: Bool { scheme.lowercased() == "bearer" }

    /// True when `header` holds a Bearer challenge with `error="invalid_token"`
    /// ([RFC 6750 §3.1](https://www.rfc-editor.org/rfc/rfc6750#section-3.1)): the access token
    /// expired, was revoked, or is otherwise not accepted, so a new one may succeed.
    static func isInvalidBearerToken(_ header: String?) -> Bool {
        guard let header else { return false }
        return parse(header).contains { $0.isBearer && $0.parameters["error"] == "invalid_token" }
    }

    /// Parses a header value that may hold several challenges, as several header lines joined by
    /// commas do. Unparsable input ends the list (what was read before it is kept); nothing traps.
    static func parse(_ header: String) -> [Challenge] {
        var parser = Parser(bytes: Array(header.utf8.prefix(maximumLength)))
        return parser.challenges()
    }

    /// Why `header` cannot be acted on, or nil when it can: longer than ``maximumLength`` (a value
    /// cut there could change meaning), or holding a control character other than a tab, which
    /// neither a token nor a quoted-string may carry (RFC 9110 §5.6.2, §5.6.4). What a resource's
    /// challenge asks for is shown to people and put into an authorization request, so such a
    /// header is refused as a whole rather than read in part.
    static func problem(in header: String) -> String? {
        guard header.utf8.count <= maximumLength else { return "is longer than \(maximumLength) bytes" }
        guard header.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
            return "holds a control character (RFC 9110 §5.6.4)"
        }
        return nil
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        /// RFC 9110 §11.2 token68 characters (before its trailing `=`s).
        static func isToken68Byte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return Array("-._~+/".utf8).contains(byte)
            }
        }

        var atEnd: Bool { index >= bytes.count }
        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpaces() {
            while let byte = current, byte == 0x20 || byte == 0x09 { index += 1 }
        }

        mutating func skipSpacesAndCommas() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == UInt8(ascii: ",") { index += 1 }
        }

        mutating func token() -> String? {
            let start = index
            while let byte = current, ASCIIText.isTokenCharacter(byte) { index += 1 }
            return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
        }

        /// A quoted-string after its opening quote, with `\` escapes removed; nil when unterminated.
        mutating func quotedRest() -> String? {
            var value: [UInt8] = []
            while let byte = current {
                index += 1
                switch byte {
                case UInt8(ascii: "\""): return String(decoding: value, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escaped = current else { return nil }
                    value.append(escaped)
                    index += 1
                default: value.append(byte)
                }
            }
            return nil
        }

        mutating func challenges() -> [Challenge] {
            var result: [Challenge] = []
            while true {
                skipSpacesAndCommas()
                guard !atEnd, let scheme = token() else { return result }
                var challenge = Challenge(scheme: scheme)
                skipSpaces()
                if let token68 = token68() {
                    challenge.token68 = token68
                } else {
                    // #auth-param, until a token that is not followed by "=" starts the next challenge.
                    while true {
                        skipSpacesAndCommas()
                        let mark = index
                        guard let name = token() else { break }
                        skipSpaces()
                        guard current == UInt8(ascii: "=") else {
                            index = mark  // the next challenge's scheme
                            break
                        }
                        index += 1
                        skipSpaces()
                        let value: String?
                        if current == UInt8(ascii: "\"") {
                            index += 1
                            value = quotedRest()
                        } else {
                            value = token()
                        }
                        guard let value else { return result + [challenge] }  // broken: keep what was read
                        let key = name.lowercased()
                        if challenge.parameters[key] == nil { challenge.parameters[key] = value }
                    }
                }
                result.append(challenge)
            }
        }

        /// A token68 (`1*tchar68 *"="`) when one stands here alone, up to a comma or the end;
        /// `name=value` is a parameter instead.
        mutating func token68() -> String? {
            var probe = index
            while probe < bytes.count, Self.isToken68Byte(bytes[probe]) { probe += 1 }
            guard probe > index else { return nil }
            while probe < bytes.count, bytes[probe] == UInt8(ascii: "=") { probe += 1 }
            let end = probe
            while probe < bytes.count, bytes[probe] == 0x20 || bytes[probe] == 0x09 { probe += 1 }
            guard probe == bytes.count || bytes[probe] == UInt8(ascii: ",") else { return nil }
            let value = String(decoding: bytes[index..<end], as: UTF8.self)
            index = probe
            return value
        }
    }
}

extension BearerChallenge {
    /// The `error`, `error_description` and `error_uri` of the first Bearer challenge in `header`
    /// that has a non-empty `error` (RFC 6750 §3); nil without one. Read by ``Challenge/parse(_:)``.
    static func parse(_ header: String) -> ErrorResponse? {
        guard let challenge = Challenge.parse(header).first(where: { $0.isBearer && !($0.parameters["error"] ?? "").isEmpty }),
              let code = challenge.parameters["error"]
        else { return nil }
        return ErrorResponse(code: .init(rawValue: code), errorDescription: challenge.parameters["error_description"],
                             errorURI: challenge.parameters["error_uri"])
    }
}
