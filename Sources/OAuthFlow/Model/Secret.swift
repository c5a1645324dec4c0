#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A value that must never be printed: a token, a code, a client secret, a PKCE verifier.
///
/// `description`, `debugDescription`, `dump` and string interpolation show `<redacted>`.
/// Call ``reveal()`` only to put the value on the wire or into a ``SecretStore``.
/// `Secret` is deliberately not `Equatable`; compare with ``constantTimeEquals(_:)``.
/// `Codable` writes the raw value, so encode a `Secret` only into a store.
public struct Secret: Sendable, Codable {
    private let value: String

    /// Wraps a raw secret value.
    public init(_ value: String) { self.value = value }

    /// Returns the raw value; use it only for the wire or for storage.
    public func reveal() -> String { value }

    /// Compares two secrets in time independent of where they differ (`CRYPTO_memcmp`).
    public func constantTimeEquals(_ other: Secret) -> Bool {
        // Over the strings' own UTF-8 storage (made contiguous if it is not), without copies. Two
        // copies of one secret share their storage: equal without reading it, which tells a clock
        // nothing about the bytes.
        var (mine, theirs) = (value, other.value)
        return mine.withUTF8 { a in
            theirs.withUTF8 { b in
                (a.baseAddress == b.baseAddress && a.count == b.count)
                    || ConstantTime.equals(UnsafeRawBufferPointer(a), UnsafeRawBufferPointer(b))
            }
        }
    }

    /// Decodes a secret from a single string value.
    public init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the raw value (stores only).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}

extension Secret: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always `<redacted>`.
    public var description: String { "<redacted>" }
    /// Always `Secret(<redacted>)`.
    public var debugDescription: String { "Secret(<redacted>)" }
    /// A mirror with no children, so `dump` shows nothing of the value.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
