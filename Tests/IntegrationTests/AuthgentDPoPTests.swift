import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// DPoP (RFC 9449) with the JWT-bearer grant (RFC 7523 §2.1) and token exchange (RFC 8693), judged by
/// authgent-server 0.3.4 (PyPI; `Server/authgent/agserver.py`) on 127.0.0.1: its own proof check at the
/// token endpoint (signature, `typ`, ES256 only, `htm`, `htu`, `iat` within 60 s, its server nonces,
/// required here) and its own binding of the issued JWT access token to the proof's key (`cnf.jkt`,
/// `token_type: DPoP`). Clients are registered through its RFC 7591 endpoint; the JWT-bearer client's
/// id is the issuer authgent trusts, whose JWKS the wrapper serves (`POST /it/issuer-keys`).
@Suite(
    "Integration: DPoP with the JWT-bearer grant and token exchange against authgent-server on loopback (RFC 9449, 7523, 8693)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .authgentServer,
    .serialized,
    .timeLimit(.minutes(2))
)
struct AuthgentDPoPIntegration {
    typealias Exchanges = PushedAuthorizationIntegration.DPoP.Exchanges

    static func transport() -> Exchanges { Exchanges(CurlTransport(timeout: 30, proxy: .none)) }

    static func proof(_ exchange: Exchanges.Exchange) throws -> WireJWS {
        try WireJWS(try #require(exchange.request.header("DPoP"), "no DPoP header to \(exchange.request.url.path)"))
    }

    static func fields(_ exchange: Exchanges.Exchange) -> [String: String] {
        Dictionary(PushedAuthorizationIntegration.fields(exchange.request), uniquingKeysWith: { first, _ in first })
    }

    static func body(_ exchange: Exchanges.Exchange) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: exchange.response.body) as? [String: Any]) ?? [:]
    }

    /// Checks the two token requests authgent's required nonces cause for a provider that has none
    /// yet: a proof without `nonce` answered 401 `use_dpop_nonce` with a `DPoP-Nonce`, then a fresh
    /// proof (new `jti`) with that nonce, answered 200. Returns the second proof.
    static func nonceExchange(_ exchanges: [Exchanges.Exchange], server: AuthgentServer, grantType: String) throws -> WireJWS {
        try #require(exchanges.count == 2, "\(exchanges.map { $0.response.status })")
        let (asked, granted) = (exchanges[0], exchanges[1])
        #expect(asked.response.status == 401 && body(asked)["error"] as? String == "use_dpop_nonce")
        let nonce = try #require(asked.response.headers["dpop-nonce"])
        #expect(granted.response.status == 200)
        let first = try proof(asked), second = try proof(granted)
        #expect(first.claims["nonce"] == nil && second.claims["nonce"] as? String == nonce)
        #expect(first.jti != nil && first.jti != second.jti)
        #expect(try first.thumbprint() == second.thumbprint())
        for exchange in exchanges {
            #expect(fields(exchange)["grant_type"] == grantType)
            let proof = try proof(exchange)
            #expect(proof.header["typ"] as? String == "dpop+jwt" && proof.header["alg"] as? String == "ES256" && proof.jwk["d"] == nil)
            #expect(proof.claims["htm"] as? String == "POST" && proof.claims["htu"] as? String == server.tokenURL.absoluteString)
        }
        return second
    }

    @Test("client credentials, then token exchange of that token, each with DPoP: authgent answers token_type DPoP and binds each JWT (cnf.jkt) to its own provider's key; the exchanged token names the actor")
    func tokenExchange() async throws {
        let server = try AuthgentServer.require()
        let client = try await server.register(grantTypes: ["client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"])
        func provider(_ id: String) throws -> Provider {
            var provider = Provider(id: id, tokenURL: server.tokenURL, issuer: server.issuer, clientID: client.id, clientSecret: client.secret,
                                    clientAuthentication: .clientSecretPost, scopes: ["read"])
            provider.dpop = .required
            try provider.validate()
            return provider
        }
        let transport = Self.transport()
        let flow = try await AuthFlow(providers: [try provider("agent"), try provider("delegate")], transport: transport)

        let agent = try await flow.clientCredentials(provider: "agent")
        #expect(agent.tokenType == "DPoP" && agent.isDPoPBound)
        let agentProof = try Self.nonceExchange(transport.to("/token"), server: server, grantType: "client_credentials")
        let agentSet = try await flow.tokenSet(for: "agent")
        #expect(try AuthgentServer.claims(agentSet.accessToken)["cnf"] as? [String: String] == ["jkt": try agentProof.thumbprint()])
        #expect(try agentProof.thumbprint() == DPoPProver(try #require(agentSet.dpopKey)).thumbprint)

        transport.clear()
        let exchanged = try await flow.exchangeToken(
            provider: "delegate", subjectToken: agentSet.accessToken, subjectTokenType: TokenType.accessToken,
            audience: ["https://api.example.com/"])
        #expect(exchanged.grant == .tokenExchange && exchanged.tokenType == "DPoP" && exchanged.isDPoPBound)
        #expect(exchanged.issuedTokenType == TokenType.accessToken)
        let exchanges = transport.to("/token")
        let delegateProof = try Self.nonceExchange(exchanges, server: server, grantType: "urn:ietf:params:oauth:grant-type:token-exchange")
        let sent = Self.fields(exchanges[1])
        #expect(sent["subject_token"] == agentSet.accessToken.reveal() && sent["subject_token_type"] == TokenType.accessToken)
        #expect(sent["audience"] == "https://api.example.com/" && sent["client_id"] == client.id)
        let delegateSet = try await flow.tokenSet(for: "delegate")
        let claims = try AuthgentServer.claims(delegateSet.accessToken)
        #expect(claims["cnf"] as? [String: String] == ["jkt": try delegateProof.thumbprint()])
        #expect(try delegateProof.thumbprint() == DPoPProver(try #require(delegateSet.dpopKey)).thumbprint)
        #expect(try delegateProof.thumbprint() != agentProof.thumbprint(), "each provider proves a key of its own")
        #expect(claims["aud"] as? String == "https://api.example.com/")
        #expect(claims["act"] as? [String: String] == ["sub": "client:\(client.id)"])
    }

    @Test("the JWT-bearer grant from the catalog (clientKeyFile, \"dpop\": \"required\"): the assertion and a DPoP proof; authgent answers token_type DPoP bound to the proof's key")
    func jwtBearer() async throws {
        let server = try AuthgentServer.require()
        let scratch = try TemporaryDirectory("authgent-it")
        defer { scratch.remove() }
        let directory = scratch.url
        let keyPath = directory.appendingPathComponent("key.pem").path
        try ClientAssertionIntegration.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        let keyID = "kid-\(UUID().uuidString.prefix(8))"
        try await server.addIssuerKey(try ClientKey(contentsOfFile: keyPath).publicJWK(keyID: keyID, algorithm: .es256))
        let catalog = """
            [{"id": "chained", "grant": "jwt-bearer", "clientID": "\(server.chainIssuer)", "tokenURL": "\(server.tokenURL.absoluteString)",
              "clientKeyFile": "key.pem", "clientKeyID": "\(keyID)", "scopes": ["read"], "dpop": "required"}]
            """
        let providers = try ProviderCatalog.load(data: Data(catalog.utf8), baseDirectory: directory, environment: [:], strict: true)
        #expect(providers[0].dpop == .required && providers[0].serviceGrant == .jwtBearer)
        let transport = Self.transport()
        let flow = try await AuthFlow(providers: providers, transport: transport)
        let token = try await flow.accessToken(for: "chained")
        let authorization = try #require(await flow.authorization(for: "chained"))
        #expect(authorization.grant == .jwtBearer && authorization.tokenType == "DPoP" && authorization.isDPoPBound)

        let exchanges = transport.to("/token")
        let proof = try Self.nonceExchange(exchanges, server: server, grantType: "urn:ietf:params:oauth:grant-type:jwt-bearer")
        let (first, second) = (Self.fields(exchanges[0]), Self.fields(exchanges[1]))
        #expect(second["client_id"] == server.chainIssuer && second["scope"] == "read")
        // The grant's assertion is built once per grant request; the nonce retry sends it again
        // (authgent spends its jti only once the proof passed).
        #expect(first["assertion"] != nil && first["assertion"] == second["assertion"])
        let assertion = try JWS(compact: try #require(second["assertion"]))
        #expect(assertion.header.algorithm == .es256 && assertion.header.keyID == keyID)

        let set = try await flow.tokenSet(for: "chained")
        #expect(set.accessToken.reveal() == token.reveal())
        let claims = try AuthgentServer.claims(set.accessToken)
        #expect(claims["cnf"] as? [String: String] == ["jkt": try proof.thumbprint()])
        #expect(try proof.thumbprint() == DPoPProver(try #require(set.dpopKey)).thumbprint)
        #expect(claims["sub"] as? String == server.chainIssuer && claims["chained_from"] as? String == server.chainIssuer)
        #expect(claims["scope"] as? String == "read")
    }

    @Test("EdDSA proofs: with the issuer, discovery reads dpop_signing_alg_values_supported [ES256] and the flow refuses before any token request (.configuration); with the token URL alone, authgent refuses the proof (401 invalid_dpop_proof, .serverRejected); nothing stored",
          arguments: [true, false])
    func algorithmRefused(discovered: Bool) async throws {
        let server = try AuthgentServer.require()
        let client = try await server.register(grantTypes: ["client_credentials"])
        var provider = Provider(id: "eddsa", tokenURL: server.tokenURL, issuer: discovered ? server.issuer : nil, clientID: client.id,
                                clientSecret: client.secret, clientAuthentication: .clientSecretPost, scopes: ["read"])
        provider.dpop = .required
        provider.dpopAlgorithm = .edDSA
        try provider.validate()
        let transport = Self.transport()
        let flow = try await AuthFlow(providers: [provider], transport: transport)
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "eddsa") }
        #expect(await flow.authorization(for: "eddsa") == nil)
        if discovered {
            #expect(error?.code == .configuration, "\(String(describing: error))")
            #expect(error?.message?.contains("dpop_signing_alg_values_supported (ES256)") == true, "\(String(describing: error))")
            #expect(transport.to("/token").isEmpty)
            return
        }
        let code = error?.response?.code.rawValue
        #expect(error?.code == .serverRejected, "\(String(describing: error))")
        #expect(code == "invalid_dpop_proof")
        let exchange = try #require(transport.to("/token").only)
        let proof = try Self.proof(exchange)
        #expect(exchange.response.status == 401 && proof.header["alg"] as? String == "EdDSA")
    }
}

/// The authgent-server of ``AuthgentDPoPIntegration`` (on 127.0.0.1:`port`) and its test hooks.
struct AuthgentServer: Sendable {
    let port: Int
    var issuer: String { "http://127.0.0.1:\(port)" }
    var tokenURL: URL { URL(string: "\(issuer)/token")! }
    /// The issuer authgent trusts for JWT-bearer assertions, and the client id of the client that signs them.
    var chainIssuer: String { "\(issuer)/it/issuer" }

    @TaskLocal static var current: AuthgentServer?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> AuthgentServer {
        try #require(current, "run inside the .authgentServer suite", sourceLocation: sourceLocation)
    }

    func post(_ path: String, json: Any) async throws -> (status: Int, body: [String: Any]) {
        let response = try await CurlTransport().send(HTTPRequest(
            method: "POST", url: URL(string: "\(issuer)\(path)")!, headers: [("Content-Type", "application/json")],
            body: try JSONSerialization.data(withJSONObject: json)))
        return (response.status, (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:])
    }

    /// Registers a client through authgent's RFC 7591 endpoint (scope `read`); its id and secret.
    func register(grantTypes: [String]) async throws -> (id: String, secret: Secret) {
        let reply = try await post("/register", json: ["client_name": "oauthflow-it", "grant_types": grantTypes, "scope": "read"])
        try #require(reply.status == 201, "\(reply)")
        return (try #require(reply.body["client_id"] as? String), Secret(try #require(reply.body["client_secret"] as? String)))
    }

    /// Adds a public JWK (with `kid`) to the JWKS of ``chainIssuer``.
    func addIssuerKey(_ jwk: String) async throws {
        let reply = try await post("/it/issuer-keys", json: try JSONSerialization.jsonObject(with: Data(jwk.utf8)))
        #expect(reply.status == 200 && reply.body["client_id"] as? String == chainIssuer)
    }

    /// The claims of authgent's JWT access token.
    static func claims(_ token: Secret) throws -> [String: Any] {
        try PushedAuthorizationIntegration.DPoP.claims(token.reveal())
    }
}

extension Trait where Self == ScriptedServerTrait {
    /// Runs the suite against one agserver.py started for it (setup.sh + start.sh on a free port, stop.sh after).
    static var authgentServer: Self {
        Self(server: ScriptedServer(directory: "authgent", logPrefix: "oauthflow-authgent", portVariable: "OAUTHFLOW_AUTHGENT_PORT")) { port, suite in
            try await AuthgentServer.$current.withValue(AuthgentServer(port: port)) { try await suite() }
        }
    }
}
