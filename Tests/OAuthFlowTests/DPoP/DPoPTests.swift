import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

@Suite("DPoP proofs and keys (RFC 9449 §4, RFC 7638)", .timeLimit(.minutes(1)))
struct DPoPProofTests {
    @Test("RFC 7638 §3.1: the thumbprint of the example RSA key; members other than the required ones are ignored")
    func rfc7638Vector() throws {
        let jwk = [
            "kty": "RSA", "alg": "RS256", "kid": "2011-04-29", "e": "AQAB",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        ]
        #expect(try DPoPProof.header(jwk: jwk, algorithm: .rs256).thumbprint == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test("RFC 9449 §4.2/§6.1: the example proof key's thumbprint is the example's jkt")
    func rfc9449Thumbprint() throws {
        let jwk = ["kty": "EC", "crv": "P-256", "x": "l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs",
                   "y": "9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"]
        #expect(try DPoPProof.header(jwk: jwk, algorithm: .es256).thumbprint == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
    }

    @Test("RFC 9449 §7.1: ath of the example access token")
    func athVector() throws {
        #expect(try DPoPProof.ath(Secret("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")) == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
    }

    @Test("a proof: typ dpop+jwt, alg, public jwk only; htm, htu without query and fragment, iat, a fresh 128-bit jti; it verifies",
          arguments: [SigningAlgorithm.es256, .es384, .edDSA, .ps256, .rs256])
    func proofShape(algorithm: SigningAlgorithm) async throws {
        let key = try DPoPKey.generate(algorithm)
        let prover = DPoPProver(key)
        let url = URL(string: "https://Server.example:8443/token/path?x=1#frag")!
        let now = Date(timeIntervalSince1970: 1_700_000_000.9)
        let first = try WireJWS(try await prover.proof(method: "POST", url: url, nonce: nil, now: now).reveal())
        let second = try WireJWS(try await prover.proof(method: "POST", url: url, nonce: "n-1", accessToken: Secret("at-1"), now: now).reveal())

        #expect(first.header["typ"] as? String == "dpop+jwt" && first.header["alg"] as? String == algorithm.rawValue)
        #expect(Set(first.header.keys) == ["typ", "alg", "jwk"])
        #expect(first.jwk["d"] == nil && first.jwk["p"] == nil && first.jwk["kid"] == nil)
        #expect(Set(first.claims.keys) == ["jti", "htm", "htu", "iat"])
        #expect(first.claims["htm"] as? String == "POST")
        #expect(first.claims["htu"] as? String == "https://Server.example:8443/token/path")
        #expect(first.claims["iat"] as? Int == 1_700_000_000)
        #expect(Base64URL.decode(first.jti ?? "")?.count == 16)
        #expect(first.jti != second.jti)
        #expect(second.claims["nonce"] as? String == "n-1")
        #expect(second.claims["ath"] as? String == (try DPoPProof.ath(Secret("at-1"))))
        #expect(try first.verifies() && second.verifies())
        #expect(try first.thumbprint() == key.thumbprint)
    }

    @Test("a stored key reads back as the same key (base64url DER; sealed with the entry when the store is encrypted)",
          arguments: [SigningAlgorithm.es256, .edDSA, .rs256])
    func keyRoundTrip(algorithm: SigningAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        let again = try DPoPKey.decode(key.encoded.reveal(), algorithm: algorithm)
        #expect(again.thumbprint == key.thumbprint)
        let decoded = try JSONDecoder().decode(DPoPKey.self, from: try JSONEncoder().encode(key))
        #expect(decoded.thumbprint == key.thumbprint && decoded.algorithm == algorithm)
        #expect(throws: OAuthError.self) { try DPoPKey.decode(key.encoded.reveal(), algorithm: algorithm == .es256 ? .edDSA : .es256) }
    }

    @Test("the key never prints: description, debugDescription, dump, and a TokenSet holding it")
    func redaction() throws {
        let key = try DPoPKey.generate(.es256)
        let secret = key.encoded.reveal()
        var set = TokenSet(providerID: "p", accessToken: Secret("at-x"), tokenType: "DPoP", issuedAt: Date(), grant: .clientCredentials)
        set.dpopKey = key
        var dumped = ""
        dump(key, to: &dumped)
        dump(set, to: &dumped)
        for text in [String(describing: key), String(reflecting: key), dumped, String(describing: set), String(reflecting: set),
                     String(describing: set.authorization)] {
            #expect(!text.contains(secret) && !text.contains(String(secret.prefix(24))))
        }
        #expect(String(describing: key) == "DPoPKey(ES256)")
        let headers = AuthorizationHeaders(authorization: Secret("DPoP at-x"), dpop: Secret("eyJ.proof.sig"))
        #expect(String(describing: headers) == "AuthorizationHeaders(DPoP, proof)")
    }

    @Test("nonces are kept per origin, only valid NQCHAR values, the latest wins")
    func nonceTable() {
        let table = DPoPNonces()
        let tokenURL = URL(string: "https://as.test/token")!
        #expect(table.record(HTTPResponse(status: 200, headers: ["DPoP-Nonce": "n-1"]), from: tokenURL))
        #expect(table.record(HTTPResponse(status: 400, headers: ["DPoP-Nonce": "n-2"]), from: URL(string: "https://AS.test:443/other")!))
        #expect(table.nonce(for: tokenURL) == "n-2")
        #expect(table.nonce(for: URL(string: "https://api.test/x")!) == nil)
        #expect(!table.record(HTTPResponse(status: 200, headers: ["DPoP-Nonce": "bad\"nonce"]), from: tokenURL))
        #expect(!table.record(HTTPResponse(status: 200, headers: ["DPoP-Nonce": ""]), from: tokenURL))
        #expect(table.nonce(for: tokenURL) == "n-2")
    }
}

@Suite("DPoP in the flow (RFC 9449 §5, §7, §8, §10)", .timeLimit(.minutes(1)))
struct DPoPFlowTests {
    let clock = TestClock()
    let authServer = ScriptedTransport()
    let api = ScriptedTransport()

    func provider(_ mode: DPoPMode = .enabled, algorithm: SigningAlgorithm? = nil) -> Provider {
        var provider = scriptedProvider(secret: "s3cret")
        provider.dpop = mode
        provider.dpopAlgorithm = algorithm
        return provider
    }

    func flow(_ provider: Provider, store: MemorySecretStore = MemorySecretStore()) async throws -> AuthFlow {
        try await AuthFlow(providers: [provider], store: store, transport: authServer, options: options(clock))
    }

    func proofs(_ path: String = "/token") throws -> [WireJWS] {
        try authServer.requests(path).map { try WireJWS(try #require($0.header("DPoP"))) }
    }

    @Test("client credentials: the token request carries one proof (POST, the token URL); token_type DPoP is accepted and marked DPoP-bound")
    func clientCredentials() async throws {
        let store = MemorySecretStore()
        let flow = try await flow(provider(), store: store)
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        let recorders = recordStates(flow)

        let authorization = try await flow.clientCredentials(provider: "app")

        #expect(authorization.isDPoPBound && authorization.tokenType == "DPoP")
        let sent = try #require(authServer.requests("/token").only)
        #expect(sent.headerValues("DPoP").count == 1)
        let proof = try WireJWS(try #require(sent.header("DPoP")))
        #expect(proof.claims["htm"] as? String == "POST" && proof.claims["htu"] as? String == "https://as.test/token")
        #expect(proof.claims["ath"] == nil && proof.claims["nonce"] == nil)
        #expect(try proof.verifies())
        #expect(proof.header["alg"] as? String == "ES256")
        // The key went into the store with the tokens.
        let stored = String(decoding: try #require(try await store.load("app")), as: UTF8.self)
        #expect(stored.contains(#""dpopAlgorithm":"ES256","dpopKey":""#))
        let set = try #require(flow.tokens["app"])
        #expect(set.dpopKey?.thumbprint == (try proof.thumbprint()))
        let states = await collected(recorders).first ?? []
        #expect(states.contains { if case .authorized(_, let a) = $0 { return a.isDPoPBound } else { return false } })
    }

    // No Debian or PyPI server offers these two grants with DPoP (Documentation/Testing.md); this
    // scripted test is their DPoP proof.
    @Test("token exchange and the JWT-bearer grant prove the key as every grant does: a proof for POST to the token URL, use_dpop_nonce sent once more with the nonce, token_type DPoP kept with the key",
          arguments: [GrantType.tokenExchange, .jwtBearer])
    func otherGrants(grant: GrantType) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        var provider = provider(.required)
        if grant == .jwtBearer {
            provider.clientSecret = nil
            provider.clientAuthentication = .privateKeyJWT
            provider.clientKey = try ClientKey(contentsOfFile: try files.key(.p256SEC1))
        }
        let flow = try await flow(provider)
        authServer.script("/token", [.oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "n-1"]), .token("at-1", type: "DPoP")])

        let authorization = grant == .tokenExchange
            ? try await flow.exchangeToken(provider: "app", subjectToken: Secret("subject-token-1"))
            : try await flow.jwtBearer(provider: "app")

        #expect(authorization.grant == grant && authorization.isDPoPBound)
        let sent = authServer.requests("/token")
        #expect(sent.map { $0.form["grant_type"] } == [grant.rawValue, grant.rawValue])
        #expect(sent.allSatisfy { $0.headerValues("DPoP").count == 1 })
        let proofs = try proofs()
        #expect(proofs.map { $0.claims["nonce"] as? String } == [nil, "n-1"])
        #expect(proofs.allSatisfy { $0.claims["htm"] as? String == "POST" && $0.claims["htu"] as? String == "https://as.test/token" })
        #expect(try proofs.allSatisfy { try $0.verifies() })
        #expect(proofs[0].jti != proofs[1].jti)
        #expect(try flow.tokens["app"]?.dpopKey?.thumbprint == proofs[1].thumbprint())
    }

    @Test("use_dpop_nonce with a DPoP-Nonce: sent once more with the nonce and a new jti; exactly two requests (RFC 9449 §8)")
    func nonceRetry() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "eyJ7S_zG.eyJH0-Z.HX4w-7v"]), .token("at-1", type: "DPoP")])

        _ = try await flow.clientCredentials(provider: "app")

        let proofs = try proofs()
        #expect(proofs.count == 2)
        #expect(proofs[0].claims["nonce"] == nil && proofs[1].claims["nonce"] as? String == "eyJ7S_zG.eyJH0-Z.HX4w-7v")
        #expect(proofs[0].jti != proofs[1].jti)
        #expect(try proofs[0].thumbprint() == proofs[1].thumbprint())
    }

    @Test("the latest DPoP-Nonce of the server goes into the next proof: a rotated nonce replaces the old one (RFC 9449 §8.2)")
    func rotatedNonce() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.status(200, json: #"{"access_token":"at-1","token_type":"DPoP","expires_in":60}"#, headers: ["DPoP-Nonce": "n-1"]),
                                     .status(200, json: #"{"access_token":"at-2","token_type":"DPoP","expires_in":60}"#, headers: ["DPoP-Nonce": "n-2"]),
                                     .token("at-3", type: "DPoP")])
        for _ in 0..<3 { _ = try await flow.clientCredentials(provider: "app") }
        #expect(try proofs().map { $0.claims["nonce"] as? String } == [nil, "n-1", "n-2"])
    }

    @Test("a second use_dpop_nonce is an error, not a loop: exactly two requests, .serverRejected use_dpop_nonce")
    func secondNonceRequestFails() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "n-1"]),
                                     .oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "n-2"]), .token("never", type: "DPoP")])

        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }

        #expect(error?.code == .serverRejected && error?.response?.code == .useDPoPNonce)
        #expect(authServer.requests("/token").count == 2)
    }

    @Test("use_dpop_nonce without a DPoP-Nonce header is not retried")
    func nonceRequestWithoutNonce() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.oauthError("use_dpop_nonce"), .token("never", type: "DPoP")])
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }
        #expect(error?.response?.code == .useDPoPNonce && authServer.requests("/token").count == 1)
    }

    @Test("a Bearer answer to a required DPoP request is .invalidResponse and nothing is stored; with dpop true it is kept as Bearer")
    func bearerAnswer() async throws {
        let store = MemorySecretStore()
        let required = try await flow(provider(.required), store: store)
        authServer.script("/token", [.token("at-bearer"), .token("at-bearer-2")])
        let error = await #expect(throws: OAuthError.self) { try await required.clientCredentials(provider: "app") }
        #expect(error?.code == .invalidResponse)
        #expect(try await store.load("app") == nil)

        let enabled = try await flow(provider(.enabled))
        let authorization = try await enabled.clientCredentials(provider: "app")
        #expect(!authorization.isDPoPBound && authorization.tokenType == "Bearer")
    }

    @Test("token_type DPoP is refused when no proof was sent (RFC 9449 §5)")
    func dpopWithoutProof() async throws {
        let flow = try await flow(provider(.off))
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }
        #expect(error?.code == .invalidResponse && error?.message?.contains("no DPoP proof was sent") == true)
        #expect(authServer.requests("/token").only?.header("DPoP") == nil)
    }

    @Test("a refresh proves the same key, with the nonce the last token response rotated to; the key survives a restart")
    func refreshAndRestart() async throws {
        let store = MemorySecretStore()
        var first: AuthFlow? = try await flow(provider(), store: store)
        authServer.script("/token", [.status(200, json: #"{"access_token":"at-1","token_type":"DPoP","expires_in":3600,"refresh_token":"rt-1"}"#,
                                             headers: ["DPoP-Nonce": "nonce-A"])])
        let request = try #require(try await first?.authorizationRequest(provider: "app"))
        _ = try await first?.completeAuthorization(callbackURL: callback(request))
        first = nil

        // A new process: same store, no memory of the key or the nonce but what the store holds.
        let second = try await flow(provider(), store: store)
        clock.advance(by: .seconds(3600))
        authServer.script("/token", [.oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "nonce-B"]),
                                     .status(200, json: #"{"access_token":"at-2","token_type":"DPoP","expires_in":3600,"refresh_token":"rt-2"}"#)])
        _ = try await second.accessToken(for: "app")

        let proofs = try proofs()
        #expect(proofs.count == 3)
        #expect(authServer.requests("/token").map { $0.form["grant_type"] } == ["authorization_code", "refresh_token", "refresh_token"])
        #expect(Set(try proofs.map { try $0.thumbprint() }).count == 1, "one key for the provider, across the restart")
        #expect(proofs[2].claims["nonce"] as? String == "nonce-B")
        #expect(second.tokens["app"]?.dpopKey != nil)
    }

    @Test("an encrypted file store seals the DPoP key with the tokens: the file holds neither; a new flow reads the same key back")
    func sealedInFileStore() async throws {
        let parent = try TemporaryDirectory("dpop-store")
        defer { parent.remove() }
        let directory = parent.url.appendingPathComponent("store", isDirectory: true)
        let key = try StoreKey.generate()
        func store() throws -> FileSecretStore { try FileSecretStore(directory: directory, encryption: EntryEncryption(key: key)) }
        var first: AuthFlow? = try await AuthFlow(providers: [provider()], store: try store(), transport: authServer, options: options(clock))
        authServer.script("/token", [.token("at-sealed", type: "DPoP"), .token("at-2", type: "DPoP")])
        _ = try await first?.clientCredentials(provider: "app")
        let encoded = try #require(first?.tokens["app"]?.dpopKey?.encoded.reveal())
        first = nil

        let file = try Data(contentsOf: directory.appendingPathComponent("app.json"))
        #expect(EntryEncryption.isSealed(file))
        let text = String(decoding: file, as: UTF8.self)
        #expect(!text.contains("dpopKey") && !text.contains(String(encoded.prefix(16))) && !text.contains("at-sealed"))

        let second = try await AuthFlow(providers: [provider()], store: try store(), transport: authServer, options: options(clock))
        #expect(second.tokens["app"]?.dpopKey?.encoded.reveal() == encoded)
        _ = try await second.refresh(provider: "app")
        let thumbprints = try proofs().map { try $0.thumbprint() }
        #expect(thumbprints.count == 2 && thumbprints[0] == thumbprints[1])
    }

    @Test("a logout forgets the key: the next grant proves a new one")
    func logoutForgetsKey() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.token("at-1", type: "DPoP"), .token("at-2", type: "DPoP")])
        _ = try await flow.clientCredentials(provider: "app")
        try await flow.clear(provider: "app")
        _ = try await flow.clientCredentials(provider: "app")
        let proofs = try proofs()
        #expect(proofs.count == 2)
        let thumbprints = try proofs.map { try $0.thumbprint() }
        #expect(thumbprints.count == 2 && thumbprints[0] != thumbprints[1])
    }

    @Test("dpop_jkt in the authorization request is the thumbprint of the key the code exchange proves (RFC 9449 §10)")
    func authorizationRequestThumbprint() async throws {
        let flow = try await flow(provider())
        let request = try await flow.authorizationRequest(provider: "app")
        let jkt = try #require(query(request.url)?["dpop_jkt"])
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        _ = try await flow.completeAuthorization(callbackURL: callback(request))
        #expect(try proofs().only?.thumbprint() == jkt)
    }

    @Test("an algorithm the server's dpop_signing_alg_values_supported lacks is .configuration before any token request")
    func advertisedAlgorithms() async throws {
        var provider = Provider(id: "app", issuer: "https://as.test", clientID: "cli-1", clientSecret: Secret("s3cret"), scopes: ["read"])
        provider.dpop = .enabled
        provider.dpopAlgorithm = .edDSA
        authServer.script("/.well-known/openid-configuration", [.status(200, json: """
            {"issuer":"https://as.test","token_endpoint":"https://as.test/token","dpop_signing_alg_values_supported":["ES256","PS256"]}
            """)])
        let flow = try await flow(provider)
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }
        #expect(error?.code == .configuration && error?.message?.contains("ES256, PS256") == true)
        #expect(authServer.requests("/token").isEmpty)
    }

    @Test("the authorizing transport: Authorization: DPoP, a proof with ath for the request; a 401 use_dpop_nonce is retried once with the nonce (RFC 9449 §7.1, §9)")
    func authorizingTransport() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        _ = try await flow.clientCredentials(provider: "app")
        let transport = AuthorizingTransport(base: api, source: flow.tokenSource(for: "app"))
        api.script("/invoices", [.status(401, headers: ["WWW-Authenticate": #"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#,
                                                        "DPoP-Nonce": "rs-nonce-1"]),
                                 .status(200, json: "[]")])

        let response = try await transport.send(HTTPRequest(method: "GET", url: URL(string: "https://api.test/invoices?page=2")!))

        #expect(response.status == 200)
        let sent = api.requests("/invoices")
        #expect(sent.count == 2)
        #expect(sent.map { $0.headerValues("Authorization") } == [["DPoP at-1"], ["DPoP at-1"]])
        let proofs = try sent.map { try WireJWS(try #require($0.header("DPoP"))) }
        for proof in proofs {
            #expect(proof.claims["htm"] as? String == "GET" && proof.claims["htu"] as? String == "https://api.test/invoices")
            #expect(proof.claims["ath"] as? String == (try DPoPProof.ath(Secret("at-1"))))
            #expect(try proof.verifies())
            let thumbprint = try proof.thumbprint()
            let tokenKey = try self.proofs().first?.thumbprint()
            #expect(thumbprint == tokenKey)
        }
        #expect(proofs[0].claims["nonce"] == nil && proofs[1].claims["nonce"] as? String == "rs-nonce-1")
        #expect(proofs[0].jti != proofs[1].jti)
    }

    @Test("a second 401 use_dpop_nonce from the resource server is returned, not retried again")
    func authorizingTransportNoLoop() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        _ = try await flow.clientCredentials(provider: "app")
        let transport = AuthorizingTransport(base: api, source: flow.tokenSource(for: "app"))
        let challenge = ["WWW-Authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": "n"]
        api.script("/invoices", [.status(401, headers: challenge), .status(401, headers: challenge), .status(200)])
        let response = try await transport.send(HTTPRequest(method: "GET", url: URL(string: "https://api.test/invoices")!))
        #expect(response.status == 401 && api.requests("/invoices").count == 2)
    }

    @Test("userinfo with a DPoP-bound token: Authorization: DPoP and a proof for GET on the userinfo URL with ath")
    func userInfo() async throws {
        var provider = provider()
        provider.userinfoURL = URL(string: "https://as.test/userinfo")
        let flow = try await flow(provider)
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        authServer.script("/userinfo", [.status(200, json: #"{"sub":"u-1"}"#)])
        _ = try await flow.clientCredentials(provider: "app")
        let info = try await flow.userInfo(provider: "app")
        #expect(info.subject == "u-1")
        let sent = try #require(authServer.requests("/userinfo").only)
        #expect(sent.headerValues("Authorization") == ["DPoP at-1"])
        let proof = try WireJWS(try #require(sent.header("DPoP")))
        #expect(proof.claims["htm"] as? String == "GET" && proof.claims["htu"] as? String == "https://as.test/userinfo")
        #expect(proof.claims["ath"] as? String == (try DPoPProof.ath(Secret("at-1"))))
    }

    @Test("a bearer token from a DPoP provider is sent as Bearer without a proof")
    func bearerFromDPoPProvider() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.token("at-1")])
        _ = try await flow.clientCredentials(provider: "app")
        let headers = try await flow.tokenSource(for: "app").authorizationHeaders(method: "GET", url: URL(string: "https://api.test/x")!)
        #expect(headers.authorization.reveal() == "Bearer at-1" && headers.dpop == nil)
    }

    @Test("authorizationHeaderValue() refuses a DPoP-bound token (it needs a proof per request)")
    func headerValueRefusesDPoP() async throws {
        let flow = try await flow(provider())
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        _ = try await flow.clientCredentials(provider: "app")
        let error = await #expect(throws: OAuthError.self) { try await flow.tokenSource(for: "app").authorizationHeaderValue() }
        #expect(error?.code == .configuration)
    }

    @Test("a key of the application's (a ClientKey) signs the proofs and is never stored")
    func applicationKey() async throws {
        let keys = try TemporaryDirectory("dpop-key")
        defer { keys.remove() }
        let pem = try #require(String(data: try Data(contentsOf: Self.writeKey(in: keys)), encoding: .utf8))
        let key = try ClientKey(pem: pem)
        var provider = provider()
        provider.dpopKey = key
        let store = MemorySecretStore()
        let flow = try await flow(provider, store: store)
        authServer.script("/token", [.token("at-1", type: "DPoP")])
        _ = try await flow.clientCredentials(provider: "app")
        #expect(try proofs().only?.thumbprint() == (try key.jwkThumbprint()))
        let stored = String(decoding: try #require(try await store.load("app")), as: UTF8.self)
        #expect(!stored.contains("dpopKey"))
    }

    /// A P-256 key made by openssl for this test, in `directory`.
    static func writeKey(in directory: TemporaryDirectory) throws -> URL {
        let url = directory.url.appendingPathComponent("key.pem")
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", url.path]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0)
        return url
    }
}

@Suite("DPoP catalog keys", .timeLimit(.minutes(1)))
struct DPoPCatalogTests {
    func load(_ members: String) throws(OAuthError) -> Provider {
        let json = #"[{"id":"p","tokenURL":"https://as.test/token","clientID":"c",\#(members)}]"#
        return try ProviderCatalog.load(data: Data(json.utf8), baseDirectory: nil, environment: [:]).first!
    }

    @Test("dpop true / \"required\" / false and dpopAlgorithm")
    func values() throws {
        #expect(try load(#""dpop":true"#).dpop == .enabled)
        #expect(try load(#""dpop":"required","dpopAlgorithm":"EdDSA""#).dpop == .required)
        #expect(try load(#""dpop":"required","dpopAlgorithm":"EdDSA""#).effectiveDPoPAlgorithm == .edDSA)
        #expect(try load(#""dpop":false"#).dpop == .off)
        #expect(try load(#""dpop":true"#).effectiveDPoPAlgorithm == .es256)
    }

    @Test("refused: another dpop value, an HMAC or unknown algorithm, dpopAlgorithm without dpop",
          arguments: [#""dpop":"yes""#, #""dpop":true,"dpopAlgorithm":"HS256""#, #""dpop":true,"dpopAlgorithm":"ES512""#,
                      #""dpopAlgorithm":"ES256""#])
    func refused(members: String) {
        let error = #expect(throws: OAuthError.self) { try load(members) }
        #expect(error?.code == .configuration && error?.message?.contains("dpop") == true)
    }
}
