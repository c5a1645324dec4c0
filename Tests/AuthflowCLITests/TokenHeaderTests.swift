@testable import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow token PROVIDER --header`: the header line for `curl -H @-`.
@Suite("authflow token --header")
struct TokenHeaderTests {
    @Test("prints exactly 'Authorization: Bearer <token>' and a newline; a lower-case bearer type is sent as Bearer (RFC 6750 §2.1)",
          arguments: ["Bearer", "bearer"])
    func header(type: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
        h.mock.script(.token, [.token(access: "at-header-1", type: type, refresh: "rt-1")])
        #expect(await h.run(["login", "gh", "--device"]).status == .success)
        let run = await h.run(["token", "gh", "--header"])
        #expect(run.status == .success, "\(run.stderr)")
        #expect(run.stdout == "Authorization: Bearer at-header-1\n")
        #expect(run.stderr.isEmpty)
    }

    @Test("--header with --json is a usage error")
    func exclusive() throws {
        #expect(throws: UsageError("choose one of --json, --header", command: "token")) { try Authflow.parse(["token", "gh", "--header", "--json"]) }
        #expect(try Authflow.parse(["token", "gh", "--header"]).command == .tokenHeader(provider: "gh"))
    }

    @Test("with nothing stored: exit 77 and the login hint, nothing on stdout")
    func notLoggedIn() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        let run = await h.run(["token", "gh", "--header"])
        #expect(run.status == .denied)
        #expect(run.stdout.isEmpty && run.stderr.contains("authflow login gh"))
    }
}
