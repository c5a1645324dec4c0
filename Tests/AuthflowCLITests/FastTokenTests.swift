import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow token` answered from the store before any flow exists (`FastToken.swift`): it
/// prints what the full path prints for a fresh token, and in every other case it prints nothing
/// and returns nil, so the full path runs and reports as it always did.
@Suite("authflow token: the answer from the store")
struct FastTokenTests {
    /// A catalog with providers "gh" and "dbg" (`"debug": true`), and an entry for `id` written as
    /// the library writes it: issued at `issued`, expiring `lifetime` seconds later (nil: never).
    struct Rig {
        let directory: TemporaryDirectory
        let issued = Date(timeIntervalSince1970: 1_800_000_000)

        init() throws {
            directory = try TemporaryDirectory()
            try directory.writeCatalog([
                catalogEntry(id: "gh", base: "http://127.0.0.1:9"),
                #"{ "id": "dbg", "clientID": "c", "tokenURL": "http://127.0.0.1:9/token", "debug": true }"#,
            ])
            try FileManager.default.createDirectory(at: directory.store, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }

        var entryPath: String { directory.store.appendingPathComponent("gh.json").path }

        func storeEntry(id: String = "gh", access: String = "at-fast", lifetime: Double? = 3600, mode: mode_t = 0o600) throws {
            let expiry = lifetime.map { #""expiresAt":\#(issued.timeIntervalSince1970 + $0),"# } ?? ""
            let json = #"{"tokens":{"accessToken":"\#(access)",\#(expiry)"grant":"urn:ietf:params:oauth:grant-type:device_code","#
                + #""issuedAt":\#(issued.timeIntervalSince1970),"needsReauthorization":false,"providerID":"\#(id)","#
                + #""scopes":["read"],"tokenType":"Bearer"},"version":1}"#
            try writeEntry(json, id: id, mode: mode)
        }

        func writeEntry(_ text: String, id: String = "gh", mode: mode_t = 0o600) throws {
            let path = directory.store.appendingPathComponent("\(id).json").path
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            chmod(path, mode)
        }

        var environment: [String: String] {
            ["HOME": directory.url.appendingPathComponent("home").path, "AUTHFLOW_CONFIG": directory.config.path,
             "AUTHFLOW_STORE": directory.store.path]
        }

        func services(at offset: Double) -> Authflow.Services {
            let now = issued.addingTimeInterval(offset)
            return Authflow.Services(transport: UnreachableTransport(), now: { now }, lockTimeout: .seconds(2))
        }

        /// The answer from the store alone: its status (nil: not answered) and both streams.
        func fast(_ arguments: [String], at offset: Double = 10, environment extra: [String: String] = [:]) throws
            -> (status: ExitCode?, stdout: String, stderr: String)
        {
            let (output, stdout, stderr) = Output.capture()
            let status = Authflow.tokenFromStore(try Authflow.parse(arguments), output: output,
                                                 environment: environment.merging(extra) { _, new in new }, services: services(at: offset))
            return (status, stdout.text, stderr.text)
        }

        /// The full path only (``Authflow/execute(_:output:environment:services:)``), never the answer from the store.
        func full(_ arguments: [String], at offset: Double = 10, environment extra: [String: String] = [:]) async throws
            -> (status: ExitCode, stdout: String, stderr: String)
        {
            let (output, stdout, stderr) = Output.capture()
            let status = await Authflow.execute(try Authflow.parse(arguments), output: output,
                                                environment: environment.merging(extra) { _, new in new }, services: services(at: offset))
            return (status, stdout.text, stderr.text)
        }

        /// What a caller of ``Authflow/run(arguments:output:environment:services:)`` sees (the answer from the store first).
        func run(_ arguments: [String], at offset: Double = 10, environment extra: [String: String] = [:]) async
            -> (status: ExitCode, stdout: String, stderr: String)
        {
            let (output, stdout, stderr) = Output.capture()
            let status = await Authflow.run(arguments: arguments, output: output,
                                            environment: environment.merging(extra) { _, new in new }, services: services(at: offset))
            return (status, stdout.text, stderr.text)
        }

        /// Checks that the store does not answer, and that `run` then behaves exactly as the full path.
        func expectFallsThrough(
            _ arguments: [String] = ["token", "gh"], at offset: Double = 10, environment extra: [String: String] = [:],
            sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> (status: ExitCode, stdout: String, stderr: String) {
            let fast = try fast(arguments, at: offset, environment: extra)
            #expect(fast.status == nil, "the store answered", sourceLocation: sourceLocation)
            #expect(fast.stdout.isEmpty && fast.stderr.isEmpty, "printed before falling through", sourceLocation: sourceLocation)
            let full = try await full(arguments, at: offset, environment: extra)
            let run = await run(arguments, at: offset, environment: extra)
            #expect(run.status == full.status && run.stdout == full.stdout && run.stderr == full.stderr,
                    "run differs from the full path: \(run) vs \(full)", sourceLocation: sourceLocation)
            return full
        }
    }

    @Test("a fresh token: the store answers, with exactly the full path's output and status")
    func freshTokenSameAsFullPath() async throws {
        let rig = try Rig()
        defer { rig.directory.remove() }
        try rig.storeEntry()
        let fast = try rig.fast(["token", "gh"])
        let full = try await rig.full(["token", "gh"])
        #expect(fast.status == .success)
        #expect(fast.stdout == "at-fast\n")
        #expect(fast.stderr.isEmpty)
        #expect(full.status == fast.status && full.stdout == fast.stdout && full.stderr == fast.stderr)
        // Options before the command, and a store named by --store, answer the same way.
        let flags = try rig.fast(["--config", rig.directory.config.path, "--store", rig.directory.store.path, "token", "gh"],
                                 environment: ["AUTHFLOW_CONFIG": "/nonexistent", "AUTHFLOW_STORE": "/nonexistent"])
        #expect(flags.status == .success && flags.stdout == "at-fast\n")
        // Marked for reauthorization but still fresh: the flow answers it from memory, and so does the store.
        try rig.writeEntry(#"{"tokens":{"accessToken":"at-marked","expiresAt":\#(rig.issued.timeIntervalSince1970 + 3600),"grant":"refresh_token","issuedAt":\#(rig.issued.timeIntervalSince1970),"needsReauthorization":true,"providerID":"gh","scopes":[],"tokenType":"Bearer"},"version":1}"#)
        let marked = try rig.fast(["token", "gh"])
        let markedFull = try await rig.full(["token", "gh"])
        #expect(marked.status == .success && marked.stdout == "at-marked\n")
        #expect(markedFull.status == marked.status && markedFull.stdout == marked.stdout && markedFull.stderr == marked.stderr)
        // A token that never expires is fresh.
        try rig.storeEntry(access: "at-forever", lifetime: nil)
        #expect(try rig.fast(["token", "gh"], at: 1e9).stdout == "at-forever\n")
    }

    @Test("freshness is the flow's rule: expiry minus 60 s, the margin capped at a third of the lifetime")
    func freshnessRule() async throws {
        let rig = try Rig()
        defer { rig.directory.remove() }
        try rig.storeEntry(lifetime: 3600)
        #expect(try rig.fast(["token", "gh"], at: 3600 - 61).status == .success)
        for offset: Double in [3540, 3570, 3600, 7200] {  // near expiry or expired: the full path decides
            let full = try await rig.expectFallsThrough(at: offset)
            #expect(full.status != .success && full.stdout.isEmpty, "at \(offset): \(full)")
        }
        try rig.storeEntry(lifetime: 90)  // margin 30 s
        #expect(try rig.fast(["token", "gh"], at: 59).status == .success)
        _ = try await rig.expectFallsThrough(at: 60)
    }

    @Test("no entry, an unknown provider, --json, debugging: the full path runs")
    func notAnswered() async throws {
        let rig = try Rig()
        defer { rig.directory.remove() }
        let missing = try await rig.expectFallsThrough()
        #expect(missing.status == .denied, "\(missing)")
        try rig.storeEntry()
        let unknown = try await rig.expectFallsThrough(["token", "nope"])
        #expect(unknown.status == .usage && unknown.stderr.contains("no provider 'nope'"))
        let json = try await rig.expectFallsThrough(["token", "gh", "--json"])
        #expect(json.status == .success && json.stdout.contains(#""access_token":"at-fast""#))
        let debug = try await rig.expectFallsThrough(environment: ["AUTHFLOW_DEBUG": "1"])
        #expect(debug.status == .success && debug.stdout == "at-fast\n")
        try rig.storeEntry(id: "dbg")
        let debugProvider = try await rig.expectFallsThrough(["token", "dbg"])
        #expect(debugProvider.status == .success && debugProvider.stdout == "at-fast\n")
        _ = try await rig.expectFallsThrough(environment: ["AUTHFLOW_CONFIG": rig.directory.url.appendingPathComponent("none.json").path])
        _ = try await rig.expectFallsThrough(environment: ["AUTHFLOW_STORE": "postgresql://127.0.0.1:9/none"])
    }

    @Test("a store key, an encrypted entry, --store-plaintext: the full path runs")
    func encryption() async throws {
        let rig = try Rig()
        defer { rig.directory.remove() }
        try rig.storeEntry()
        let keyFile = rig.directory.url.appendingPathComponent("store.key")
        try Data(String(repeating: "ab", count: 32).utf8).write(to: keyFile)
        chmod(keyFile.path, 0o600)
        _ = try await rig.expectFallsThrough(environment: ["AUTHFLOW_STORE_KEY_FILE": keyFile.path])
        _ = try await rig.expectFallsThrough(["--store-key-file", keyFile.path, "token", "gh"])
        _ = try await rig.expectFallsThrough(["--store-plaintext", "token", "gh"])
        // An entry sealed with a key, read without one: refused by the store, reported by the full path.
        let key = try StoreKey(contentsOf: keyFile)
        let sealed = try FileSecretStore(directory: rig.directory.store, encryption: EntryEncryption(key: key))
        try await sealed.save(try Data(contentsOf: URL(fileURLWithPath: rig.entryPath)), for: "gh")
        let refused = try await rig.expectFallsThrough()
        #expect(refused.status != .success && refused.stderr.contains("encrypted"), "\(refused)")
    }

    @Test("a corrupt, oversized-mode, FIFO or symlinked entry: nothing from the store, the full path reports it")
    func hostileEntries() async throws {
        let rig = try Rig()
        defer { rig.directory.remove() }
        try rig.writeEntry("{not json")
        let corrupt = try await rig.expectFallsThrough()
        #expect(corrupt.status != .success && corrupt.stdout.isEmpty)
        try rig.writeEntry(#"{"tokens":{"accessToken":"a\r\nb","grant":"client_credentials","issuedAt":1,"providerID":"gh","tokenType":"Bearer"},"version":1}"#)
        let crlf = try await rig.expectFallsThrough()
        #expect(crlf.status != .success && crlf.stdout.isEmpty)
        try rig.storeEntry(mode: 0o644)
        let wide = try await rig.expectFallsThrough()
        #expect(wide.status != .success && wide.stderr.contains("chmod 600"), "\(wide)")

        unlink(rig.entryPath)
        #expect(mkfifo(rig.entryPath, 0o600) == 0)
        let fifo = try await rig.expectFallsThrough()  // O_NONBLOCK: returns at once
        #expect(fifo.status != .success && fifo.stderr.contains("not a regular file"), "\(fifo)")

        unlink(rig.entryPath)
        let elsewhere = rig.directory.url.appendingPathComponent("elsewhere.json").path
        try rig.storeEntry(id: "gh")
        rename(rig.entryPath, elsewhere)
        #expect(symlink(elsewhere, rig.entryPath) == 0)
        let link = try await rig.expectFallsThrough()
        #expect(link.status != .success && link.stderr.contains("symbolic link"), "\(link)")
    }

    @Test("the store directory's checks hold: group-readable, or another provider's entry")
    func directoryAndOwnership() async throws {
        let rig = try Rig()
        defer { rig.directory.remove() }
        try rig.storeEntry()
        chmod(rig.directory.store.path, 0o750)
        let open = try await rig.expectFallsThrough()
        #expect(open.status != .success && open.stderr.contains("chmod 700"), "\(open)")
        chmod(rig.directory.store.path, 0o700)
        // gh.json holding dbg's entry is refused by the decoder (it names the provider it belongs to).
        let other = #"{"tokens":{"accessToken":"at-x","grant":"client_credentials","issuedAt":1,"providerID":"dbg","tokenType":"Bearer"},"version":1}"#
        try rig.writeEntry(other)
        let misplaced = try await rig.expectFallsThrough()
        #expect(misplaced.status != .success && misplaced.stdout.isEmpty)
    }

    @Test("the binary answers a fresh token from the store, and falls back for an expired one")
    func binary() async throws {
        let rig = try Rig()
        defer { rig.directory.remove() }
        // Issued now, so the wall clock the binary reads finds it fresh.
        let issued = Date().timeIntervalSince1970
        let fresh = #"{"tokens":{"accessToken":"at-binary","expiresAt":\#(issued + 3600),"grant":"urn:ietf:params:oauth:grant-type:device_code","issuedAt":\#(issued),"needsReauthorization":false,"providerID":"gh","scopes":[],"tokenType":"Bearer"},"version":1}"#
        try rig.writeEntry(fresh)
        let environment = cleanEnvironment(rig.directory, ["AUTHFLOW_CONFIG": rig.directory.config.path,
                                                           "AUTHFLOW_STORE": rig.directory.store.path])
        let answered = try await runBinary(["token", "gh"], environment: environment)
        #expect(answered.status == 0 && answered.stdout == "at-binary\n" && answered.stderr.isEmpty, "\(answered)")
        let expired = fresh.replacingOccurrences(of: "\(issued + 3600)", with: "\(issued - 10)")
            .replacingOccurrences(of: #""issuedAt":\#(issued)"#, with: #""issuedAt":\#(issued - 3600)"#)
        try rig.writeEntry(expired)
        let relogin = try await runBinary(["token", "gh"], environment: environment)
        #expect(relogin.status == 77 && relogin.stdout.isEmpty && relogin.stderr.contains("authflow login gh"), "\(relogin)")
    }
}

@Suite("authflow's environment reader")
struct ProcessEnvironmentTests {
    @Test("reads what ProcessInfo.processInfo.environment reads")
    func sameAsProcessInfo() {
        #expect(Authflow.processEnvironment() == ProcessInfo.processInfo.environment)
    }
}
