import Foundation
import Glibc
import OAuthFlow
import OAuthFlowPostgres
import TestSupport
import Testing

/// `authflow agent` on the fleet store: two agents, one database.
extension FleetStoreTests {
    @Test("two agents on one postgresql:// store: a refused refresh token makes one device login for the fleet, and both serve its token")
    func agentsAskOnce() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        let id = uniqueID("agent")
        let key = try TestKey()
        // A stored login whose refresh token the server refuses. The store's lock makes the agents
        // refresh one after the other: the first gets invalid_grant and marks the entry, the second
        // reads the mark and sends nothing. Then one device login polls: pending, then approved.
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-old", refresh: "RT-dead", expired: true), for: id)
        server.script("/token", [.oauthError("invalid_grant"), .oauthError("authorization_pending"), .token("AT-fleet", refresh: "RT-fleet")])
        server.script("/device/code", [.deviceCode(user: "FLEE-TWOA", interval: 1)])

        let scratch = try TemporaryDirectory("pg-agent", in: URL(fileURLWithPath: "/tmp"))  // short socket paths
        defer { scratch.remove() }
        let directory = scratch.url
        let catalog = directory.appendingPathComponent("providers.json")
        try Data(#"[{ "id": "\#(id)", "clientID": "client", "tokenURL": "\#(server.baseURL)/token", "deviceAuthorizationURL": "\#(server.baseURL)/device/code" }]"#.utf8)
            .write(to: catalog)
        let environment = ["PATH": "/usr/bin:/bin", "HOME": directory.path, "NO_COLOR": "1", "PGPASSWORD": cluster.password]
        let uri = "postgresql://\(cluster.user)@127.0.0.1:\(cluster.port)/postgres"
        let sockets = ["a", "b"].map { directory.appendingPathComponent("\($0).sock").path }
        let agents = try sockets.map { socket in
            try RunningBinary(["--config", catalog.path, "--store", uri, "--store-key-file", key.file.path, "agent", "--socket", socket],
                              environment: environment)
        }
        defer { for agent in agents { kill(agent.pid, SIGKILL) } }

        var logs: String { agents.map(\.stderr).joined(separator: "\n---\n") }
        var asked = false
        for _ in 0..<3000 where !asked {
            asked = logs.contains("a person must approve") && logs.contains("is asking a person already")
            if !asked { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(asked, "\(logs)")
        for socket in sockets {
            var served: String?
            for _ in 0..<600 where served == nil {
                let answer = try await runBinary(["token", id], environment: environment.merging(["AUTHFLOW_AGENT": socket]) { _, new in new })
                if answer.status == 0 { served = answer.stdout } else { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(served == "AT-fleet\n", "\(logs)")
        }
        #expect(server.requests("/device/code").count == 1, "one device login for the fleet")
        #expect(server.requests("/token").filter { $0.form["grant_type"] == "refresh_token" }.count == 1, "one refresh for the fleet")
        #expect(try await store.load("\(id).agent-login") == nil, "the marker is removed after the login")
        #expect(!logs.contains("AT-fleet") && !logs.contains("RT-"))
        for agent in agents {
            kill(agent.pid, SIGTERM)
            #expect(await agent.wait(timeout: .seconds(30)) == 0)
        }
        try await store.delete(id)
    }

    @Test("an agent on a postgresql:// store listens: a logout on another machine ends the token it serves at once, not at expiry")
    func agentFollowsRemoteLogout() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        let id = uniqueID("agent-logout")
        let key = try TestKey()
        // A login good for an hour: without LISTEN the agent would serve it from memory until then.
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-live", refresh: "RT-live", expired: false), for: id)

        let scratch = try TemporaryDirectory("pg-agent", in: URL(fileURLWithPath: "/tmp"))  // short socket paths
        defer { scratch.remove() }
        let directory = scratch.url
        let catalog = directory.appendingPathComponent("providers.json")
        try Data(#"[{ "id": "\#(id)", "clientID": "client", "tokenURL": "\#(server.baseURL)/token" }]"#.utf8).write(to: catalog)
        let environment = ["PATH": "/usr/bin:/bin", "HOME": directory.path, "NO_COLOR": "1", "PGPASSWORD": cluster.password]
        let uri = "postgresql://\(cluster.user)@127.0.0.1:\(cluster.port)/postgres"
        let socket = directory.appendingPathComponent("agent.sock").path
        let agent = try RunningBinary(["--config", catalog.path, "--store", uri, "--store-key-file", key.file.path, "agent", "--socket", socket],
                                      environment: environment)
        defer { kill(agent.pid, SIGKILL) }
        let asking = environment.merging(["AUTHFLOW_AGENT": socket]) { _, new in new }

        var served: String?
        for _ in 0..<600 where served == nil {
            let answer = try await runBinary(["token", id], environment: asking)
            if answer.status == 0 { served = answer.stdout } else { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(served == "AT-live\n", "\(agent.stderr)")

        // Another machine logs out: its store deletes the entry and notifies the table's listeners.
        let elsewhere = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await elsewhere.delete(id)
        var refused: (status: Int32, stderr: String)?
        for _ in 0..<600 where refused == nil {
            let answer = try await runBinary(["token", id], environment: asking)
            if answer.status != 0 { refused = (answer.status, answer.stderr) } else { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(refused?.status == 77, "a login is needed: \(refused?.stderr ?? "still served")")
        #expect(refused?.stderr.contains("reauthorization_required") == true, "\(refused?.stderr ?? "")")
        #expect(server.requests("/token").isEmpty, "nothing to refresh with: no request")
        kill(agent.pid, SIGTERM)
        #expect(await agent.wait(timeout: .seconds(30)) == 0)
    }
}
