// The one JSON parser of OAuthFlow: catalogs, token/device/error responses, discovery, JWKS, JWTs,
// userinfo, introspection and stored entries all go through it.

extension JSONValue {
    /// Where and why the text is not JSON; the reason never quotes the text.
    struct SyntaxError: Error {
        var reason: String
        var line: Int
        var column: Int
    }

    /// The deepest nesting accepted; deeper documents are refused, never recursed into.
    static let maximumDepth = 64

    /// Parses `bytes` (RFC 8259; trailing commas before `]` and `}` accepted; a duplicate member
    /// name in one object refused).
    static func parse(_ bytes: [UInt8]) throws(SyntaxError) -> JSONValue {
        var parser = Parser(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
        parser.skipWhitespace()
        guard parser.peek() != nil else { throw parser.error("the document is empty") }
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.peek() == nil else { throw parser.error("unexpected text after the top-level value") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func peek(_ ahead: Int = 0) -> UInt8? {
            index + ahead < bytes.count ? bytes[index + ahead] : nil
        }

        mutating func skipWhitespace() {
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        /// An error at `offset` (default: here), with a 1-based line and a column counted in characters.
        func error(_ reason: String, at offset: Int? = nil) -> SyntaxError {
            let end = min(offset ?? index, bytes.count)
            var line = 1
            var column = 1
            for byte in bytes[..<end] {
                if byte == 0x0A {
                    line += 1
                    column = 1
                } else if byte & 0xC0 != 0x80 {   // count UTF-8 lead bytes only
                    column += 1
                }
            }
            return SyntaxError(reason: reason, line: line, column: column)
        }

        mutating func parseValue(depth: Int) throws(SyntaxError) -> JSONValue {
            guard depth < JSONValue.maximumDepth else {
                throw error("values are nested more than \(JSONValue.maximumDepth) levels deep")
            }
            guard let byte = peek() else { throw error("the document ends where a value was expected") }
            switch byte {
            case UInt8(ascii: "{"): return try parseObject(depth: depth)
            case UInt8(ascii: "["): return try parseArray(depth: depth)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
            case UInt8(ascii: "/"): throw error("comments are not allowed in JSON")
            case UInt8(ascii: "'"): throw error("strings must be in double quotes")
            default: throw error("expected a value: a string in double quotes, a number, true, false, null, an object or an array")
            }
        }

        mutating func literal(_ word: String) throws(SyntaxError) {
            let expected = Array(word.utf8)
            guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected else {
                throw error("expected a value: strings must be in double quotes, and true, false and null in lowercase")
            }
            index += expected.count
        }

        mutating func parseObject(depth: Int) throws(SyntaxError) -> JSONValue {
            index += 1   // {
            skipWhitespace()
            if peek() == UInt8(ascii: "}") {
                index += 1
                return .object([:])
            }
            // A token response's members without a rehash. Made at this capacity rather than grown
            // to it: `reserveCapacity` on an empty dictionary is not specialized and looks its
            // storage type up at run time (about 1 000 instructions a fetch).
            var members = [String: JSONValue](minimumCapacity: 8)
            while true {
                guard let byte = peek() else { throw error("the document ends inside an object") }
                guard byte == UInt8(ascii: "\"") else { throw error("expected a member name in double quotes") }
                let nameStart = index
                let name = try parseString()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after a member name") }
                index += 1
                skipWhitespace()
                // One hash per member: the insert reports a name that was there already.
                guard members.updateValue(try parseValue(depth: depth + 1), forKey: name) == nil else {
                    throw error("the member \"\(Self.printable(name))\" appears twice in one object", at: nameStart)
                }
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","):
                    index += 1
                    skipWhitespace()
                    if peek() == UInt8(ascii: "}") {   // a trailing comma
                        index += 1
                        return .object(members)
                    }
                case UInt8(ascii: "}"):
                    index += 1
                    return .object(members)
                case nil:
                    throw error("the document ends inside an object")
                default:
                    throw error("expected ',' or '}' after an object member")
                }
            }
        }

        mutating func parseArray(depth: Int) throws(SyntaxError) -> JSONValue {
            index += 1   // [
            var items: [JSONValue] = []
            skipWhitespace()
            if peek() == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                items.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","):
                    index += 1
                    skipWhitespace()
                    if peek() == UInt8(ascii: "]") {   // a trailing comma
                        index += 1
                        return .array(items)
                    }
                case UInt8(ascii: "]"):
                    index += 1
                    return .array(items)
                case nil:
                    throw error("the document ends inside an array")
                default:
                    throw error("expected ',' or ']' after an array element")
                }
            }
        }

        mutating func parseString() throws(SyntaxError) -> String {
            let start = index
            index += 1   // "
            // Fast path: a string without escapes becomes its bytes between the quotes, uncopied.
            var scan = index
            var ascii = true
            while scan < bytes.count {
                let byte = bytes[scan]
                if byte == UInt8(ascii: "\"") {
                    let first = index
                    // ASCII is valid UTF-8 as it is: `String(decoding:)` then copies it without the
                    // generic validation `String(validating:)` runs (a few hundred instructions a string).
                    let text = bytes.withUnsafeBufferPointer { buffer in
                        let slice = UnsafeBufferPointer(rebasing: buffer[first..<scan])
                        return ascii ? String(decoding: slice, as: UTF8.self) : String(validating: slice, as: UTF8.self)
                    }
                    guard let text else { throw error("a string is not valid UTF-8", at: start) }
                    index = scan + 1
                    return text
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                if byte >= 0x80 { ascii = false }
                scan += 1
            }
            // An escape, a control character or the end: go on byte by byte from there.
            var buffer = Array(bytes[index..<scan])
            index = scan
            while true {
                guard let byte = peek() else { throw error("a string is not closed", at: start) }
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    guard let text = String(validating: buffer, as: UTF8.self) else {
                        throw error("a string is not valid UTF-8", at: start)
                    }
                    return text
                case UInt8(ascii: "\\"):
                    index += 1
                    try parseEscape(into: &buffer)
                case 0x00..<0x20:
                    throw error("control characters such as line breaks must be escaped inside strings")
                default:
                    buffer.append(byte)
                    index += 1
                }
            }
        }

        mutating func parseEscape(into buffer: inout [UInt8]) throws(SyntaxError) {
            guard let byte = peek() else { throw error("a string is not closed") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(byte)
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "u"):
                var value = try hexQuad()
                if (0xD800...0xDBFF).contains(value) {
                    guard peek() == UInt8(ascii: "\\"), peek(1) == UInt8(ascii: "u") else {
                        throw error("a \\u escape has a high surrogate without its low surrogate")
                    }
                    index += 2
                    let low = try hexQuad()
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw error("a \\u escape has a high surrogate without its low surrogate")
                    }
                    value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(value) {
                    throw error("a \\u escape has a low surrogate without its high surrogate")
                }
                guard let scalar = Unicode.Scalar(value) else { throw error("a \\u escape is not a Unicode scalar") }
                UTF8.encode(scalar) { buffer.append($0) }
            default:
                throw error("invalid escape sequence; JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX")
            }
        }

        mutating func hexQuad() throws(SyntaxError) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let digit = peek().flatMap(ASCIIText.hexValue) else { throw error("a \\u escape needs four hex digits") }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        mutating func parseNumber() throws(SyntaxError) -> String {
            let start = index
            func isDigit(_ byte: UInt8?) -> Bool { byte.map { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } ?? false }
            if peek() == UInt8(ascii: "-") { index += 1 }
            guard isDigit(peek()) else { throw error("a number needs a digit after '-'") }
            if peek() == UInt8(ascii: "0") {
                index += 1
                guard !isDigit(peek()) else { throw error("numbers must not have leading zeros") }
            } else {
                while isDigit(peek()) { index += 1 }
            }
            if peek() == UInt8(ascii: ".") {
                index += 1
                guard isDigit(peek()) else { throw error("a number needs a digit after '.'") }
                while isDigit(peek()) { index += 1 }
            }
            if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
                index += 1
                if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
                guard isDigit(peek()) else { throw error("a number needs a digit in its exponent") }
                while isDigit(peek()) { index += 1 }
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        /// A member name fit for a message: printable ASCII, at most 64 characters.
        static func printable(_ name: String) -> String {
            String(String.UnicodeScalarView(name.unicodeScalars.filter { (0x20...0x7E).contains($0.value) }.prefix(64)))
        }
    }
}
