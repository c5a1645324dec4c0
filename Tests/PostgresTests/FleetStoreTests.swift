import Foundation
import Glibc
import OAuthFlow
@testable import OAuthFlowPostgres
import Synchronization
import TestSupport
import Testing

/// The PostgreSQL fleet store against a private cluster on loopback, with separate processes as
/// separate machines. Serialized: one test stops and restarts the cluster.
@Suite("Fleet store: PostgreSQL, one refresh for the whole fleet", .postgresCluster, .serialized, .timeLimit(.minutes(5)))
struct FleetStoreTests {
    // MARK: Single-flight across processes

    @Test("16 processes, an expired login, a server that rotates refresh tokens and rejects reuse: exactly 1 refresh (RFC 6749 §6, RFC 9700 §4.14.2)")
    func sixteenProcessesRefreshOnce() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        // The first refresh rotates RT-1 into RT-2; any later request (a reuse of RT-1) is rejected.
        server.script("/token", [.token("AT-fleet-new", refresh: "RT-fleet-2").delayed(.milliseconds(300)), .oauthError("invalid_grant")])
        let key = try TestKey()
        let id = uniqueID("user")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-fleet-old", refresh: "RT-fleet-1", expired: true), for: id)

        let outputs = try await FleetMember.runMany(16, ["--store", cluster.uri, "--key-file", key.file.path,
                                                         "--token-url", "\(server.baseURL)/token", "--provider", id])

        #expect(outputs.count == 16)
        for output in outputs {
            #expect(output.status == 0, "\(output.output)")
            #expect(output.stdout == "token AT-fleet-new\n", "\(output.output)")
        }
        let requests = server.requests("/token")
        #expect(requests.count == 1)
        #expect(requests.first?.form["grant_type"] == "refresh_token")
        #expect(requests.first?.form["refresh_token"] == "RT-fleet-1")
        // The table holds the newest refresh token, sealed: decrypt it here.
        let sealed = try #require(Data(hex: try await cluster.psql("SELECT encode(value, 'hex') FROM oauthflow_secrets WHERE key = '\(id)'")))
        #expect(EntryEncryption.isSealed(sealed))
        let entry = try decodeEntry(try key.encryption.open(sealed, providerID: id), id)
        #expect(entry.refreshToken?.reveal() == "RT-fleet-2")
        #expect(entry.accessToken.reveal() == "AT-fleet-new")
    }

    @Test("16 processes, client credentials, nothing stored: 1 token request for the fleet (RFC 6749 §4.4)")
    func sixteenProcessesOneClientCredentialsRequest() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [.token("CC-fleet-1").delayed(.milliseconds(300)), .token("CC-fleet-second-request")])
        let key = try TestKey()
        let id = uniqueID("service")

        let outputs = try await FleetMember.runMany(16, ["--store", cluster.uri, "--key-file", key.file.path, "--service",
                                                         "--token-url", "\(server.baseURL)/token", "--provider", id])

        for output in outputs { #expect(output.stdout == "token CC-fleet-1\n", "\(output.output)") }
        let requests = server.requests("/token")
        #expect(requests.count == 1)
        #expect(requests.first?.form["grant_type"] == "client_credentials")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let entry = try decodeEntry(try #require(try await store.load(id)), id)
        #expect(entry.accessToken.reveal() == "CC-fleet-1")
    }

    @Test("SIGKILL of the process holding the lock mid-refresh: the next process gets the lock and completes; nothing is lost")
    func killedHolderReleasesTheLock() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        // The first answer is slow: its process is killed before it arrives (so RT-1 is still good).
        server.script("/token", [.token("AT-kill-lost", refresh: "RT-kill-lost").delayed(.seconds(3)),
                                 .token("AT-kill-2", refresh: "RT-kill-2"), .oauthError("invalid_grant")])
        let key = try TestKey()
        let id = uniqueID("kill")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-kill-old", refresh: "RT-kill-1", expired: true), for: id)
        let arguments = ["--store", cluster.uri, "--key-file", key.file.path, "--token-url", "\(server.baseURL)/token", "--provider", id]

        let pid = Mutex<Int32>(0)
        let victim = Task { try await FleetMember.run(arguments, started: { started in pid.withLock { $0 = started } }) }
        let refreshing = await eventually(.seconds(60)) { server.requests("/token").count == 1 }
        try #require(refreshing, "the first process never sent its refresh")
        // It holds the fleet lock now, waiting for the token server.
        let lockHeld = try await cluster.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
        #expect(lockHeld == "1")
        kill(pid.withLock { $0 }, SIGKILL)
        let killed = try await victim.value
        #expect(killed.status != 0)

        let survivor = try await FleetMember.run(arguments, timeout: .seconds(60))
        #expect(survivor.stdout == "token AT-kill-2\n", "\(survivor.output)")
        let requests = server.requests("/token")
        #expect(requests.map { $0.form["refresh_token"] } == ["RT-kill-1", "RT-kill-1"])
        let entry = try decodeEntry(try #require(try await store.load(id)), id)
        #expect(entry.refreshToken?.reveal() == "RT-kill-2")
        #expect(try await cluster.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == "0")
    }

    // MARK: Logout is final

    @Test("A logout while another process refreshes is final: the refresh cannot write the login back")
    func logoutWinsOverRefreshInFlight() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [.token("AT-revived", refresh: "RT-revived").delayed(.seconds(2))])
        let key = try TestKey()
        let id = uniqueID("logout")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-logout-old", refresh: "RT-logout-1", expired: true), for: id)

        let member = Task {
            try await FleetMember.run(["--store", cluster.uri, "--key-file", key.file.path, "--token-url", "\(server.baseURL)/token", "--provider", id])
        }
        let refreshing = await eventually(.seconds(60)) { server.requests("/token").count == 1 }
        try #require(refreshing)
        try await store.delete(id)  // the logout, from another process's point of view
        let output = try await member.value

        #expect(output.status == 1)
        #expect(output.stdout.hasPrefix("error reauthorizationRequired"), "\(output.output)")
        #expect(try await store.load(id) == nil)
        #expect(try await store.keys().contains(id) == false)
        #expect(try await cluster.psql("SELECT value IS NULL FROM oauthflow_secrets WHERE key = '\(id)'") == "t")
    }

    @Test("A delete in one process drops the cached token in another process's AuthFlow (LISTEN/NOTIFY)")
    func deleteInvalidatesOtherCaches() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("notify")
        let writer = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let reader = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await writer.save(storedEntry(id, access: "AT-notify", refresh: "RT-notify", expired: false), for: id)
        let provider = Provider(id: id, tokenURL: URL(string: "http://127.0.0.1:9/token")!,
                                deviceAuthorizationURL: URL(string: "http://127.0.0.1:9/device")!, clientID: "fleet")
        let flow = try await AuthFlow(providers: [provider], store: reader)
        #expect(try await flow.accessToken(for: id).reveal() == "AT-notify")  // from memory from now on
        // The listener connects in the background; a delete before it listens would not be seen, so retry the delete.
        let dropped = await eventually(.seconds(30)) {
            try? await writer.save(storedEntry(id, access: "AT-notify", refresh: "RT-notify", expired: false), for: id)
            try? await writer.delete(id)
            try? await Task.sleep(for: .milliseconds(300))
            return await flow.authorization(for: id) == nil
        }
        #expect(dropped)
        #expect(flow.state == .empty(provider: id))
        let error = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: id) }
        #expect(error?.code == .reauthorizationRequired)
    }

    // MARK: Failures

    @Test("The database stopped mid-run with idle connections, a lock held here and 4 fleet members refreshing: typed, temporary errors, no crash; it works again")
    func databaseStoppedAndRestarted() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        // The first refresh is slow: the database stops while its member holds the lock waiting for it.
        server.script("/token", [.token("AT-outage-lost", refresh: "RT-outage-lost").delayed(.seconds(3)),
                                 .token("AT-outage-2", refresh: "RT-outage-2")])
        let key = try TestKey()
        let id = uniqueID("outage")
        let local = uniqueID("restart")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let entry = storedEntry(local, access: "AT-restart", refresh: "RT-restart", expired: false)
        try await store.save(entry, for: local)
        try await store.save(storedEntry(id, access: "AT-outage-old", refresh: "RT-outage-1", expired: true), for: id)
        try await openIdleConnections(store, 3)
        #expect(store.openConnections == 3)

        let arguments = ["--store", cluster.uri, "--key-file", key.file.path, "--token-url", "\(server.baseURL)/token", "--provider", id]
        let members = Task { try await FleetMember.runMany(4, arguments) }
        let refreshing = await eventually(.seconds(60)) { server.requests("/token").count == 1 }
        try #require(refreshing, "no member sent its refresh")
        // An operation in flight here: this process holds the lock on another key.
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let holding = Task {
            await outcome { () async throws(OAuthError) in
                try await store.withExclusiveAccess(to: local) { () async throws(OAuthError) in
                    enteredContinuation.yield()
                    for await _ in release { break }
                    try await store.save(entry, for: local)
                }
            }
        }
        for await _ in entered { break }

        try await cluster.stopServer()
        var errors: [OAuthError] = []
        do { _ = try await store.load(id) } catch { errors.append(error) }
        do { try await store.save(entry, for: uniqueID("other")) } catch { errors.append(error) }
        do { _ = try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in 1 } } catch { errors.append(error) }
        releaseContinuation.yield()
        if let error = await holding.value { errors.append(error) }
        let outputs = try await members.value
        try await cluster.startServer()

        #expect(errors.count == 4)
        for error in errors {
            #expect(error.code == .storage || error.code == .timedOut, "\(error)")
            let failure = try #require(error.underlying as? PostgresStoreFailure)
            #expect(failure.isTemporary, "\(failure)")
            #expect(!String(describing: error).contains(cluster.password))
        }
        // Every member failed cleanly: exit 1 with a typed error, never a signal (134, 139).
        #expect(outputs.count == 4)
        for output in outputs {
            #expect(output.status == 1, "\(output.output)")
            #expect(output.stdout.hasPrefix("error storage") || output.stdout.hasPrefix("error timedOut"), "\(output.output)")
            #expect(!output.output.contains(cluster.password))
        }
        let recovered = await eventually(.seconds(30)) { (try? await store.load(local)) == entry }
        #expect(recovered)
        let value = try await store.withExclusiveAccess(to: local) { () async throws(OAuthError) in try await store.load(local) }
        #expect(value == entry)
        // The lost refresh was never committed: the next member refreshes RT-outage-1 again and stores the result.
        let survivor = try await FleetMember.run(arguments, timeout: .seconds(60))
        #expect(survivor.stdout == "token AT-outage-2\n", "\(survivor.output)")
        #expect(server.requests("/token").map { $0.form["refresh_token"] } == ["RT-outage-1", "RT-outage-1"])
        let stored = try decodeEntry(try #require(try await store.load(id)), id)
        #expect(stored.refreshToken?.reveal() == "RT-outage-2")
    }

    @Test("After a restart with idle connections in the pool, the first call succeeds: every idle connection is dropped and BEGIN retried once")
    func restartDropsIdleConnections() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("idle")
        let reader = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let locker = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let entry = storedEntry(id, access: "AT-idle", refresh: "RT-idle", expired: false)
        try await reader.save(entry, for: id)
        try await openIdleConnections(reader, 3)
        try await openIdleConnections(locker, 3)
        #expect(reader.openConnections == 3 && locker.openConnections == 3)

        try await cluster.stopServer()
        try await cluster.startServer()

        // Three dead connections each: without dropping them all, the one retry would meet a second dead one.
        #expect(try await reader.load(id) == entry)
        #expect(reader.openConnections == 1)
        let locked = try await locker.withExclusiveAccess(to: id) { () async throws(OAuthError) in try await locker.load(id) }
        #expect(locked == entry)
        #expect(locker.openConnections == 1)
    }

    @Test("A second process waits at most lockTimeout for the fleet lock, then fails with .timedOut")
    func lockWaitIsBounded() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("timeout")
        let holder = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let waiter = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, options: .init(lockTimeout: .seconds(1)))
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let holding = Task {
            try await holder.withExclusiveAccess(to: id) { () async throws(OAuthError) in
                enteredContinuation.yield()
                for await _ in release { break }
            }
        }
        for await _ in entered { break }
        let error = await #expect(throws: OAuthError.self) {
            try await waiter.withExclusiveAccess(to: id) { () async throws(OAuthError) in }
        }
        releaseContinuation.yield()
        try await holding.value
        #expect(error?.code == .timedOut)
        #expect((error?.underlying as? PostgresStoreFailure)?.sqlState == "55P03")
        // Once released, the lock is there for the taking.
        #expect(try await waiter.withExclusiveAccess(to: id) { () async throws(OAuthError) in 7 } == 7)
    }

    // MARK: Encryption

    @Test("Every stored value is ciphertext: no token, refresh token or JSON key appears in the table")
    func everyValueIsCiphertext() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let ids = (0..<3).map { _ in uniqueID("cipher") }
        for (index, id) in ids.enumerated() {
            try await store.save(storedEntry(id, access: "AT-cipher-\(index)-visible", refresh: "RT-cipher-\(index)-visible", expired: false), for: id)
        }
        let rows = try await cluster.psql("SELECT key || ' ' || encode(value, 'hex') FROM oauthflow_secrets WHERE value IS NOT NULL")
        let values = rows.split(separator: "\n").map { $0.split(separator: " ") }
        #expect(values.count >= ids.count)
        for row in values {
            let value = try #require(Data(hex: String(row[1])))
            #expect(EntryEncryption.isSealed(value), "\(row[0]) is not sealed")
            for needle in ["AT-", "RT-", "access_token", "accessToken", "refreshToken", "visible", "fleet"] {
                #expect(!value.contains(needle), "\(row[0]) holds \(needle) in clear")
            }
        }
        for (index, id) in ids.enumerated() {
            let entry = try decodeEntry(try #require(try await store.load(id)), id)
            #expect(entry.accessToken.reveal() == "AT-cipher-\(index)-visible")
        }
    }

    @Test("No key and no explicit plaintext: refused with .configuration; plaintext only when asked; no downgrade")
    func encryptedByDefault() async throws {
        let cluster = try PostgresCluster.require()
        let refused = #expect(throws: OAuthError.self) { try PostgresSecretStore(connection: cluster.uri, encryption: nil) }
        #expect(refused?.code == .configuration)
        let key = try TestKey()
        let both = #expect(throws: OAuthError.self) {
            try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, allowPlaintext: true)
        }
        #expect(both?.code == .configuration)

        let id = uniqueID("plain")
        let plain = try PostgresSecretStore(connection: cluster.uri, encryption: nil, allowPlaintext: true)
        try await plain.save(Data("plain-entry".utf8), for: id)
        #expect(try await cluster.psql("SELECT convert_from(value, 'UTF8') FROM oauthflow_secrets WHERE key = '\(id)'") == "plain-entry")
        // An encrypting store refuses a plaintext row (it could have been planted) ...
        let sealedStore = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let downgrade = await #expect(throws: OAuthError.self) { try await sealedStore.load(id) }
        #expect(downgrade?.code == .storage)
        // ... and a plaintext store cannot read a sealed one.
        try await sealedStore.save(Data("sealed-entry".utf8), for: id)
        let noKey = await #expect(throws: OAuthError.self) { try await plain.load(id) }
        #expect(noKey?.code == .storage)
        #expect(try await sealedStore.load(id) == Data("sealed-entry".utf8))
    }

    // MARK: Secrets in messages

    @Test("The password never appears in the store's name, description, or any error", arguments: [
        "postgresql://fleet:S3cr3t-pw-in-uri@127.0.0.1:1/postgres",
        "postgresql://fleet@127.0.0.1:1/postgres?password=S3cr3t-pw-in-uri",
        "host=127.0.0.1 port=1 user=fleet password=S3cr3t-pw-in-uri dbname=postgres",
    ])
    func passwordNeverShown(connection: String) async throws {
        let key = try TestKey()
        let store = try PostgresSecretStore(connection: connection, encryption: key.encryption, environment: [:])
        #expect(store.name == "postgresql://fleet@127.0.0.1:1/postgres")
        #expect(!store.description.contains("S3cr3t") && !String(reflecting: store).contains("S3cr3t"))
        var dumped = ""
        dump(store, to: &dumped)
        #expect(dumped.contains("postgresql://fleet@127.0.0.1:1/postgres") && !dumped.contains("S3cr3t"), "\(dumped)")
        #expect(Mirror(reflecting: store).children.map(\.label) == ["name", "options"])
        let error = await #expect(throws: OAuthError.self) { try await store.load("github") }
        let shown = [String(describing: error as Any), String(reflecting: error as Any), error?.message ?? "", "\(error?.underlying as Any)"]
        for text in shown { #expect(!text.contains("S3cr3t"), "\(text)") }
        #expect(error?.message?.contains("postgresql://fleet@127.0.0.1:1/postgres") == true)
        #expect((error?.underlying as? PostgresStoreFailure)?.kind == .unreachable)
    }

    @Test("A wrong password against the live server: rejected, and neither password is shown")
    func wrongPasswordNotShown() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let store = try PostgresSecretStore(connection: "postgresql://fleet:Wr0ng-pw-XYZ@127.0.0.1:\(cluster.port)/postgres",
                                            encryption: key.encryption, environment: ["PGPASSWORD": cluster.password])
        let error = await #expect(throws: OAuthError.self) { try await store.keys() }
        let text = String(describing: error as Any) + String(reflecting: error?.underlying as Any)
        #expect(text.contains("password authentication failed"), "\(text)")
        #expect(!text.contains("Wr0ng-pw-XYZ") && !text.contains(cluster.password))
        // A refused login is a configuration error, not a temporary one: retrying cannot help.
        #expect(error?.code == .configuration)
        let failure = try #require(error?.underlying as? PostgresStoreFailure)
        #expect(failure.kind == .authenticationFailed && !failure.isTemporary)

        // No password at all (none in the URI, no PGPASSWORD, no .pgpass): refused the same way.
        let none = try PostgresSecretStore(connection: "postgresql://fleet@127.0.0.1:\(cluster.port)/postgres?passfile=/nonexistent",
                                           encryption: key.encryption, environment: [:])
        let missing = await #expect(throws: OAuthError.self) { try await none.keys() }
        #expect((missing?.underlying as? PostgresStoreFailure)?.kind == .authenticationFailed, "\(missing as Any)")
    }
}
