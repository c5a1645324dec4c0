import Foundation
import Glibc
import OAuthFlow
import OAuthFlowPostgres
import TestSupport
import Testing

/// `authflow --store postgresql://…`: the real binary against the suite's cluster.
extension FleetStoreTests {
    /// A catalog with one device-code provider whose endpoints are on `base`, and an environment without the developer's.
    private static func setUp(_ id: String, base: String) throws -> (catalog: URL, environment: [String: String]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-cli-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let catalog = directory.appendingPathComponent("providers.json")
        let entry = #"[{ "id": "\#(id)", "clientID": "client", "tokenURL": "\#(base)/token", "deviceAuthorizationURL": "\#(base)/device/code", "scopes": ["read"] }]"#
        try Data(entry.utf8).write(to: catalog)
        return (catalog, ["PATH": "/usr/bin:/bin", "HOME": directory.path, "NO_COLOR": "1"])
    }

    @Test("authflow token and status with --store postgresql:// and a key file; logout --local ends it for every process")
    func cliUsesTheFleetStore() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [.token("AT-cli-new", refresh: "RT-cli-2"), .oauthError("invalid_grant")])
        let key = try TestKey()
        let id = uniqueID("cli")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-cli-old", refresh: "RT-cli-1", expired: true), for: id)
        let (catalog, environment) = try Self.setUp(id, base: server.baseURL)
        // The password comes from PGPASSWORD, as libpq reads it; the URI has none.
        let uri = "postgresql://\(cluster.user)@127.0.0.1:\(cluster.port)/postgres"
        var withPassword = environment
        withPassword["PGPASSWORD"] = cluster.password
        withPassword["AUTHFLOW_STORE"] = uri

        let token = try await runBinary(["--config", catalog.path, "--store-key-file", key.file.path, "token", id], environment: withPassword)
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout == "AT-cli-new\n")
        #expect(server.requests("/token").map { $0.form["refresh_token"] } == ["RT-cli-1"])

        let status = try await runBinary(["--config", catalog.path, "--store", uri, "--store-key-file", key.file.path, "status", id, "--json"],
                                         environment: withPassword)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("\"provider\":\"\(id)\"") && !status.stdout.contains("AT-cli-new"))

        let logout = try await runBinary(["--config", catalog.path, "--store-key-file", key.file.path, "logout", id, "--local"],
                                         environment: withPassword)
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(try await store.load(id) == nil)
        #expect(server.requests().allSatisfy { $0.path == "/token" })  // --local: nothing sent to the provider
    }

    @Test("authflow --store postgresql:// without a key and without --store-plaintext refuses (exit 65)")
    func cliRefusesPlaintextByDefault() async throws {
        let cluster = try PostgresCluster.require()
        let (catalog, environment) = try Self.setUp("github", base: "http://127.0.0.1:9")
        let result = try await runBinary(["--config", catalog.path, "--store", cluster.uri, "status"], environment: environment)
        #expect(result.status == 65)
        #expect(result.stderr.contains("refusing to store tokens in postgresql://fleet@127.0.0.1:\(cluster.port)/postgres unencrypted"), "\(result.stderr)")
        #expect(!result.stderr.contains(cluster.password))
        let plain = try await runBinary(["--config", catalog.path, "--store", cluster.uri, "--store-plaintext", "status"], environment: environment)
        #expect(plain.status == 0, "\(plain.stderr)")
    }

    @Test("An unreachable database: exit 75 naming the store, never its password", arguments: [false, true])
    func cliUnreachableDatabase(silentServer: Bool) async throws {
        // Either nothing listens (refused at once), or a socket accepts TCP and never answers, so
        // only libpq's connect_timeout (5 s here) ends the wait; the run is killed at 30 s otherwise.
        let listener = silentServer ? try SilentListener() : nil
        let port = listener?.port ?? 1
        let (catalog, environment) = try Self.setUp("github", base: "http://127.0.0.1:9")
        let uri = "postgresql://fleet:Unr3achable-pw@127.0.0.1:\(port)/postgres"
        let key = try TestKey()
        let result = try await runBinary(["--config", catalog.path, "--store", uri, "--store-key-file", key.file.path, "token", "github"],
                                         environment: environment, timeout: .seconds(30))
        #expect(result.status == 75, "\(result.stderr)")
        #expect(result.stderr.contains("postgresql://fleet@127.0.0.1:\(port)/postgres"), "\(result.stderr)")
        #expect(!result.stderr.contains("Unr3achable-pw") && !result.stdout.contains("Unr3achable-pw"))
        _ = listener
    }
}

/// A loopback TCP socket that completes handshakes (the kernel's backlog) and never answers.
final class SilentListener: Sendable {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClusterError("socket failed") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw ClusterError("bind failed")
        }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: addr.sin_port))
    }

    deinit { close(fd) }
}
