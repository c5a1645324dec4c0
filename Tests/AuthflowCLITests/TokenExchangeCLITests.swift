import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

@Suite("authflow and the grants that need no person: token exchange, JWT-bearer with a client key, client credentials (issue 17)")
struct TokenExchangeCLITests {
    static func exchanged(_ access: String) -> MockResponse {
        .json(object: ["access_token": .string(access), "token_type": .string("Bearer"), "expires_in": .number(3600),
                       "issued_token_type": .string("urn:ietf:params:oauth:token-type:access_token")])
    }

    func entry(_ h: Harness, _ extra: String) -> String {
        #"{"id": "wl", "tokenURL": "\#(h.base)/token", "clientID": "wl-client", "clientSecret": "s3cret", "scopes": ["read"]\#(extra)}"#
    }

    @Test("token for a catalog token-exchange provider exchanges the subject token file on demand, then answers from the store")
    func tokenExchangeOnDemand() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let file = h.directory.url.appendingPathComponent("subject-token")
        try Data("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ3bCJ9.c2ln\n".utf8).write(to: file)
        try h.catalog(entry(h, #", "subjectTokenFile": "\#(file.path)", "audience": "billing""#))
        h.mock.script(.token, [Self.exchanged("at-x-1")])
        let first = await h.run(["token", "wl"])
        #expect(first.status == .success, "\(first.stderr)")
        #expect(first.stdout == "at-x-1\n")
        #expect(h.mock.requests(.token).count == 1)
        let sent = try #require(h.mock.requests(.token).first)
        #expect(sent.formPairs.map(\.0) == ["grant_type", "subject_token", "subject_token_type", "audience", "scope"])
        #expect(sent.form["subject_token"] == "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ3bCJ9.c2ln" && sent.form["audience"] == "billing")
        let again = await h.run(["token", "wl"])
        #expect(again.stdout == "at-x-1\n" && h.mock.requests(.token).count == 1)
    }

    @Test("a missing or empty subject token file exits 65 naming the file, never a token, and sends nothing", arguments: ["missing", "empty"])
    func subjectTokenFileProblem(problem: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let file = h.directory.url.appendingPathComponent("subject-token")
        if problem == "empty" { try Data().write(to: file) }
        try h.catalog(entry(h, #", "grant": "token-exchange", "subjectTokenFile": "\#(file.path)""#))
        let result = await h.run(["token", "wl"])
        #expect(result.status == .dataError, "\(result.stderr)")
        #expect(result.stderr.contains("the subject token file \(file.path) \(problem == "empty" ? "is empty" : "does not exist")"), "\(result.stderr)")
        #expect(result.stdout.isEmpty && h.mock.requests(.token).isEmpty)
    }

    @Test("invalid_client from the server on an on-demand exchange exits 65 naming the client's secret and the catalog, not a login")
    func invalidClient() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let file = h.directory.url.appendingPathComponent("subject-token")
        try Data("subject-token-value".utf8).write(to: file)
        try h.catalog(entry(h, #", "subjectTokenFile": "\#(file.path)""#))
        h.mock.script(.token, [.oauthError("invalid_client", description: "bad client", status: 401)])
        let result = await h.run(["token", "wl"])
        #expect(result.status == .dataError, "\(result.stderr)")
        #expect(result.stderr.contains("invalid_client"), "\(result.stderr)")
        #expect(result.stderr.contains("The provider refused the client secret of client ID wl-client: check it against the catalog at \(h.directory.config.path)"),
                "\(result.stderr)")
        #expect(!result.stderr.contains("authflow login"))
        #expect(!result.stderr.contains("subject-token-value"))
    }

    @Test("token for grant jwt-bearer with clientKeyFile signs an assertion (iss = sub = client id) and fetches on demand")
    func jwtBearerWithClientKey() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let key = try ClientKeyFileCLITests.key(h)
        try h.catalog(#"{"id": "rfc7523", "grant": "jwt-bearer", "tokenURL": "\#(h.base)/token", "clientID": "jb-client", "clientKeyFile": "\#(key)", "clientKeyID": "k1", "scopes": ["read"]}"#)
        h.mock.script(.token, [.token(access: "at-jb-1", refresh: nil)])
        let result = await h.run(["token", "rfc7523"])
        #expect(result.status == .success, "\(result.stderr)")
        #expect(result.stdout == "at-jb-1\n")
        #expect(h.mock.requests(.token).count == 1)
        let sent = try #require(h.mock.requests(.token).first)
        #expect(sent.formPairs.map(\.0) == ["grant_type", "assertion", "scope", "client_id"])
        #expect(sent.form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" && sent.form["client_id"] == "jb-client")
        let assertion = try WireJWS(try #require(sent.form["assertion"]))
        #expect(assertion.claims["iss"] as? String == "jb-client" && assertion.claims["sub"] as? String == "jb-client")
        #expect(assertion.claims["aud"] as? String == h.mock.url(.token).absoluteString)
        #expect(!result.stderr.contains(assertion.parts[2]))
    }

    @Test("grant client-credentials fetches on demand even when the entry has interactive endpoints")
    func explicitClientCredentials() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(#"{"id": "api", "authorizationURL": "\#(h.base)/authorize", "redirectURI": "http://127.0.0.1:8765/cb", "tokenURL": "\#(h.base)/token", "clientID": "c", "clientSecret": "s3cret", "grant": "client-credentials"}"#)
        h.mock.script(.token, [.token(access: "at-cc-1", refresh: nil)])
        let result = await h.run(["token", "api"])
        #expect(result.status == .success, "\(result.stderr)")
        #expect(result.stdout == "at-cc-1\n")
        #expect(h.mock.requests(.token).map { $0.form["grant_type"] } == ["client_credentials"])
    }

    @Test("providers and status show the authentication method and the grant fetched on demand, as text and --json")
    func providersAndStatus() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let key = try ClientKeyFileCLITests.key(h)
        let file = h.directory.url.appendingPathComponent("subject-token")
        try Data("tok".utf8).write(to: file)
        try h.catalog(entry(h, #", "subjectTokenFile": "\#(file.path)""#),
                      #"{"id": "pk", "tokenURL": "\#(h.base)/token", "clientID": "pk-client", "clientKeyFile": "\#(key)"}"#)
        let json = await h.run(["providers", "--json"])
        #expect(json.status == .success, "\(json.stderr)")
        let lines = json.stdout.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.map { $0?["authentication"] as? String } == ["client_secret_basic", "private_key_jwt"])
        #expect(lines.map { $0?["on_demand"] as? String } == ["token-exchange", "client-credentials"])
        let text = await h.run(["providers"])
        #expect(text.stdout.contains("AUTH") && text.stdout.contains("private_key_jwt") && text.stdout.contains("token-exchange"))

        let status = await h.run(["status", "--json"])
        let rows = status.stdout.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(rows.map { $0?["authentication"] as? String } == ["client_secret_basic", "private_key_jwt"])
        let table = await h.run(["status"])
        #expect(table.stdout.contains("AUTH") && table.stdout.contains("private_key_jwt"))
    }

    @Test("discover suggests private_key_jwt when the issuer advertises it, and lists the methods")
    func discoverSuggestsKey() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let document = #"{"issuer": "\#(h.mock.issuer)", "token_endpoint": "\#(h.mock.url(.token).absoluteString)", "#
            + #""token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt"]}"#
        h.mock.script(.openIDConfiguration, [.json(document)])
        let result = await h.run(["discover", h.mock.issuer])
        #expect(result.status == .success, "\(result.stderr)")
        #expect(result.stdout.contains("client_secret_basic private_key_jwt"))
        #expect(result.stdout.contains(#"The issuer accepts private_key_jwt: instead of a client secret, add "clientAuthentication": "private_key_jwt""#))
        let entry = try #require(result.stdout.split(separator: "\n").last)
        #expect(try ProviderCatalog.load(data: Data("[\(entry)]".utf8), environment: [:]).count == 1)

        let plain = try Harness()
        defer { plain.directory.remove() }
        plain.mock.script(.openIDConfiguration, [plain.mock.discoveryDocument()])
        #expect(!(await plain.run(["discover", plain.mock.issuer])).stdout.contains("private_key_jwt"))
    }

    @Test("login for a token-exchange provider runs the exchange (not client credentials); for a service-account provider, the JWT-bearer grant")
    func loginRunsTheProvidersGrant() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let file = h.directory.url.appendingPathComponent("subject-token")
        try Data("subject-1".utf8).write(to: file)
        let key = try ClientKeyFileCLITests.key(h)
        try h.catalog(entry(h, #", "subjectTokenFile": "\#(file.path)""#),
                      #"{"id": "jb", "grant": "jwt-bearer", "tokenURL": "\#(h.base)/token", "clientID": "jb-client", "clientKeyFile": "\#(key)"}"#)
        h.mock.script(.token, [Self.exchanged("at-1"), .token(access: "at-jb", refresh: nil)])
        let exchange = await h.run(["login", "wl"])
        #expect(exchange.status == .success, "\(exchange.stderr)")
        let bearer = await h.run(["login", "jb"])
        #expect(bearer.status == .success, "\(bearer.stderr)")
        #expect(h.mock.requests(.token).map { $0.form["grant_type"] } == [
            "urn:ietf:params:oauth:grant-type:token-exchange", "urn:ietf:params:oauth:grant-type:jwt-bearer",
        ])
    }
}
