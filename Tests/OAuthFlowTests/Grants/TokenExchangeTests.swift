import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Token exchange (RFC 8693) and resource indicators (RFC 8707)", .timeLimit(.minutes(1)))
struct TokenExchangeTests {
    let mock = MockProvider()
    let clock = TestClock()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, transport: mock.transport(), options: options(clock))
    }

    static func exchanged(type: String = "Bearer", issued: String? = TokenType.accessToken, access: String = "issued-1") -> MockResponse {
        var object: [String: JSONValue] = ["access_token": .string(access), "token_type": .string(type), "expires_in": .number(600)]
        if let issued { object["issued_token_type"] = .string(issued) }
        return .json(object: object)
    }

    @Test("exchangeToken sends the RFC 8693 §2.1 fields in order, repeated audience and resource, through the client's authentication")
    func wire() async throws {
        mock.script(.token, [Self.exchanged()])
        let flow = try await flow(mock.provider(id: "sts", clientSecret: "s3cret"))
        let authorization = try await flow.exchangeToken(
            provider: "sts", subjectToken: Secret("subject.jwt.token"), actorToken: Secret("actor-token"), actorTokenType: TokenType.accessToken,
            audience: ["a1", "a2"], resources: [URL(string: "https://r1.example/api")!, URL(string: "urn:example:r2")!],
            scopes: ["read", "write"], requestedTokenType: TokenType.accessToken)
        #expect(authorization.grant == .tokenExchange)
        #expect(authorization.issuedTokenType == TokenType.accessToken)
        #expect(authorization.scopes == ["read", "write"])

        let sent = try #require(mock.requests(.token).only)
        #expect(sent.basicCredentials?.id == "mock-client" && sent.basicCredentials?.secret == "s3cret")
        #expect(sent.formPairs.map { "\($0.0)=\($0.1)" } == [
            "grant_type=urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token=subject.jwt.token",
            "subject_token_type=urn:ietf:params:oauth:token-type:jwt",
            "actor_token=actor-token",
            "actor_token_type=urn:ietf:params:oauth:token-type:access_token",
            "requested_token_type=urn:ietf:params:oauth:token-type:access_token",
            "audience=a1", "audience=a2",
            "resource=https://r1.example/api", "resource=urn:example:r2",
            "scope=read write",
        ])
        #expect(try await flow.accessToken(for: "sts").reveal() == "issued-1")
    }

    @Test("token_type N_A: accepted for a refresh token or JWT issued, kept with issued_token_type through the store; refused for an access token or without issued_token_type",
          arguments: [
            (TokenType.refreshToken as String?, true), (TokenType.jwt, true), (TokenType.accessToken, false), (nil, false),
          ])
    func notApplicable(issued: String?, accepted: Bool) async throws {
        mock.script(.token, [Self.exchanged(type: "N_A", issued: issued)])
        let store = MemorySecretStore()
        let flow = try await AuthFlow(providers: [mock.provider(id: "sts", clientSecret: "s3cret")], store: store,
                                      transport: mock.transport(), options: options(clock))
        if accepted {
            let authorization = try await flow.exchangeToken(provider: "sts", subjectToken: Secret("subject"))
            #expect(authorization.tokenType == "N_A" && authorization.issuedTokenType == issued)
            let data = try #require(try await store.load("sts"))
            let restored = try StoredEntry.decode(data, key: "sts")
            #expect(restored.tokenType == "N_A" && restored.issuedTokenType == issued)
        } else {
            let error = await #expect(throws: OAuthError.self) { try await flow.exchangeToken(provider: "sts", subjectToken: Secret("subject")) }
            #expect(error?.code == .invalidResponse)
            #expect(error?.message?.contains(issued == nil ? "N_A without an issued_token_type" : "an access token needs a token_type") == true,
                    "\(error?.message ?? "")")
            #expect(try await store.load("sts") == nil)
        }
    }

    @Test("an actor token needs its type; a type without a token, or a type that is not a URI, is .configuration before any request")
    func actorRules() async throws {
        let flow = try await flow(mock.provider(id: "sts", clientSecret: "s3cret"))
        let missingType = await #expect(throws: OAuthError.self) {
            try await flow.exchangeToken(provider: "sts", subjectToken: Secret("s"), actorToken: Secret("a"))
        }
        #expect(missingType?.code == .configuration && missingType?.message?.contains("needs its actor_token_type") == true)
        let missingToken = await #expect(throws: OAuthError.self) {
            try await flow.exchangeToken(provider: "sts", subjectToken: Secret("s"), actorTokenType: TokenType.jwt)
        }
        #expect(missingToken?.code == .configuration)
        let badType = await #expect(throws: OAuthError.self) {
            try await flow.exchangeToken(provider: "sts", subjectToken: Secret("s"), subjectTokenType: "jwt")
        }
        #expect(badType?.code == .configuration)
        #expect(mock.requests(.token).isEmpty)
    }

    // MARK: Catalog

    static func catalog(_ directory: URL, _ members: String, secret: Bool = true) throws -> [Provider] {
        let text = """
            [{"id": "wl", "tokenURL": "https://sts.example/token", "clientID": "wl-client"\(secret ? #", "clientSecret": "s3cret""# : "")\(members)}]
            """
        return try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: directory, environment: ["TOKENS": directory.path], strict: true)
    }

    @Test("catalog: grant token-exchange with subjectTokenFile (relative, ${VAR}), subjectTokenType default jwt, audience and resource as string or array")
    func catalogKeys() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let implied = try Self.catalog(files.directory, #", "subjectTokenFile": "token""#)[0]
        #expect(implied.grant == .tokenExchange && implied.serviceGrant == .tokenExchange)
        #expect(implied.tokenExchange == Provider.TokenExchange() && implied.subjectTokenSource == .file(files.path("token")))
        #expect(implied.tokenExchange?.subjectTokenType == "urn:ietf:params:oauth:token-type:jwt")
        let full = try Self.catalog(files.directory, """
            , "grant": "token-exchange", "subjectTokenFile": "${TOKENS}/t", "subjectTokenType": "urn:ietf:params:oauth:token-type:access_token",
            "audience": ["a", "b"], "requestedTokenType": "urn:ietf:params:oauth:token-type:jwt",
            "resource": ["https://api.example/x", "urn:example:y"]
            """)[0]
        #expect(full.subjectTokenSource?.filePath == files.directory.path + "/t")
        #expect(full.tokenExchange?.subjectTokenType == TokenType.accessToken)
        #expect(full.tokenExchange?.audience == ["a", "b"] && full.tokenExchange?.requestedTokenType == TokenType.jwt)
        #expect(full.resources.map(\.absoluteString) == ["https://api.example/x", "urn:example:y"])
        let one = try Self.catalog(files.directory, #", "resource": "https://api.example/only""#)[0]
        #expect(one.resources.map(\.absoluteString) == ["https://api.example/only"] && one.serviceGrant == nil)
    }

    @Test("catalog refusals name the key and the reason", arguments: [
        (#", "resource": "https://api.example/x#frag""#, "resource: must not contain a fragment (RFC 8707 §2)"),
        (#", "resource": ["https://a.example/", "/relative"]"#, "resource[1]: must be an absolute URI (RFC 8707 §2)"),
        (#", "resource": []"#, "resource: must not be an empty array"),
        (#", "grant": "password""#, #"grant: must be "client-credentials", "jwt-bearer" or "token-exchange""#),
        (#", "grant": "token-exchange""#, "grant: token-exchange needs subjectTokenSource or subjectTokenFile"),
        (#", "audience": "x""#, "audience: is a token-exchange setting and needs subjectTokenSource (or subjectTokenFile)"),
        (#", "subjectTokenFile": "t", "subjectTokenType": "jwt""#, "subjectTokenType: must be an absolute URI"),
        (#", "subjectTokenFile": "t", "grant": "client-credentials""#,
         "subjectTokenSource: is for the token-exchange or jwt-bearer grant, and grant is client-credentials"),
        (#", "subjectTokenFile": "t", "requestedTokenType": "access token""#, "requestedTokenType: must be an absolute URI"),
    ])
    func catalogRefusals(members: String, expected: String) throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let error = #expect(throws: OAuthError.self) { try Self.catalog(files.directory, members) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains(#"provider #1 ("wl"): "# + expected) == true, "\(error?.message ?? "")")
    }

    @Test("grant client-credentials needs a client that authenticates")
    func clientCredentialsNeedsCredentials() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let error = #expect(throws: OAuthError.self) { try Self.catalog(files.directory, #", "grant": "client-credentials""#, secret: false) }
        #expect(error?.message?.contains("grant: client-credentials needs a client that authenticates") == true, "\(error?.message ?? "")")
    }

    @Test("subject token file: read on every exchange; missing, empty or not one token is .configuration naming the file, never its contents, and nothing is sent",
          arguments: ["missing", "empty", "blank", "two words"])
    func subjectTokenFile(problem: String) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        var provider = try Self.catalog(files.directory, #", "subjectTokenFile": "token""#)[0]
        provider.tokenURL = mock.url(.token)
        let path = files.path("token")
        switch problem {
        case "empty": try Data().write(to: URL(fileURLWithPath: path))
        case "blank": try Data(" \n\n".utf8).write(to: URL(fileURLWithPath: path))
        case "two words": try Data("secret-part other-part\n".utf8).write(to: URL(fileURLWithPath: path))
        default: break
        }
        let flow = try await flow(provider)
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.accessToken(for: "wl") }
        #expect(error?.code == .configuration)
        let reason = ["missing": "does not exist", "empty": "is empty", "blank": "is empty (only white space)",
                      "two words": "does not hold one token"][problem]!
        #expect(error?.message?.contains("the subject token file \(path) \(reason)") == true, "\(error?.message ?? "")")
        #expect(error.map { !String(describing: $0).contains("secret-part") && !String(reflecting: $0).contains("secret-part") } == true)
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("catalog token-exchange on demand: the file's token is exchanged when nothing is stored and read again when the token is due")
    func onDemandRereads() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        var provider = try Self.catalog(files.directory, #", "subjectTokenFile": "token", "audience": "svc", "resource": "https://api.example/""#)[0]
        provider.tokenURL = mock.url(.token)
        try Data("first-token\n".utf8).write(to: URL(fileURLWithPath: files.path("token")))
        mock.script(.token, [Self.exchanged(access: "at-1"), Self.exchanged(access: "at-2")])
        let flow = try await flow(provider)
        #expect(try await flow.accessToken(for: "wl").reveal() == "at-1")
        try Data("second-token".utf8).write(to: URL(fileURLWithPath: files.path("token")))
        #expect(try await flow.accessToken(for: "wl").reveal() == "at-1")   // still valid: no exchange
        clock.advance(by: .seconds(600))
        #expect(try await flow.accessToken(for: "wl").reveal() == "at-2")
        let sent = mock.requests(.token)
        #expect(sent.map { $0.form["subject_token"] } == ["first-token", "second-token"])
        for request in sent {
            #expect(request.formPairs.map(\.0) == ["grant_type", "subject_token", "subject_token_type", "audience", "resource"])
            #expect(request.form["audience"] == "svc" && request.form["resource"] == "https://api.example/")
        }
    }

    // MARK: Resource indicators on the other grants

    @Test("resource on client credentials, the authorization request, the code exchange and refresh: one field per resource (RFC 8707 §2)")
    func resourcesEverywhere() async throws {
        var provider = mock.provider(id: "api", clientSecret: "s3cret")
        provider.resources = [URL(string: "https://a.example/")!, URL(string: "https://b.example/v1")!]
        try provider.validate()
        mock.script(.token, [.token(access: "cc-1"), .token(access: "cc-2"), .token(access: "code-1", expiresIn: 60, refresh: "rt-1"),
                             .token(access: "rf-1")])
        let flow = try await flow(provider)
        _ = try await flow.clientCredentials(provider: "api")
        _ = try await flow.clientCredentials(provider: "api", resources: [URL(string: "https://only.example/")!])

        let request = try await flow.authorizationRequest(provider: "api")
        let query = queryPairs(request.url).filter { $0.0 == "resource" }.map(\.1)
        #expect(query == ["https://a.example/", "https://b.example/v1"])
        let state = request.state.reveal()
        _ = try await flow.completeAuthorization(callbackURL: URL(string: "http://127.0.0.1:8765/callback?code=c1&state=\(state)")!)
        clock.advance(by: .seconds(120))
        _ = try await flow.accessToken(for: "api")

        let sent = mock.requests(.token)
        #expect(sent.count == 4)
        let resources = sent.map { $0.formPairs.filter { $0.0 == "resource" }.map(\.1) }
        #expect(resources == [
            ["https://a.example/", "https://b.example/v1"], ["https://only.example/"],
            ["https://a.example/", "https://b.example/v1"], ["https://a.example/", "https://b.example/v1"],
        ])
        #expect(sent.map { $0.form["grant_type"] } == ["client_credentials", "client_credentials", "authorization_code", "refresh_token"])
    }

    @Test("a resource with a fragment, or a relative one, is refused by validate() and by a call")
    func resourceRules() async throws {
        var provider = mock.provider(id: "api", clientSecret: "s3cret")
        provider.resources = [URL(string: "https://a.example/#x")!]
        let error = #expect(throws: OAuthError.self) { try provider.validate() }
        #expect(error?.message?.contains("resource[0]: must not contain a fragment") == true, "\(error?.message ?? "")")
        let flow = try await flow(mock.provider(id: "api", clientSecret: "s3cret"))
        let call = await #expect(throws: OAuthError.self) {
            try await flow.clientCredentials(provider: "api", resources: [URL(string: "relative/path")!])
        }
        #expect(call?.code == .configuration && call?.message?.contains("must be an absolute URI") == true)
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("description and reflection of a provider with token-exchange settings and of an exchanged authorization hold no token")
    func redaction() async throws {
        mock.script(.token, [Self.exchanged(access: "issued-secret-value")])
        let flow = try await flow(mock.provider(id: "sts", clientSecret: "s3cret"))
        let authorization = try await flow.exchangeToken(provider: "sts", subjectToken: Secret("subject-secret-value"))
        for text in [String(describing: authorization), String(reflecting: authorization), String(describing: flow.state)] {
            #expect(!text.contains("issued-secret-value") && !text.contains("subject-secret-value"))
        }
        var logged = ""
        dump(try await flow.tokenSet(for: "sts"), to: &logged)
        #expect(!logged.contains("issued-secret-value"))
    }

    @Test("background renewal: a token exchanged from the catalog's subject token file is renewed ahead of expiry; one exchanged in code is not (nothing to exchange again)")
    func proactive() async throws {
        var withFile = mock.provider(id: "file", clientSecret: "s3cret")
        withFile.tokenExchange = Provider.TokenExchange()
        withFile.subjectTokenSource = .file("/run/token")
        let flow = try await flow(withFile, mock.provider(id: "code", clientSecret: "s3cret"))
        let now = clock.date
        func set(_ id: String) -> TokenSet {
            TokenSet(providerID: id, accessToken: Secret("t"), issuedAt: now, expiresAt: now.addingTimeInterval(3600), grant: .tokenExchange,
                     issuedTokenType: TokenType.accessToken)
        }
        #expect(flow.proactiveDelay(for: set("file"), now: now) != nil)
        #expect(flow.proactiveDelay(for: set("code"), now: now) == nil)
    }
}
