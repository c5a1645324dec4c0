import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// Dynamic registration and its management (RFC 7591, RFC 7592) through the flow
/// (Flow/AuthFlow+Registration.swift): the exact requests, the record kept in the store and
/// applied to the next flow, every malformed answer a typed error with nothing stored, and no
/// secret in any rendering.
@Suite("Dynamic client registration (RFC 7591, RFC 7592)", .timeLimit(.minutes(1)))
struct RegistrationTests {
    static let redirect = URL(string: "http://127.0.0.1:53123/callback")!
    static let secret = "s3cr3t-client-secret-0123456789"
    static let registrationToken = "reg-access-token-abcdef"

    let clock = TestClock()
    let wire = ScriptedTransport()

    static func metadata(methods: [String]? = ["client_secret_basic", "client_secret_post"], signing: [String]? = nil) -> String {
        var members = [#""issuer":"https://as.test""#, #""authorization_endpoint":"https://as.test/authorize""#,
                       #""token_endpoint":"https://as.test/token""#, #""registration_endpoint":"https://as.test/register""#]
        if let methods { members.append(#""token_endpoint_auth_methods_supported":[\#(methods.map { "\"\($0)\"" }.joined(separator: ","))]"#) }
        if let signing { members.append(#""token_endpoint_auth_signing_alg_values_supported":[\#(signing.map { "\"\($0)\"" }.joined(separator: ","))]"#) }
        return "{\(members.joined(separator: ","))}"
    }

    static func answer(method: String = "client_secret_basic", secret: String? = RegistrationTests.secret, expiresAt: Int = 0,
                       extra: String = "") -> String {
        var members = [#""client_id":"c1""#, #""token_endpoint_auth_method":"\#(method)""#, #""redirect_uris":["\#(redirect.absoluteString)"]"#,
                       #""grant_types":["authorization_code","refresh_token"]"#, #""client_id_issued_at":1800000000"#,
                       #""registration_access_token":"\#(registrationToken)""#, #""registration_client_uri":"https://as.test/register/c1""#]
        if let secret { members.append(#""client_secret":"\#(secret)","client_secret_expires_at":\#(expiresAt)"#) }
        if !extra.isEmpty { members.append(extra) }
        return "{\(members.joined(separator: ","))}"
    }

    static func provider(authentication: Provider.ClientAuthentication? = nil) -> Provider {
        var provider = Provider(id: "api", issuer: "https://as.test", clientID: "", redirectURI: redirect, scopes: ["openid"])
        provider.dynamicRegistration = Provider.DynamicRegistration(authentication: authentication, scopes: ["openid", "api"])
        provider.resources = [URL(string: "https://api.test/mcp")!]
        return provider
    }

    func flow(_ provider: Provider = RegistrationTests.provider(), store: any SecretStore) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider], store: store, transport: wire, options: options(clock))
    }

    static func body(_ request: HTTPRequest) throws -> [String: JSONValue] {
        try #require(try JSONValue.parse(request.body ?? Data()).objectValue)
    }

    @Test("register: the request's JSON members exactly; the answer stored under api.registration; the next flow applies it")
    func registers() async throws {
        let store = MemorySecretStore()
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer())])
        let flow = try await flow(store: store)
        #expect(flow.providers["api"]?.awaitsRegistration == true)

        let registration = try await flow.registerClient(provider: "api")

        let sent = try #require(wire.requests("/register").only)
        #expect(sent.method == "POST")
        #expect(sent.header("Content-Type") == "application/json")
        #expect(sent.header("Authorization") == nil, "no initial access token was configured")
        #expect(try Self.body(sent) == [
            "redirect_uris": .array([.string(Self.redirect.absoluteString)]),
            "grant_types": .array([.string("authorization_code"), .string("refresh_token")]),
            "response_types": .array([.string("code")]),
            "token_endpoint_auth_method": .string("client_secret_basic"),
            "client_name": .string("authflow"),
            "scope": .string("openid api"),
        ])
        #expect(registration.clientID == "c1")
        #expect(registration.clientSecret?.reveal() == Self.secret)
        #expect(registration.clientSecretExpiresAt == nil, "0 means it never expires (RFC 7591 §3.2.1)")
        #expect(registration.registrationClientURI?.absoluteString == "https://as.test/register/c1")
        #expect(try await store.keys() == ["api.registration"])

        let next = try await self.flow(store: store)
        let applied = try next.provider("api")
        #expect(applied.clientID == "c1")
        #expect(applied.clientSecret?.reveal() == Self.secret)
        #expect(applied.clientAuthentication == .clientSecretBasic)
        #expect(applied.redirectURI == Self.redirect)
        #expect(!applied.awaitsRegistration)
    }

    @Test("the method registered when none is configured, from token_endpoint_auth_methods_supported", arguments: [
        (["none", "client_secret_basic"] as [String]?, Provider.ClientAuthentication.none),
        (nil, .none),
        (["client_secret_basic", "client_secret_post", "private_key_jwt"], .privateKeyJWT),
        (["client_secret_basic", "client_secret_post"], .clientSecretBasic),
        (["client_secret_post"], .clientSecretPost),
    ])
    func methodChoice(methods: [String]?, expected: Provider.ClientAuthentication) async throws {
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata(methods: methods))])
        wire.script("/register", [.status(201, json: Self.answer(method: expected.rawValue, secret: expected == .none || expected == .privateKeyJWT ? nil : Self.secret))])
        let registration = try await flow(store: MemorySecretStore()).registerClient(provider: "api")
        let body = try Self.body(try #require(wire.requests("/register").only))
        #expect(body["token_endpoint_auth_method"] == .string(expected.rawValue))
        #expect(registration.tokenEndpointAuthMethod == expected)
        // glewlwyd makes a `none` registration confidential unless told otherwise; other servers ignore the member (RFC 7591 §2).
        #expect(body["client_confidential"] == (expected == .none ? .bool(false) : nil))
    }

    @Test("private_key_jwt: a new key whose public JWK (kid = its RFC 7638 thumbprint) is sent as jwks; the next flow signs with it")
    func privateKeyJWT() async throws {
        let store = MemorySecretStore()
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata(methods: ["private_key_jwt"], signing: ["RS256", "ES256"]))])
        wire.script("/register", [.status(200, json: Self.answer(method: "private_key_jwt", secret: nil))])
        let registration = try await flow(store: store).registerClient(provider: "api")

        let sent = try #require(wire.requests("/register").only)
        let jwks = try #require(try Self.body(sent)["jwks"])
        let key = try #require(jwks["keys"]?.arrayValue?.only?.objectValue)
        #expect(key["kty"] == .string("RSA"))
        let made = try #require(registration.clientKey)
        #expect(key["kid"] == .string(try made.jwkThumbprint()))
        #expect(key["alg"] == .string("RS256"))
        for member in ["d", "p", "q", "dp", "dq", "qi"] { #expect(key[member] == nil, "no private member: \(member)") }

        let applied = try await self.flow(store: store).provider("api")
        #expect(applied.clientAuthentication == .privateKeyJWT)
        #expect(applied.clientKeyID == registration.clientKeyID)
        #expect(applied.clientKey != nil)
        #expect(applied.clientSecret == nil)
        try applied.validate()
    }

    @Test("ES256 is used when the server's signing algorithms list it and not RS256")
    func ecKey() async throws {
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata(methods: ["private_key_jwt"], signing: ["ES256"]))])
        wire.script("/register", [.status(201, json: Self.answer(method: "private_key_jwt", secret: nil))])
        let registration = try await flow(store: MemorySecretStore()).registerClient(provider: "api")
        #expect(registration.clientKey?.defaultAlgorithm == .es256)
    }

    @Test("an initial access token goes as Authorization: Bearer (RFC 7591 §3); the configured one when none is passed")
    func initialAccessToken() async throws {
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer()), .status(201, json: Self.answer())])
        var provider = Self.provider()
        provider.dynamicRegistration?.initialAccessToken = Secret("iat-from-catalog")
        let flow = try await flow(provider, store: MemorySecretStore())
        _ = try await flow.registerClient(provider: "api")
        _ = try await flow.registerClient(provider: "api", initialAccessToken: Secret("iat-given"))
        #expect(wire.requests("/register").map { $0.header("Authorization") } == ["Bearer iat-from-catalog", "Bearer iat-given"])
    }

    @Test("a malformed answer is a typed error and nothing is stored", arguments: [
        (#"{"client_secret":"x","client_secret_expires_at":0}"#, "client_id is missing"),
        (#"{"client_id":"c\u0001","client_secret":"x"}"#, "client_id is empty, longer"),
        ("{\"client_id\":\"" + String(repeating: "c", count: 300) + "\",\"client_secret\":\"x\"}", "client_id is empty, longer"),
        ("{\"client_id\":\"c1\",\"client_secret\":\"" + String(repeating: "s", count: 5000) + "\"}", "client_secret is empty, longer"),
        (#"{"client_id":"c1","token_endpoint_auth_method":"client_secret_basic"}"#, "client_secret is missing"),
        (#"{"client_id":"c1","client_secret":"x","token_endpoint_auth_method":"magic"}"#, "not a method"),
        (#"{"client_id":"c1","token_endpoint_auth_method":"tls_client_auth"}"#, "not a method"),
        (#"{"client_id":"c1","client_secret":"x","registration_access_token":"t","registration_client_uri":"https://evil.test/register/c1"}"#,
         "not on the registration endpoint's origin"),
        (#"{"client_id":"c1","client_secret":"x","client_secret_expires_at":1e300}"#, "client_secret_expires_at"),
        (#"{"client_id":"c1","client_secret":"x","redirect_uris":["http://127.0.0.1:1/cb\u001b"]}"#, "redirect_uris"),
    ])
    func hostileAnswers(body: String, reason: String) async throws {
        let store = MemorySecretStore()
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: body)])
        let error = await #expect(throws: OAuthError.self) { try await flow(store: store).registerClient(provider: "api") }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .registration)
        #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "")")
        #expect(try await store.keys().isEmpty)
        #expect(!(error?.description.contains(String(repeating: "s", count: 50)) ?? true))
    }

    @Test("refusals: an RFC 7591 §3.2.2 error body, Authlib's access_denied for a missing initial token, a 401 without a body")
    func refusals() async throws {
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [
            .status(400, json: #"{"error":"invalid_redirect_uri","error_description":"a redirect_uri must be https"}"#),
            .status(400, json: #"{"error":"access_denied"}"#),
            .status(401),
        ])
        let flow = try await flow(store: MemorySecretStore())
        let first = await #expect(throws: OAuthError.self) { try await flow.registerClient(provider: "api") }
        #expect(first?.code == .serverRejected)
        #expect(first?.response?.code == .invalidRedirectURI)
        let second = await #expect(throws: OAuthError.self) { try await flow.registerClient(provider: "api") }
        #expect(second?.code == .accessDenied)
        let third = await #expect(throws: OAuthError.self) { try await flow.registerClient(provider: "api") }
        #expect(third?.code == .httpStatus)
        #expect(third?.httpStatus == 401)
    }

    @Test("a server without registration_endpoint, a provider without an issuer or redirect URI: .configuration")
    func configuration() async throws {
        wire.script("/.well-known/openid-configuration", [.status(200, json: #"{"issuer":"https://as.test","token_endpoint":"https://as.test/token"}"#)])
        let error = await #expect(throws: OAuthError.self) { try await flow(store: MemorySecretStore()).registerClient(provider: "api") }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains("registration_endpoint") == true)
        var noIssuer = Self.provider()
        noIssuer.issuer = nil
        noIssuer.tokenURL = URL(string: "https://as.test/token")
        #expect(throws: OAuthError.self) { try noIssuer.validate() }
    }

    @Test("no secret, token or key in any rendering of a registration or of its errors")
    func redaction() async throws {
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata(methods: ["private_key_jwt", "client_secret_basic"]))])
        wire.script("/register", [.status(201, json: Self.answer(method: "private_key_jwt", secret: nil))])
        let registration = try await flow(store: MemorySecretStore()).registerClient(provider: "api")
        var dumped = ""
        dump(registration, to: &dumped)
        let pem = try #require(registration.clientKeyPEM?.reveal())
        for text in ["\(registration)", String(reflecting: registration), dumped] {
            #expect(!text.contains(Self.registrationToken))
            #expect(!text.contains(pem.split(separator: "\n")[1]))
            #expect(!text.contains("PRIVATE KEY"))
        }
        var withSecret = registration
        withSecret.clientSecret = Secret(Self.secret)
        #expect(!"\(withSecret)".contains(Self.secret))
        #expect("\(withSecret)".contains("clientID: c1"))
    }

    @Test("debug log records show shapes: the JSON members sent, never the initial access token, the secret or the registration token")
    func logs() async throws {
        let log = LogCollector()
        var provider = Self.provider()
        provider.debug = true
        provider.dynamicRegistration?.initialAccessToken = Secret("iat-secret-value-42")
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer())])
        wire.script("/register/c1", [.status(200, json: Self.answer())])
        let flow = try await AuthFlow(providers: [provider], store: MemorySecretStore(), transport: wire, options: options(clock, log: log))
        _ = try await flow.registerClient(provider: "api")
        _ = try await flow.readRegistration(provider: "api")
        let text = log.all.map(\.description).joined(separator: "\n")
        for secret in [Self.secret, Self.registrationToken, "iat-secret-value-42", "127.0.0.1:53123"] {
            #expect(!text.contains(secret), "\(secret) in the log")
        }
        #expect(text.contains("client_name,grant_types,redirect_uris"), "the request's member names are logged: \(text)")
    }

    @Test("with a store key the record is sealed on disk like tokens (AES-256-GCM), and read back")
    func sealed() async throws {
        let directory = try TemporaryDirectory("oauthflow-registration")
        defer { directory.remove() }
        let store = try FileSecretStore(directory: directory.url, encryption: EntryEncryption(key: try StoreKey.generate()))
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer())])
        _ = try await flow(store: store).registerClient(provider: "api")
        let raw = try Data(contentsOf: directory.url.appendingPathComponent("api.registration.json"))
        #expect(EntryEncryption.isSealed(raw))
        #expect(!String(decoding: raw, as: UTF8.self).contains(Self.secret))
        #expect(try await flow(store: store).registration(for: "api")?.clientSecret?.reveal() == Self.secret)
    }

    @Test("read (RFC 7592 §2.1): Bearer the registration token; a rotated secret is kept, what the answer leaves out stays")
    func read() async throws {
        let store = MemorySecretStore()
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer())])
        // glewlwyd's read: the method as an array, no registration token or URI.
        wire.script("/register/c1", [.status(200, json: #"{"client_id":"c1","client_secret":"rotated","token_endpoint_auth_method":["client_secret_basic"]}"#)])
        let flow = try await flow(store: store)
        _ = try await flow.registerClient(provider: "api")
        let read = try await flow.readRegistration(provider: "api")
        let sent = try #require(wire.requests("/register/c1").only)
        #expect(sent.method == "GET")
        #expect(sent.header("Authorization") == "Bearer \(Self.registrationToken)")
        #expect(read.clientSecret?.reveal() == "rotated")
        #expect(read.registrationAccessToken?.reveal() == Self.registrationToken)
        #expect(read.registrationClientURI?.absoluteString == "https://as.test/register/c1")
        #expect(try await flow.registration(for: "api")?.clientSecret?.reveal() == "rotated")
    }

    @Test("update (RFC 7592 §2.2): PUT of the full metadata with client_id; a new secret and token in the answer replace the old")
    func update() async throws {
        let store = MemorySecretStore()
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer())])
        wire.script("/register/c1", [.status(200, json: #"{"client_id":"c1","client_secret":"new-secret","registration_access_token":"new-token","client_name":"renamed"}"#)])
        let flow = try await flow(store: store)
        let registered = try await flow.registerClient(provider: "api")
        var metadata = try registered.metadata()
        metadata.clientName = "renamed"
        let updated = try await flow.updateRegistration(provider: "api", metadata: metadata)
        let sent = try #require(wire.requests("/register/c1").only)
        #expect(sent.method == "PUT")
        #expect(sent.header("Authorization") == "Bearer \(Self.registrationToken)")
        let body = try Self.body(sent)
        #expect(body["client_id"] == .string("c1"))
        #expect(body["client_name"] == .string("renamed"))
        #expect(body["redirect_uris"] == .array([.string(Self.redirect.absoluteString)]))
        #expect(body["registration_access_token"] == nil && body["client_secret"] == nil)
        #expect(updated.clientSecret?.reveal() == "new-secret")
        #expect(updated.registrationAccessToken?.reveal() == "new-token")
        #expect(try await self.flow(store: store).provider("api").clientSecret?.reveal() == "new-secret")
    }

    @Test("delete (RFC 7592 §2.3): DELETE with the registration token, then the record is gone; 204 and glewlwyd's empty 200 alike")
    func delete() async throws {
        for answer in [ScriptedTransport.Step.status(204), .status(200)] {
            let store = MemorySecretStore()
            let wire = ScriptedTransport()
            wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
            wire.script("/register", [.status(201, json: Self.answer())])
            wire.script("/register/c1", [answer])
            let flow = try await AuthFlow(providers: [Self.provider()], store: store, transport: wire, options: options(clock))
            _ = try await flow.registerClient(provider: "api")
            #expect(try await flow.deleteRegistration(provider: "api"))
            let sent = try #require(wire.requests("/register/c1").only)
            #expect(sent.method == "DELETE")
            #expect(sent.header("Authorization") == "Bearer \(Self.registrationToken)")
            #expect(try await store.keys().isEmpty)
            #expect(try await flow.deleteRegistration(provider: "api") == false, "nothing left to delete")
        }
    }

    @Test("a refused delete keeps the record, so it can be tried again")
    func refusedDelete() async throws {
        let store = MemorySecretStore()
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer())])
        wire.script("/register/c1", [.status(401)])
        let flow = try await flow(store: store)
        _ = try await flow.registerClient(provider: "api")
        await #expect(throws: OAuthError.self) { try await flow.deleteRegistration(provider: "api") }
        #expect(try await store.keys() == ["api.registration"])
    }

    @Test("currentRegistration: registers when none is stored; re-reads a stored one; registers again when the server forgot it")
    func current() async throws {
        let store = MemorySecretStore()
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer()), .status(201, json: Self.answer().replacingOccurrences(of: "\"c1\"", with: "\"c2\"")
            .replacingOccurrences(of: "/register/c1", with: "/register/c2"))])
        wire.script("/register/c1", [.status(200, json: #"{"client_id":"c1"}"#), .status(401)])
        let flow = try await flow(store: store)
        #expect(try await flow.currentRegistration(provider: "api").clientID == "c1")
        #expect(try await flow.currentRegistration(provider: "api").clientID == "c1")
        #expect(try await flow.currentRegistration(provider: "api").clientID == "c2")
        #expect(wire.requests().filter { $0.url.path.hasPrefix("/register") }.map { "\($0.method) \($0.url.path)" } == [
            "POST /register", "GET /register/c1", "GET /register/c1", "POST /register",
        ])
    }

    @Test("an expired client secret is registered again (and the old client deleted), not reported as a failed login")
    func expiredSecret() async throws {
        let store = MemorySecretStore()
        let soon = Int(clock.date.timeIntervalSince1970) + 60
        wire.script("/.well-known/openid-configuration", [.status(200, json: Self.metadata())])
        wire.script("/register", [.status(201, json: Self.answer(expiresAt: soon)),
                                  .status(201, json: Self.answer(expiresAt: 0).replacingOccurrences(of: "\"c1\"", with: "\"c2\""))])
        wire.script("/register/c1", [.status(200, json: #"{"client_id":"c1"}"#), .status(204)])
        let flow = try await flow(store: store)
        let first = try await flow.registerClient(provider: "api")
        #expect(first.clientSecretExpiresAt == Date(timeIntervalSince1970: TimeInterval(soon)))
        clock.advance(by: .seconds(120))
        let renewed = try await flow.currentRegistration(provider: "api")
        #expect(renewed.clientID == "c2")
        #expect(wire.requests().filter { $0.url.path.hasPrefix("/register") }.map { "\($0.method) \($0.url.path)" } == [
            "POST /register", "GET /register/c1", "DELETE /register/c1", "POST /register",
        ])
        #expect(try await flow.registration(for: "api")?.clientID == "c2")
    }

    @Test("a damaged registration record does not stop the flow: its provider awaits a registration, a warning is logged, the read reports it")
    func damagedRecord() async throws {
        let log = LogCollector()
        let store = MemorySecretStore(["api.registration": Data(#"{"registration":{"providerID":"api"},"version":1}"#.utf8)])
        let flow = try await AuthFlow(providers: [Self.provider(), scriptedProvider()], store: store, transport: wire, options: options(clock, log: log))
        #expect(flow.providers["api"]?.awaitsRegistration == true)
        #expect(flow.providers["app"] != nil)
        #expect(log.all.contains { $0.level == .warning && $0.providerID == "api" && $0.message.contains("cannot be used") })
        let error = await #expect(throws: OAuthError.self) { try await flow.currentRegistration(provider: "api") }
        #expect(error?.code == .storage)
    }

    @Test("a provider awaiting its registration refuses grants with .reauthorizationRequired, naming the login that registers it")
    func unregisteredRefusesGrants() async throws {
        let flow = try await flow(store: MemorySecretStore())
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizationRequest(provider: "api") }
        #expect(error?.code == .reauthorizationRequired)
        #expect(wire.requests().isEmpty)
    }
}
