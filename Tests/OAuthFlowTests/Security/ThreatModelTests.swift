import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import Testing

/// Attacks in Documentation/Security.md that no other suite covered: each test is named there.
@Suite("Threat model: attacks without a test elsewhere", .timeLimit(.minutes(1)))
struct ThreatModelTests {
    let mock = MockProvider()
    let clock = TestClock()

    @Test("PKCE downgrade: metadata that advertises only plain still gets S256 (RFC 7636 §4.2, RFC 9700 §2.1.1)")
    func pkceDowngrade() async throws {
        let document = #"""
            {"issuer":"\#(mock.issuer)","authorization_endpoint":"\#(mock.url(.authorization))","token_endpoint":"\#(mock.url(.token))",
             "response_types_supported":["code"],"code_challenge_methods_supported":["plain"]}
            """#
        mock.script(.openIDConfiguration, [.json(document)])
        let flow = try await AuthFlow(providers: [mock.discoveredProvider(id: "op", scopes: ["read"])], transport: mock.transport(),
                                      options: options(clock))
        let request = try await flow.authorizationRequest(provider: "op")
        let items = try #require(query(request.url))
        #expect(items["code_challenge_method"] == "S256")
        #expect(items["code_challenge"]?.count == 43)
        #expect(!request.url.absoluteString.contains("plain"))
    }

    @Test("a token response nested 100,000 levels deep is .invalidResponse, never a stack overflow; nothing stored")
    func deepNesting() async throws {
        let store = MemorySecretStore()
        let flow = try await AuthFlow(providers: [mock.provider(id: "svc", clientSecret: "s3cret")], store: store,
                                      transport: mock.transport(), options: options(clock))
        mock.script(.token, [.json(String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000))])
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") })
        #expect(error.code == .invalidResponse)
        #expect(try await store.keys().isEmpty)
    }

    @Test("pending authorization requests are bounded: past maximumPendingAuthorizations the oldest state stops working")
    func pendingRequestsBounded() async throws {
        var options = options(clock)
        options.maximumPendingAuthorizations = 3
        let flow = try await AuthFlow(providers: [mock.provider(id: "app")], transport: mock.transport(), options: options)
        var requests: [AuthorizationRequest] = []
        for _ in 0..<4 { requests.append(try await flow.authorizationRequest(provider: "app")) }
        let error = try #require(await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(requests[0]))
        })
        #expect(error.code == .stateMismatch)
        #expect(mock.requests(.token).isEmpty)
        mock.script(.token, [.token(access: "at-1")])
        _ = try await flow.completeAuthorization(callbackURL: callback(requests[3]))
        #expect(mock.requests(.token).count == 1)
    }

    @Test("store TOCTOU: the directory swapped for a symbolic link after the store opened it cannot redirect a save")
    func directorySwap() async throws {
        try await withRaceStoreDirectory { directory in
            let store = try FileSecretStore(directory: directory)
            let parent = directory.deletingLastPathComponent()
            let moved = parent.appendingPathComponent("moved", isDirectory: true)
            let elsewhere = parent.appendingPathComponent("elsewhere", isDirectory: true)
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            #expect(rename(directory.path, moved.path) == 0)
            #expect(symlink(elsewhere.path, directory.path) == 0)

            try await store.save(Data(#"{"x":1}"#.utf8), for: "app")

            #expect(FileManager.default.fileExists(atPath: moved.appendingPathComponent("app.json").path))
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
        }
    }

    @Test("store symlinks: a symbolic link in place of the lock file is refused, and its target is never created")
    func lockFileSymlink() async throws {
        try await withRaceStoreDirectory { directory in
            let store = try FileSecretStore(directory: directory)
            let target = directory.deletingLastPathComponent().appendingPathComponent("victim")
            #expect(symlink(target.path, directory.appendingPathComponent("app.lock").path) == 0)
            let error = try #require(await #expect(throws: OAuthError.self) {
                try await store.withExclusiveAccess(to: "app") { () async throws(OAuthError) in }
            })
            #expect(error.code == .storage)
            #expect(error.message?.contains("symbolic link") == true)
            #expect(!FileManager.default.fileExists(atPath: target.path))
            // A logout cannot be turned into a write elsewhere either: the delete takes the same lock.
            await #expect(throws: OAuthError.self) { try await store.delete("app") }
        }
    }
}
