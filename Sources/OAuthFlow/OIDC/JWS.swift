#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A compact JWS (RFC 7515 §7.1) split and decoded, not yet verified.
///
/// Parsing is strict and bounded: exactly three segments, unpadded base64url, a JSON object as
/// header with a string `alg` (a known one, `none` included so that verification can refuse it
/// by name), `kid` and `typ` strings when present, and no `crit` extension (none is implemented,
/// so RFC 7515 §4.1.11 requires refusing any). Failures are ``OAuthError`` `.idTokenRejected` with
/// ``TokenRejection/malformed``, ``TokenRejection/oversized``, ``TokenRejection/algorithmNotAllowed``
/// or ``TokenRejection/unsupportedCritical``; the message names the part, never the token.
package struct JWS: Sendable {
    /// The protected header's members this library reads.
    struct Header: Sendable, Hashable {
        /// `alg` (RFC 7515 §4.1.1).
        let algorithm: JWSAlgorithm
        /// `kid` (RFC 7515 §4.1.4).
        let keyID: String?
        /// `typ` (RFC 7515 §4.1.9).
        let type: String?
    }

    /// The largest compact JWS accepted, in bytes.
    static let maximumSize = 64 * 1024

    let header: Header
    /// The decoded payload bytes.
    package let payload: [UInt8]
    /// ASCII(BASE64URL(header) "." BASE64URL(payload)), what the signature covers.
    package let signingInput: [UInt8]
    /// The decoded signature bytes.
    package let signature: [UInt8]

    /// Parses a compact serialization.
    /// - Throws: ``OAuthError`` `.idTokenRejected` (see the type's documentation for the reasons).
    package init(compact: String) throws(OAuthError) {
        let bytes = Array(compact.utf8)
        guard bytes.count <= Self.maximumSize else {
            throw TokenRejection.oversized.error("the JWS is \(bytes.count) bytes, over the \(Self.maximumSize)-byte limit")
        }
        let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else {
            throw TokenRejection.malformed.error("a compact JWS has 3 dot-separated segments, found \(segments.count)")
        }
        guard !segments[0].isEmpty, let headerBytes = Base64URL.decode(utf8: segments[0]) else {
            throw TokenRejection.malformed.error("the JWS header is not unpadded base64url")
        }
        guard let payload = Base64URL.decode(utf8: segments[1]) else {
            throw TokenRejection.malformed.error("the JWS payload is not unpadded base64url")
        }
        guard !segments[2].isEmpty, let signature = Base64URL.decode(utf8: segments[2]) else {
            throw TokenRejection.malformed.error("the JWS signature is missing or not unpadded base64url")
        }
        header = try Self.parseHeader(headerBytes)
        self.payload = payload
        self.signature = signature
        signingInput = Array(bytes[..<segments[1].endIndex])
    }

    private static func parseHeader(_ bytes: [UInt8]) throws(OAuthError) -> Header {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw TokenRejection.malformed.error("the JWS header is not JSON: \(error.reason)")
        }
        let object = try JSONObject(value, what: "the JWS header") { TokenRejection.malformed.error("JWS header: \($0)") }
        guard let name = try object.string("alg") else { throw TokenRejection.malformed.error("the JWS header has no alg") }
        guard let algorithm = JWSAlgorithm(rawValue: name) ?? (name.lowercased() == "none" ? JWSAlgorithm.none : nil) else {
            throw TokenRejection.algorithmNotAllowed.error("alg \(TokenRejection.printable(name)) is not supported")
        }
        let keyID = try object.string("kid")
        let type = try object.string("typ")
        if let critical = object.value("crit") {
            guard case .array(let names) = critical, !names.isEmpty else {
                throw TokenRejection.malformed.error("crit must be a non-empty array of names (RFC 7515 §4.1.11)")
            }
            let listed = names.compactMap(\.stringValue).map(TokenRejection.printable).joined(separator: ", ")
            throw TokenRejection.unsupportedCritical.error("the JWS requires extensions this library does not implement (crit: \(listed))")
        }
        return Header(algorithm: algorithm, keyID: keyID, type: type)
    }
}
