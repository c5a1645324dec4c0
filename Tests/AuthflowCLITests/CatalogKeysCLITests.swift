import AuthflowCLI
import Foundation
import OAuthFlow
import TestSupport
import Testing

/// The CLI loads catalogs strictly: every key Documentation/Catalog.md documents must load.
@Suite("authflow providers with every documented catalog key")
struct CatalogKeysCLITests {
    @Test("providers --config: an entry with endSessionURL or idTokenSigningAlgorithms loads in strict mode and is listed",
          arguments: [
              #""endSessionURL": "https://login.example.com/logout""#,
              #""idTokenSigningAlgorithms": ["RS256", "ES256"]"#,
          ])
    func documentedOIDCKeys(setting: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(#"{"id": "op", "issuer": "https://login.example.com", "clientID": "app", \#(setting)}"#)
        let result = await h.run(["providers", "--config", h.directory.config.path], environment: ["AUTHFLOW_CONFIG": ""])
        #expect(result.status == .success, "\(result.stderr)")
        #expect(result.stderr.isEmpty, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").contains { $0.hasPrefix("op ") }, "\(result.stdout)")
    }
}
