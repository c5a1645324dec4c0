#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Fetched documents by key (an issuer, a JWKS URL), each with its expiry; at most one fetch per
/// key runs at a time and everyone asking meanwhile shares its result. A failure is not kept.
///
/// Looking up a running fetch and registering a new one happen under one lock, so two callers can
/// never both start one, from the actor or from any task.
final class DocumentCache<Document: Sendable>: Sendable {
    typealias Fetch = Task<Result<(Document, TimeInterval), OAuthError>, Never>

    private struct Entry {
        var document: Document?
        var expiresAt: Date = .distantPast
        /// Bumped by every successful fetch, so a caller can tell whether the keys it used are still the newest.
        var generation = 0
        var running: Fetch?
        /// When a refetch outside the expiry (an unknown JWKS `kid`) last started.
        var lastForcedFetch: Date?
    }

    private let entries = Mutex<[String: Entry]>([:])

    private enum Decision { case newer(Document, Int), limited, await(Fetch) }

    /// The cached document of `key` while fresh at `now`, with its generation.
    func fresh(_ key: String, now: Date) -> (Document, Int)? {
        entries.withLock { entries in
            guard let entry = entries[key], let document = entry.document, now < entry.expiresAt else { return nil }
            return (document, entry.generation)
        }
    }

    /// The document of `key`: the cached one while fresh; else the running fetch's; else a new fetch by `fetch`.
    func document(
        _ key: String, now: @Sendable () -> Date, fetch: @escaping @Sendable () async throws(OAuthError) -> (Document, TimeInterval)
    ) async throws(OAuthError) -> (Document, Int) {
        if let cached = fresh(key, now: now()) { return cached }
        return try await join(key, now: now, fetch: fetch)
    }

    /// Fetches `key` again because `generation` lacked something (an unknown `kid`), unless a newer
    /// generation exists already (then that), a fetch is running (then its result), or a forced
    /// fetch started less than `interval` ago (then nil: the caller keeps its failure).
    /// Only forced fetches count against `interval`: the first fetch and expiry refetches do not.
    func refetch(
        _ key: String, after generation: Int, interval: TimeInterval, now: @Sendable () -> Date,
        fetch: @escaping @Sendable () async throws(OAuthError) -> (Document, TimeInterval)
    ) async throws(OAuthError) -> (Document, Int)? {
        let time = now()
        // Deciding and starting the fetch under one lock: a caller that comes between them would
        // otherwise find the forced fetch counted but not yet running, and be refused (`.limited`).
        let decision: Decision = entries.withLock { entries in
            let entry = entries[key] ?? Entry()
            if let document = entry.document, entry.generation > generation { return .newer(document, entry.generation) }
            if let running = entry.running { return .await(running) }
            if let last = entry.lastForcedFetch, time.timeIntervalSince(last) < interval, time >= last { return .limited }
            entries[key, default: Entry()].lastForcedFetch = time
            return .await(Self.start(key, in: &entries, fetch: fetch))
        }
        switch decision {
        case .newer(let document, let generation): return (document, generation)
        case .limited: return nil
        case .await(let task): return try await finish(key, task, now: now)
        }
    }

    /// Awaits the running fetch of `key`, or starts one.
    private func join(
        _ key: String, now: @Sendable () -> Date, fetch: @escaping @Sendable () async throws(OAuthError) -> (Document, TimeInterval)
    ) async throws(OAuthError) -> (Document, Int) {
        let task: Fetch = entries.withLock { entries in
            entries[key]?.running ?? Self.start(key, in: &entries, fetch: fetch)
        }
        return try await finish(key, task, now: now)
    }

    /// Starts a fetch of `key` and registers it as running; under the lock.
    private static func start(
        _ key: String, in entries: inout [String: Entry], fetch: @escaping @Sendable () async throws(OAuthError) -> (Document, TimeInterval)
    ) -> Fetch {
        let task = Fetch { () async -> Result<(Document, TimeInterval), OAuthError> in
            do throws(OAuthError) { return .success(try await fetch()) } catch { return .failure(error) }
        }
        entries[key, default: Entry()].running = task
        return task
    }

    /// Awaits `task`, a fetch of `key`, and records its result (once, by the first waiter to resume).
    private func finish(_ key: String, _ task: Fetch, now: @Sendable () -> Date) async throws(OAuthError) -> (Document, Int) {
        let result = await task.value
        return try entries.withLock { entries throws(OAuthError) -> (Document, Int) in
            var entry = entries[key] ?? Entry()
            // The first waiter to resume records the result; the others find it recorded.
            if let running = entry.running, running == task {
                entry.running = nil
                if case .success(let (document, lifetime)) = result {
                    entry.document = document
                    entry.expiresAt = now().addingTimeInterval(lifetime)
                    entry.generation += 1
                }
                entries[key] = entry
            }
            switch result {
            case .success(let (document, _)): return (document, entry.generation)
            case .failure(let error): throw error
            }
        }
    }

    /// Forgets everything (tests, or a caller that knows the documents changed).
    func removeAll() { entries.withLock { $0.removeAll() } }
}
