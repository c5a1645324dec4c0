#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An HTTP request as OAuthFlow sends it.
public struct HTTPRequest: Sendable, Hashable {
    /// `GET` or `POST`.
    public var method: String
    /// The full URL.
    public var url: URL
    /// Header fields, in order.
    public var headers: [(name: String, value: String)]
    /// The body, if any.
    public var body: Data?

    /// Creates a request.
    public init(method: String, url: URL, headers: [(name: String, value: String)] = [], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { ASCIIText.equalsIgnoringCase($0.name, name) }?.value
    }

    /// Equal when method, URL, headers and body match.
    public static func == (lhs: HTTPRequest, rhs: HTTPRequest) -> Bool {
        lhs.method == rhs.method && lhs.url == rhs.url && lhs.body == rhs.body
            && lhs.headers.map { "\($0.name):\($0.value)" } == rhs.headers.map { "\($0.name):\($0.value)" }
    }

    /// Hashes method and URL.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(method)
        hasher.combine(url)
    }
}

/// An HTTP response: status, headers (names lower-cased), body.
public struct HTTPResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// Header fields with lower-cased names.
    public var headers: [String: String]
    /// The body, at most the transport's limit.
    public var body: Data
    /// The HTTP version the response came over ("1.1", "2"), when the transport says (`CurlTransport` does).
    var httpVersion: String?

    /// Creates a response; header names are lower-cased.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }

    /// A response whose header names are lower-case already (a transport that parsed them so).
    init(status: Int, lowercasedHeaders: [String: String], body: Data) {
        self.status = status
        self.headers = lowercasedHeaders
        self.body = body
    }

    /// The `Content-Type` media type without parameters, lower-cased.
    public var mediaType: String? {
        headers["content-type"]?.split(separator: ";").first.map { ASCIIText.trimmingBlanks($0).lowercased() }
    }
}

extension HTTPRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Method, URL without its query, header names and body size: never a header value or the body,
    /// which hold client credentials and tokens.
    public var description: String {
        "HTTPRequest(\(method) \(url.redactedForLog), headers: [\(headers.map(\.name).joined(separator: ", "))], "
            + "body: \(body.map { "\($0.count) bytes" } ?? "none"))"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// The same shape as ``description``.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "method": method, "url": url.redactedForLog, "headers": headers.map(\.name), "bodySize": body?.count as Any,
        ], displayStyle: .struct)
    }
}

extension HTTPResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Status, media type, header names and body size: never a header value or the body, which holds tokens.
    public var description: String {
        "HTTPResponse(status: \(status), \(mediaType ?? "no media type"), headers: [\(headers.keys.sorted().joined(separator: ", "))], "
            + "body: \(body.count) bytes)"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// The same shape as ``description``.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "status": status, "mediaType": mediaType as Any, "headers": headers.keys.sorted(), "bodySize": body.count,
        ], displayStyle: .struct)
    }
}

extension URL {
    /// `scheme://host[:port]/path`, with `?…` in place of any query: safe for logs and messages.
    var redactedForLog: String {
        guard let components = URLComponents(url: self, resolvingAgainstBaseURL: false), let host = components.host else {
            return "<url>"
        }
        let port = components.port.map { ":\($0)" } ?? ""
        let query = components.percentEncodedQuery == nil ? "" : "?…"
        return "\(components.scheme ?? "?")://\(host)\(port)\(components.percentEncodedPath)\(query)"
    }
}

/// The seam through which every request leaves OAuthFlow.
///
/// The default is ``CurlTransport``; `URLSessionTransport` is in the `OAuthFlowURLSession` product.
/// Implement it to route through your own HTTP client,
/// add tracing, or script responses in tests:
///
/// ```swift
/// struct RecordingTransport: HTTPTransport {
///     let base: any HTTPTransport
///     func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
///         print(request.method, request.url.path)   // never the body: it holds secrets
///         return try await base.send(request)
///     }
/// }
/// ```
///
/// Implementations must not follow redirects for token requests (RFC 9700 §4.11) and should
/// refuse bodies larger than a sane bound.
public protocol HTTPTransport: Sendable {
    /// Sends one request and returns the response, whatever its status.
    /// - Throws: ``OAuthError`` `.transport` when no response arrived, `.cancelled` on cancellation,
    ///   `.invalidResponse` when the body exceeds the limit.
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse

    /// The largest response body this transport accepts; the endpoint client refuses anything
    /// larger too. Defaults to ``HTTPTransportDefaults/maximumBodySize`` (1 MiB).
    var maximumBodySize: Int { get }
}

/// Limits every transport starts from.
public enum HTTPTransportDefaults {
    /// 1 MiB: far above any token, discovery or JWKS document, far below what could hurt.
    public static let maximumBodySize = 1 << 20
}

extension HTTPTransport {
    /// 1 MiB (``HTTPTransportDefaults/maximumBodySize``) unless the transport says otherwise.
    public var maximumBodySize: Int { HTTPTransportDefaults.maximumBodySize }
}
