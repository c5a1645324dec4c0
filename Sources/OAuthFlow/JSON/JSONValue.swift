#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A JSON value as OAuthFlow parses it: booleans distinct from numbers, numbers kept as their text.
///
/// Claims of an ID token (``IDToken/claims``), of userinfo and of an introspection answer are
/// given as `JSONValue`s. Read a member with the subscript, then the typed accessors:
///
/// ```swift
/// if let email = idToken.claims["email"]?.stringValue { … }
/// ```
///
/// Numbers keep the text the server sent, so nothing is lost or rounded; ``integerValue`` and
/// ``doubleValue`` convert it with range checks and never trap. Every document OAuthFlow reads —
/// catalogs, token, device and error responses, discovery, JWKS, JWTs, stored entries — goes
/// through one strict parser (RFC 8259, a member given twice in one object refused).
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, as the text that was sent (for example `3600` or `1.5e3`).
    case number(String)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; member order is not kept.
    case object([String: JSONValue])

    /// The kind of value, for "found …" in messages; never the value itself.
    public var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The member `key` of an object; nil for a missing member or when this is not an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    /// The string, when this is one.
    public var stringValue: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }

    /// The boolean, when this is one.
    public var boolValue: Bool? {
        guard case .bool(let flag) = self else { return nil }
        return flag
    }

    /// The number as a whole `Int`, when this is a number with no fractional part that fits; nil
    /// otherwise (never traps: `1e308` and `9223372036854775808` give nil).
    public var integerValue: Int? {
        guard case .number(let text) = self else { return nil }
        return Self.wholeNumber(text)
    }

    /// The number as a finite `Double`, when this is a number.
    public var doubleValue: Double? {
        guard case .number(let text) = self, let value = Double(text), value.isFinite else { return nil }
        return value
    }

    /// The members, when this is an object.
    public var objectValue: [String: JSONValue]? {
        guard case .object(let members) = self else { return nil }
        return members
    }

    /// The elements, when this is an array.
    public var arrayValue: [JSONValue]? {
        guard case .array(let items) = self else { return nil }
        return items
    }

    /// Parses a JSON document (RFC 8259, at most 64 levels deep, duplicate member names refused).
    ///
    /// - Throws: ``OAuthError`` `.invalidResponse` whose message gives the line, column and reason
    ///   (never the text itself).
    public static func parse(_ data: Data) throws(OAuthError) -> JSONValue {
        do {
            return try parse(Array(data))
        } catch {
            throw OAuthError(.invalidResponse, message: "not valid JSON: \(error.reason) (line \(error.line), column \(error.column))")
        }
    }

    /// A whole number from JSON number text: `3600`, `3600.0`, `3.6e3`; nil for a fraction, or
    /// for anything outside `Int`'s range (checked before converting, so it never traps).
    static func wholeNumber(_ text: String) -> Int? {
        if let exact = Int(text) { return exact }
        guard let value = Double(text), value.isFinite, value.rounded(.towardZero) == value,
              value >= -9.2e18, value <= 9.2e18
        else { return nil }
        return Int(value)
    }
}

extension JSONValue: CustomStringConvertible {
    /// The kind and size, never the content (claims can carry personal data).
    public var description: String {
        switch self {
        case .object(let members): "JSONValue(object with \(members.count) members)"
        case .array(let items): "JSONValue(array of \(items.count))"
        default: "JSONValue(\(kind))"
        }
    }
}
