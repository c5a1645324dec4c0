@testable import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// The CLI from a URL (issue 32), in process against `MockProvider`: login's resource and step-up
/// options, `request` (exit codes, the step-up line, the body), `discover URL` for a resource,
/// `logout --unregister`, and the catalog entry added without rewriting the others.
@Suite("authflow from a resource URL: login, request, discover, logout --unregister")
struct ResourceCLITests {
    // MARK: Parsing

    @Test("login URL: the URL is the resource and its host the entry's id; --resource names the resource for a chosen id")
    func parseLogin() throws {
        let plain = try Authflow.parse(["login", "https://api.example.com:8443/mcp"])
        #expect(plain.command == .login(LoginOptions(provider: "api.example.com-8443", resource: "https://api.example.com:8443/mcp")))
        let full = try Authflow.parse(["login", "mine", "--resource", "https://api.example/mcp", "--issuer", "https://as.example",
                                       "--initial-access-token-file", "/run/iat", "--acr-values", "phr phrh", "--max-age", "0"])
        #expect(full.command == .login(LoginOptions(provider: "mine", resource: "https://api.example/mcp", issuer: "https://as.example",
                                                    initialAccessTokenFile: "/run/iat", acrValues: "phr phrh", maxAge: 0)))
        for bad in [["login", "p", "--max-age", "soon"], ["login", "p", "--max-age", "-1"], ["login", "p", "--issuer", "https://as.example"],
                    ["login", "p", "--acr-values", "caf\u{E9}"], ["login", "p", "--resource", "ftp://x/y"]] {
            #expect(throws: UsageError.self, "\(bad)") { try Authflow.parse(bad) }
        }
    }

    @Test("request: method upper-cased, data and headers kept; an Authorization header or a non-http URL refused; logout --unregister")
    func parseRequest() throws {
        let parsed = try Authflow.parse(["request", "--method", "put", "--data", "@body.json", "--add-header", "X-Trace: 1", "api", "https://api.example/v1"])
        #expect(parsed.command == .request(RequestOptions(provider: "api", url: "https://api.example/v1", method: "PUT", data: "@body.json",
                                                          headers: ["X-Trace: 1"])))
        #expect(throws: UsageError.self) { try Authflow.parse(["request", "--add-header", "Authorization: Bearer x", "api", "https://a.example"]) }
        #expect(throws: UsageError.self) { try Authflow.parse(["request", "--add-header", "X: a\u{1B}b", "api", "https://a.example"]) }
        #expect(throws: UsageError.self) { try Authflow.parse(["request", "api", "file:///etc/passwd"]) }
        #expect(throws: UsageError.self) { try Authflow.parse(["request", "api"]) }
        #expect(try Authflow.parse(["logout", "api", "--unregister"]).command == .logoutUnregister(provider: "api", localOnly: false))
    }

    // MARK: request

    /// A harness whose provider `app` holds a fresh token `at-1` with scope `read`, resource `BASE/api`.
    func loggedIn() async throws -> Harness {
        let h = try Harness()
        try h.catalog(#"{"id":"app","clientID":"c","tokenURL":"\#(h.base)/token","authorizationURL":"\#(h.base)/authorize","resource":"\#(h.base)/api","redirectURI":"http://127.0.0.1:8765/callback","scopes":["read"]}"#)
        h.mock.script(.token, [.token(access: "at-1", expiresIn: 3600, refresh: "rt-1", scope: "read")])
        let store = try FileSecretStore(directory: h.directory.store)
        let flow = try await AuthFlow(providers: try ProviderCatalog.load(contentsOf: h.directory.config), store: store, transport: h.mock.transport(),
                                      options: AuthFlow.Options(now: { [clock = h.clock] in clock.date }))
        let request = try await flow.authorizationRequest(provider: "app")
        let state = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?.value ?? ""
        try await flow.completeAuthorization(callbackURL: URL(string: "http://127.0.0.1:8765/callback?code=c1&state=\(state)")!)
        return h
    }

    @Test("request: the body on stdout, exit 0; the token as Authorization: Bearer; --data @FILE is POSTed as JSON")
    func requestSucceeds() async throws {
        let h = try await loggedIn()
        defer { h.directory.remove() }
        h.mock.script(path: "/api/items", [.json(#"{"items":[1,2]}"#), .json(#"{"id":3}"#, status: 201)])
        let got = await h.run(["request", "app", "\(h.base)/api/items"])
        #expect(got.status == .success, "\(got.stderr)")
        #expect(got.stdout == "{\"items\":[1,2]}\n")
        let body = h.directory.url.appendingPathComponent("item.json")
        try Data(#"{"name":"x"}"#.utf8).write(to: body)
        let posted = await h.run(["request", "--data", "@\(body.path)", "app", "\(h.base)/api/items"])
        #expect(posted.status == .success)
        let sent = h.mock.requests(path: "/api/items")
        #expect(sent.map(\.method) == ["GET", "POST"])
        #expect(sent.allSatisfy { $0.header("Authorization") == "Bearer at-1" })
        #expect(sent.last?.body == Data(#"{"name":"x"}"#.utf8))
        #expect(sent.last?.header("Content-Type") == "application/json")
        #expect(!got.stdout.contains("at-1") && !got.stderr.contains("at-1") && !posted.stderr.contains("at-1"))
    }

    @Test("request: insufficient_scope names what was asked and the login line that gets it; exit 77, nothing logged in", arguments: [
        (403, #"Bearer error="insufficient_scope", scope="read admin""#, "authflow login app --browser --scope 'read admin'"),
        (401, #"Bearer error="insufficient_user_authentication", acr_values="phr", max_age="0""#,
         "authflow login app --browser --scope 'read' --acr-values 'phr' --max-age 0"),
    ])
    func requestStepUp(status: Int, header: String, line: String) async throws {
        let h = try await loggedIn()
        defer { h.directory.remove() }
        h.mock.script(path: "/api/admin", [MockResponse(status: status, headers: ["WWW-Authenticate": header], body: Data())])
        let got = await h.run(["request", "app", "\(h.base)/api/admin"])
        #expect(got.status == .denied)
        #expect(got.stderr.contains("Log in again with what it asked for: \(line)\n"), "\(got.stderr)")
        #expect(got.stderr.contains("the resource answered"))
        #expect(got.stdout.isEmpty)
        #expect(h.mock.requests(.token).count == 1, "only the first login's exchange: no renewal, no login by itself")
    }

    @Test("request: another non-2xx prints the body and exits by status (77 refused, 75 temporary, 65 otherwise)", arguments: [
        (404, ExitCode.dataError), (403, .denied), (503, .temporaryFailure), (429, .temporaryFailure),
    ])
    func requestStatus(status: Int, exit: ExitCode) async throws {
        let h = try await loggedIn()
        defer { h.directory.remove() }
        h.mock.script(path: "/api/x", [.json(#"{"error":"nope"}"#, status: status)])
        let got = await h.run(["request", "app", "\(h.base)/api/x"])
        #expect(got.status == exit)
        #expect(got.stdout == "{\"error\":\"nope\"}\n")
        #expect(got.stderr.contains("HTTP \(status)"))
    }

    @Test("request: a URL off the provider's resources, or plain http off loopback, gets no token; nothing is sent")
    func requestRefusesOtherOrigins() async throws {
        let h = try await loggedIn()
        defer { h.directory.remove() }
        for url in ["https://elsewhere.example/api", "http://\(h.mock.host)/api/items"] {
            let got = await h.run(["request", "app", url])
            #expect(got.status == .dataError, "\(url)")
        }
        #expect(h.mock.requests(path: "/api/items").isEmpty)
    }

    @Test("request's scheme rule is the endpoints' loopback rule: plain http only to localhost, 127.0.0.0/8 and ::1, never a name that starts with 127.",
          arguments: [("http://127.0.0.1:8080/api", true), ("http://localhost/api", true), ("http://[::1]:9/api", true),
                      ("http://api.localhost/api", true), ("https://api.example.com/api", true),
                      ("http://127.evil.example/api", false), ("http://127.0.0.1.evil.example/api", false), ("http://api.example.com/api", false)])
    func requestSchemeRule(url: String, allowed: Bool) throws {
        let provider = Provider(id: "open", tokenURL: URL(string: "https://auth.example.com/token")!, clientID: "c")
        let problem = Context.requestURLProblem(try #require(URL(string: url)), provider: provider)
        #expect((problem == nil) == allowed, "\(url): \(problem ?? "allowed")")
    }

    @Test("request on a terminal: the body's control characters are escaped; to a pipe it is printed as it came")
    func requestTerminal() async throws {
        let h = try await loggedIn()
        defer { h.directory.remove() }
        h.mock.script(path: "/api/t", [.json("{\"a\":\"\u{1B}[2J\"}")])
        let stdout = BufferSink()
        let output = Output(stdout: stdout, stderr: BufferSink(), stdoutIsTerminal: true)
        let status = await Authflow.run(arguments: ["request", "app", "\(h.base)/api/t"], output: output, environment: h.environment,
                                        services: h.services())
        #expect(status == .success)
        #expect(!stdout.text.contains("\u{1B}"))
        #expect(stdout.text.contains("\\u{1B}[2J"))
    }

    // MARK: The catalog file

    @Test("the entry goes before the providers array's end, after a comma when needed; the other entries are left as written", arguments: [
        ("[\n  {\"id\": \"a\",  \"clientID\": \"x\"}\n]\n", 2),
        ("[]", 1),
        ("[\n]\n", 1),
        ("{\"providers\": [ {\"id\": \"a\"}, ]}\n", 2),
        ("{\n  \"$schema\": \"s\",\n  \"providers\": []\n}\n", 1),
    ])
    func catalogInsert(original: String, count: Int) throws {
        let entry = #"{"id":"new","issuer":"https://as.example","registration":"dynamic"}"#
        let updated = try #require(CatalogFile.inserted(entry, into: original))
        #expect(CatalogFile.entries(updated).count == count)
        #expect(CatalogFile.entries(updated).last?["id"]?.stringValue == "new")
        if original.contains("\"clientID\": \"x\"") { #expect(updated.hasPrefix("[\n  {\"id\": \"a\",  \"clientID\": \"x\"}")) }
    }

    @Test("a catalog it cannot add to safely, or an id taken by another resource: an error with the entry to add by hand")
    func catalogRefusals() throws {
        #expect(CatalogFile.inserted("{}", into: "not json") == nil)
        #expect(CatalogFile.inserted("{}", into: "[{\"id\":\"a\"}] trailing") == nil)
        let directory = try TemporaryDirectory("authflow-catalog")
        defer { directory.remove() }
        let url = directory.url.appendingPathComponent("providers.json")
        let entry: [(String, JSONValue)] = [("id", .string("api")), ("resource", .string("https://api.example/mcp"))]
        #expect(try CatalogFile.add(entry, id: "api", to: url))
        #expect(try CatalogFile.add(entry, id: "api", to: url) == false, "the same resource again: nothing to add")
        let other: [(String, JSONValue)] = [("id", .string("api")), ("resource", .string("https://other.example/mcp"))]
        #expect(throws: CLIError.self) { try CatalogFile.add(other, id: "api", to: url) }
        let mode = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    // MARK: discover and logout --unregister

    @Test("discover URL of a resource: each step, the entry with registration dynamic; nothing registered")
    func discoverResource() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        h.mock.script(path: "/mcp/.well-known/openid-configuration", [.json("{}", status: 404)])
        h.mock.script(path: "/.well-known/oauth-authorization-server/mcp", [.json("{}", status: 404)])
        h.mock.script(path: "/mcp", [MockResponse(status: 401, headers: [
            "WWW-Authenticate": #"Bearer resource_metadata="\#(h.base)/.well-known/oauth-protected-resource/mcp", scope="read""#])])
        h.mock.script(path: "/.well-known/oauth-protected-resource/mcp", [
            .json(#"{"resource":"\#(h.base)/mcp","authorization_servers":["\#(h.mock.issuer)"],"scopes_supported":["read","write"]}"#)])
        var document = h.mock.discoveryDocument()
        var object = try #require(try JSONValue.parse(document.body).objectValue)
        object["registration_endpoint"] = .string("\(h.base)/register")
        document = .json(object: object)
        h.mock.script(.openIDConfiguration, [document])
        let got = await h.run(["discover", "\(h.base)/mcp"])
        #expect(got.status == .success, "\(got.stderr)")
        #expect(got.stdout.contains("1. Resource \(h.base)/mcp"))
        #expect(got.stdout.contains("the resource's 401 challenge"))
        #expect(got.stdout.contains("2. Authorization server \(h.mock.issuer)"))
        let entry = record(try #require(got.stdout.split(separator: "\n").last))
        #expect(entry["registration"] as? String == "dynamic")
        #expect(entry["resource"] as? String == "\(h.base)/mcp")
        #expect(entry["issuer"] as? String == h.mock.issuer)
        #expect(h.mock.requests(path: "/register").isEmpty)
    }

    @Test("logout --unregister: the tokens forgotten, the client deleted at the server with its registration token, the record gone")
    func logoutUnregister() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(#"{"id":"api","issuer":"\#(h.mock.issuer)","registration":"dynamic","clientAuthentication":"client_secret_basic"}"#)
        var document = try #require(try JSONValue.parse(h.mock.discoveryDocument().body).objectValue)
        document["registration_endpoint"] = .string("\(h.base)/register")
        h.mock.script(.openIDConfiguration, [.json(object: document)])
        h.mock.script(path: "/register", [.json(#"{"client_id":"c9","client_secret":"sec-0123456789","client_secret_expires_at":0,"registration_access_token":"rat-0123456789","registration_client_uri":"\#(h.base)/register/c9","redirect_uris":["http://127.0.0.1:8765/callback"]}"#, status: 201)])
        h.mock.script(path: "/register/c9", [MockResponse(status: 204)])
        var provider = try #require(try ProviderCatalog.load(contentsOf: h.directory.config).first)
        provider.redirectURI = URL(string: "http://127.0.0.1:8765/callback")
        let store = try FileSecretStore(directory: h.directory.store)
        _ = try await AuthFlow(providers: [provider], store: store, transport: h.mock.transport()).registerClient(provider: "api")
        #expect(h.directory.storedKeys == ["api.registration"])

        let got = await h.run(["logout", "api", "--unregister"])
        #expect(got.status == .success, "\(got.stderr)")
        #expect(got.stdout.contains("Deleted client c9 at \(h.mock.issuer) and forgot its registration."))
        let deleted = try #require(h.mock.requests(path: "/register/c9").first)
        #expect(deleted.method == "DELETE")
        #expect(deleted.header("Authorization") == "Bearer rat-0123456789")
        #expect(h.directory.storedKeys.isEmpty)
        #expect(!got.stdout.contains("rat-0123456789") && !got.stderr.contains("rat-0123456789") && !got.stdout.contains("sec-0123456789"))
    }
}
