public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import OAuthFlow
public import OAuthFlowURLSession
import Synchronization

/// A scripted authorization server served in-process through `URLProtocol`: no socket, no network.
///
/// Each instance owns a unique host (`<uuid>.oauth.test`), so tests run in parallel without
/// colliding. Script each endpoint's responses in order, run the flow with ``transport(maximumBodySize:)``, then
/// assert on ``requests(_:)``. Works with Swift Testing and XCTest alike; imports neither.
///
/// ```swift
/// let mock = MockProvider()
/// mock.script(.token, [.oauthError("authorization_pending"), .token(access: "at-1")])
/// let flow = try await AuthFlow(providers: [mock.provider(id: "demo")], transport: mock.transport())
/// ```
public final class MockProvider: Sendable {
    /// The endpoints the mock serves, by path.
    public enum Endpoint: String, Sendable, CaseIterable {
        /// `/authorize` (answers nothing by itself; a browser step is yours to simulate).
        case authorization = "/authorize"
        /// `/token`.
        case token = "/token"
        /// `/device/code`.
        case deviceAuthorization = "/device/code"
        /// `/revoke`.
        case revocation = "/revoke"
        /// `/introspect`.
        case introspection = "/introspect"
        /// `/userinfo`.
        case userinfo = "/userinfo"
        /// `/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4) for issuer ``MockProvider/issuer``.
        case openIDConfiguration = "/.well-known/openid-configuration"
        /// `/.well-known/oauth-authorization-server` (RFC 8414 §3) for issuer ``MockProvider/issuer``.
        case authorizationServerMetadata = "/.well-known/oauth-authorization-server"
        /// `/jwks`: the JWKS the discovery document names as `jwks_uri`.
        case jwks = "/jwks"
    }

    /// The unique host this mock answers for.
    public let host: String
    let route: Route

    /// Creates a mock on a fresh unique host and registers it.
    public init(host: String = "\(UUID().uuidString.lowercased()).oauth.test") {
        self.host = host
        self.route = Route()
        MockURLProtocol.register(host: host, route: route)
    }

    deinit { MockURLProtocol.unregister(host: host) }

    /// `https://<host>`.
    public var baseURL: URL { URL(string: "https://\(host)")! }

    /// The URL of `endpoint` on this mock.
    public func url(_ endpoint: Endpoint) -> URL { baseURL.appendingPathComponent(String(endpoint.rawValue.dropFirst())) }

    /// A provider whose endpoints all point at this mock.
    ///
    /// - Parameters:
    ///   - clientSecret: makes it a confidential client (`client_secret_basic` unless `clientAuthentication` says otherwise).
    public func provider(
        id: String = "mock", clientID: String = "mock-client", clientSecret: String? = nil,
        clientAuthentication: Provider.ClientAuthentication? = nil, scopes: [String] = ["read"],
        redirectURI: URL? = URL(string: "http://127.0.0.1:8765/callback"), issuer: String? = nil,
        authorizationParameters: [String: String] = [:], debug: Bool = false
    ) -> Provider {
        Provider(
            id: id, authorizationURL: url(.authorization), tokenURL: url(.token),
            deviceAuthorizationURL: url(.deviceAuthorization), revocationURL: url(.revocation),
            introspectionURL: url(.introspection), userinfoURL: url(.userinfo), issuer: issuer, clientID: clientID,
            clientSecret: clientSecret.map(Secret.init), clientAuthentication: clientAuthentication, redirectURI: redirectURI,
            scopes: scopes, authorizationParameters: authorizationParameters, debug: debug)
    }

    /// The issuer identifier of this mock: `https://<host>`, without a trailing slash.
    public var issuer: String { "https://\(host)" }

    /// A provider configured from ``issuer`` alone: every endpoint comes from discovery.
    public func discoveredProvider(
        id: String = "mock", clientID: String = "mock-client", clientSecret: String? = nil, scopes: [String] = ["openid"],
        redirectURI: URL? = URL(string: "http://127.0.0.1:8765/callback"), idTokenSigningAlgorithms: [String]? = nil
    ) -> Provider {
        Provider(
            id: id, issuer: issuer, idTokenSigningAlgorithms: idTokenSigningAlgorithms, clientID: clientID,
            clientSecret: clientSecret.map(Secret.init), redirectURI: redirectURI, scopes: scopes)
    }

    /// A discovery document (OpenID Connect Discovery 1.0 §3) naming this mock's endpoints.
    ///
    /// - Parameters:
    ///   - issuer: the `issuer` member; this mock's ``issuer`` unless given (give another to test the mismatch).
    ///   - issParameterSupported: `authorization_response_iss_parameter_supported` (RFC 9207 §3).
    ///   - algorithms: `id_token_signing_alg_values_supported`.
    ///   - maxAge: sent as `Cache-Control: max-age=…` when given.
    public func discoveryDocument(
        issuer: String? = nil, issParameterSupported: Bool = false, algorithms: [String] = ["RS256"], maxAge: Int? = nil
    ) -> MockResponse {
        let object: [String: JSONValue] = [
            "issuer": .string(issuer ?? self.issuer),
            "authorization_endpoint": .string(url(.authorization).absoluteString),
            "token_endpoint": .string(url(.token).absoluteString),
            "device_authorization_endpoint": .string(url(.deviceAuthorization).absoluteString),
            "revocation_endpoint": .string(url(.revocation).absoluteString),
            "introspection_endpoint": .string(url(.introspection).absoluteString),
            "userinfo_endpoint": .string(url(.userinfo).absoluteString),
            "end_session_endpoint": .string(baseURL.appendingPathComponent("logout").absoluteString),
            "jwks_uri": .string(url(.jwks).absoluteString),
            "response_types_supported": .array([.string("code")]),
            "id_token_signing_alg_values_supported": .array(algorithms.map(JSONValue.string)),
            "code_challenge_methods_supported": .array([.string("S256")]),
            "authorization_response_iss_parameter_supported": .bool(issParameterSupported),
        ]
        var response = MockResponse.json(object: object)
        if let maxAge { response.headers["Cache-Control"] = "public, max-age=\(maxAge)" }
        return response
    }

    /// A JWKS (RFC 7517 §5) holding the given JWKs, each a JSON object's text.
    public static func jwks(_ keys: [String], maxAge: Int? = nil) -> MockResponse {
        .json(#"{"keys":[\#(keys.joined(separator: ","))]}"#, headers: maxAge.map { ["Cache-Control": "max-age=\($0)"] } ?? [:])
    }

    /// Appends responses for any `path` on this host (such as `/tenant/.well-known/openid-configuration`).
    public func script(path: String, _ responses: [MockResponse]) {
        route.append(path, responses)
    }

    /// Every request the mock received for `path`, oldest first.
    public func requests(path: String) -> [RecordedRequest] {
        route.requests.filter { $0.url.path == path }
    }

    /// A transport whose session routes every request through the mock protocol.
    public func transport(maximumBodySize: Int = URLSessionTransport.defaultMaximumBodySize) -> URLSessionTransport {
        URLSessionTransport(configuration: Self.sessionConfiguration(), maximumBodySize: maximumBodySize)
    }

    /// An ephemeral configuration whose `protocolClasses` hold the mock protocol; build your own session from it.
    public static func sessionConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [MockURLProtocol.self]
        return configuration
    }

    /// Appends responses for `endpoint`, served in order; when they run out, ``repeatLast`` decides.
    public func script(_ endpoint: Endpoint, _ responses: [MockResponse]) {
        route.append(endpoint.rawValue, responses)
    }

    /// When true (the default), an endpoint whose script ran out repeats its last response;
    /// when false it answers `500` with `{"error":"mock_unscripted"}`.
    public var repeatLast: Bool {
        get { route.repeatLast }
        set { route.repeatLast = newValue }
    }

    /// Every request the mock received (for `endpoint`, when given), oldest first.
    public func requests(_ endpoint: Endpoint? = nil) -> [RecordedRequest] {
        route.requests.filter { endpoint == nil || $0.url.path == endpoint!.rawValue }
    }

    /// Forgets the recorded requests.
    public func clearRequests() { route.clearRequests() }
}

/// One scripted answer.
public struct MockResponse: Sendable {
    /// The HTTP status.
    public var status: Int
    /// Response headers.
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// A response with any status, headers and body.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON body given as text.
    public static func json(_ text: String, status: Int = 200, headers: [String: String] = [:]) -> MockResponse {
        MockResponse(status: status, headers: headers.merging(["Content-Type": "application/json"]) { a, _ in a }, body: Data(text.utf8))
    }

    /// A JSON object body, members sorted by name (written by OAuthFlow's one JSON writer).
    public static func json(object: [String: JSONValue], status: Int = 200) -> MockResponse {
        MockResponse(status: status, headers: ["Content-Type": "application/json"], body: JSONValue.object(object).jsonData)
    }

    /// A form-encoded body, as GitHub answers without `Accept: application/json`.
    public static func form(_ text: String, status: Int = 200) -> MockResponse {
        MockResponse(status: status, headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Data(text.utf8))
    }

    /// An HTML page, as a proxy or a misconfigured server sends.
    public static func html(_ text: String = "<html><body><h1>502 Bad Gateway</h1></body></html>", status: Int = 502) -> MockResponse {
        MockResponse(status: status, headers: ["Content-Type": "text/html"], body: Data(text.utf8))
    }

    /// A token response (RFC 6749 §5.1).
    public static func token(
        access: String, type: String = "Bearer", expiresIn: Int? = 3600, refresh: String? = nil, scope: String? = nil,
        idToken: String? = nil
    ) -> MockResponse {
        var object: [String: JSONValue] = ["access_token": .string(access), "token_type": .string(type)]
        if let expiresIn { object["expires_in"] = .number(expiresIn) }
        if let refresh { object["refresh_token"] = .string(refresh) }
        if let scope { object["scope"] = .string(scope) }
        if let idToken { object["id_token"] = .string(idToken) }
        return .json(object: object)
    }

    /// An RFC 6749 §5.2 error body with status 400 (or the one given, e.g. 200 as GitHub does).
    public static func oauthError(_ code: String, description: String? = nil, status: Int = 400) -> MockResponse {
        var object: [String: JSONValue] = ["error": .string(code)]
        if let description { object["error_description"] = .string(description) }
        return .json(object: object, status: status)
    }

    /// A device authorization response (RFC 8628 §3.2).
    public static func deviceCode(
        device: String = "mock-device-code", user: String = "WDJB-MJHT", verificationURI: String = "https://example.com/device",
        complete: String? = nil, expiresIn: Int = 900, interval: Int? = 5, uriKey: String = "verification_uri"
    ) -> MockResponse {
        var object: [String: JSONValue] = [
            "device_code": .string(device), "user_code": .string(user), uriKey: .string(verificationURI), "expires_in": .number(expiresIn),
        ]
        if let complete { object["verification_uri_complete"] = .string(complete) }
        if let interval { object["interval"] = .number(interval) }
        return .json(object: object)
    }
}

/// A request as the mock received it.
public struct RecordedRequest: Sendable {
    /// The method.
    public var method: String
    /// The full URL.
    public var url: URL
    /// Headers with lower-cased names.
    public var headers: [String: String]
    /// The raw body.
    public var body: Data

    /// The first value of `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The form body as ordered pairs.
    public var formPairs: [(String, String)] {
        let text = String(decoding: body, as: UTF8.self)
        return text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            return (parts[0], parts.count > 1 ? parts[1] : "")
        }
    }

    /// The form body as a dictionary (first value wins).
    public var form: [String: String] {
        Dictionary(formPairs, uniquingKeysWith: { first, _ in first })
    }

    /// The id and secret of an `Authorization: Basic` header, form-decoded (RFC 6749 §2.3.1).
    public var basicCredentials: (id: String, secret: String)? {
        guard let value = header("authorization"), value.hasPrefix("Basic "),
              let data = Data(base64Encoded: String(value.dropFirst(6))),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        func decode(_ s: Substring) -> String { String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s) }
        return (decode(text[..<colon]), decode(text[text.index(after: colon)...]))
    }
}

/// A host's scripted responses and recorded requests.
final class Route: Sendable {
    private struct Inner {
        var scripts: [String: [MockResponse]] = [:]
        var last: [String: MockResponse] = [:]
        var requests: [RecordedRequest] = []
        var repeatLast = true
    }
    private let inner = Mutex(Inner())

    var repeatLast: Bool {
        get { inner.withLock { $0.repeatLast } }
        set { inner.withLock { $0.repeatLast = newValue } }
    }
    var requests: [RecordedRequest] { inner.withLock { $0.requests } }
    func clearRequests() { inner.withLock { $0.requests.removeAll() } }

    func append(_ path: String, _ responses: [MockResponse]) {
        inner.withLock { $0.scripts[path, default: []].append(contentsOf: responses) }
    }

    func answer(_ request: RecordedRequest) -> MockResponse {
        inner.withLock { inner in
            inner.requests.append(request)
            let path = request.url.path
            if var queue = inner.scripts[path], !queue.isEmpty {
                let next = queue.removeFirst()
                inner.scripts[path] = queue
                inner.last[path] = next
                return next
            }
            if inner.repeatLast, let last = inner.last[path] { return last }
            return .json(#"{"error":"mock_unscripted","error_description":"no response scripted for this path"}"#, status: 500)
        }
    }
}

/// The `URLProtocol` behind ``MockProvider``: routes by host, records, answers.
public final class MockURLProtocol: URLProtocol {
    private static let routes = Mutex<[String: Route]>([:])

    static func register(host: String, route: Route) { routes.withLock { $0[host.lowercased()] = route } }
    static func unregister(host: String) { _ = routes.withLock { $0.removeValue(forKey: host.lowercased()) } }
    private static func route(for host: String?) -> Route? {
        guard let host = host?.lowercased() else { return nil }
        return routes.withLock { $0[host] }
    }

    /// Handles requests to registered mock hosts, and to any other `.test` host (RFC 6761: it never
    /// resolves) by failing with `cannotFindHost`, so a stale mock URL never reaches real DNS.
    public override class func canInit(with request: URLRequest) -> Bool {
        guard let host = request.url?.host?.lowercased() else { return false }
        return route(for: host) != nil || host.hasSuffix(".test")
    }
    /// Returns the request unchanged.
    public override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    /// Records the request and answers with the next scripted response.
    public override func startLoading() {
        guard let url = request.url, let route = Self.route(for: url.host) else {
            client?.urlProtocol(self, didFailWithError: URLError(.cannotFindHost))
            return
        }
        var headers: [String: String] = [:]
        for (name, value) in request.allHTTPHeaderFields ?? [:] { headers[name.lowercased()] = value }
        let recorded = RecordedRequest(
            method: request.httpMethod ?? "GET", url: url, headers: headers, body: request.httpBody ?? Self.read(request.httpBodyStream))
        let answer = route.answer(recorded)
        guard let response = HTTPURLResponse(url: url, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: answer.headers) else {
            client?.urlProtocol(self, didFailWithError: URLError(.badServerResponse))
            return
        }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        if !answer.body.isEmpty { client?.urlProtocol(self, didLoad: answer.body) }
        client?.urlProtocolDidFinishLoading(self)
    }

    /// Nothing to stop: answers are synchronous.
    public override func stopLoading() {}

    private static func read(_ stream: InputStream?) -> Data {
        guard let stream else { return Data() }
        stream.open()
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while stream.hasBytesAvailable {
            let count = stream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            data.append(buffer, count: count)
        }
        return data
    }
}
