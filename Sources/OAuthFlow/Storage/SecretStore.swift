#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// Where ``AuthFlow`` keeps token sets, one entry per provider id.
///
/// Use ``FileSecretStore`` for services and the CLI, ``MemorySecretStore`` for tests and
/// short-lived processes. Implement it to keep tokens in a vault or a database:
///
/// ```swift
/// struct VaultStore: SecretStore {
///     func load(_ key: String) async throws(OAuthError) -> Data? { … }
///     func save(_ data: Data, for key: String) async throws(OAuthError) { … }
///     func delete(_ key: String) async throws(OAuthError) { … }
///     func keys() async throws(OAuthError) -> [String] { … }
///     func withExclusiveAccess<T: Sendable>(to key: String,
///         _ body: @Sendable () async throws(OAuthError) -> T) async throws(OAuthError) -> T { … }
/// }
/// ```
///
/// The values are JSON that holds secrets: keep them out of logs, backups others can read, and
/// world-readable places.
public protocol SecretStore: Sendable {
    /// The data stored under `key`, or nil when there is none.
    /// - Throws: ``OAuthError`` `.storage` when the entry exists but cannot be read safely.
    func load(_ key: String) async throws(OAuthError) -> Data?
    /// Replaces the entry under `key` atomically.
    /// - Throws: ``OAuthError`` `.storage`.
    func save(_ data: Data, for key: String) async throws(OAuthError)
    /// Removes the entry; removing a missing entry is not an error.
    /// - Throws: ``OAuthError`` `.storage`.
    func delete(_ key: String) async throws(OAuthError)
    /// Every key that has an entry, sorted.
    /// - Throws: ``OAuthError`` `.storage`.
    func keys() async throws(OAuthError) -> [String]
    /// Runs `body` while holding an exclusive lock on `key`, across tasks and (for files) processes.
    ///
    /// ``AuthFlow`` re-reads, refreshes and saves inside it, so two processes never lose each
    /// other's rotated refresh token.
    /// - Throws: ``OAuthError`` `.timedOut` when the lock cannot be had in time, or what `body` throws.
    func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T
    /// What other processes change in a shared store, as it happens: keys they deleted (a
    /// logout), and ``StoreInvalidation/resync`` when changes may have been missed; nil when the
    /// store cannot tell. ``AuthFlow`` subscribes, drops its in-memory copy (and the background
    /// renewal) of each deleted key, and re-reads every cached key on `.resync`. A store that
    /// reports deletions must also refuse the write-back of a refresh that was in flight when the
    /// entry was deleted (inside ``withExclusiveAccess(to:_:)``), so a logout stays final.
    func invalidations() -> AsyncStream<StoreInvalidation>?
}

extension SecretStore {
    /// No invalidations: the default for stores that are not shared between processes, or cannot notify.
    public func invalidations() -> AsyncStream<StoreInvalidation>? { nil }
}

/// A change another process made to a shared ``SecretStore``, from ``SecretStore/invalidations()``.
public enum StoreInvalidation: Sendable, Hashable {
    /// The entry under this key was deleted (a logout): drop the in-memory copy.
    case deleted(String)
    /// Deletions may have been missed (the store's notifications were interrupted, or just
    /// started): check every in-memory copy against the store.
    case resync
}

/// A ``SecretStore`` in memory: nothing survives the process.
///
/// Good for tests and for processes that authorize on every start.
public final class MemorySecretStore: SecretStore {
    private let entries: Mutex<[String: Data]>
    private let locks = KeyedAsyncLock()

    /// Creates a store, optionally with entries.
    public init(_ entries: [String: Data] = [:]) { self.entries = Mutex(entries) }

    /// Returns the entry for `key`.
    public func load(_ key: String) async throws(OAuthError) -> Data? { entries.withLock { $0[key] } }
    /// Stores `data` under `key`.
    public func save(_ data: Data, for key: String) async throws(OAuthError) { entries.withLock { $0[key] = data } }
    /// Removes `key`.
    public func delete(_ key: String) async throws(OAuthError) { _ = entries.withLock { $0.removeValue(forKey: key) } }
    /// The sorted keys.
    public func keys() async throws(OAuthError) -> [String] { entries.withLock { $0.keys.sorted() } }
    /// Runs `body` holding the in-process lock for `key`.
    public func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        try await locks.withLock(key, body)
    }
}

/// A FIFO async lock per key, for tasks in one process (no thread is ever blocked).
final class KeyedAsyncLock: Sendable {
    private struct Entry {
        var held = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let table = Mutex<[String: Entry]>([:])

    func withLock<T: Sendable>(_ key: String, _ body: @Sendable () async throws(OAuthError) -> T) async throws(OAuthError) -> T {
        if !tryAcquire(key) { await acquire(key) }
        defer { release(key) }
        return try await body()
    }

    /// Takes the lock when nobody holds it, without suspending; false when it is held.
    ///
    /// An entry is in the table exactly while its lock is held, so one lookup decides.
    private func tryAcquire(_ key: String) -> Bool {
        table.withLock { table in
            var acquired = false
            Self.take(&table[key, default: Entry()], acquired: &acquired)
            return acquired
        }
    }

    private static func take(_ entry: inout Entry, acquired: inout Bool) {
        guard !entry.held else { return }
        entry.held = true
        acquired = true
    }

    private func acquire(_ key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = table.withLock { table -> Bool in
                var entry = table[key] ?? Entry()
                defer { table[key] = entry }
                if entry.held {
                    entry.waiters.append(continuation)
                    return false
                }
                entry.held = true
                return true
            }
            if acquired { continuation.resume() }
        }
    }

    private func release(_ key: String) {
        let next = table.withLock { table -> CheckedContinuation<Void, Never>? in
            guard var entry = table.removeValue(forKey: key), !entry.waiters.isEmpty else { return nil }
            // The lock passes to the first waiter, still held.
            let next = entry.waiters.removeFirst()
            table[key] = entry
            return next
        }
        next?.resume()
    }
}
