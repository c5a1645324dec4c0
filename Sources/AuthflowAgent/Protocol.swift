#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import OAuthFlow

/// The agent's socket protocol, version 1: one JSON object on one line from the client, one JSON
/// object on one line back, then the agent closes the connection (Documentation/Agent.md).
///
/// - `{"v":1,"token":"P"}` → `{"v":1,"access_token":"…","token_type":"Bearer","expires_at":1767225600,"scopes":["read"]}`
///   (`expires_at`: seconds since 1970, or null);
/// - `{"v":1,"metrics":true}` → `{"v":1,"metrics":"# HELP …"}` (Prometheus text);
/// - any failure → `{"v":1,"error":"CODE","recovery":"…","message":"…"}`.
package enum AgentProtocol {
    /// The version this agent speaks.
    package static let version = 1

    /// What a client asked.
    enum Request: Equatable {
        case token(provider: String)
        case metrics
    }

    /// Reads one request line.
    /// - Returns: the request, or the failure line to answer.
    static func parse(_ line: [UInt8]) -> Result<Request, Failure> {
        var bytes = line
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        if let id = plainTokenRequest(bytes) { return .success(.token(provider: id)) }
        return parseDocument(bytes)
    }

    /// The provider of `{"v":1,"token":"ID"}` written byte for byte so (what agent-client, the
    /// README's socat line and `authflow token` send), read without the JSON parser: the socket
    /// loop answers most requests in this shape, and the parser's objects are most of its own work
    /// per request. Nil for anything else, which ``parseDocument(_:)`` reads; both give the same
    /// result for this shape (AgentTests, "the plain token request").
    static func plainTokenRequest(_ bytes: [UInt8]) -> String? {
        let head = plainHead, tail = plainTail
        guard bytes.count > head.count + tail.count,
              bytes.starts(with: head), bytes[(bytes.count - tail.count)...].elementsEqual(tail)
        else { return nil }
        let id = bytes[head.count..<(bytes.count - tail.count)]
        // Only provider-id bytes: no quote, backslash or control character, so no JSON escape; and
        // what isProviderID(_:) also asks (1 to 128 bytes, not starting with a dot).
        guard id.count <= 128, id.first != UInt8(ascii: "."), id.allSatisfy(isProviderIDByte) else { return nil }
        return String(decoding: id, as: UTF8.self)
    }

    private static let plainHead = Array(#"{"v":1,"token":""#.utf8)
    private static let plainTail = Array(#""}"#.utf8)

    /// Reads one request line (without its `\r`) with the JSON parser.
    static func parseDocument(_ bytes: [UInt8]) -> Result<Request, Failure> {
        let value: JSONValue
        do {
            value = try JSONValue.parse(Data(bytes))
        } catch {
            return .failure(Failure("invalid_request", "the request is not valid JSON; send one object on one line, such as {\"v\":1,\"token\":\"PROVIDER\"}"))
        }
        guard case .object(let members) = value else {
            return .failure(Failure("invalid_request", "the request must be a JSON object, not \(value.kind)"))
        }
        if let version = members["v"], version.integerValue != version_ {
            return .failure(Failure("unsupported_version", "this agent speaks version \(version_) of the protocol"))
        }
        if members["metrics"]?.boolValue == true { return .success(.metrics) }
        if let provider = members["token"] {
            guard let id = provider.stringValue, isProviderID(id) else {
                return .failure(Failure("invalid_request", "\"token\" must be a provider id"))
            }
            return .success(.token(provider: id))
        }
        return .failure(Failure("invalid_request", "the request asks for nothing; send {\"v\":1,\"token\":\"PROVIDER\"} or {\"v\":1,\"metrics\":true}"))
    }

    private static let version_ = version

    /// A failure answer: an error code, what to do next, and a sentence for people. Never a secret.
    struct Failure: Error, Equatable {
        var code: String
        var recovery: String
        var message: String

        init(_ code: String, _ message: String, recovery: String = "fix_request") {
            self.code = code
            self.message = message
            self.recovery = recovery
        }

        /// The failure of a library call; `message` explains it (``AgentHost/explain``).
        init(_ error: OAuthError, message: String) {
            self.code = error.response?.code.rawValue ?? snakeCase(error.code.description)
            self.recovery = AgentProtocol.name(of: error.recovery)
            self.message = message
        }

        var line: String {
            AgentProtocol.line([("v", .number("\(version)")), ("error", .string(code)), ("recovery", .string(recovery)), ("message", .string(message))])
        }
    }

    /// A recovery as a failure answer names it: ``OAuthError/Recovery``'s name in snake case
    /// (`retry_later`, `reauthorize`, `fix_configuration`, `none`).
    package static func name(of recovery: OAuthError.Recovery) -> String { snakeCase(recovery.rawValue) }

    /// The recovery a failure answer names; nil for one of the protocol's own (`fix_request`).
    package static func recovery(named name: String) -> OAuthError.Recovery? {
        OAuthError.Recovery.allCases.first { self.name(of: $0) == name }
    }

    /// A failure line.
    static func failure(_ code: String, _ message: String, recovery: String = "fix_request") -> String {
        Failure(code, message, recovery: recovery).line
    }

    /// The answer to a token request.
    static func token(_ set: TokenSet) -> String {
        let expiry: JSONValue = set.expiresAt.map { .number("\(wholeSeconds($0.timeIntervalSince1970.rounded()))") } ?? .null
        return line([
            ("v", .number("\(version)")), ("access_token", .string(set.accessToken.reveal())), ("token_type", .string(set.tokenType)),
            ("expires_at", expiry), ("scopes", .array(set.scopes.map(JSONValue.string))),
        ])
    }

    /// The answer to a metrics request.
    static func metrics(_ text: String) -> String {
        line([("v", .number("\(version)")), ("metrics", .string(text))])
    }

    /// One answer line: an object with its members in the order given (`"v"` first), and a newline.
    static func line(_ members: [(String, JSONValue)]) -> String { JSONValue.text(orderedMembers: members) + "\n" }

    /// `interval` as whole seconds, clamped to ±10^15 and 0 for NaN, so no expiry a server chose
    /// can trap the conversion to `Int`.
    static func wholeSeconds(_ interval: Double) -> Int {
        guard interval.isFinite else { return 0 }
        return Int(min(max(interval, -1e15), 1e15))
    }

    /// Whether `token` is only visible ASCII (0x21–0x7E), so no answer puts a space, a control
    /// character or a line break into a client's header line.
    static func isHeaderSafe(_ token: Secret) -> Bool {
        token.reveal().utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}

/// `reauthorizationRequired` → `reauthorization_required`.
func snakeCase(_ name: String) -> String {
    var out = ""
    for character in name {
        if character.isUppercase {
            out += "_" + character.lowercased()
        } else {
            out.append(character)
        }
    }
    return out
}

/// The catalog's rule for ids: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
package func isProviderID(_ id: String) -> Bool {
    guard (1...128).contains(id.utf8.count), !id.hasPrefix(".") else { return false }
    return id.utf8.allSatisfy(isProviderIDByte)
}

/// True for a byte a provider id may hold: an ASCII letter or digit, `.`, `_` or `-`.
func isProviderIDByte(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
        || byte == UInt8(ascii: "-")
}
