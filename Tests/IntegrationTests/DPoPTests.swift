import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// DPoP (RFC 9449) made by OAuthFlow, judged by a real implementation: idpyoidc 5.0.0's DPoP add-on
/// (`Server/dpop/dpopserver.py`) on 127.0.0.1, started once for this suite. Every request goes
/// through the library's own CurlTransport; the tests assert the server's answers and the proofs it
/// received. Nonces, jti replay and the `/api` resource check are the wrapper's, on top of idpyoidc's
/// proof verification (idpyoidc 5.0.0 has none of them; Documentation/Testing.md).
@Suite(
    "Integration: DPoP against idpyoidc on loopback (RFC 9449)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .dpopServer,
    .serialized,
    .timeLimit(.minutes(2))
)
struct DPoPIntegration {
    static func provider(_ server: DPoPServer, algorithm: SigningAlgorithm? = nil) throws -> Provider {
        var provider = Provider(
            id: "idpy", authorizationURL: server.url("/authorization"), tokenURL: server.url("/token"), issuer: server.issuer,
            clientID: "dpop-client", clientSecret: Secret("dpop-client-secret-0123456789abcdef"),
            redirectURI: URL(string: "http://127.0.0.1:9/callback"), scopes: ["read", "offline_access"])
        provider.dpop = .required
        provider.dpopAlgorithm = algorithm
        try provider.validate()
        return provider
    }

    /// A flow logged in through idpyoidc's authorization endpoint (its NoAuthn user) and code exchange.
    static func loggedIn(_ server: DPoPServer, algorithm: SigningAlgorithm? = nil, store: MemorySecretStore = MemorySecretStore())
        async throws -> (AuthFlow, AuthorizationRequest, Authorization) {
        let flow = try await AuthFlow(providers: [provider(server, algorithm: algorithm)], store: store)
        let request = try await flow.authorizationRequest(provider: "idpy")
        let redirect = try await CurlTransport().send(HTTPRequest(method: "GET", url: request.url))
        try #require(redirect.status == 302)
        let location = try #require(redirect.headers["location"].flatMap { URL(string: $0) })
        let authorization = try await flow.completeAuthorization(callbackURL: location)
        return (flow, request, authorization)
    }

    @Test("authorization code with DPoP, each algorithm: idpyoidc binds the token (token_type DPoP) to the key of dpop_jkt; the proof on the wire is exact",
          arguments: [SigningAlgorithm.es256, .edDSA, .es384, .ps256, .rs256])
    func authorizationCode(algorithm: SigningAlgorithm) async throws {
        let server = try DPoPServer.require()
        try await server.reset()
        let (_, request, authorization) = try await Self.loggedIn(server, algorithm: algorithm)

        #expect(authorization.tokenType == "DPoP" && authorization.isDPoPBound && authorization.isRefreshable)
        let sent = try #require(try await server.received().only)
        #expect(sent.path == "/token" && sent.form["grant_type"] == "authorization_code")
        let proof = try WireJWS(try #require(sent.dpop))
        #expect(proof.header["typ"] as? String == "dpop+jwt" && proof.header["alg"] as? String == algorithm.rawValue)
        #expect(Set(proof.header.keys) == ["typ", "alg", "jwk"] && proof.jwk["d"] == nil)
        #expect(Set(proof.claims.keys) == ["jti", "htm", "htu", "iat"])
        #expect(proof.claims["htm"] as? String == "POST" && proof.claims["htu"] as? String == "\(server.issuer)/token")
        #expect(try proof.thumbprint() == query(request.url)["dpop_jkt"])
    }

    @Test("the server's metadata lists its DPoP algorithms (dpop_signing_alg_values_supported, RFC 9449 §5.1), which the flow checks")
    func advertisedAlgorithms() async throws {
        let server = try DPoPServer.require()
        let provider = try Self.provider(server)
        let metadata = try await AuthFlow(providers: [provider]).metadata(for: provider)
        let listed = (metadata.document["dpop_signing_alg_values_supported"]?.arrayValue ?? []).compactMap(\.stringValue)
        #expect(listed == ["ES256", "ES384", "EdDSA", "PS256", "RS256"])
    }

    @Test("a refresh with server nonces: use_dpop_nonce then the nonce (two requests); the rotated nonce of that answer goes into the next refresh (one request)")
    func refreshWithRotatedNonce() async throws {
        let server = try DPoPServer.require()
        try await server.reset()
        let (flow, _, _) = try await Self.loggedIn(server)
        try await server.nonces(token: true)
        defer { Task { try? await server.nonces(token: false) } }
        try await server.reset()

        let first = try await flow.refresh(provider: "idpy")
        let second = try await flow.refresh(provider: "idpy")

        #expect(first.isDPoPBound && second.isDPoPBound)
        let sent = try await server.received()
        #expect(sent.map { $0.form["grant_type"] } == ["refresh_token", "refresh_token", "refresh_token"])
        let proofs = try sent.map { try WireJWS(try #require($0.dpop)) }
        #expect(proofs[0].claims["nonce"] == nil)
        let nonces = proofs.map { $0.claims["nonce"] as? String }
        #expect(nonces[1] != nil && nonces[2] != nil && nonces[1] != nonces[2], "the nonce rotated after the first refresh")
        #expect(Set(try proofs.map { try $0.thumbprint() }).count == 1)
        #expect(Set(proofs.compactMap(\.jti)).count == 3)
    }

    @Test("a resource request through the authorizing transport: DPoP scheme, proof with ath; a resource nonce is retried once; a replayed proof is refused")
    func resourceRequest() async throws {
        let server = try DPoPServer.require()
        try await server.reset()
        let (flow, _, _) = try await Self.loggedIn(server)
        let api = AuthorizingTransport(base: CurlTransport(), source: flow.tokenSource(for: "idpy"))
        try await server.reset()

        let plain = try await api.send(HTTPRequest(method: "GET", url: server.url("/api?page=1")))
        #expect(plain.status == 200)

        try await server.nonces(resource: true)
        defer { Task { try? await server.nonces(resource: false) } }
        let withNonce = try await api.send(HTTPRequest(method: "POST", url: server.url("/api"), headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                                       body: Data("a=1".utf8)))
        #expect(withNonce.status == 200)

        let sent = try await server.received()
        #expect(sent.map(\.path) == ["/api", "/api", "/api"])
        let token = try await flow.tokenSet(for: "idpy").accessToken
        #expect(sent.allSatisfy { $0.authorization == "DPoP \(token.reveal())" })
        let proofs = try sent.map { try WireJWS(try #require($0.dpop)) }
        #expect(proofs.map { $0.claims["htm"] as? String } == ["GET", "POST", "POST"])
        #expect(proofs.allSatisfy { $0.claims["htu"] as? String == "\(server.issuer)/api" })
        #expect(proofs.allSatisfy { $0.claims["ath"] as? String == (try? DPoPProof.ath(token)) })
        #expect(proofs[1].claims["nonce"] == nil && proofs[2].claims["nonce"] != nil)

        // The same proof again: refused (jti seen), whatever the token.
        let replay = try await CurlTransport().send(HTTPRequest(method: "GET", url: server.url("/api?page=1"), headers: [
            ("Authorization", try #require(sent[0].authorization)), ("DPoP", try #require(sent[0].dpop)),
        ]))
        #expect(replay.status == 401 && replay.headers["www-authenticate"]?.contains("invalid_dpop_proof") == true)
    }

    @Test("idpyoidc refuses a proof for another URL or another method (htu, htm)", arguments: [("POST", "/other"), ("GET", "/token")])
    func wrongTarget(method: String, path: String) async throws {
        let server = try DPoPServer.require()
        try await server.reset()
        let (flow, _, _) = try await Self.loggedIn(server)
        let set = try await flow.tokenSet(for: "idpy")
        let prover = DPoPProver(try #require(set.dpopKey))
        let proof = try await prover.proof(method: method, url: server.url(path), nonce: nil, now: Date())
        let basic = Data("dpop-client:dpop-client-secret-0123456789abcdef".utf8).base64EncodedString()
        let answer = try await CurlTransport().send(HTTPRequest(
            method: "POST", url: server.url("/token"),
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic \(basic)"), ("DPoP", proof.reveal())],
            body: Data(FormEncoding.encode([("grant_type", "refresh_token"), ("refresh_token", try #require(set.refreshToken).reveal())]).utf8)))
        #expect(answer.status == 400)
        let text = String(decoding: answer.body, as: UTF8.self)
        #expect(text.contains("invalid_dpop_proof") && text.contains(method == "GET" ? "htm" : "htu"))
    }

    @Test("a request object alone (RFC 9101, no PAR) at idpyoidc's authorization endpoint: the URL repeats response_type and scope (OpenID Connect Core §6.1) and gets a code; client_id and request alone are refused")
    func requestObjectInURL() async throws {
        let server = try DPoPServer.require()
        let scratch = try TemporaryDirectory("dpop-it")
        defer { scratch.remove() }
        let directory = scratch.url
        let path = directory.appendingPathComponent("key.pem").path
        try ClientAssertionIntegration.generateP256Key(at: path)
        let key = try ClientKey(contentsOfFile: path)
        try await server.post("/it/client-key", json: try key.publicJWK(keyID: "jar-1"))

        var provider = Provider(
            id: "idpy-jar", authorizationURL: server.url("/authorization"), tokenURL: server.url("/token"), issuer: server.issuer,
            clientID: "dpop-client", clientAuthentication: .privateKeyJWT, redirectURI: URL(string: "http://127.0.0.1:9/callback"),
            scopes: ["read", "offline_access"], clientKey: key, clientKeyID: "jar-1")
        provider.requestObject = true
        let flow = try await AuthFlow(providers: [provider])
        let request = try await flow.authorizationRequest(provider: "idpy-jar")
        let items = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.map(\.name) == ["client_id", "response_type", "scope", "request"])

        let answer = try await CurlTransport().send(HTTPRequest(method: "GET", url: request.url))
        #expect(answer.status == 302)
        let callback = try #require(answer.headers["location"].flatMap { URLComponents(string: $0) })
        #expect(callback.queryItems?.first { $0.name == "state" }?.value == request.state.reveal())
        #expect(callback.queryItems?.contains { $0.name == "code" } == true, "idpyoidc verified the request object and issued a code")

        // The URL as OAuthFlow built it before: idpyoidc checks the query's required parameters first.
        var bare = try #require(URLComponents(url: request.url, resolvingAgainstBaseURL: false))
        bare.queryItems = items.filter { $0.name == "client_id" || $0.name == "request" }
        let refused = try await CurlTransport().send(HTTPRequest(method: "GET", url: try #require(bare.url)))
        #expect(refused.status == 400)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("response_type"))
    }

    @Test("the key stays with the tokens: a new flow over the same store refreshes with the same key")
    func keyPersists() async throws {
        let server = try DPoPServer.require()
        try await server.reset()
        let store = MemorySecretStore()
        do { _ = try await Self.loggedIn(server, store: store) }  // that flow is gone after this line
        let second = try await AuthFlow(providers: [Self.provider(server)], store: store)
        _ = try await second.refresh(provider: "idpy")
        let proofs = try await server.received().map { try WireJWS(try #require($0.dpop)) }
        let thumbprints = try proofs.map { try $0.thumbprint() }
        #expect(thumbprints.count == 2 && thumbprints[0] == thumbprints[1])
    }
}

// MARK: - The server

/// One request the wrapper recorded.
struct DPoPRecordedRequest: Sendable {
    var path: String
    var method: String
    var authorization: String?
    var dpop: String?
    var form: [String: String]
}

/// The running dpopserver.py of this suite.
struct DPoPServer: Sendable {
    let port: Int
    var issuer: String { "http://127.0.0.1:\(port)" }
    func url(_ path: String) -> URL { URL(string: issuer + path)! }

    @TaskLocal static var current: DPoPServer?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> DPoPServer {
        try #require(current, "run inside the .dpopServer suite", sourceLocation: sourceLocation)
    }

    func post(_ path: String, json: String) async throws {
        let response = try await CurlTransport().send(HTTPRequest(method: "POST", url: url(path), headers: [("Content-Type", "application/json")],
                                                                 body: Data(json.utf8)))
        #expect(response.status == 200)
    }

    func reset() async throws { try await post("/it/reset", json: "{}") }

    func nonces(token: Bool = false, resource: Bool = false) async throws {
        try await post("/it/nonces", json: #"{"token":\#(token),"resource":\#(resource)}"#)
    }

    func received() async throws -> [DPoPRecordedRequest] {
        let response = try await CurlTransport().send(HTTPRequest(method: "GET", url: url("/it/requests")))
        let list = (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
        return list.map {
            DPoPRecordedRequest(path: $0["path"] as? String ?? "", method: $0["method"] as? String ?? "",
                                authorization: $0["authorization"] as? String, dpop: $0["dpop"] as? String,
                                form: $0["form"] as? [String: String] ?? [:])
        }
    }
}

extension Trait where Self == ScriptedServerTrait {
    /// Runs the suite against one dpopserver.py started for it (setup.sh + start.sh on a free port, stop.sh after).
    static var dpopServer: Self {
        Self(server: ScriptedServer(directory: "dpop", logPrefix: "oauthflow-dpop", portVariable: "OAUTHFLOW_DPOP_PORT")) { port, suite in
            try await DPoPServer.$current.withValue(DPoPServer(port: port)) { try await suite() }
        }
    }
}

/// The query of `url` (first value wins).
private func query(_ url: URL) -> [String: String] {
    var pairs: [String: String] = [:]
    for item in URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? [] where pairs[item.name] == nil {
        pairs[item.name] = item.value ?? ""
    }
    return pairs
}
