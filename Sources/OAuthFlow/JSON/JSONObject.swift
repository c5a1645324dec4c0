#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON object read field by field into typed values, with every failure a typed error that
/// names the member and the problem, never the value.
///
/// Every decoder of a server's answer (token, device, error, discovery, JWKS, JWT, userinfo,
/// introspection) and of a stored entry reads through this. Numbers are range-checked before
/// they are converted, so `9223372036854775808`, `1e308`, `-1` or `1.5` where a count of seconds
/// belongs is an error, never a trap.
struct JSONObject {
    let members: [String: JSONValue]
    /// Builds the error for a reason such as `expires_in must be a whole number`.
    let failure: (String) -> OAuthError

    /// Reads `value` as an object; `what` names the document in the error when it is not one.
    init(_ value: JSONValue, what: String, failure: @escaping (String) -> OAuthError) throws(OAuthError) {
        guard case .object(let members) = value else { throw failure("\(what) must be a JSON object, found \(value.kind)") }
        self.members = members
        self.failure = failure
    }

    init(members: [String: JSONValue], failure: @escaping (String) -> OAuthError) {
        self.members = members
        self.failure = failure
    }

    func fail(_ reason: String) -> OAuthError { failure(reason) }

    /// The member, or nil when it is absent or `null`.
    func value(_ key: String) -> JSONValue? {
        // A pattern, not `!= .null`: the synthesized `==` copies both values to compare them.
        guard let value = Self.member(key, of: members) else { return nil }
        if case .null = value { return nil }
        return value
    }

    /// `members[key]`; for an object of a few members (a token or error response) the names are
    /// compared one by one, which costs less than hashing `key`. Same `String` equality either way.
    static func member(_ key: String, of members: [String: JSONValue]) -> JSONValue? {
        guard members.count <= 8 else { return members[key] }
        var index = members.startIndex
        while index != members.endIndex {
            if members.keys[index] == key { return members.values[index] }
            members.formIndex(after: &index)
        }
        return nil
    }

    func contains(_ key: String) -> Bool { value(key) != nil }

    /// A string member; nil when absent or `null`.
    /// - Throws: when present with another type.
    func string(_ key: String) throws(OAuthError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else { throw fail("\(key) must be a string, found \(value.kind)") }
        return text
    }

    /// A string member that must be present and not empty.
    func requiredString(_ key: String) throws(OAuthError) -> String {
        guard let text = try string(key), !text.isEmpty else { throw fail("\(key) is missing") }
        return text
    }

    /// A boolean member; nil when absent or `null`.
    func bool(_ key: String) throws(OAuthError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw fail("\(key) must be true or false, found \(value.kind)") }
        return flag
    }

    /// A whole number in `range`; nil when absent or `null`.
    ///
    /// With `acceptsString`, a string holding such a number is read too (Azure sends `"3599"`).
    /// - Throws: for a fraction, a number outside `range` (however large), or another type.
    func integer(_ key: String, in range: ClosedRange<Int>, acceptsString: Bool = false) throws(OAuthError) -> Int? {
        guard let value = value(key) else { return nil }
        let number: Int?
        switch value {
        case .number(let text):
            number = JSONValue.wholeNumber(text)
        case .string(let text) where acceptsString:
            let trimmed = ASCIIText.trimmingBlanks(text)
            number = trimmed.utf8.allSatisfy({ (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x2B })
                ? Int(trimmed) : nil
        default:
            throw fail("\(key) must be a number, found \(value.kind)")
        }
        guard let number, range.contains(number) else {
            throw fail("\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// A point in time given as seconds since 1970 (a JWT `NumericDate`, RFC 7519 §2), fractions
    /// allowed, between 1970 and the year 9999; nil when absent or `null`.
    func date(_ key: String) throws(OAuthError) -> Date? {
        guard let value = value(key) else { return nil }
        guard case .number(let text) = value, let seconds = Double(text), seconds.isFinite else {
            throw fail("\(key) must be a number of seconds since 1970, found \(value.kind)")
        }
        guard (0...JSONObject.latestDate).contains(seconds) else {
            throw fail("\(key) must be a time between 1970 and 9999")
        }
        return Date(timeIntervalSince1970: seconds)
    }

    /// 9999-12-31T23:59:59Z: later times are refused rather than carried into date arithmetic.
    static let latestDate: Double = 253_402_300_799

    /// An array of strings; nil when absent or `null`.
    func strings(_ key: String) throws(OAuthError) -> [String]? {
        guard let value = value(key) else { return nil }
        guard case .array(let items) = value else { throw fail("\(key) must be an array of strings, found \(value.kind)") }
        var result: [String] = []
        result.reserveCapacity(items.count)
        for item in items {
            guard case .string(let text) = item else { throw fail("\(key) must hold only strings, found \(item.kind)") }
            result.append(text)
        }
        return result
    }

    /// A string or an array of strings (a JWT `aud`, RFC 7519 §4.1.3); nil when absent or `null`.
    func stringOrStrings(_ key: String) throws(OAuthError) -> [String]? {
        if case .string(let text)? = value(key) { return [text] }
        return try strings(key)
    }

    /// A nested object; nil when absent or `null`.
    func object(_ key: String) throws(OAuthError) -> JSONObject? {
        guard let value = value(key) else { return nil }
        guard case .object(let members) = value else { throw fail("\(key) must be an object, found \(value.kind)") }
        return JSONObject(members: members, failure: failure)
    }

    /// An absolute URL with a scheme and host, written in visible ASCII; nil when absent or `null`.
    func url(_ key: String) throws(OAuthError) -> URL? {
        guard let text = try string(key) else { return nil }
        // A URI is visible ASCII (RFC 3986 §2); Foundation would percent-encode a space, a newline or
        // an escape sequence and accept the result, so a server could slip them into what is shown.
        guard text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw fail("\(key) holds characters a URI cannot have (RFC 3986 §2)")
        }
        guard let url = URL(string: text), url.scheme != nil, url.host != nil else { throw fail("\(key) is not an absolute URL") }
        return url
    }
}
