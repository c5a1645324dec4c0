import Foundation
@testable import OAuthFlow
import Synchronization
import Testing

/// The cache behind discovery and JWKS: single flight, max-age, forced refetches at most once a minute.
@Suite("DocumentCache: single flight, expiry, rate-limited refetch", .timeLimit(.minutes(1)))
struct DocumentCacheTests {
    final class Source: Sendable {
        let fetches = Mutex(0)
        let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var count: Int { fetches.withLock { $0 } }
        var clock: @Sendable () -> Date { { [self] in now.withLock { $0 } } }
        func advance(_ seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }

        /// A fetch that yields a few times (so concurrent callers overlap) and returns the fetch number.
        var fetch: @Sendable () async throws(OAuthError) -> (Int, TimeInterval) {
            { [self] () async throws(OAuthError) -> (Int, TimeInterval) in
                let number = fetches.withLock { $0 += 1; return $0 }
                for _ in 0..<20 { await Task.yield() }
                return (number, 300)
            }
        }
    }

    @Test("concurrent first callers share one fetch")
    func concurrentFirst() async throws {
        let cache = DocumentCache<Int>()
        let source = Source()
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<32 { group.addTask { try await cache.document("k", now: source.clock, fetch: source.fetch).0 } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: 1, count: 32))
        #expect(source.count == 1)
    }

    @Test("concurrent refetches for an unknown kid share one fetch (50 rounds of 32 callers)")
    func concurrentRefetch() async throws {
        // A caller that came between counting the forced fetch and starting it was once refused
        // (nil) on a loaded machine; the rounds give the scheduler many chances to interleave.
        for _ in 0..<50 {
            let cache = DocumentCache<Int>()
            let source = Source()
            let (_, generation) = try await cache.document("k", now: source.clock, fetch: source.fetch)
            let results = try await withThrowingTaskGroup(of: Int?.self) { group in
                for _ in 0..<32 {
                    group.addTask { try await cache.refetch("k", after: generation, interval: 60, now: source.clock, fetch: source.fetch)?.0 }
                }
                return try await group.reduce(into: [Int?]()) { $0.append($1) }
            }
            #expect(results == Array(repeating: 2, count: 32), "every caller sees the refetched document")
            #expect(source.count == 2)
        }
    }

    @Test("forced refetches: at most one a minute; the first fetch and expiry refetches do not count")
    func rateLimit() async throws {
        let cache = DocumentCache<Int>()
        let source = Source()
        var generation = try await cache.document("k", now: source.clock, fetch: source.fetch).1
        source.advance(1)
        // A forced refetch one second after the first fetch is allowed.
        generation = try #require(try await cache.refetch("k", after: generation, interval: 60, now: source.clock, fetch: source.fetch)).1
        #expect(source.count == 2)
        source.advance(59.5)
        #expect(try await cache.refetch("k", after: generation, interval: 60, now: source.clock, fetch: source.fetch) == nil)
        #expect(source.count == 2)
        source.advance(1)
        generation = try #require(try await cache.refetch("k", after: generation, interval: 60, now: source.clock, fetch: source.fetch)).1
        #expect(source.count == 3)
        // Expiry (max-age 300) refetches regardless of the forced limit.
        source.advance(301)
        #expect(try await cache.document("k", now: source.clock, fetch: source.fetch).0 == 4)
        #expect(try await cache.document("k", now: source.clock, fetch: source.fetch).0 == 4)
        #expect(source.count == 4)
    }

    @Test("a failure is not kept: the next call fetches again")
    func failureNotKept() async throws {
        let cache = DocumentCache<Int>()
        let attempts = Mutex(0)
        let fetch: @Sendable () async throws(OAuthError) -> (Int, TimeInterval) = { () async throws(OAuthError) in
            let attempt = attempts.withLock { $0 += 1; return $0 }
            if attempt == 1 { throw OAuthError(.transport, message: "down") }
            return (attempt, 300)
        }
        let now: @Sendable () -> Date = { Date(timeIntervalSince1970: 1_800_000_000) }
        await #expect(throws: OAuthError.self) { try await cache.document("k", now: now, fetch: fetch) }
        #expect(try await cache.document("k", now: now, fetch: fetch).0 == 2)
        #expect(attempts.withLock { $0 } == 2)
    }
}
