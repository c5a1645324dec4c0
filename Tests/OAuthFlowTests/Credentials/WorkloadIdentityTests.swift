import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// Workload identity through the flow (the exact requests on the wire, against ``MockProvider``):
/// subject token sources in the catalog and on demand, the JWT-bearer grant's pre-made assertion,
/// federated client assertions (`clientAssertionFile`) and Google `external_account` files.
@Suite("Workload identity: catalog sources, federated client assertions, external_account files", .timeLimit(.minutes(2)))
struct WorkloadIdentityTests {
    let mock = MockProvider()
    let ci = MockProvider()
    let clock = TestClock()

    static var valid: String { SubjectTokenSourceTests.valid }

    func flow(_ providers: [Provider], store: MemorySecretStore = MemorySecretStore()) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, store: store, transport: mock.transport(), options: options(clock))
    }

    /// A catalog of one provider `wl` at the mock's token endpoint with `members`.
    func catalog(_ directory: URL, _ members: String, environment: [String: String] = [:], clientID: Bool = true) throws -> Provider {
        let text = """
            [{"id": "wl", "tokenURL": "\(mock.url(.token).absoluteString)"\(clientID ? #", "clientID": "wl-client""# : "")\(members)}]
            """
        return try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: directory, environment: environment, strict: true)[0]
    }

    static func exchanged(_ access: String) -> MockResponse {
        .json(object: ["access_token": .string(access), "token_type": .string("Bearer"), "expires_in": .number(600),
                       "issued_token_type": .string(TokenType.accessToken)])
    }

    // MARK: The catalog

    @Test("catalog: every form of subjectTokenSource", arguments: [
        (#""kubernetes""#, "the kubernetes subject token file /var/run/secrets/kubernetes.io/serviceaccount/token"),
        (#"{"preset": "kubernetes", "path": "tokens/k8s"}"#, "the kubernetes subject token file DIR/tokens/k8s"),
        (#"{"preset": "github-actions", "audience": "sts.example"}"#,
         "the github-actions subject token URL ${ACTIONS_ID_TOKEN_REQUEST_URL}&audience=sts.example"),
        (#"{"preset": "gitlab-ci", "variable": "GITLAB_OIDC_TOKEN"}"#, "the gitlab-ci subject token variable GITLAB_OIDC_TOKEN"),
        (#""gitlab-ci""#, "the gitlab-ci subject token variable CI_JOB_JWT_V2"),
        (#"{"file": "token.json", "jsonField": "token"}"#, "the subject token file DIR/token.json"),
        (#"{"url": "https://ci.example/token?x=1", "headers": {"Authorization": "bearer ${T}"}, "jsonField": "value"}"#,
         "the subject token URL https://ci.example/token?…"),
        (#"{"command": ["/usr/local/bin/get-token", "--audience", "sts"], "timeoutSeconds": 5}"#, "the subject token command /usr/local/bin/get-token"),
    ])
    func catalogForms(written: String, shown: String) throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let provider = try catalog(scratch.url, #", "clientSecret": "s3cret", "subjectTokenSource": \#(written)"#, environment: ["T": "x"])
        #expect(provider.grant == .tokenExchange && provider.serviceGrant == .tokenExchange)
        #expect(provider.tokenExchange == Provider.TokenExchange())
        #expect(provider.subjectTokenSource?.description == shown.replacingOccurrences(of: "DIR", with: scratch.url.path))
        if written.contains("command") {
            guard case .command(let arguments, let timeout, _)? = provider.subjectTokenSource?.kind else { Issue.record("not a command"); return }
            #expect(arguments == ["/usr/local/bin/get-token", "--audience", "sts"] && timeout == .seconds(5))
        }
    }

    @Test("catalog refusals name the key and the reason", arguments: [
        (#", "subjectTokenSource": {"file": "a"}, "subjectTokenFile": "b""#, "subjectTokenFile: and subjectTokenSource name two sources; keep one"),
        (#", "subjectTokenSource": {"file": "a", "url": "https://x.example/"}"#, #"subjectTokenSource: must have exactly one of "file", "url", "command" and "preset""#),
        (#", "subjectTokenSource": {"file": "a", "timeoutSeconds": 3}"#, #"subjectTokenSource: "timeoutSeconds" is not a member of a file source"#),
        (#", "subjectTokenSource": "aws""#, #"subjectTokenSource: "aws" is not a preset"#),
        (#", "subjectTokenSource": {"preset": "kubernetes", "audience": "x"}"#, "subjectTokenSource.audience: is not an option of the kubernetes preset (it takes path)"),
        (#", "subjectTokenSource": {"command": []}"#, "subjectTokenSource.command: must be a non-empty array of strings"),
        (#", "subjectTokenSource": {"command": ["/bin/true"], "timeoutSeconds": 0}"#, "subjectTokenSource.timeoutSeconds: must be a whole number of seconds from 1 to 600"),
        (#", "subjectTokenSource": {"url": "https://x.example/${BAD"}"#, #"subjectTokenSource: has a "${" without its closing "}""#),
        (#", "subjectTokenSource": {"url": "https://x.example/", "headers": {"Bad Name": "v"}}"#, "is not an HTTP token (RFC 9110 §5.1)"),
        (#", "subjectTokenSource": 3"#, "subjectTokenSource: must be an object or a preset's name, found a number"),
        (#", "subjectTokenSource": "kubernetes", "grant": "client-credentials""#,
         "subjectTokenSource: is for the token-exchange or jwt-bearer grant, and grant is client-credentials"),
        (#", "subjectTokenFile": "t", "grant": "jwt-bearer", "audience": "x""#, "audience: is a token-exchange setting, and grant is jwt-bearer"),
        (#", "grant": "token-exchange""#, "grant: token-exchange needs subjectTokenSource or subjectTokenFile"),
        (#", "audience": "x""#, "audience: is a token-exchange setting and needs subjectTokenSource (or subjectTokenFile)"),
        (#", "clientAssertionFile": "a.jwt", "clientAuthentication": "client_secret_post""#,
         "clientAssertionFile: is sent as a private_key_jwt assertion, and clientAuthentication is client_secret_post"),
    ])
    func catalogRefusals(members: String, expected: String) throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let error = #expect(throws: OAuthError.self) { try catalog(scratch.url, #", "clientSecret": "s3cret""# + members) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains(expected) == true, "\(error?.message ?? "")")
    }

    // MARK: Sources on demand

    @Test("URL source on demand: each exchange fetches the CI's token anew (never cached), sends it as subject_token; a failed fetch stores nothing and sends nothing")
    func urlOnDemand() async throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let second = SubjectTokenSourceTests.jwt(exp: Int(clock.date.timeIntervalSince1970) + 3600, sub: "second")
        ci.script(path: "/idtoken", [.json(#"{"value":"\#(Self.valid)"}"#), .json(#"{"value":"\#(second)"}"#), .json(#"{"message":"down"}"#, status: 503)])
        let provider = try catalog(scratch.url, """
            , "clientSecret": "s3cret", "subjectTokenSource": {"url": "${CI_URL}", "headers": {"Authorization": "bearer ${CI_TOKEN}"}, "jsonField": "value"},
            "audience": "billing"
            """, environment: ["CI_URL": ci.baseURL.absoluteString + "/idtoken?api-version=2.0", "CI_TOKEN": "ci-request-token"])
        mock.script(.token, [Self.exchanged("at-1"), Self.exchanged("at-2")])
        let store = MemorySecretStore()
        let flow = try await flow([provider], store: store)
        #expect(try await flow.accessToken(for: "wl").reveal() == "at-1")
        clock.advance(by: .seconds(600))
        #expect(try await flow.accessToken(for: "wl").reveal() == "at-2")
        #expect(ci.requests(path: "/idtoken").map { $0.header("Authorization") } == ["bearer ci-request-token", "bearer ci-request-token"])
        #expect(mock.requests(.token).map { $0.form["subject_token"] } == [Self.valid, second])
        #expect(mock.requests(.token).first?.formPairs.map(\.0) == ["grant_type", "subject_token", "subject_token_type", "audience"])

        clock.advance(by: .seconds(600))
        try await store.delete("wl")
        let states = flow.states
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.refresh(provider: "wl") }
        #expect(error?.code == .httpStatus && error?.httpStatus == 503)
        #expect(error?.message?.hasPrefix("the subject token URL ${CI_URL}") == true, "\(error?.message ?? "")")
        #expect(mock.requests(.token).count == 2, "nothing sent to the token endpoint")
        #expect(try await store.load("wl") == nil, "nothing stored")
        var seenError = false
        for await state in states {
            if case .error(provider: "wl", _) = state { seenError = true; break }
        }
        #expect(seenError)
    }

    @Test("command source on demand: the command's output is the subject token, run again for the next exchange")
    func commandOnDemand() async throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let file = scratch.url.appendingPathComponent("minted").path
        try Data(Self.valid.utf8).write(to: URL(fileURLWithPath: file))
        let provider = try catalog(scratch.url, #", "clientSecret": "s3cret", "subjectTokenSource": {"command": ["/bin/cat", "\#(file)"]}"#)
        mock.script(.token, [Self.exchanged("at-1")])
        let flow = try await flow([provider])
        #expect(try await flow.accessToken(for: "wl").reveal() == "at-1")
        #expect(mock.requests(.token).only?.form["subject_token"] == Self.valid)
    }

    @Test("jwt-bearer with a pre-made assertion (subjectTokenSource): sent as the assertion, nothing signed, read again each time")
    func jwtBearerPremade() async throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let file = scratch.url.appendingPathComponent("assertion").path
        try Data((Self.valid + "\n").utf8).write(to: URL(fileURLWithPath: file))
        let provider = try catalog(scratch.url, #", "grant": "jwt-bearer", "subjectTokenFile": "assertion", "scopes": ["read"]"#)
        #expect(provider.serviceGrant == .jwtBearer && provider.tokenExchange == nil && provider.clientAuthentication == .none)
        mock.script(.token, [Self.exchanged("at-1")])
        let flow = try await flow([provider])
        #expect(try await flow.accessToken(for: "wl").reveal() == "at-1")
        let sent = try #require(mock.requests(.token).only)
        #expect(sent.formPairs.map { "\($0.0)=\($0.1)" } == [
            "grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion=\(Self.valid)", "scope=read", "client_id=wl-client",
        ])
    }

    // MARK: Federated client assertions

    @Test("clientAssertionFile: private_key_jwt by default; re-read on every request, trailing newline trimmed, sent with client_id and the jwt-bearer assertion type — in client credentials and token exchange alike")
    func federatedAssertion() async throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let file = scratch.url.appendingPathComponent("azure-identity-token")
        let first = SubjectTokenSourceTests.jwt(exp: Int(clock.date.timeIntervalSince1970) + 600, sub: "first")
        let second = SubjectTokenSourceTests.jwt(exp: Int(clock.date.timeIntervalSince1970) + 600, sub: "second")
        try Data((first + "\n").utf8).write(to: file)
        let provider = try catalog(scratch.url, #", "grant": "client-credentials", "clientAssertionFile": "${AZURE_FEDERATED_TOKEN_FILE}""#,
                                   environment: ["AZURE_FEDERATED_TOKEN_FILE": file.path])
        #expect(provider.clientAuthentication == .privateKeyJWT && provider.clientAssertionFile == file.path && provider.isConfidential)
        mock.script(.token, [Self.exchanged("at-1"), Self.exchanged("at-2")])
        let flow = try await flow([provider])
        _ = try await flow.clientCredentials(provider: "wl")
        try Data((second + "\r\n").utf8).write(to: file)
        _ = try await flow.clientCredentials(provider: "wl")
        let sent = mock.requests(.token)
        #expect(sent.map { $0.form["client_assertion"] } == [first, second])
        for request in sent {
            #expect(request.formPairs.map(\.0) == ["grant_type", "client_id", "client_assertion_type", "client_assertion"])
            #expect(request.form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            #expect(request.form["client_id"] == "wl-client" && request.header("Authorization") == nil)
        }

        let subject = scratch.url.appendingPathComponent("subject")
        try Data(Self.valid.utf8).write(to: subject)
        var exchanging = try catalog(scratch.url, #", "subjectTokenFile": "subject", "clientAssertionFile": "azure-identity-token""#)
        exchanging.id = "exchange"
        let exchangeFlow = try await self.flow([exchanging])
        mock.script(.token, [Self.exchanged("at-3")])
        _ = try await exchangeFlow.accessToken(for: "exchange")
        #expect(mock.requests(.token).last?.formPairs.map(\.0) == [
            "grant_type", "subject_token", "subject_token_type", "client_id", "client_assertion_type", "client_assertion",
        ])
    }

    @Test("clientAssertionFile: an expired or missing assertion is a typed error naming the file, before anything is sent", arguments: ["expired", "missing", "two lines"])
    func federatedAssertionRefused(_ problem: String) async throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let file = scratch.url.appendingPathComponent("assertion")
        switch problem {
        // Expired by any clock: client authentication reads the wall clock, as the assertions it signs do.
        case "expired": try Data(SubjectTokenSourceTests.jwt(exp: 1_000_000_000).utf8).write(to: file)
        case "two lines": try Data("\(Self.valid)\n\(Self.valid)\n".utf8).write(to: file)
        default: break
        }
        let provider = try catalog(scratch.url, #", "grant": "client-credentials", "clientAssertionFile": "assertion""#)
        let flow = try await flow([provider])
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.accessToken(for: "wl") }
        #expect(error?.message?.hasPrefix("the client assertion file \(file.path) ") == true, "\(error?.message ?? "")")
        #expect(error.map { !String(reflecting: $0).contains(Self.valid) } == true)
        #expect(mock.requests(.token).isEmpty)
    }
}

extension WorkloadIdentityTests {
    @Test("every catalog entry of Documentation/WorkloadIdentity.md loads in strict mode, as the recipe says")
    func recipesLoad() throws {
        let scratch = try TemporaryDirectory("workload")
        defer { scratch.remove() }
        let wif = try ExternalAccountTests.write("""
            {"type": "external_account", "audience": "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/k8s",
             "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": "https://sts.googleapis.com/v1/token",
             "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/deployer@project.iam.gserviceaccount.com:generateAccessToken",
             "credential_source": {"file": "/var/run/secrets/sts/token", "format": {"type": "text"}}}
            """, in: scratch)
        let root = DocumentationTests.root
        let text = try String(contentsOf: root.appendingPathComponent("Documentation/WorkloadIdentity.md"), encoding: .utf8)
        let blocks = text.components(separatedBy: "```json\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        #expect(blocks.count == 5)
        let environment = ["GOOGLE_APPLICATION_CREDENTIALS": wif, "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/azure-identity-token",
                           "ACTIONS_ID_TOKEN_REQUEST_URL": "https://runner.example/idtoken?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"]
        var grants: [GrantType?] = []
        for block in blocks {
            let provider = try ProviderCatalog.load(data: Data("[\(block)]".utf8), environment: environment, strict: true)[0]
            grants.append(provider.serviceGrant)
        }
        #expect(grants == [.tokenExchange, .tokenExchange, .tokenExchange, .tokenExchange, .clientCredentials])
    }
}

// MARK: - external_account files

/// Google `external_account` files (Credentials/ExternalAccount.swift): read as they are, the STS
/// exchange and service-account impersonation on the wire.
@Suite("Google external_account files: the members read and refused, the STS exchange, impersonation", .timeLimit(.minutes(2)))
struct ExternalAccountTests {
    let mock = MockProvider()
    let clock = TestClock()
    static let impersonationPath = "/v1/projects/-/serviceAccounts/deployer@project.iam.gserviceaccount.com:generateAccessToken"

    /// Writes a valid subject token (a JWT) to a file and returns its path.
    static func subjectTokenFile(in scratch: TemporaryDirectory) throws -> String {
        let path = scratch.url.appendingPathComponent("token").path
        try Data(SubjectTokenSourceTests.valid.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Writes `object` (JSON text) as an external_account file and returns its path.
    static func write(_ text: String, in scratch: TemporaryDirectory, name: String = "wif.json") throws -> String {
        let path = scratch.url.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func file(tokenURL: String? = nil, source: String, extra: String = "") -> String {
        """
        {"type": "external_account", "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k8s",
         "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": "\(tokenURL ?? mock.url(.token).absoluteString)",
         "credential_source": \(source), "quota_project_id": "billing-project", "universe_domain": "googleapis.com"\(extra)}
        """
    }

    @Test("read as written: audience, subject_token_type, token_url, the file source with format json, impersonation and its lifetime; description shows no secret")
    func reads() throws {
        let scratch = try TemporaryDirectory("wif")
        defer { scratch.remove() }
        let path = try Self.write(file(source: #"{"file": "/var/run/token.json", "format": {"type": "json", "subject_token_field_name": "id_token"}}"#,
                                       extra: #", "service_account_impersonation_url": "https://iamcredentials.googleapis.com\#(Self.impersonationPath)", "service_account_impersonation": {"token_lifetime_seconds": 1200}, "client_id": "wf-client", "client_secret": "wf-secret-value""#), in: scratch)
        let account = try ExternalAccountFile(contentsOfFile: path, environment: [:])
        #expect(account.tokenURL == mock.url(.token) && account.subjectTokenType == TokenType.jwt)
        #expect(account.audience.hasSuffix("/providers/k8s") && account.impersonationLifetime == 1200 && account.clientID == "wf-client")
        #expect(account.source.description == "the external_account subject token file /var/run/token.json")
        guard case .file(_, let field) = account.source.kind else { Issue.record("not a file source"); return }
        #expect(field == "id_token")
        #expect(ExternalAccountFile.impersonatedEmail(try #require(account.serviceAccountImpersonationURL)) == "deployer@project.iam.gserviceaccount.com")
        for rendering in [String(describing: account), String(reflecting: account)] { #expect(!rendering.contains("wf-secret-value")) }
    }

    @Test("refused, naming the file and the member: unknown members, a non-https token_url, AWS sources, an executable not allowed, and more", arguments: [
        (#", "credential_source_v2": {}"#, #"{"file": "/t"}"#, #"has the member "credential_source_v2", which this library does not read; refused rather than ignored"#),
        ("", #"{"file": "/t", "format": {"type": "json"}}"#, "credential_source.format of type json needs subject_token_field_name"),
        ("", #"{"environment_id": "aws1", "region_url": "http://169.254.169.254/latest/meta-data/placement/availability-zone"}"#,
         "credential_source is an AWS source"),
        ("", #"{"executable": {"command": "/usr/bin/get-token"}}"#, "needs GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1"),
        ("", #"{"file": "/t", "url": "https://x.example/"}"#, "credential_source must have exactly one of file, url and executable"),
        ("", #"{"file": "/t", "cache": true}"#, #"credential_source has the member "cache""#),
        (#", "service_account_impersonation": {"token_lifetime_seconds": 60}"#, #"{"file": "/t"}"#, "token_lifetime_seconds"),
        (#", "client_secret": "s""#, #"{"file": "/t"}"#, "client_secret needs client_id"),
    ])
    func refused(extra: String, source: String, expected: String) throws {
        let scratch = try TemporaryDirectory("wif")
        defer { scratch.remove() }
        let path = try Self.write(file(source: source, extra: extra), in: scratch)
        let error = #expect(throws: OAuthError.self) { try ExternalAccountFile(contentsOfFile: path, environment: [:]) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.hasPrefix("external_account file \(path): ") == true)
        #expect(error?.message?.contains(expected) == true, "\(error?.message ?? "")")
    }

    @Test("a non-https token_url is refused, in the catalog too (the key named, nothing loaded)")
    func nonHTTPS() throws {
        let scratch = try TemporaryDirectory("wif")
        defer { scratch.remove() }
        let path = try Self.write(file(tokenURL: "http://sts.example.com/v1/token", source: #"{"file": "/t"}"#), in: scratch)
        let catalog = #"[{"id": "gcp", "externalAccountFile": "${GOOGLE_APPLICATION_CREDENTIALS}"}]"#
        let error = #expect(throws: OAuthError.self) {
            try ProviderCatalog.load(data: Data(catalog.utf8), environment: ["GOOGLE_APPLICATION_CREDENTIALS": path], strict: true)
        }
        #expect(error?.message?.hasSuffix(#"provider #1 ("gcp"): externalAccountFile: \#(path): token_url must use https:// (http:// is allowed only for loopback hosts)"#) == true,
                "\(error?.message ?? "")")
    }

    /// The catalog entry for an external_account file at `path`.
    func provider(_ path: String, members: String = "", environment: [String: String] = [:]) throws -> Provider {
        let catalog = #"[{"id": "gcp", "externalAccountFile": "${GOOGLE_APPLICATION_CREDENTIALS}"\#(members)}]"#
        return try ProviderCatalog.load(data: Data(catalog.utf8), environment: environment.merging(["GOOGLE_APPLICATION_CREDENTIALS": path]) { a, _ in a },
                                        strict: true)[0]
    }

    @Test("the STS exchange without client_id: RFC 8693 fields with audience, requested access token and the cloud-platform scope; no client_id, no Authorization")
    func exchange() async throws {
        let scratch = try TemporaryDirectory("wif")
        defer { scratch.remove() }
        let token = try Self.subjectTokenFile(in: scratch)
        let path = try Self.write(file(source: #"{"file": "\#(token)"}"#, extra: #", "workforce_pool_user_project": "proj-1""#), in: scratch)
        let provider = try provider(path)
        #expect(provider.serviceGrant == .tokenExchange && provider.clientAuthentication == .none && provider.sendsNoClientID)
        #expect(provider.scopes == ["https://www.googleapis.com/auth/cloud-platform"])
        mock.script(.token, [WorkloadIdentityTests.exchanged("ya29.sts-token")])
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))
        #expect(try await flow.accessToken(for: "gcp").reveal() == "ya29.sts-token")
        let sent = try #require(mock.requests(.token).only)
        #expect(sent.header("Authorization") == nil)
        #expect(sent.formPairs.map { "\($0.0)=\($0.1)" } == [
            "grant_type=urn:ietf:params:oauth:grant-type:token-exchange", "subject_token=\(SubjectTokenSourceTests.valid)",
            "subject_token_type=urn:ietf:params:oauth:token-type:jwt", "requested_token_type=urn:ietf:params:oauth:token-type:access_token",
            "audience=//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k8s",
            "scope=https://www.googleapis.com/auth/cloud-platform", #"options={"userProject":"proj-1"}"#,
        ])
    }

    @Test("impersonation followed: a POST with the exchanged token as Bearer and {scope, lifetime}; the service account's accessToken and expireTime are what is stored")
    func impersonation() async throws {
        let scratch = try TemporaryDirectory("wif")
        defer { scratch.remove() }
        let token = try Self.subjectTokenFile(in: scratch)
        let path = try Self.write(file(source: #"{"file": "\#(token)"}"#, extra: #", "service_account_impersonation_url": "\#(mock.baseURL.absoluteString)\#(Self.impersonationPath)", "client_id": "wf-client", "client_secret": "wf-secret-value""#), in: scratch)
        let provider = try provider(path, members: #", "scopes": ["https://www.googleapis.com/auth/devstorage.read_only"]"#)
        #expect(provider.clientAuthentication == .clientSecretBasic && provider.clientID == "wf-client")
        mock.script(.token, [WorkloadIdentityTests.exchanged("ya29.sts-token")])
        let expiry = clock.date.addingTimeInterval(1800)
        mock.script(path: Self.impersonationPath, [.json(#"{"accessToken": "ya29.impersonated", "expireTime": "\#(expiry.formatted(Date.ISO8601FormatStyle()))"}"#)])
        let store = MemorySecretStore()
        let flow = try await AuthFlow(providers: [provider], store: store, transport: mock.transport(), options: options(clock))
        #expect(try await flow.accessToken(for: "gcp").reveal() == "ya29.impersonated")
        #expect(await flow.authorization(for: "gcp")?.expiresAt == expiry)
        #expect(mock.requests(.token).only?.basicCredentials?.id == "wf-client")
        let sent = try #require(mock.requests(path: Self.impersonationPath).only)
        #expect(sent.method == "POST" && sent.header("Authorization") == "Bearer ya29.sts-token")
        #expect(sent.header("Content-Type") == "application/json")
        #expect(String(decoding: sent.body, as: UTF8.self) == #"{"scope":["https://www.googleapis.com/auth/devstorage.read_only"],"lifetime":"3600s"}"#)
        #expect(try await store.load("gcp") != nil)
    }

    @Test("impersonation refused (403 PERMISSION_DENIED) or expired: typed, nothing stored", arguments: [403, 200])
    func impersonationRefused(status: Int) async throws {
        let scratch = try TemporaryDirectory("wif")
        defer { scratch.remove() }
        let token = try Self.subjectTokenFile(in: scratch)
        let path = try Self.write(file(source: #"{"file": "\#(token)"}"#, extra: #", "service_account_impersonation_url": "\#(mock.baseURL.absoluteString)\#(Self.impersonationPath)""#), in: scratch)
        mock.script(.token, [WorkloadIdentityTests.exchanged("ya29.sts-token")])
        mock.script(path: Self.impersonationPath, [status == 403
            ? .json(#"{"error": {"code": 403, "message": "denied", "status": "PERMISSION_DENIED"}}"#, status: 403)
            : .json(#"{"accessToken": "ya29.impersonated", "expireTime": "2020-01-01T00:00:00Z"}"#)])
        let store = MemorySecretStore()
        let flow = try await AuthFlow(providers: [try provider(path)], store: store, transport: mock.transport(), options: options(clock))
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.accessToken(for: "gcp") }
        if status == 403 {
            #expect(error?.code == .httpStatus && error?.httpStatus == 403 && error?.message?.contains("(PERMISSION_DENIED)") == true)
        } else {
            #expect(error?.code == .invalidResponse && error?.message?.contains("expireTime has passed") == true)
        }
        #expect(error.map { !String(reflecting: $0).contains("ya29") } == true)
        #expect(try await store.load("gcp") == nil)
    }

    @Test("an executable source (allowed): run with Google's variables, its JSON read")
    func executable() async throws {
        let scratch = try TemporaryDirectory("wif")
        defer { scratch.remove() }
        let script = scratch.url.appendingPathComponent("get-token").path
        try Data("""
            #!/bin/sh
            [ "$GOOGLE_EXTERNAL_ACCOUNT_INTERACTIVE" = 0 ] || exit 9
            printf '{"version":1,"success":true,"token_type":"%s","id_token":"%s"}' "$GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE" "$1"
            """.utf8).write(to: URL(fileURLWithPath: script))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script)
        let path = try Self.write(file(source: #"{"executable": {"command": "\#(script) \#(SubjectTokenSourceTests.valid)", "timeout_millis": 10000}}"#),
                                  in: scratch)
        let provider = try provider(path, environment: ["GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES": "1"])
        mock.script(.token, [WorkloadIdentityTests.exchanged("ya29.sts-token")])
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))
        #expect(try await flow.accessToken(for: "gcp").reveal() == "ya29.sts-token")
        #expect(mock.requests(.token).only?.form["subject_token"] == SubjectTokenSourceTests.valid)
    }

    @Test("RFC 3339 times as Google writes expireTime", arguments: [
        ("2014-10-02T15:01:23Z", 1_412_262_083.0), ("2014-10-02T15:01:23.045123456Z", 1_412_262_083.045123456),
        ("2014-10-02T17:01:23+02:00", 1_412_262_083.0), ("1970-01-01T00:00:00Z", 0.0), ("2000-02-29T12:00:00Z", 951_825_600.0),
    ])
    func timestamps(text: String, seconds: Double) throws {
        let date = try #require(ServiceAccountImpersonation.timestamp(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 1e-6)
    }

    @Test("not RFC 3339", arguments: ["2014-10-02 15:01:23Z", "2014-13-02T15:01:23Z", "2014-10-02T15:01:23", "2014-10-02T15:01:23.Z", "x"])
    func notTimestamps(text: String) {
        #expect(ServiceAccountImpersonation.timestamp(text) == nil)
    }
}
