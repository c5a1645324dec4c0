import Foundation
import Glibc
import OAuthFlow
@testable import OAuthFlowPostgres
import Synchronization
import TestSupport
import Testing

/// The lock's edges (task-local scope, one deadline, cancellation, the hold limit), privileges,
/// notifications after a reconnect, prepared statements, tombstones, and loading libpq.
extension FleetStoreTests {
    // MARK: The lock scope

    @Test("A proactive-refresh timer set inside the lock takes the fleet lock itself when it fires: the inherited task-local scope is closed")
    func proactiveRefreshTakesTheLock() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        // The background renewal's answer is slow, so the test can look at the locks while it runs.
        server.script("/token", [.token("AT-pro-1", refresh: "RT-pro-2"), .token("AT-pro-2", refresh: "RT-pro-3").delayed(.seconds(3))])
        let key = try TestKey()
        let id = uniqueID("proactive")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-pro-old", refresh: "RT-pro-1", expired: true), for: id)
        let clock = ManualClock()
        let flow = try await AuthFlow(providers: [fleetProvider(id, tokenURL: "\(server.baseURL)/token")], store: store,
                                      options: .init(clock: clock, proactiveRefresh: true))

        // The refresh runs under the lock, and caching its result there sets the renewal timer.
        #expect(try await flow.accessToken(for: id).reveal() == "AT-pro-1")
        #expect(await eventually(.seconds(10)) { clock.pending == 1 })
        clock.fireAll()
        let renewing = await eventually(.seconds(30)) { server.requests("/token").count == 2 }
        try #require(renewing, "the background renewal never sent its refresh")

        // While it waits for the token server it holds the fleet lock, in a transaction of its own.
        #expect(try await cluster.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted") == "1")
        let other = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, options: .init(lockTimeout: .milliseconds(500)))
        let blocked = await #expect(throws: OAuthError.self) {
            try await other.withExclusiveAccess(to: id) { () async throws(OAuthError) in }
        }
        #expect(blocked?.code == .timedOut)

        let renewed = await eventually(.seconds(30)) { (try? await flow.accessToken(for: id).reveal()) == "AT-pro-2" }
        #expect(renewed)
        let entry = try decodeEntry(try #require(try await store.load(id)), id)
        #expect(entry.refreshToken?.reveal() == "RT-pro-3")
        #expect(server.requests("/token").map { $0.form["refresh_token"] } == ["RT-pro-1", "RT-pro-2"])
    }

    @Test("A logout in another process cancels this process's background renewal of that login, not only its cached copy")
    func deletionCancelsTheRenewalTimer() async throws {
        let cluster = try PostgresCluster.require()
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [.token("AT-timer-revived", refresh: "RT-timer-revived")])
        let key = try TestKey()
        let id = uniqueID("timer")
        let writer = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let reader = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await writer.save(storedEntry(id, access: "AT-timer", refresh: "RT-timer", expired: false), for: id)
        let clock = ManualClock()
        let flow = try await AuthFlow(providers: [fleetProvider(id, tokenURL: "\(server.baseURL)/token")], store: reader,
                                      options: .init(clock: clock, proactiveRefresh: true))
        #expect(await eventually(.seconds(30)) { clock.pending == 1 })  // the restored login's renewal
        #expect(await eventually(.seconds(30)) { reader.listenCount >= 1 })

        try await writer.delete(id)

        #expect(await eventually(.seconds(30)) { clock.pending == 0 }, "the renewal timer was not cancelled")
        #expect(await flow.authorization(for: id) == nil)
        clock.fireAll()
        try await Task.sleep(for: .milliseconds(300))
        #expect(server.requests().isEmpty)
    }

    // MARK: Notifications

    @Test("A logout whose notification was missed (the LISTEN connection was down) still reaches the cache: a resync after the reconnect")
    func resyncAfterListenerReconnect() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("resync")
        let writer = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let reader = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await writer.save(storedEntry(id, access: "AT-resync", refresh: "RT-resync", expired: false), for: id)
        let flow = try await AuthFlow(providers: [fleetProvider(id, tokenURL: "http://127.0.0.1:9/token")], store: reader)
        #expect(await flow.authorization(for: id) != nil)
        #expect(await eventually(.seconds(30)) { reader.listenCount == 1 })

        // A deletion nobody is told about, as when it happens while the LISTEN connection is down.
        _ = try await cluster.psql("UPDATE oauthflow_secrets SET value = NULL, revision = revision + 1 WHERE key = '\(id)'")
        try await Task.sleep(for: .milliseconds(500))
        #expect(await flow.authorization(for: id) != nil, "nothing notified, so nothing should have changed yet")

        // The server ends the LISTEN session; the store reconnects and signals a resync.
        _ = try await cluster.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'")
        let dropped = await eventually(.seconds(30)) { await flow.authorization(for: id) == nil }
        #expect(dropped)
        #expect(reader.listenCount >= 2)
        let error = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: id) }
        #expect(error?.code == .reauthorizationRequired)
    }

    @Test("listensForDeletions: false opens no LISTEN connection (invalidations() is nil)")
    func noListenerWhenOff() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, options: .init(listensForDeletions: false))
        #expect(store.invalidations() == nil)
        let listening = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        #expect(listening.invalidations() != nil)
    }

    @Test("A fresh token is served from memory while the database is down")
    func freshTokenWithTheDatabaseDown() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("memory")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-memory", refresh: "RT-memory", expired: false), for: id)
        let flow = try await AuthFlow(providers: [fleetProvider(id, tokenURL: "http://127.0.0.1:9/token")], store: store)

        try await cluster.stopServer()
        var served: [String] = []
        do {
            for _ in 0..<3 { served.append(try await flow.accessToken(for: id).reveal()) }
        } catch {
            Issue.record("no token from memory: \(error)")
        }
        let down = await #expect(throws: OAuthError.self) { try await store.load(id) }  // the database really is down
        try await cluster.startServer()

        #expect(served == ["AT-memory", "AT-memory", "AT-memory"])
        #expect((down?.underlying as? PostgresStoreFailure)?.isTemporary == true)
    }

    // MARK: Bounds

    @Test("The lock wait has one deadline for the pool and the lock together, not lockTimeout twice")
    func oneDeadlineForPoolAndLock() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let busy = uniqueID("pool")
        let wanted = uniqueID("wanted")
        // One connection: a waiter first waits for the pool (9 s), then for the lock another process holds.
        // One deadline ends the whole wait at 10 s; a deadline each would take 9 + 10 = 19 s.
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption,
                                            options: .init(lockTimeout: .seconds(10), maximumConnections: 1))
        let holder = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let (held, heldContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let holding = Task {
            try await holder.withExclusiveAccess(to: wanted) { () async throws(OAuthError) in
                heldContinuation.yield()
                for await _ in release { break }
            }
        }
        for await _ in held { break }
        // The waiter starts once the pool's only connection is leased (a signal, not a sleep: on a busy
        // machine the lease may come late).
        let (leased, leasedContinuation) = AsyncStream.makeStream(of: Void.self)
        let poolBusy = Task {
            try await store.withExclusiveAccess(to: busy) { () async throws(OAuthError) in
                leasedContinuation.yield()
                try? await Task.sleep(for: .seconds(9))
            }
        }
        for await _ in leased { break }

        let start = ContinuousClock.now
        let error = await #expect(throws: OAuthError.self) {
            try await store.withExclusiveAccess(to: wanted) { () async throws(OAuthError) in }
        }
        let elapsed = ContinuousClock.now - start
        releaseContinuation.yield()
        try await holding.value
        try await poolBusy.value

        #expect(error?.code == .timedOut)
        // 10 s in all; separate waits would take 9 s for the pool plus 10 s for the lock. The lower bound
        // is the pool's lease (a busy machine only makes it longer). The upper bound is relative to what
        // it tells apart: 6 s above the one deadline for the few round trips after the pool frees, 3 s
        // below the 19 s of two deadlines (issue 21: no bound close to the time it bounds).
        #expect(elapsed >= .seconds(9) && elapsed < .seconds(16), "\(elapsed)")
    }

    @Test("Cancelling the task ends a wait for the pool and a wait for another process's lock, with .cancelled")
    func cancellationEndsTheWaits() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("cancel")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption,
                                            options: .init(lockTimeout: .seconds(60), maximumConnections: 1))
        let holder = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)

        // 1. The only connection is leased: the second call waits for the pool.
        let (leased, leasedContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let leasing = Task {
            try await store.withExclusiveAccess(to: uniqueID("lease")) { () async throws(OAuthError) in
                leasedContinuation.yield()
                for await _ in release { break }
            }
        }
        for await _ in leased { break }
        let poolWaiter = Task { await outcome { () async throws(OAuthError) in try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in } } }
        try await Task.sleep(for: .milliseconds(300))
        poolWaiter.cancel()
        let poolResult = await poolWaiter.value
        releaseContinuation.yield()
        try await leasing.value

        // 2. Another process holds the lock: the call waits on the server.
        let (locked, lockedContinuation) = AsyncStream.makeStream(of: Void.self)
        let (unlock, unlockContinuation) = AsyncStream.makeStream(of: Void.self)
        let holding = Task {
            try await holder.withExclusiveAccess(to: id) { () async throws(OAuthError) in
                lockedContinuation.yield()
                for await _ in unlock { break }
            }
        }
        for await _ in locked { break }
        let lockWaiter = Task { await outcome { () async throws(OAuthError) in try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in } } }
        let waiting = await eventually(.seconds(30)) {
            (try? await cluster.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")) == "1"
        }
        #expect(waiting)
        lockWaiter.cancel()
        let lockResult = await lockWaiter.value
        unlockContinuation.yield()
        try await holding.value

        // No wall-clock bound (issue 21): the lease and the lock are released only after the waits end,
        // so a missed cancellation waits out the 60 s lock timeout and ends in .timedOut, not .cancelled.
        for result in [poolResult, lockResult] {
            guard let error = result else {
                Issue.record("a cancelled wait succeeded")
                continue
            }
            #expect(error.code == .cancelled, "\(error)")
        }
        // The store works afterwards (the cancelled lock wait's connection was dropped, not reused).
        #expect(try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in 5 } == 5)
    }

    @Test("A holder stuck longer than holdTimeout loses its session on the server, which frees the lock; keepalives are set server-side")
    func holdTimeoutFreesTheLock() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("hold")
        let holder = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, options: .init(holdTimeout: .seconds(1)))
        let waiter = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, options: .init(lockTimeout: .seconds(30)))
        let settings = try await holder.sessionSettings([
            "idle_in_transaction_session_timeout", "tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count",
        ])
        #expect(settings == ["1s", "10", "5", "3"])  // the keepalive settings are in seconds

        let finished = Shared(false)
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let holding = Task {
            await outcome { () async throws(OAuthError) in
                try await holder.withExclusiveAccess(to: id) { () async throws(OAuthError) in
                    enteredContinuation.yield()
                    try? await Task.sleep(for: .seconds(8))  // a refresh that hangs, with the connection idle in its transaction
                    finished.update { $0 = true }
                }
            }
        }
        for await _ in entered { break }
        let tookItEarly = try await waiter.withExclusiveAccess(to: id) { () async throws(OAuthError) in !finished.value }
        #expect(tookItEarly, "the waiter got the lock only after the stuck holder finished")
        guard let error = await holding.value else {
            Issue.record("the holder's commit succeeded after the server ended its session")
            return
        }
        #expect(error.code == .storage)
        #expect((error.underlying as? PostgresStoreFailure)?.kind == .connectionLost, "\(error)")
    }

    // MARK: Privileges, statements, rows

    @Test("A least-privilege role (SELECT, INSERT, UPDATE on the table, no CREATE on the schema) uses an existing table")
    func leastPrivilegeRole() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let role = "dml_\(UUID().uuidString.prefix(8).lowercased())"
        let password = "pw-\(UUID().uuidString.prefix(12))"
        let table = "least_\(UUID().uuidString.prefix(8).lowercased())"
        let owner = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, options: .init(table: table))
        _ = try await owner.keys()  // creates the table as the cluster's owner
        _ = try await cluster.psql("""
            CREATE ROLE \(role) LOGIN PASSWORD '\(password)'; REVOKE CREATE ON SCHEMA public FROM PUBLIC;
            GRANT SELECT, INSERT, UPDATE ON \(table) TO \(role)
            """)
        let uri = "postgresql://\(role):\(password)@127.0.0.1:\(cluster.port)/postgres"
        let store = try PostgresSecretStore(connection: uri, encryption: key.encryption, options: .init(table: table))
        let id = uniqueID("least")
        let entry = storedEntry(id, access: "AT-least", refresh: "RT-least", expired: false)

        try await store.save(entry, for: id)
        #expect(try await store.load(id) == entry)
        let locked = try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in
            try await store.save(entry, for: id)
            return try await store.load(id)
        }
        #expect(locked == entry)
        try await store.delete(id)
        #expect(try await store.keys().isEmpty)

        // The same role cannot create a missing table: a clear .storage error naming the table and what to do.
        let missing = try PostgresSecretStore(connection: uri, encryption: key.encryption, options: .init(table: "\(table)_missing"))
        let error = await #expect(throws: OAuthError.self) { try await missing.keys() }
        #expect(error?.code == .storage)
        #expect(error?.message?.contains("does not exist") == true && error?.message?.contains("grant this role") == true, "\(error as Any)")
        #expect((error?.underlying as? PostgresStoreFailure)?.sqlState == "42501")
        #expect(error?.message?.contains(password) == false)
    }

    @Test("Statements are prepared once per connection and run by name")
    func statementsArePrepared() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("prepared")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption, options: .init(maximumConnections: 1))
        try await store.save(storedEntry(id, access: "AT-prep", refresh: nil, expired: false), for: id)
        _ = try await store.load(id)
        _ = try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in try await store.load(id) }
        let names = try await store.preparedStatements()
        for name in ["oauthflow_session", "oauthflow_save", "oauthflow_load", "oauthflow_begin", "oauthflow_lock", "oauthflow_commit"] {
            #expect(names.contains(name), "\(name) is not prepared: \(names)")
        }
        // Run again: still one of each (prepared once, executed by name).
        _ = try await store.load(id)
        #expect(try await store.preparedStatements() == names)
    }

    @Test("Every row carries PostgresSecretStore.schemaVersion; a row with a newer version is refused, naming it")
    func schemaVersionColumn() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("version")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        try await store.save(storedEntry(id, access: "AT-version", refresh: nil, expired: false), for: id)
        #expect(try await cluster.psql("SELECT schema_version FROM oauthflow_secrets WHERE key = '\(id)'") == String(PostgresSecretStore.schemaVersion))
        _ = try await cluster.psql("UPDATE oauthflow_secrets SET schema_version = 2 WHERE key = '\(id)'")
        let error = await #expect(throws: OAuthError.self) { try await store.load(id) }
        #expect(error?.code == .storage)
        #expect(error?.message?.contains("schema version 2") == true, "\(error as Any)")
    }

    @Test("Purging tombstones is safe: a refresh in flight cannot write a purged login back")
    func purgedTombstoneIsNotRevived() async throws {
        let cluster = try PostgresCluster.require()
        let key = try TestKey()
        let id = uniqueID("purge")
        let store = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let other = try PostgresSecretStore(connection: cluster.uri, encryption: key.encryption)
        let entry = storedEntry(id, access: "AT-purge", refresh: "RT-purge", expired: false)
        try await store.save(entry, for: id)

        let error = await #expect(throws: OAuthError.self) {
            try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in
                _ = try await store.load(id)
                try await other.delete(id)  // a logout elsewhere ...
                do {
                    _ = try await cluster.psql("DELETE FROM oauthflow_secrets WHERE value IS NULL AND key = '\(id)'")  // ... then a purge
                } catch {
                    Issue.record("\(error)")
                }
                try await store.save(entry, for: id)
            }
        }
        #expect(error?.code == .reauthorizationRequired)
        #expect(try await cluster.psql("SELECT count(*) FROM oauthflow_secrets WHERE key = '\(id)'") == "0")
    }

    // MARK: Connection strings and libpq

    @Test("A bare database name is a connection string, as for libpq; the name shows the default socket host")
    func bareDatabaseName() throws {
        let key = try TestKey()
        let store = try PostgresSecretStore(connection: "mydb", encryption: key.encryption, environment: [:])
        #expect(store.name == "postgresql:///mydb")
        let withEnvironment = try PostgresSecretStore(connection: "mydb", encryption: key.encryption,
                                                      environment: ["PGHOST": "db.internal", "PGUSER": "app", "PGPORT": "6432"])
        #expect(withEnvironment.name == "postgresql://app@db.internal:6432/mydb")
        let refused = #expect(throws: OAuthError.self) {
            try PostgresSecretStore(connection: "host=127.0.0.1 port", encryption: key.encryption, environment: [:])
        }
        #expect(refused?.code == .configuration)
    }

    @Test("After a failed connect, calls fail at once during the backoff instead of connecting again")
    func connectBackoff() async throws {
        let key = try TestKey()
        let store = try PostgresSecretStore(connection: "postgresql://fleet@127.0.0.1:1/postgres", encryption: key.encryption, environment: [:])
        var messages: [String] = []
        for _ in 0..<8 {
            do {
                _ = try await store.keys()
                Issue.record("a store on a closed port answered")
            } catch {
                messages.append(error.message ?? "")
                #expect((error.underlying as? PostgresStoreFailure)?.kind == .unreachable)
            }
        }
        // The backoff doubles from 50 ms with each failed attempt, so some of 8 quick calls land inside it.
        #expect(messages.contains { $0.contains("next connection attempt in") }, "\(messages)")
    }

    @Test("A missing libpq is a typed failure that says what to install")
    func missingLibPQ() {
        guard case .failure(let failure) = LibPQ.load("libpq-oauthflow-missing.so.5") else {
            Issue.record("a library that does not exist was loaded")
            return
        }
        #expect(failure.kind == .libraryMissing && !failure.isTemporary)
        #expect(failure.message.contains("libpq-oauthflow-missing.so.5") && failure.message.contains("apt-get install libpq5"))
        // The real one loads, and reports its version (15 or later on Debian 12).
        guard case .success(let lib) = LibPQ.shared else {
            Issue.record("libpq.so.5 did not load")
            return
        }
        #expect(lib.version >= 100_000)
    }
}
