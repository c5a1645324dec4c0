import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing
import TestSupport

@Suite("authflow and client key files (issue 17)")
struct ClientKeyFileCLITests {
    @Test("An unsafe, missing or encrypted clientKeyFile exits 65 naming the file and the problem, never its contents", arguments: [
        ("unsafe.pem", 0o644, "-----BEGIN PRIVATE KEY-----\nTUlJQ2Rnc2VjcmV0bm90YWtleWF0YWxs\n-----END PRIVATE KEY-----\n",
         "is readable or writable by group or others (mode 0644)"),
        ("encrypted.pem", 0o600, "-----BEGIN ENCRYPTED PRIVATE KEY-----\nTUlJQ2Rnc2VjcmV0bm90YWtleWF0YWxs\n-----END ENCRYPTED PRIVATE KEY-----\n",
         "holds an encrypted private key"),
        ("absent.pem", 0, "", "does not exist"),
    ])
    func unsafeKeyFile(name: String, mode: Int, contents: String, problem: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let path = h.directory.url.appendingPathComponent(name).path
        if mode != 0 {
            try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        }
        try h.catalog(#"{"id": "svc", "tokenURL": "\#(h.base)/token", "clientID": "svc-client", "clientAuthentication": "private_key_jwt", "clientKeyFile": "\#(path)"}"#)
        for command in [["token", "svc"], ["status"]] {
            let result = await h.run(command)
            #expect(result.status == .dataError, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("clientKeyFile: \(path) \(problem)"), "\(result.stderr)")
            #expect(!result.stderr.contains("TUlJQ2Rnc2VjcmV0bm90YWtleWF0YWxs"))
            #expect(result.stdout.isEmpty)
        }
    }

    /// An openssl-made P-256 key in the harness's directory, mode 0600.
    static func key(_ h: Harness) throws -> String {
        let path = h.directory.url.appendingPathComponent("client-key.pem").path
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]
        try process.run()
        process.waitUntilExit()
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        return path
    }

    @Test("login with private_key_jwt sends an assertion, not a secret; invalid_client from the server exits 65")
    func loginWithKey() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let path = try Self.key(h)
        try h.catalog(#"{"id": "svc", "tokenURL": "\#(h.base)/token", "clientID": "svc-client", "clientKeyFile": "\#(path)", "scopes": ["read"]}"#)
        h.mock.script(.token, [.token(access: "at-key-1", refresh: nil)])
        let login = await h.run(["login", "svc"])
        #expect(login.status == .success, "\(login.stderr)")
        let sent = try #require(h.mock.requests(.token).first)
        #expect(sent.form["grant_type"] == "client_credentials")
        #expect(sent.form["client_id"] == "svc-client")
        #expect(sent.form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        #expect(sent.form["client_assertion"]?.split(separator: ".").count == 3)
        #expect(sent.header("Authorization") == nil && sent.form["client_secret"] == nil)
        #expect(!login.stdout.contains(sent.form["client_assertion"] ?? "-") && !login.stderr.contains(sent.form["client_assertion"] ?? "-"))

        h.mock.script(.token, [.oauthError("invalid_client", description: "assertion rejected", status: 401)])
        let rejected = await h.run(["login", "svc"])
        #expect(rejected.status == .dataError, "\(rejected.stderr)")
        #expect(rejected.stderr.contains("invalid_client"))
        #expect(!rejected.stderr.contains(h.mock.requests(.token).last?.form["client_assertion"] ?? "-"))
    }

    @Test("authflow token for a service account fetches its first token with the JWT-bearer grant, then answers from the store")
    func serviceAccountToken() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let accountPath = try h.directory.serviceAccountFile(email: "svc@demo.iam.example", tokenURI: h.mock.url(.token).absoluteString)
        try h.catalog(#"{"id": "gcp", "serviceAccountFile": "\#(accountPath)", "scopes": ["read"]}"#)
        h.mock.script(.token, [.token(access: "at-sa-1", expiresIn: 3600, refresh: nil)])

        let first = await h.run(["token", "gcp"])
        #expect(first.status == .success, "\(first.stderr)")
        #expect(first.stdout == "at-sa-1\n")
        #expect(h.mock.requests(.token).first?.form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        let again = await h.run(["token", "gcp"])
        #expect(again.stdout == "at-sa-1\n")
        #expect(h.mock.requests(.token).count == 1)
    }
}
