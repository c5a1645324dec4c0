import Foundation
@testable import AuthflowAgent
import OAuthFlow
import TestSupport
import Testing

/// What the agent checks before it serves: `--sink` owners, groups and providers, and the store key
/// systemd passes as a credential (Documentation/Agent.md, "Token files" and "systemd").
@Suite("The agent's start-up checks")
struct StartupTests {
    @Test("--sink: an unknown owner or group is a usage error; a sink naming a provider the catalog lacks is found")
    func sinks() throws {
        let unknownUser = "no-such-user-\(UUID().uuidString.prefix(6))"
        #expect { try TokenSinks([AgentOptions.Sink(provider: "a", path: "/t", owner: unknownUser)]) } throws: { error in
            guard case AgentError.usage(let message) = error else { return false }
            return message.contains(unknownUser)
        }
        #expect { try TokenSinks([AgentOptions.Sink(provider: "a", path: "/t", group: "no-such-group-x1")]) } throws: { error in
            guard case AgentError.usage = error else { return false }
            return true
        }
        #expect { try TokenSinks([AgentOptions.Sink(provider: "a", path: "relative")]) } throws: { error in
            guard case AgentError.oauth(let error, let provider) = error else { return false }
            return error.code == .configuration && provider == "a"
        }
        let sinks = try TokenSinks([AgentOptions.Sink(provider: "a", path: "/t/a", owner: "0", group: "0"),
                                    AgentOptions.Sink(provider: "b", path: "/t/b")])
        let a = Provider(id: "a", tokenURL: URL(string: "https://idp.example/token")!, clientID: "c")
        let b = Provider(id: "b", tokenURL: URL(string: "https://idp.example/token")!, clientID: "c")
        #expect(sinks.first(notIn: [a, b]) == nil)
        #expect(sinks.first(notIn: [a]) == "b")
        #expect(sinks.first(notIn: []) == "a")
    }

    @Test("the store key from $CREDENTIALS_DIRECTORY/authflow-store-key: nil without it, the key with it, a clear error for a bad one")
    func storeKeyCredential() throws {
        let directory = try TemporaryDirectory("authflow-agent-credentials")
        defer { directory.remove() }
        #expect(try Systemd.storeKeyCredential(environment: [:]) == nil)
        #expect(try Systemd.storeKeyCredential(environment: ["CREDENTIALS_DIRECTORY": directory.url.path]) == nil, "no such file")
        #expect(try Systemd.storeKeyCredential(environment: ["CREDENTIALS_DIRECTORY": "relative"]) == nil)

        let file = directory.url.appendingPathComponent("authflow-store-key")
        let hex = String(repeating: "5a", count: 32)
        try Data((hex + "\n").utf8).write(to: file)
        _ = chmod(file.path, 0o400)
        let encryption = try #require(try Systemd.storeKeyCredential(environment: ["CREDENTIALS_DIRECTORY": directory.url.path]))
        #expect(encryption.key.id == (try StoreKey(contentsOf: file)).id)

        _ = chmod(file.path, 0o600)
        try Data("not a key\n".utf8).write(to: file)
        _ = chmod(file.path, 0o400)
        #expect { try Systemd.storeKeyCredential(environment: ["CREDENTIALS_DIRECTORY": directory.url.path]) } throws: { error in
            guard case AgentError.data(let message) = error else { return false }
            return !message.contains("not a key")
        }
    }
}
