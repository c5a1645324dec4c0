import Foundation
@testable import OAuthFlow
import Testing
import TestSupport

// Workload identity against real servers on loopback: every subject token source kind exchanged
// at idpyoidc's RFC 8693 token endpoint, an `external_account` file exchanged there too (Google's
// request is plain RFC 8693 when the file has no workforce `options`, so idpyoidc takes it), and a
// federated client assertion accepted by glewlwyd's private_key_jwt check. The CI platform's
// token endpoint and Google's impersonation endpoint are played by TestHTTPServer: they are the
// platform's, not authorization servers, and there is no real one to install.

extension TokenExchangeIntegration {
    /// Each kind of source the catalog takes.
    enum SourceKind: String, CaseIterable, Sendable {
        case file, url, githubActions, command, kubernetes, gitlabCI
    }

    @Test("subjectTokenSource of each kind: accessToken(for:) asks the source, idpyoidc exchanges the token it gets (RFC 8693 §2.1)",
          arguments: SourceKind.allCases)
    func sourceKinds(_ kind: SourceKind) async throws {
        let server = try ExchangeServer.require()
        let scratch = try TemporaryDirectory("workload-it")
        defer { scratch.remove() }
        let ci = try TestHTTPServer()
        defer { ci.stop() }
        let subject = try await server.subjectTokens(scope: "openid profile")
        let tokenFile = scratch.url.appendingPathComponent("token")
        try Data((subject.access + "\n").utf8).write(to: tokenFile)
        ci.script("/_apis/pipelines/workflows/7/idtoken", [.json(#"{"count":1,"value":"\#(subject.access)"}"#)])
        var environment = ["EXCHANGER_SECRET": Self.secret]
        let source: String
        switch kind {
        case .file:
            source = #"{"file": "token"}"#
        case .url:
            environment["CI_TOKEN"] = "ci-request-token"
            source = #"{"url": "\#(ci.baseURL)/_apis/pipelines/workflows/7/idtoken?api-version=2.0", "headers": {"Authorization": "bearer ${CI_TOKEN}"}, "jsonField": "value"}"#
        case .githubActions:
            environment["ACTIONS_ID_TOKEN_REQUEST_URL"] = "\(ci.baseURL)/_apis/pipelines/workflows/7/idtoken?api-version=2.0"
            environment["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = "ci-request-token"
            source = #"{"preset": "github-actions", "audience": "exchanger"}"#
        case .command:
            source = #"{"command": ["/bin/cat", "\#(tokenFile.path)"], "timeoutSeconds": 10}"#
        case .kubernetes:
            source = #"{"preset": "kubernetes", "path": "token"}"#
        case .gitlabCI:
            environment["GITLAB_OIDC_TOKEN"] = subject.access
            source = #"{"preset": "gitlab-ci", "variable": "GITLAB_OIDC_TOKEN"}"#
        }
        let catalog = """
            [{"id": "workload", "tokenURL": "\(server.tokenURL.absoluteString)", "clientID": "exchanger", "clientSecretEnv": "EXCHANGER_SECRET",
              "subjectTokenSource": \(source), "subjectTokenType": "urn:ietf:params:oauth:token-type:access_token",
              "audience": "orders-service", "scopes": ["openid"]}]
            """
        let providers = try ProviderCatalog.load(data: Data(catalog.utf8), baseDirectory: scratch.url, environment: environment, strict: true)
        let flow = try await AuthFlow(providers: providers)
        let before = try await server.received().count
        let token = try await flow.accessToken(for: "workload")
        #expect(token.reveal() != subject.access && token.reveal().split(separator: ".").count == 3)
        #expect(await flow.authorization(for: "workload")?.issuedTokenType == TokenType.accessToken)

        let received = try #require(Array(try await server.received().dropFirst(before)).only)
        #expect(received["subject_token"] == [subject.access])
        #expect(received["subject_token_type"] == [TokenType.accessToken] && received["audience"] == ["orders-service"])
        let fetched = ci.requests("/_apis/pipelines/workflows/7/idtoken")
        if kind == .url || kind == .githubActions {
            let request = try #require(fetched.only)
            #expect(request.method == "GET" && request.headers["authorization"] == "bearer ci-request-token")
            #expect(request.query == (kind == .githubActions ? "api-version=2.0&audience=exchanger" : "api-version=2.0"))
        } else {
            #expect(fetched.isEmpty)
        }
    }

    @Test("external_account file as Google writes it: exchanged at idpyoidc's token_url (client_id/client_secret as HTTP Basic), then impersonation followed at a loopback server")
    func externalAccount() async throws {
        let server = try ExchangeServer.require()
        let scratch = try TemporaryDirectory("workload-it")
        defer { scratch.remove() }
        let iam = try TestHTTPServer()
        defer { iam.stop() }
        let subject = try await server.subjectTokens(scope: "openid profile")
        let tokenFile = scratch.url.appendingPathComponent("token.json")
        try Data(#"{"access_token": "\#(subject.access)"}"#.utf8).write(to: tokenFile)
        let impersonationPath = "/v1/projects/-/serviceAccounts/deployer@project.iam.gserviceaccount.com:generateAccessToken"
        func file(impersonation: Bool) -> String {
            """
            {"type": "external_account", "audience": "orders-service",
             "subject_token_type": "urn:ietf:params:oauth:token-type:access_token", "token_url": "\(server.tokenURL.absoluteString)",
             "credential_source": {"file": "\(tokenFile.path)", "format": {"type": "json", "subject_token_field_name": "access_token"}},
             "client_id": "exchanger", "client_secret": "\(Self.secret)", "scopes": ["openid"],
             "quota_project_id": "billing-project"\(impersonation ? #", "service_account_impersonation_url": "\#(iam.baseURL)\#(impersonationPath)""# : "")}
            """
        }
        let plain = scratch.url.appendingPathComponent("plain.json")
        let impersonating = scratch.url.appendingPathComponent("impersonating.json")
        try Data(file(impersonation: false).utf8).write(to: plain)
        try Data(file(impersonation: true).utf8).write(to: impersonating)
        let expiry = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3000).rounded(.down))
        iam.script(impersonationPath, [.json(#"{"accessToken": "ya29.impersonated-token", "expireTime": "\#(expiry.formatted(Date.ISO8601FormatStyle()))"}"#)])
        let catalog = """
            [{"id": "gcp", "externalAccountFile": "\(plain.path)"},
             {"id": "gcp-sa", "externalAccountFile": "${GOOGLE_APPLICATION_CREDENTIALS}"}]
            """
        let providers = try ProviderCatalog.load(data: Data(catalog.utf8), environment: ["GOOGLE_APPLICATION_CREDENTIALS": impersonating.path],
                                                 strict: true)
        let flow = try await AuthFlow(providers: providers)
        let before = try await server.received().count

        let exchanged = try await flow.accessToken(for: "gcp")
        let payload = try #require(Base64URL.decode(String(exchanged.reveal().split(separator: ".")[1])))
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        #expect(claims["iss"] as? String == server.issuer, "the token idpyoidc issued")

        let impersonated = try await flow.accessToken(for: "gcp-sa")
        #expect(impersonated.reveal() == "ya29.impersonated-token")
        // expires_in is whole seconds from our clock's now to expireTime: within a second of it.
        let expiresAt = try #require(await flow.authorization(for: "gcp-sa")?.expiresAt)
        #expect(abs(expiresAt.timeIntervalSince(expiry)) <= 1)

        let sent = Array(try await server.received().dropFirst(before))
        #expect(sent.count == 2)
        let basic = "Basic " + Data("exchanger:\(Self.secret)".utf8).base64EncodedString()
        for received in sent {
            #expect(Set(received.keys) == ["grant_type", "subject_token", "subject_token_type", "requested_token_type", "audience", "scope", "_authorization"])
            #expect(received["subject_token"] == [subject.access] && received["requested_token_type"] == [TokenType.accessToken])
            #expect(received["audience"] == ["orders-service"] && received["scope"] == ["openid"] && received["_authorization"] == [basic])
        }
        let impersonation = try #require(iam.requests(impersonationPath).only)
        #expect(impersonation.method == "POST" && impersonation.headers["content-type"] == "application/json")
        #expect(impersonation.body == #"{"scope":["openid"],"lifetime":"3600s"}"#)
        let bearer = try #require(impersonation.headers["authorization"])
        #expect(bearer.hasPrefix("Bearer ") && bearer != "Bearer \(subject.access)" && bearer.split(separator: ".").count == 3,
                "the token idpyoidc issued for the exchange, not the subject token")
    }
}

extension PushedAuthorizationIntegration {
    @Test("clientAssertionFile against glewlwyd's private_key_jwt check: a new assertion written to the file before each request is read again and accepted; the same one twice is refused (jti)")
    func federatedClientAssertion() async throws {
        let server = try GlewlwydServer.require()
        let scratch = try TemporaryDirectory("federated-it")
        defer { scratch.remove() }
        let file = scratch.url.appendingPathComponent("azure-identity-token")
        let key = try ClientKey(contentsOfFile: server.pki("client.key"))
        let tokenURL = try #require(URL(string: "\(server.issuer)/token"))
        /// What the platform does: a fresh assertion (new jti, aud = the exact token URL), with a trailing newline.
        func writeAssertion() async throws -> String {
            let parameters = ClientAssertion.Parameters(clientID: "par-jwt", audience: tokenURL.absoluteString, algorithm: .rs256)
            let assertion = try await ClientAssertion.make(parameters, signer: key, now: Date()).reveal()
            try Data((assertion + "\n").utf8).write(to: file)
            return assertion
        }
        var provider = Provider(id: "glewlwyd", tokenURL: tokenURL, issuer: server.issuer, clientID: "par-jwt",
                                clientAuthentication: .privateKeyJWT, scopes: ["openid"])
        provider.clientAssertionFile = file.path
        provider.grant = .clientCredentials
        try provider.validate()
        let transport = Self.transport(server)
        let flow = try await AuthFlow(providers: [provider], transport: transport)

        let first = try await writeAssertion()
        _ = try await flow.clientCredentials(provider: "glewlwyd")
        let second = try await writeAssertion()
        _ = try await flow.clientCredentials(provider: "glewlwyd")
        #expect(try await flow.accessToken(for: "glewlwyd").reveal().isEmpty == false)

        let sent = transport.requests(path: "/api/oidc/token")
        #expect(sent.map { Self.fields($0).first { $0.0 == "client_assertion" }?.1 } == [first, second])
        for request in sent {
            #expect(Self.fields(request).map(\.0) == ["grant_type", "scope", "client_id", "client_assertion_type", "client_assertion"])
            #expect(request.headerValue("Authorization") == nil)
        }
        // Not rewritten: the file still holds `second`, whose jti glewlwyd has seen.
        let replay = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "glewlwyd") }
        // glewlwyd 2.7.5 answers a replayed jti with 403 and an empty body, not invalid_client (Documentation/Testing.md).
        #expect(replay?.code == .httpStatus && replay?.httpStatus == 403, "\(replay.map(String.init(describing:)) ?? "")")
        #expect(replay.map { !String(reflecting: $0).contains(second) } == true)
    }
}
