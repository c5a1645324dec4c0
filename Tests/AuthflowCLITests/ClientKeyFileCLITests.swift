import AuthflowCLI
import Foundation
import OAuthFlow
import Testing

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
}
