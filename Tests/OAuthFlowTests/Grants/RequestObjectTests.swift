import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// Signed request objects (RFC 9101), alone and pushed (RFC 9126 §3), and the catalog keys of the
/// browser path.
@Suite("Request objects (RFC 9101) and the browser path's catalog keys", .timeLimit(.minutes(1)))
struct RequestObjectTests {
    let clock = TestClock()

    static func provider(key: ClientKey, pushed: Bool) -> Provider {
        var provider = Provider(
            id: "jar", authorizationURL: URL(string: "https://as.test/authorize"), tokenURL: URL(string: "https://as.test/token"),
            issuer: "https://as.test", clientID: "cli-1", redirectURI: URL(string: "http://127.0.0.1:8765/callback"), scopes: ["openid"],
            clientKey: key, clientKeyID: "k1")
        provider.requestObject = true
        provider.pushedAuthorization = pushed
        provider.pushedAuthorizationURL = URL(string: "https://as.test/par")
        return provider
    }

    static func members(_ part: Substring) throws -> [String: JSONValue] {
        guard let bytes = Base64URL.decode(String(part)), case .object(let members) = try JSONValue.parse(bytes) else {
            throw OAuthError(.invalidResponse, message: "not a JSON object")
        }
        return members
    }

    /// Checks `jwt` as a server would: typ, alg, kid, the signature (by openssl), iss/aud/times,
    /// and the authorization parameters of `request`.
    func check(_ jwt: String, request: AuthorizationRequest, files: KeyFiles, keyPath: String) throws {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let header = try Self.members(parts[0])
        #expect(header["typ"] == .string("oauth-authz-req+jwt"))
        #expect(header["alg"] == .string("ES256"))
        #expect(header["kid"] == .string("k1"))
        let signature = try #require(Base64URL.decode(String(parts[2])))
        #expect(try files.opensslVerifies(keyPath: keyPath, algorithm: .es256, input: Array("\(parts[0]).\(parts[1])".utf8),
                                          signature: signature))
        let claims = try Self.members(parts[1])
        let now = Int(clock.date.timeIntervalSince1970)
        #expect(claims["iss"] == .string("cli-1"))
        #expect(claims["aud"] == .string("https://as.test"))
        #expect(claims["client_id"] == .string("cli-1"))
        #expect(claims["response_type"] == .string("code"))
        #expect(claims["redirect_uri"] == .string("http://127.0.0.1:8765/callback"))
        #expect(claims["scope"] == .string("openid"))
        #expect(claims["state"] == .string(request.state.reveal()))
        #expect(claims["nonce"] == .string(try #require(request.nonce).reveal()))
        #expect(claims["code_challenge_method"] == .string("S256"))
        #expect(claims["iat"] == .number(String(now)) && claims["nbf"] == .number(String(now)))
        #expect(claims["exp"] == .number(String(now + 300)))
        #expect(claims["max_age"] == .number("120"), "a number, as OpenID Connect Core §6.1 has it")
        guard case .string(let jti)? = claims["jti"] else { Issue.record("no jti"); return }
        #expect((Base64URL.decode(jti)?.count ?? 0) == 16)
    }

    @Test("Alone: the browser URL carries client_id, response_type and scope (OpenID Connect Core §6.1) and the signed request object, nothing else")
    func signedInURL() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let keyPath = try files.key(.p256SEC1)
        let transport = ScriptedTransport()
        let flow = try await AuthFlow(providers: [Self.provider(key: try ClientKey(contentsOfFile: keyPath), pushed: false)],
                                      transport: transport, options: options(clock))
        let request = try await flow.authorizationRequest(provider: "jar", parameters: ["max_age": "120"])
        let pairs = queryPairs(request.url)
        #expect(pairs.map(\.0) == ["client_id", "response_type", "scope", "request"])
        #expect(pairs[0].1 == "cli-1" && pairs[1].1 == "code" && pairs[2].1 == "openid", "the values the object has")
        try check(pairs[3].1, request: request, files: files, keyPath: keyPath)
        #expect(request.maxAge == 120, "max_age still binds the ID token's auth_time")
        #expect(transport.requests().isEmpty)
    }

    @Test("Pushed: the body is request=<JWT> plus the client's authentication; the URL holds client_id and request_uri (RFC 9126 §3)")
    func signedAndPushed() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let keyPath = try files.key(.p256SEC1)
        let transport = ScriptedTransport()
        transport.script("/par", [.status(201, json: #"{"request_uri":"urn:ietf:params:oauth:request_uri:r1","expires_in":60}"#)])
        let flow = try await AuthFlow(providers: [Self.provider(key: try ClientKey(contentsOfFile: keyPath), pushed: true)],
                                      transport: transport, options: options(clock))
        let request = try await flow.authorizationRequest(provider: "jar", parameters: ["max_age": "120"])
        let pushed = try #require(transport.requests("/par").first)
        let fields = FormEncoding.decode(String(decoding: pushed.body ?? Data(), as: UTF8.self))
        #expect(fields.map(\.0) == ["request", "client_id", "client_assertion_type", "client_assertion"])
        try check(fields[0].1, request: request, files: files, keyPath: keyPath)
        // The client assertion is fresh and aimed at the PAR endpoint (the default audience).
        let assertion = try Self.members(fields[3].1.split(separator: ".")[1])
        #expect(assertion["aud"] == .string("https://as.test/par"))
        #expect(queryPairs(request.url).map(\.1) == ["cli-1", "urn:ietf:params:oauth:request_uri:r1"])
    }

    @Test("Catalog: pushedAuthorization, pushedAuthorizationURL and requestObject are read and checked")
    func catalogKeys() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.p256SEC1)
        let provider = try ClientCredentialCatalogTests.load(files, #""clientKeyFile": "key.pem", "pushedAuthorization": true, "#
            + #""pushedAuthorizationURL": "https://as.example/par", "requestObject": true"#)
        #expect(provider.pushedAuthorization && provider.requestObject)
        #expect(provider.pushedAuthorizationURL == URL(string: "https://as.example/par"))
        #expect(provider.requestObjectAlgorithm == .es256)
        let plain = try ClientCredentialCatalogTests.load(files, #""clientSecret": "s""#)
        #expect(!plain.pushedAuthorization && !plain.requestObject && plain.pushedAuthorizationURL == nil)
    }

    @Test("Catalog refusals name the key", arguments: [
        (#""clientSecret": "s", "pushedAuthorization": "yes""#, "pushedAuthorization"),
        (#""clientSecret": "s", "pushedAuthorizationURL": "http://as.example/par""#, "pushedAuthorizationURL"),
        (#""clientSecret": "s", "requestObject": 1"#, "requestObject"),
        (#""clientSecret": "s", "requestObject": true"#, "requestObject: needs a client key"),
        (#""clientSecret": "s", "pushedAuthorizaton": true"#, "did you mean \"pushedAuthorization\""),
    ])
    func catalogRefusals(members: String, expected: String) throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let error = ClientCredentialCatalogTests.failure(files, members)
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains(expected) == true, "\(error?.message ?? "no error")")
    }

    @Test("requestObject needs the issuer (its aud)")
    func needsIssuer() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        var provider = Self.provider(key: try ClientKey(contentsOfFile: try files.key(.p256SEC1)), pushed: false)
        provider.issuer = nil
        let error = #expect(throws: OAuthError.self) { try provider.validate() }
        #expect(error?.message?.contains("issuer") == true)
    }
}
