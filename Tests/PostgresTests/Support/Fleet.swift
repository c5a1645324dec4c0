import Foundation
import Glibc
@testable import OAuthFlow
@testable import OAuthFlowPostgres
import Synchronization
import TestSupport
import Testing

/// The `pg-fleet-member` executable, beside the test bundle (the test target depends on it).
enum FleetMember {
    static let url: URL? = {
        var directories: [URL] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        for directory in directories {
            let candidate = directory.appendingPathComponent("pg-fleet-member")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }()

    /// Runs one member to completion; `started` receives its pid.
    static func run(
        _ arguments: [String], timeout: Duration = .seconds(120), started: (@Sendable (Int32) -> Void)? = nil
    ) async throws -> PostgresCluster.Output {
        let url = try #require(url, "pg-fleet-member not built")
        return try await PostgresCluster.run([url.path] + arguments, environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp"],
                                             timeout: timeout, started: started)
    }

    /// Runs `count` members at once and returns each one's output.
    static func runMany(_ count: Int, _ arguments: [String]) async throws -> [PostgresCluster.Output] {
        try await withThrowingTaskGroup(of: PostgresCluster.Output.self) { group in
            for _ in 0..<count { group.addTask { try await run(arguments) } }
            var outputs: [PostgresCluster.Output] = []
            for try await output in group { outputs.append(output) }
            return outputs
        }
    }
}

/// A store key in a file of a private temporary directory (the `crypt` format: 64 hex digits); the
/// directory is removed with the last copy of the key.
struct TestKey: Sendable {
    let directory: TemporaryDirectory
    let file: URL
    let encryption: EntryEncryption

    init() throws {
        var bytes = [UInt8](repeating: 0, count: 32)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        directory = try TemporaryDirectory("pg-key")
        file = directory.url.appendingPathComponent("key")
        let hex = bytes.map { String(format: "%02x", $0) }.joined() + "\n"
        guard FileManager.default.createFile(atPath: file.path, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ClusterError("cannot write the key file \(file.path)")
        }
        encryption = EntryEncryption(key: try StoreKey(contentsOf: file))
    }
}

/// A fresh provider id per test, so tests share the table but never a row.
func uniqueID(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())" }

/// The stored form of a token set, exactly as AuthFlow writes it.
func storedEntry(_ id: String, access: String, refresh: String?, expired: Bool, grant: GrantType = .deviceCode) -> Data {
    let now = Date()
    let set = TokenSet(providerID: id, accessToken: Secret(access), refreshToken: refresh.map(Secret.init), scopes: ["read"],
                       issuedAt: now.addingTimeInterval(expired ? -7200 : 0), expiresAt: now.addingTimeInterval(expired ? -3600 : 3600),
                       grant: grant)
    return StoredEntry.encode(set)
}

func decodeEntry(_ data: Data, _ id: String) throws -> TokenSet { try StoredEntry.decode(data, key: id) }

extension Data {
    /// Bytes from psql's `encode(value, 'hex')`.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < digits.count {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
            index += 2
        }
        self.init(bytes)
    }

    func contains(_ text: String) -> Bool { range(of: Data(text.utf8)) != nil }
}

/// Waits (bounded) until `condition` holds; false when it never did.
func eventually(_ limit: Duration = .seconds(30), _ condition: @Sendable () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return await condition()
}

/// A clock whose sleeps end only when the test says so (``fireAll()``) or when cancelled, so a
/// proactive-refresh timer fires exactly when a test wants it to.
final class ManualClock: Clock, Sendable {
    typealias Instant = ContinuousClock.Instant
    typealias Duration = Swift.Duration

    private let sleepers = Mutex<(next: UInt64, waiting: [UInt64: CheckedContinuation<Void, any Error>])>((0, [:]))

    var now: Instant { .now }
    var minimumResolution: Duration { .zero }

    /// Sleeps waiting now.
    var pending: Int { sleepers.withLock { $0.waiting.count } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = sleepers.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = sleepers.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.waiting[id] = continuation
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = sleepers.withLock { $0.waiting.removeValue(forKey: id) }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Ends every sleep waiting now.
    func fireAll() {
        let all = sleepers.withLock { state -> [CheckedContinuation<Void, any Error>] in
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for continuation in all { continuation.resume() }
    }
}

/// A provider for the flows of these tests: device-code (refreshable) unless `service`.
func fleetProvider(_ id: String, tokenURL: String, service: Bool = false) -> Provider {
    let url = URL(string: tokenURL)!
    return service
        ? Provider(id: id, tokenURL: url, clientID: "fleet", clientSecret: Secret("fleet-secret"), scopes: ["read"])
        : Provider(id: id, tokenURL: url, deviceAuthorizationURL: url.deletingLastPathComponent().appendingPathComponent("device"),
                   clientID: "fleet", scopes: ["read"])
}

/// Leaves `count` idle connections in `store`'s pool: that many lock scopes held at once, then released.
func openIdleConnections(_ store: PostgresSecretStore, _ count: Int) async throws {
    let entered = Shared(0)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<count {
            group.addTask {
                try await store.withExclusiveAccess(to: uniqueID("idle")) { () async throws(OAuthError) in
                    entered.update { $0 += 1 }
                    let deadline = ContinuousClock.now + .seconds(30)
                    while entered.value < count, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
                }
            }
        }
        try await group.waitForAll()
    }
}

/// Runs `body` and returns the error it threw, nil when it returned.
func outcome(_ body: () async throws(OAuthError) -> Void) async -> OAuthError? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}

/// A value shared between tasks.
final class Shared<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    var value: Value { storage.withLock { $0 } }
    func update(_ change: (inout Value) -> Void) { storage.withLock { change(&$0) } }
}
