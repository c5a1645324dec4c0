import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
@testable import OAuthFlowPostgres
import TestSupport
import Testing

/// `authflow --store postgresql://…`: the real binary against the suite's cluster.
extension FleetStoreTests {
    /// A catalog with one device-code provider whose endpoints are on `base`, in a new private directory that is
    /// also the environment's HOME (an environment without the developer's). The caller removes the directory.
    private static func setUp(_ id: String, base: String, revocation: Bool = false) throws
        -> (scratch: TemporaryDirectory, catalog: URL, environment: [String: String])
    {
        let scratch = try TemporaryDirectory("pg-cli")
        let catalog = scratch.url.appendingPathComponent("providers.json")
        let revoke = revocation ? #", "revocationURL": "\#(base)/revoke""# : ""
        let entry = #"[{ "id": "\#(id)", "clientID": "client", "tokenURL": "\#(base)/token", "deviceAuthorizationURL": "\#(base)/device/code", "scopes": ["read"]\#(revoke) }]"#
        try Data(entry.utf8).write(to: catalog)
        return (scratch, catalog, ["PATH": "/usr/bin:/bin", "HOME": scratch.path, "NO_COLOR": "1"])
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
        let (scratch, catalog, environment) = try Self.setUp(id, base: server.baseURL)
        defer { scratch.remove() }
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
        let (scratch, catalog, environment) = try Self.setUp("github", base: "http://127.0.0.1:9")
        defer { scratch.remove() }
        let result = try await runBinary(["--config", catalog.path, "--store", cluster.uri, "status"], environment: environment)
        #expect(result.status == 65)
        #expect(result.stderr.contains("refusing to store tokens in postgresql://fleet@127.0.0.1:\(cluster.port)/postgres unencrypted"), "\(result.stderr)")
        #expect(!result.stderr.contains(cluster.password))
        let plain = try await runBinary(["--config", catalog.path, "--store", cluster.uri, "--store-plaintext", "status"], environment: environment)
        #expect(plain.status == 0, "\(plain.stderr)")
    }

    @Test("An unreachable database: exit 75 naming the store, never its password, after each address's connect timeout", arguments: [false, true])
    func cliUnreachableDatabase(silentServer: Bool) async throws {
        // Either nothing listens (refused at once), or two addresses accept TCP and never answer, so
        // only libpq's connect_timeout (4 s per address in the CLI) ends the wait. No name on this
        // machine resolves to two addresses, so a host list stands in: libpq tries a list and a
        // name's addresses alike, each with its own connect_timeout.
        let listeners = silentServer ? [try SilentListener(), try SilentListener(address: "::1")] : []
        let hosts = silentServer ? "127.0.0.1:\(listeners[0].port),[::1]:\(listeners[1].port)" : "127.0.0.1:1"
        let (scratch, catalog, environment) = try Self.setUp("github", base: "http://127.0.0.1:9")
        defer { scratch.remove() }
        let uri = "postgresql://fleet:Unr3achable-pw@\(hosts)/postgres"
        let key = try TestKey()
        let start = ContinuousClock.now
        let result = try await runBinary(["--config", catalog.path, "--store", uri, "--store-key-file", key.file.path, "token", "github"],
                                         environment: environment, timeout: .seconds(60))
        let elapsed = ContinuousClock.now - start
        // No upper wall-clock bound (issue 21): a wait without connect_timeout never ends, and is killed
        // at 60 s (status -1, not 75); "timeout expired" below names what ended a silent server's wait.
        #expect(result.status == 75, "\(result.stderr)")
        let name = silentServer ? "postgresql://fleet@127.0.0.1:\(listeners[0].port),[::1]:\(listeners[1].port)/postgres" : "postgresql://fleet@127.0.0.1:1/postgres"
        #expect(result.stderr.contains(name), "\(result.stderr)")
        #expect(!result.stderr.contains("Unr3achable-pw") && !result.stdout.contains("Unr3achable-pw"))
        if silentServer {
            #expect(result.stderr.contains("timeout expired"), "\(result.stderr)")  // both addresses were tried until their timeout
            #expect(listeners.allSatisfy { $0.connectionsMade() >= 1 }, "both addresses were tried")
            #expect(elapsed >= .seconds(7), "\(elapsed)")  // a lower bound: a busy machine only makes it longer
        }
    }

    @Test("A wrong or missing database password: exit 65 (fix the configuration), not 75, and no password shown")
    func cliWrongPassword() async throws {
        let cluster = try PostgresCluster.require()
        let (scratch, catalog, environment) = try Self.setUp("github", base: "http://127.0.0.1:9")
        defer { scratch.remove() }
        let key = try TestKey()
        for uri in ["postgresql://fleet:Wr0ng-cli-pw@127.0.0.1:\(cluster.port)/postgres",
                    "postgresql://fleet@127.0.0.1:\(cluster.port)/postgres?passfile=/nonexistent"] {
            let result = try await runBinary(["--config", catalog.path, "--store", uri, "--store-key-file", key.file.path, "status"],
                                             environment: environment)
            #expect(result.status == 65, "\(result.stderr)")
            #expect(result.stderr.contains("postgresql://fleet@127.0.0.1:\(cluster.port)/postgres"), "\(result.stderr)")
            #expect(!result.stderr.contains("Wr0ng-cli-pw") && !result.stderr.contains(cluster.password))
        }
    }

    @Test("authflow login, then logout (revoking at the provider) with --store postgresql://: the login is stored sealed, the logout leaves a tombstone")
    func cliLoginAndLogout() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/device/code", [.deviceCode(user: "WXYZ-1234", interval: 1)])
        server.script("/token", [.oauthError("authorization_pending"), .token("AT-cli-login", refresh: "RT-cli-login")])
        server.script("/revoke", [.json("{}"), .json("{}")])
        let key = try TestKey()
        let id = uniqueID("login")
        let (scratch, catalog, environment) = try Self.setUp(id, base: server.baseURL, revocation: true)
        defer { scratch.remove() }
        var env = environment
        env["AUTHFLOW_STORE"] = cluster.uri
        env["AUTHFLOW_STORE_KEY_FILE"] = key.file.path

        let login = try await runBinary(["--config", catalog.path, "login", id, "--device"], environment: env, timeout: .seconds(60))
        #expect(login.status == 0, "\(login.stderr)")
        #expect((login.stdout + login.stderr).contains("WXYZ-1234"))
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let stored = try decodeEntry(try #require(try await store.load(id)), id)
        #expect(stored.accessToken.reveal() == "AT-cli-login" && stored.refreshToken?.reveal() == "RT-cli-login")
        let sealed = try #require(Data(hex: try await cluster.psql("SELECT encode(value, 'hex') FROM oauthflow_secrets WHERE key = '\(id)'")))
        #expect(EntryEncryption.isSealed(sealed))

        let logout = try await runBinary(["--config", catalog.path, "logout", id], environment: env)
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(server.requests("/revoke").map { $0.form["token"] } == ["RT-cli-login", "AT-cli-login"])
        #expect(try await store.load(id) == nil)
        #expect(try await cluster.psql("SELECT value IS NULL FROM oauthflow_secrets WHERE key = '\(id)'") == "t")
        let token = try await runBinary(["--config", catalog.path, "token", id], environment: env)
        #expect(token.status == 77, "\(token.stderr)")
    }

    @Test("The database password from ~/.pgpass, and the connection from a PGSERVICE service file, as libpq reads them")
    func cliPgpassAndService() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let (scratch, catalog, environment) = try Self.setUp("github", base: "http://127.0.0.1:9")
        defer { scratch.remove() }
        let home = try #require(environment["HOME"])
        let pgpass = URL(fileURLWithPath: home).appendingPathComponent(".pgpass")
        #expect(FileManager.default.createFile(atPath: pgpass.path, contents: Data("127.0.0.1:\(cluster.port):postgres:fleet:\(cluster.password)\n".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let serviceFile = URL(fileURLWithPath: home).appendingPathComponent("pg_service.conf")
        try Data("[fleetsvc]\nhost=127.0.0.1\nport=\(cluster.port)\nuser=fleet\ndbname=postgres\n".utf8).write(to: serviceFile)

        // .pgpass: the URI names no password, and PGPASSWORD is unset.
        let viaPgpass = try await runBinary(["--config", catalog.path, "--store", "postgresql://fleet@127.0.0.1:\(cluster.port)/postgres",
                                             "--store-key-file", key.file.path, "status"], environment: environment)
        #expect(viaPgpass.status == 0, "\(viaPgpass.stderr)")
        // The service: in the URI, then from PGSERVICE with a bare URI; the password still from .pgpass.
        var withService = environment
        withService["PGSERVICEFILE"] = serviceFile.path
        let inURI = try await runBinary(["--config", catalog.path, "--store", "postgresql:///?service=fleetsvc", "--store-key-file", key.file.path,
                                         "status"], environment: withService)
        #expect(inURI.status == 0, "\(inURI.stderr)")
        withService["PGSERVICE"] = "fleetsvc"
        let fromEnvironment = try await runBinary(["--config", catalog.path, "--store", "postgresql://", "--store-key-file", key.file.path,
                                                   "status"], environment: withService)
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        // Without the .pgpass entry the same service is refused: the password really came from it.
        try FileManager.default.removeItem(at: pgpass)
        let refused = try await runBinary(["--config", catalog.path, "--store", "postgresql:///?service=fleetsvc", "--store-key-file", key.file.path,
                                           "status"], environment: withService)
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("postgresql:///?service=fleetsvc"), "\(refused.stderr)")
    }

    @Test("One CLI command opens one database connection and no LISTEN connection")
    func cliOpensOneConnection() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [.token("AT-one", refresh: "RT-one-2").delayed(.seconds(3))])
        let key = try TestKey()
        let id = uniqueID("one")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-one-old", refresh: "RT-one-1", expired: true), for: id)
        let (scratch, catalog, environment) = try Self.setUp(id, base: server.baseURL)
        defer { scratch.remove() }
        let application = "cli-\(UUID().uuidString.prefix(8).lowercased())"
        let running = try RunningBinary(["--config", catalog.path, "--store", "\(cluster.uri)?application_name=\(application)",
                                         "--store-key-file", key.file.path, "token", id], environment: environment)
        let refreshing = await eventually(.seconds(30)) { server.requests("/token").count == 1 }
        #expect(refreshing)
        // Mid-refresh: the lock's connection is the only one the command has.
        let connections = try await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = '\(application)'")
        let listening = try await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = '\(application)' AND query LIKE 'LISTEN%'")
        let status = await running.wait(timeout: .seconds(30))
        #expect(status == 0, "\(running.stderr)")
        #expect(running.stdout == "AT-one\n")
        #expect(connections == "1")
        #expect(listening == "0")
    }

    @Test("--store-plaintext is parsed before or after the command, and refused with a directory store (exit 64)")
    func cliStorePlaintextOption() async throws {
        #expect(try Authflow.parse(["--store-plaintext", "status"]).storePlaintext)
        #expect(try Authflow.parse(["status", "--store-plaintext"]).storePlaintext)
        #expect(try Authflow.parse(["status"]).storePlaintext == false)
        let (scratch, catalog, environment) = try Self.setUp("github", base: "http://127.0.0.1:9")
        defer { scratch.remove() }
        let directory = scratch.url.appendingPathComponent("pg-plain").path
        let result = try await runBinary(["--config", catalog.path, "--store", directory, "--store-plaintext", "status"], environment: environment)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("--store-plaintext applies to a postgresql:// store only"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory))  // refused before anything was created
    }
}

/// A loopback TCP socket (IPv4 or IPv6) that completes handshakes (the kernel's backlog) and never answers.
final class SilentListener: Sendable {
    let fd: Int32
    let port: Int

    init(address: String = "127.0.0.1") throws {
        let v6 = address.contains(":")
        let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClusterError("socket failed") }
        var storage = sockaddr_storage()
        var length = socklen_t(v6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &storage) { pointer in
            if v6 {
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { addr in
                    addr.pointee.sin6_family = sa_family_t(AF_INET6)
                    _ = inet_pton(AF_INET6, address, &addr.pointee.sin6_addr)
                }
            } else {
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { addr in
                    addr.pointee.sin_family = sa_family_t(AF_INET)
                    addr.pointee.sin_addr.s_addr = inet_addr(address)
                }
            }
        }
        let bound = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw ClusterError("bind to \(address) failed")
        }
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        let port = withUnsafePointer(to: &storage) { pointer in
            v6 ? pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
               : pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        self.fd = fd
        self.port = Int(port)
    }

    /// The connections clients have made so far (accepted and closed here).
    func connectionsMade() -> Int {
        var count = 0
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while count < 64, poll(&ready, 1, 0) > 0 {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { break }
            close(client)
            count += 1
        }
        return count
    }

    deinit { close(fd) }
}
