import Foundation
@testable import OAuthFlow
import Testing

/// The in-process lock of the stores (Storage/SecretStore.swift, `KeyedAsyncLock`).
@Suite("Secret store: the in-process lock", .timeLimit(.minutes(1)))
struct SecretStoreTests {
    @Test("the in-process store lock: free, it is taken at once; held, callers wait and run one at a time")
    func storeLock() async throws {
        actor Occupancy {
            var now = 0, most = 0, done = 0
            func enter() {
                now += 1
                most = max(most, now)
            }
            func leave() {
                now -= 1
                done += 1
            }
        }
        let lock = KeyedAsyncLock()
        let occupancy = Occupancy()
        #expect(try await lock.withLock("k") { () async throws(OAuthError) in 1 } == 1)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    _ = try? await lock.withLock("k") { () async throws(OAuthError) in
                        await occupancy.enter()
                        for _ in 0..<3 { await Task.yield() }
                        await occupancy.leave()
                    }
                }
            }
        }
        let (now, most, done) = await (occupancy.now, occupancy.most, occupancy.done)
        #expect(now == 0 && most == 1 && done == 20)
        // Another key is independent, and the first is free again.
        #expect(try await lock.withLock("other") { () async throws(OAuthError) in try await lock.withLock("k") { () async throws(OAuthError) in 2 } } == 2)
        let thrown = await #expect(throws: OAuthError.self) {
            try await lock.withLock("k") { () async throws(OAuthError) -> Int in throw OAuthError(.storage, message: "x") }
        }
        #expect(thrown?.code == .storage)
        #expect(try await lock.withLock("k") { () async throws(OAuthError) in 3 } == 3, "a throwing body releases the lock")
    }
}
