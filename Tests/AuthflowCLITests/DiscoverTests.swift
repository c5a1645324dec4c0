import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow discover` and the ID token in `status --json`, in-process against `MockProvider`.
@Suite("authflow discover and status --json idToken")
struct DiscoverTests {
    @Test("discover prints the endpoints and a ready-to-paste catalog entry")
    func human() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        h.mock.script(.openIDConfiguration, [h.mock.discoveryDocument(issParameterSupported: true)])
        let result = await h.run(["discover", h.mock.issuer, "--client-id", "my-app"])
        #expect(result.status == .success)
        #expect(result.stdout.contains(h.mock.url(.token).absoluteString))
        #expect(result.stdout.contains(h.mock.url(.jwks).absoluteString))
        #expect(result.stdout.contains("required (RFC 9207)"))
        let entry = try #require(result.stdout.split(separator: "\n").last)
        #expect(record(entry)["id"] as? String == h.mock.host)
        #expect(record(entry)["issuer"] as? String == h.mock.issuer)
        #expect(record(entry)["clientID"] as? String == "my-app")
        // The entry loads as a catalog as it is.
        let providers = try ProviderCatalog.load(data: Data("[\(entry)]".utf8), environment: [:])
        #expect(providers.first?.issuer == h.mock.issuer)
        #expect(providers.first?.tokenURL == nil)
    }

    @Test("discover --json: issuer, the document as sent, and the catalog entry")
    func json() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        h.mock.script(.openIDConfiguration, [h.mock.discoveryDocument()])
        let result = await h.run(["discover", h.mock.issuer, "--id", "corp", "--json"])
        #expect(result.status == .success)
        let object = record(Substring(result.stdout.trimmingCharacters(in: .newlines)))
        #expect(object["issuer"] as? String == h.mock.issuer)
        #expect((object["metadata"] as? [String: Any])?["token_endpoint"] as? String == h.mock.url(.token).absoluteString)
        #expect((object["catalog_entry"] as? [String: Any])?["id"] as? String == "corp")
        #expect((object["catalog_entry"] as? [String: Any])?["clientID"] as? String == "YOUR-CLIENT-ID")
    }

    @Test("discover exits 65 when the document's issuer differs, naming both")
    func mismatch() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        h.mock.script(.openIDConfiguration, [h.mock.discoveryDocument(issuer: "https://other.example")])
        let result = await h.run(["discover", h.mock.issuer])
        #expect(result.status == .dataError)
        #expect(result.stderr.contains("https://other.example"))
        #expect(result.stderr.contains(h.mock.issuer))
        #expect(result.stdout.isEmpty)
    }

    @Test("discover parses its options; a missing ISSUER is a usage error")
    func parsing() throws {
        let invocation = try Authflow.parse(["discover", "https://op.example", "--id", "op", "--client-id", "c", "--json"])
        #expect(invocation.command == .discover(DiscoverOptions(issuer: "https://op.example", id: "op", clientID: "c", json: true)))
        #expect(throws: UsageError.self) { try Authflow.parse(["discover"]) }
        #expect(throws: UsageError.self) { try Authflow.parse(["discover", "https://op.example", "--scope", "x"]) }
    }

    @Test("status --json shows the validated ID token's sub, iss and exp as an idToken object")
    func statusIDToken() async throws {
        let h = try Harness(clockStart: Date(timeIntervalSince1970: 1_800_000_000))
        defer { h.directory.remove() }
        try h.catalog(#"{"id": "op", "issuer": "\#(h.mock.issuer)", "clientID": "mock-client", "scopes": ["openid"]}"#)
        let key = try SigningKey.rsa()
        h.mock.script(.openIDConfiguration, [h.mock.discoveryDocument()])
        h.mock.script(.jwks, [MockProvider.jwks([try key.publicJWK(kid: "k1")])])
        let claims = #"{"aud":"mock-client","exp":1800003600,"iat":1800000000,"iss":"\#(h.mock.issuer)","sub":"user-42"}"#
        let idToken = try key.compact(header: #"{"alg":"RS256","kid":"k1"}"#, payload: claims, algorithm: .rs256)
        h.mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        h.mock.script(.token, [.token(access: "at-1", refresh: "rt-1", idToken: idToken)])
        #expect(await h.run(["login", "op", "--device"]).status == .success)

        let status = await h.run(["status", "--json"])
        let row = record(Substring(status.stdout.trimmingCharacters(in: .newlines)))
        let token = try #require(row["idToken"] as? [String: Any])
        #expect(token["sub"] as? String == "user-42")
        #expect(token["iss"] as? String == h.mock.issuer)
        #expect(token["exp"] as? String == "2027-01-15T09:00:00Z")
        #expect(!status.stdout.contains(idToken.split(separator: ".")[2]))
    }

    @Test("login without a flag chooses the method from the discovered endpoints of an issuer-only provider")
    func loginChoosesFromDiscovery() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(#"{"id": "op", "issuer": "\#(h.mock.issuer)", "clientID": "mock-client", "scopes": ["read"]}"#)
        h.mock.script(.openIDConfiguration, [h.mock.discoveryDocument()])
        h.mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        h.mock.script(.token, [.token(access: "at-1")])
        let result = await h.run(["login", "op", "--json"])
        #expect(result.status == .success)
        // One metadata read to choose the method, one by the flow that runs it (each process starts cold).
        #expect(h.mock.requests().map(\.url.path) == [
            "/.well-known/openid-configuration", "/.well-known/openid-configuration", "/device/code", "/token",
        ])
    }
}
