#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The background renewal timers of ``AuthFlow/Options/proactiveRefresh``, one per provider.
///
/// Owned by the flow; cancelling a timer ends its sleep. When the flow goes away this goes too and
/// cancels every timer (the timers hold the flow only weakly).
final class ProactiveTimers: Sendable {
    private let tasks = Mutex<[String: Task<Void, Never>]>([:])

    /// Replaces `provider`'s timer (cancelling the old one).
    func replace(_ provider: String, with task: Task<Void, Never>?) {
        let old = tasks.withLock { tasks in
            defer { tasks[provider] = task }
            return tasks[provider]
        }
        old?.cancel()
    }

    func cancel(_ provider: String) { replace(provider, with: nil) }

    func cancelAll() {
        let all = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return Array(tasks.values)
        }
        for task in all { task.cancel() }
    }

    deinit { cancelAll() }
}

extension AuthFlow {
    /// Puts `set` in the cache and, with ``Options/proactiveRefresh``, schedules its renewal.
    func cache(_ set: TokenSet) {
        tokens[set.providerID] = set
        scheduleProactiveRefresh(for: set)
    }

    /// When the background renewal of `set` is due, as seconds from now (``RenewalTiming``: a
    /// lead ahead of the time a caller would renew it on demand, whatever the token's lifetime).
    /// Nil when `set` cannot or need not be renewed in the background: no expiry, born expired, no
    /// refresh token (unless it came from a grant the provider runs again with no person: client
    /// credentials, JWT-bearer, a token exchange of its subject token file), or marked for
    /// reauthorization.
    nonisolated func proactiveDelay(for set: TokenSet, now: Date) -> TimeInterval? {
        guard !set.needsReauthorization,
              set.refreshToken != nil || set.grant == .clientCredentials || !set.grant.needsPerson && providers[set.providerID]?.serviceGrant == set.grant,
              let due = RenewalTiming.backgroundRenewalTime(of: set, refreshMargin: options.refreshMargin, jitter: options.jitter)
        else { return nil }
        return max(due - now.timeIntervalSince1970, 0)
    }

    private func scheduleProactiveRefresh(for set: TokenSet) {
        guard options.proactiveRefresh else { return }
        let id = set.providerID
        guard let delay = proactiveDelay(for: set, now: options.now()) else {
            proactiveTimers.cancel(id)
            return
        }
        let clock = options.clock
        let expected = set.accessToken
        if let provider = providers[id] { logger.debug(provider, "background renewal in \(Int(delay.rounded())) s") }
        let timer = Task { [weak self] in
            do { try await clock.sleep(for: .seconds(delay)) } catch { return }  // cancelled: clear, logout or the flow ended
            await self?.renewProactively(id, expected: expected)
        }
        proactiveTimers.replace(id, with: timer)
    }

    /// Renews `id` in the background unless its token changed since the timer was set (a caller,
    /// another process, or a clear got there first). Shares the single-flight refresh; a failure
    /// is published as `.error` by the refresh, and callers then refresh on demand.
    private func renewProactively(_ id: String, expected: Secret) async {
        guard !Task.isCancelled, let current = tokens[id], current.accessToken.constantTimeEquals(expected) else { return }
        logger.info(id, "renewing in the background before expiry")
        do {
            _ = try await renewShared(id, force: true)
        } catch {
            // Already published as .error (and logged) by the refresh.
            if let provider = providers[id] { logger.debug(provider, "background renewal failed (\(error.code)); callers will refresh on demand") }
        }
    }
}
