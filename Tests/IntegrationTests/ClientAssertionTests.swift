import Foundation
@testable import OAuthFlow
import Testing
import TestSupport

/// Client assertions made by OAuthFlow, judged by a real RFC 7523 implementation: Authlib 1.9.6
/// (`Server/credentials/credserver.py`) on 127.0.0.1, started once for this suite. Each test sends
/// the form OAuthFlow builds through the library's own CurlTransport and asserts the server's
/// answer and the fields it received.
@Suite(
    "Integration: client assertions (private_key_jwt, client_secret_jwt) against Authlib on loopback (RFC 7523 §2.2/§3)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .credentialsServer,
    .serialized,
    .timeLimit(.minutes(2))
)
struct ClientAssertionIntegration {
    /// Registers a client, generating its key with openssl; returns the key.
    static func register(_ server: CredentialsServer, id: String, recipe: [String], algorithms: [String]? = nil,
                         audience: String? = nil) async throws -> ClientKey {
        let scratch = try TemporaryDirectory("creds-it")
        defer { scratch.remove() }
        let directory = scratch.url
        let path = directory.appendingPathComponent("key.pem").path
        try openssl(recipe + ["-out", path])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let key = try ClientKey(contentsOfFile: path)
        var spec: [String: Any] = ["client_id": id, "method": "private_key_jwt",
                                   "jwk": try JSONSerialization.jsonObject(with: Data(try key.publicJWK().utf8))]
        if let algorithms { spec["algorithms"] = algorithms }
        if let audience { spec["audience"] = audience }
        try await server.register(spec)
        return key
    }

    /// Writes a new EC P-256 private key (PEM) to `path` with openssl.
    static func generateP256Key(at path: String) throws {
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
    }

    static func openssl(_ arguments: [String]) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ServerLaunchError(description: "openssl \(arguments) failed") }
    }

    static func provider(_ server: CredentialsServer, id: String, key: any ClientAssertionSigner, algorithm: SigningAlgorithm? = nil,
                         audience: ClientAssertionAudience = .endpoint) throws -> Provider {
        let provider = Provider(id: "authlib", tokenURL: server.tokenURL, issuer: server.issuer, clientID: id, clientKey: key,
                                clientKeyID: "k-\(id)", clientAssertionAlgorithm: algorithm, clientAssertionAudience: audience)
        try provider.validate()
        return provider
    }

    @Test("private_key_jwt with each key type: Authlib issues a token; the wire carries exactly the RFC 7521 §4.2 fields",
          arguments: [
            (["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], SigningAlgorithm.es256, ["ES256"]),
            (["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], .rs256, ["RS256"]),
            (["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], .ps256, ["PS256"]),
            (["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"], .es384, ["ES384"]),
            (["genpkey", "-algorithm", "ED25519"], .edDSA, ["EdDSA"]),
          ])
    func privateKeyJWT(recipe: [String], algorithm: SigningAlgorithm, accepted: [String]) async throws {
        let server = try CredentialsServer.require()
        let id = "pk-\(algorithm.rawValue.lowercased())-\(UUID().uuidString.prefix(6))"
        let key = try await Self.register(server, id: id, recipe: recipe, algorithms: accepted)
        let authenticator = try #require(try AssertionAuthenticator(provider: try Self.provider(server, id: id, key: key, algorithm: algorithm)))
        let before = Int(Date().timeIntervalSince1970)
        let reply = try await server.token(["grant_type": "client_credentials", "scope": "read"],
                                           authentication: try await authenticator.fields(endpoint: server.tokenURL, now: Date()))
        #expect(reply.status == 200, "\(reply.text)")
        #expect(reply.json["token_type"] as? String == "Bearer")
        #expect((reply.json["access_token"] as? String)?.isEmpty == false)

        let received = try #require(try await server.received().last)
        #expect(Set(received.keys) == ["grant_type", "scope", "client_id", "client_assertion_type", "client_assertion", "_authorization"])
        #expect(received["client_id"] == [id])
        #expect(received["client_assertion_type"] == ["urn:ietf:params:oauth:client-assertion-type:jwt-bearer"])
        #expect(received["_authorization"] == [""])  // no Basic header next to the assertion
        let jws = try JWS(compact: try #require(received["client_assertion"]?.first))
        #expect(jws.header.algorithm.rawValue == algorithm.rawValue)
        #expect(jws.header.keyID == "k-\(id)")
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
        #expect(claims["iss"] as? String == id)
        #expect(claims["sub"] as? String == id)
        #expect(claims["aud"] as? String == server.tokenURL.absoluteString)
        let iat = try #require(claims["iat"] as? Int)
        #expect(iat >= before && iat <= before + 60)
        #expect(claims["exp"] as? Int == iat + 60)
        #expect((claims["jti"] as? String).flatMap(Base64URL.decode)?.count == 16)
    }

    @Test("client_secret_jwt (HS256 under the secret): Authlib issues a token")
    func clientSecretJWT() async throws {
        let server = try CredentialsServer.require()
        let id = "hs-\(UUID().uuidString.prefix(6))"
        let secret = "0123456789abcdef0123456789abcdef-\(UUID().uuidString)"
        try await server.register(["client_id": id, "method": "client_secret_jwt", "client_secret": secret])
        let provider = Provider(id: "authlib", tokenURL: server.tokenURL, clientID: id, clientSecret: Secret(secret),
                                clientAuthentication: .clientSecretJWT)
        try provider.validate()
        let authenticator = try #require(try AssertionAuthenticator(provider: provider))
        let reply = try await server.token(["grant_type": "client_credentials"],
                                           authentication: try await authenticator.fields(endpoint: server.tokenURL, now: Date()))
        #expect(reply.status == 200, "\(reply.text)")
        let received = try #require(try await server.received().last)
        #expect(try JWS(compact: try #require(received["client_assertion"]?.first)).header.algorithm == .hs256)
        #expect(received["client_secret"] == nil)
    }

    /// A refused assertion and Authlib's `error_description` for it.
    enum Refusal: String, CaseIterable, Sendable {
        case wrongKey, replayedJTI, expired, audienceMismatch, algorithmNotAccepted
    }

    @Test("Refused: wrong key, replayed jti, expired, audience mismatch, algorithm the server does not accept — invalid_client",
          arguments: Refusal.allCases)
    func refused(_ refusal: Refusal) async throws {
        let server = try CredentialsServer.require()
        let id = "neg-\(refusal.rawValue)-\(UUID().uuidString.prefix(6))"
        let p256 = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
        let registered = try await Self.register(server, id: id, recipe: refusal == .algorithmNotAccepted
            ? ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"] : p256,
            audience: refusal == .audienceMismatch ? "issuer" : nil)
        var signer: ClientKey = registered
        if refusal == .wrongKey { signer = try await Self.register(server, id: "\(id)-other", recipe: p256) }
        let authenticator = try #require(try AssertionAuthenticator(provider: try Self.provider(server, id: id, key: signer)))
        let now = refusal == .expired ? Date().addingTimeInterval(-600) : Date()
        let fields = try await authenticator.fields(endpoint: server.tokenURL, now: now)
        if refusal == .replayedJTI {
            let first = try await server.token(["grant_type": "client_credentials"], authentication: fields)
            #expect(first.status == 200, "\(first.text)")
        }
        let reply = try await server.token(["grant_type": "client_credentials"], authentication: fields)
        #expect(reply.status == 400 || reply.status == 401, "\(reply.text)")
        #expect(reply.json["error"] as? String == "invalid_client")
        let description = reply.json["error_description"] as? String
        switch refusal {
        case .wrongKey: #expect(description == nil)
        case .replayedJTI: #expect(description == "JWT ID is used before.")
        case .expired: #expect(description == "The token is expired")
        case .audienceMismatch: #expect(description == "Invalid claim: 'aud'")
        case .algorithmNotAccepted: #expect(description == "Algorithm of 'ES384' is not recommended")
        }
    }

    @Test("JWT-bearer grant with a service-account key file: Authlib's JWTBearerGrant issues a token, no refresh token (RFC 7523 §2.1)")
    func jwtBearerGrant() async throws {
        let server = try CredentialsServer.require()
        let scratch = try TemporaryDirectory("creds-sa")
        defer { scratch.remove() }
        let directory = scratch.url
        let pemPath = directory.appendingPathComponent("key.pem").path
        try Self.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", pemPath])
        let email = "svc-\(UUID().uuidString.prefix(6))@demo.iam.example"
        let account: [String: Any] = ["type": "service_account", "client_email": email, "private_key_id": "kid-1",
                                      "private_key": try String(contentsOfFile: pemPath, encoding: .utf8), "token_uri": server.tokenURL.absoluteString]
        let accountPath = directory.appendingPathComponent("sa.json").path
        try JSONSerialization.data(withJSONObject: account).write(to: URL(fileURLWithPath: accountPath))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: accountPath)
        let key = try ServiceAccountKey(contentsOfFile: accountPath)
        try await server.register(["client_id": email, "method": "private_key_jwt",
                                   "jwk": try JSONSerialization.jsonObject(with: Data(try key.key.publicJWK().utf8))])

        // Through the flow: the same account, its subject, Authlib's token.
        let provider = Provider(id: "sa", tokenURL: server.tokenURL, clientID: email, scopes: ["read"], serviceAccount: key,
                                serviceAccountSubject: "alice")
        let flow = try await AuthFlow(providers: [provider])
        let authorization = try await flow.jwtBearer(provider: "sa")
        #expect(authorization.grant == .jwtBearer && !authorization.isRefreshable)
        let viaFlow = try #require(try await server.received().last)
        #expect(Set(viaFlow.keys) == ["grant_type", "assertion", "scope", "client_id", "_authorization"])
        #expect(viaFlow["client_id"] == [email] && viaFlow["_authorization"] == [""])

        let fields = try await key.grantFields(scopes: ["read"], subject: "alice", now: Date())
        let reply = try await server.token([:], authentication: fields)
        #expect(reply.status == 200, "\(reply.text)")
        #expect(reply.json["scope"] as? String == "read")
        #expect(reply.json["expires_in"] as? Int == 3600)
        #expect(reply.json["refresh_token"] == nil)
        let received = try #require(try await server.received().last)
        #expect(Set(received.keys) == ["grant_type", "assertion", "scope", "_authorization"])
        #expect(received["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"])
        let jws = try JWS(compact: try #require(received["assertion"]?.first))
        #expect(jws.header.algorithm == .rs256 && jws.header.keyID == "kid-1")
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
        #expect(claims["iss"] as? String == email && claims["sub"] as? String == "alice")
        #expect(claims["aud"] as? String == server.tokenURL.absoluteString)
        #expect(claims["exp"] as? Int == (claims["iat"] as? Int).map { $0 + 3600 })
    }

    @Test("Through the flow: clientCredentials with private_key_jwt gets Authlib's token; one fresh assertion per request",
          arguments: [ClientAssertionAudience.endpoint, .issuer])
    func throughTheFlow(audience: ClientAssertionAudience) async throws {
        let server = try CredentialsServer.require()
        let id = "flow-\(audience)-\(UUID().uuidString.prefix(6))"
        let key = try await Self.register(server, id: id, recipe: ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
                                          audience: audience == .issuer ? "issuer" : nil)
        let provider = try Self.provider(server, id: id, key: key, audience: audience)
        let flow = try await AuthFlow(providers: [provider])
        let before = try await server.received().count
        let first = try await flow.clientCredentials(provider: "authlib", scopes: ["read"])
        #expect(first.grant == .clientCredentials)
        #expect(!first.isRefreshable)
        _ = try await flow.clientCredentials(provider: "authlib", scopes: ["read"])

        let sent = Array(try await server.received().dropFirst(before))
        #expect(sent.count == 2)
        var identifiers = Set<String>()
        for received in sent {
            #expect(Set(received.keys) == ["grant_type", "scope", "client_id", "client_assertion_type", "client_assertion", "_authorization"])
            #expect(received["grant_type"] == ["client_credentials"] && received["client_id"] == [id])
            #expect(received["_authorization"] == [""])
            let jws = try JWS(compact: try #require(received["client_assertion"]?.first))
            #expect(jws.header.algorithm == .es256 && jws.header.keyID == "k-\(id)")
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
            #expect(claims["aud"] as? String == (audience == .issuer ? server.issuer : server.tokenURL.absoluteString))
            #expect(claims["iss"] as? String == id && claims["sub"] as? String == id)
            identifiers.insert(try #require(claims["jti"] as? String))
        }
        #expect(identifiers.count == 2)
    }

    @Test("Through the flow: an algorithm the server's metadata does not advertise fails .configuration, and no token request is sent")
    func notAdvertisedThroughTheFlow() async throws {
        let server = try CredentialsServer.require()
        let id = "flow-eddsa-\(UUID().uuidString.prefix(6))"
        let key = try await Self.register(server, id: id, recipe: ["genpkey", "-algorithm", "ED25519"], algorithms: ["EdDSA"])
        let flow = try await AuthFlow(providers: [try Self.provider(server, id: id, key: key)])
        let before = try await server.received().count
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.clientCredentials(provider: "authlib") }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains("EdDSA is not in the provider's token_endpoint_auth_signing_alg_values_supported (HS256, RS256, ES256)") == true)
        #expect(try await server.received().count == before)
    }

    @Test("The server's metadata: an algorithm it does not advertise is refused before any request")
    func advertised() async throws {
        let server = try CredentialsServer.require()
        let metadata = try await server.metadata()
        try AssertionAuthenticator.checkAdvertised(.es256, in: metadata, providerID: "authlib")
        let error = #expect(throws: OAuthError.self) { try AssertionAuthenticator.checkAdvertised(.edDSA, in: metadata, providerID: "authlib") }
        #expect(error?.message?.contains("(HS256, RS256, ES256)") == true)
    }
}

// MARK: - The server

/// The running credserver.py of this suite.
struct CredentialsServer: Sendable {
    let port: Int
    var issuer: String { "http://127.0.0.1:\(port)" }
    var tokenURL: URL { URL(string: "\(issuer)/token")! }

    @TaskLocal static var current: CredentialsServer?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> CredentialsServer {
        try #require(current, "run inside the .credentialsServer suite", sourceLocation: sourceLocation)
    }

    struct Reply {
        let status: Int
        let text: String
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:] }
    }

    func send(_ request: HTTPRequest) async throws -> Reply {
        let response = try await CurlTransport().send(request)
        return Reply(status: response.status, text: String(decoding: response.body, as: UTF8.self))
    }

    /// POSTs `fields` + `authentication` to the token endpoint.
    func token(_ fields: [String: String], authentication: [(String, String)]) async throws -> Reply {
        let all = fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } + authentication
        return try await send(HTTPRequest(method: "POST", url: tokenURL, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                          body: Data(FormEncoding.encode(all).utf8)))
    }

    func register(_ spec: [String: Any]) async throws {
        let body = try JSONSerialization.data(withJSONObject: spec)
        let reply = try await send(HTTPRequest(method: "POST", url: URL(string: "\(issuer)/it/clients")!,
                                               headers: [("Content-Type", "application/json")], body: body))
        #expect(reply.status == 200)
    }

    /// Every token request's form fields, in order (`_authorization`: the Authorization header).
    func received() async throws -> [[String: [String]]] {
        let reply = try await send(HTTPRequest(method: "GET", url: URL(string: "\(issuer)/it/requests")!))
        return (try JSONSerialization.jsonObject(with: Data(reply.text.utf8)) as? [[String: [String]]]) ?? []
    }

    func metadata() async throws -> ProviderMetadata {
        let reply = try await send(HTTPRequest(method: "GET", url: URL(string: "\(issuer)/.well-known/oauth-authorization-server")!))
        let object = try JSONObject(try JSONValue.parse(Array(reply.text.utf8)), what: "metadata") { OAuthError(.invalidResponse, message: $0) }
        return try ProviderMetadata(object)
    }
}

extension Trait where Self == ScriptedServerTrait {
    /// Runs the suite against one credserver.py started for it (setup.sh + start.sh on a free port, stop.sh after).
    static var credentialsServer: Self {
        Self(server: ScriptedServer(directory: "credentials", logPrefix: "oauthflow-creds", portVariable: "OAUTHFLOW_CREDS_PORT")) { port, suite in
            try await CredentialsServer.$current.withValue(CredentialsServer(port: port)) { try await suite() }
        }
    }
}
