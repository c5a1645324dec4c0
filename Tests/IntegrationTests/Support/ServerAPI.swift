import Foundation
import OAuthFlow
import OAuthFlowURLSession
import Synchronization
import Testing

// MARK: - Clients registered on the server (Server/README.md)

enum Fixture {
    static let username = "alice"
    static let password = "wonderland-pass-1"

    static let publicPKCEClient = "it-public-pkce"
    static let publicDeviceClient = "it-public-device"
    static let confidentialCCClient = "it-confidential-cc"
    static let confidentialCCSecret = "it-cc-secret-1"
    static let confidentialWebClient = "it-confidential-web"
    static let confidentialWebSecret = "it-web-secret-1"

    static let pkceRedirect = "http://127.0.0.1:8911/callback"
    static let webRedirect = "http://127.0.0.1:8912/callback"
}

extension IntegrationServer {
    /// A provider with every endpoint of the server; the grant-specific parts come from the arguments.
    func provider(
        id: String, clientID: String, secret: String? = nil, authentication: Provider.ClientAuthentication? = nil,
        redirectURI: String? = nil, scopes: [String], issuer: String? = nil
    ) -> Provider {
        Provider(
            id: id,
            authorizationURL: url("/o/authorize/"),
            tokenURL: url("/o/token/"),
            deviceAuthorizationURL: url("/o/device-authorization/"),
            revocationURL: url("/o/revoke_token/"),
            introspectionURL: url("/o/introspect/"),
            userinfoURL: url("/o/userinfo/"),
            issuer: issuer ?? self.issuer,
            jwksURL: url("/o/.well-known/jwks.json"),
            clientID: clientID,
            clientSecret: secret.map(Secret.init),
            clientAuthentication: authentication,
            redirectURI: redirectURI.flatMap(URL.init(string:)),
            scopes: scopes)
    }

    /// `it-public-pkce`: public, authorization code with PKCE required.
    func pkceProvider(id: String = "dot-pkce", issuer: String? = nil) -> Provider {
        provider(id: id, clientID: Fixture.publicPKCEClient, redirectURI: Fixture.pkceRedirect,
                 scopes: ["openid", "profile", "email", "read"], issuer: issuer)
    }

    /// `it-confidential-web`: confidential, authorization code, authenticated with `client_secret_basic`.
    func webProvider(id: String = "dot-web") -> Provider {
        provider(id: id, clientID: Fixture.confidentialWebClient, secret: Fixture.confidentialWebSecret,
                 authentication: .clientSecretBasic, redirectURI: Fixture.webRedirect, scopes: ["openid", "read", "write"])
    }

    /// `it-public-device`: public, device authorization.
    func deviceProvider(id: String = "dot-device") -> Provider {
        provider(id: id, clientID: Fixture.publicDeviceClient, scopes: ["read", "write"])
    }

    /// `it-confidential-cc`: confidential, client credentials. No authorization or device endpoint,
    /// so the flow treats it as a service-only provider.
    func clientCredentialsProvider(
        id: String = "dot-cc", secret: String = Fixture.confidentialCCSecret, authentication: Provider.ClientAuthentication
    ) -> Provider {
        var provider = provider(id: id, clientID: Fixture.confidentialCCClient, secret: secret,
                                authentication: authentication, scopes: ["read", "write"])
        provider.authorizationURL = nil
        provider.deviceAuthorizationURL = nil
        return provider
    }

    /// A flow over one provider with a recording transport.
    func flow(
        _ provider: Provider, store: any SecretStore = MemorySecretStore(), transport: RecordingTransport = RecordingTransport()
    ) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider], store: store, transport: transport)
    }
}

// MARK: - Asking the server directly

/// RFC 7662 introspection answer (DOT's fields).
struct Introspection: Decodable, Sendable {
    var active: Bool
    var scope: String?
    var clientID: String?
    var username: String?
    var exp: Int?

    enum CodingKeys: String, CodingKey {
        case active, scope, exp, username
        case clientID = "client_id"
    }

    var scopes: Set<String> { Set((scope ?? "").split(separator: " ").map(String.init)) }
}

/// A token endpoint answer, success or RFC 6749 §5.2 error.
struct TokenReply: Decodable, Sendable {
    var accessToken: String?
    var refreshToken: String?
    var idToken: String?
    var scope: String?
    var error: String?

    enum CodingKeys: String, CodingKey {
        case scope, error
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
    }
}

/// OpenID Connect userinfo claims.
struct UserInfoClaims: Decodable, Sendable {
    var sub: String
    var preferredUsername: String?
    var email: String?

    enum CodingKeys: String, CodingKey {
        case sub, email
        case preferredUsername = "preferred_username"
    }
}

/// Requests to the server made by the test itself, not the library: the oracle of every assertion.
///
/// Goes through ``URLSessionTransport`` only for its Linux handling of 401 + `WWW-Authenticate`;
/// the requests are built here by hand.
struct ServerAPI: Sendable {
    let server: IntegrationServer
    private let transport = URLSessionTransport(timeout: 15)

    init(_ server: IntegrationServer) { self.server = server }

    /// POSTs a form; `basic` adds `Authorization: Basic`.
    func post(_ path: String, _ fields: [(String, String)], basic: (String, String)? = nil) async throws -> HTTPResponse {
        var headers: [(name: String, value: String)] = [
            ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
        ]
        if let (user, password) = basic {
            let credentials = Data("\(Form.escape(user)):\(Form.escape(password))".utf8).base64EncodedString()
            headers.append(("Authorization", "Basic \(credentials)"))
        }
        return try await transport.send(HTTPRequest(method: "POST", url: server.url(path), headers: headers,
                                                    body: Data(Form.encode(fields).utf8)))
    }

    /// Introspects `token` as the confidential client `it-confidential-cc` (HTTP Basic).
    func introspect(_ token: String) async throws -> Introspection {
        let response = try await post("/o/introspect/", [("token", token)],
                                      basic: (Fixture.confidentialCCClient, Fixture.confidentialCCSecret))
        try #require(response.status == 200, "introspection answered HTTP \(response.status)")
        return try JSONDecoder().decode(Introspection.self, from: response.body)
    }

    /// Introspects a library-held token.
    func introspect(_ token: Secret) async throws -> Introspection { try await introspect(token.reveal()) }

    /// A token request; returns the status and the parsed body.
    func token(_ fields: [(String, String)], basic: (String, String)? = nil) async throws -> (status: Int, reply: TokenReply) {
        let response = try await post("/o/token/", fields, basic: basic)
        return (response.status, try JSONDecoder().decode(TokenReply.self, from: response.body))
    }

    /// A refresh as `it-public-pkce` would send it.
    func refresh(_ refreshToken: String, clientID: String = Fixture.publicPKCEClient) async throws -> (status: Int, reply: TokenReply) {
        try await token([("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", clientID)])
    }

    /// GET userinfo with a bearer token; the claims on 200, nil otherwise.
    func userinfo(_ token: Secret) async throws -> (status: Int, claims: UserInfoClaims?) {
        let response = try await transport.send(HTTPRequest(
            method: "GET", url: server.url("/o/userinfo/"),
            headers: [("Authorization", "Bearer \(token.reveal())"), ("Accept", "application/json")]))
        guard response.status == 200 else { return (response.status, nil) }
        return (200, try JSONDecoder().decode(UserInfoClaims.self, from: response.body))
    }
}

// MARK: - Recording what the library sends

/// An ``HTTPTransport`` around ``URLSessionTransport`` that records every exchange, so a test can
/// prove what went over the wire (or that nothing did) and what the server answered.
final class RecordingTransport: HTTPTransport {
    struct Exchange: Sendable {
        var request: HTTPRequest
        /// nil when no response arrived.
        var response: HTTPResponse?

        /// The path with its exact trailing slash (`URL.path` drops it).
        var path: String { URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.path ?? "" }
        /// The request's form fields.
        var form: [String: String] {
            Dictionary(Form.decode(String(decoding: request.body ?? Data(), as: UTF8.self)), uniquingKeysWith: { first, _ in first })
        }
        /// The `error` of the server's JSON answer, if any.
        var serverError: String? {
            guard let body = response?.body else { return nil }
            return (try? JSONDecoder().decode(TokenReply.self, from: body))?.error
        }
    }

    private let base: URLSessionTransport
    private let log = Mutex<[Exchange]>([])

    init(timeout: TimeInterval = 15) { base = URLSessionTransport(timeout: timeout) }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        do {
            let response = try await base.send(request)
            log.withLock { $0.append(Exchange(request: request, response: response)) }
            return response
        } catch {
            log.withLock { $0.append(Exchange(request: request, response: nil)) }
            throw error
        }
    }

    var exchanges: [Exchange] { log.withLock { $0 } }

    /// The exchanges with an endpoint path such as `/o/token/`.
    func exchanges(to path: String) -> [Exchange] { exchanges.filter { $0.path == path } }
}

// MARK: - Bounded waiting

struct TimedOut: Error, CustomStringConvertible {
    let description: String
}

/// Polls `condition` every 25 ms until it holds or `timeout` passes.
func waitUntil(
    _ what: String, timeout: Duration = .seconds(60), _ condition: @Sendable () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(description: "timed out after \(timeout) waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(25))
    }
}

/// Runs `operation`, cancelling it and throwing ``TimedOut`` after `timeout`.
func withTimeout<T: Sendable>(
    _ what: String, _ timeout: Duration = .seconds(30), _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TimedOut(description: "timed out after \(timeout) waiting for \(what)")
        }
        return value
    }
}

/// Collects the states a subscriber sees until a terminal one (`authorized`, `error`) arrives.
///
/// Subscribes at creation, so nothing published afterwards is missed.
final class StateRecorder: Sendable {
    private final class Seen: Sendable {
        let states = Mutex<[AuthFlow.State]>([])
    }
    private let task: Task<[AuthFlow.State], Never>
    private let seen = Seen()

    init(_ flow: AuthFlow) {
        let stream = flow.states
        let seen = self.seen
        task = Task {
            for await state in stream {
                seen.states.withLock { $0.append(state) }
                if state.name == "authorized" || state.name == "error" { break }
            }
            return seen.states.withLock { $0 }
        }
    }

    /// The states so far.
    var states: [AuthFlow.State] { seen.states.withLock { $0 } }

    /// Every state up to and including the terminal one (bounded wait).
    func finished(timeout: Duration = .seconds(15)) async throws -> [AuthFlow.State] {
        let task = self.task
        return try await withTimeout("the terminal state", timeout) { await task.value }
    }
}

// MARK: - Form encoding for hand-built requests

enum Form {
    static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    static func decode(_ text: String) -> [(String, String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            return (parts[0], parts.count > 1 ? parts[1] : "")
        }
    }

    /// The query items of a URL, first value wins.
    static func query(_ url: URL) -> [String: String] {
        Dictionary(decode(URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? ""),
                   uniquingKeysWith: { first, _ in first })
    }
}
