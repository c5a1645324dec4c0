#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The cached token set without waiting: for synchronous callers such as `authflow agent`'s socket
// loop, which answers a cached token on its own thread and goes to tokenSet(for:) only on nil.
extension AuthFlow {
    /// The fresh token set this flow holds in memory for `provider`, or nil: never renews, never
    /// waits, never hops onto the actor.
    ///
    /// For synchronous code that must not wait (a server's event loop): on nil, call
    /// ``tokenSet(for:)``, which renews. "Fresh" is what ``tokenSet(for:)`` answers from memory:
    /// a set not yet due for renewal (expiry minus ``Options/refreshMargin``), so both give the
    /// same set at the same instant. Put the token in an `Authorization` header (RFC 6750 §2.1).
    /// Throws nothing; a provider that is not configured gives nil.
    public nonisolated func cachedTokenSet(for provider: String) -> TokenSet? {
        tokens.slot(provider)?.freshSet(at: freshnessTime())
    }

    /// ``cachedTokenSet(for:)`` with a stamp that says, without a lock, whether the flow still
    /// holds that set and it is still fresh: for a caller that keeps what it made of the set (the
    /// agent's socket loops keep the answer line).
    package nonisolated func stampedTokenSet(for provider: String) -> (set: TokenSet, stamp: TokenStamp)? {
        guard let slot = tokens.slot(provider), let held = slot.stampedFreshSet(at: freshnessTime()) else { return nil }
        return (held.set, TokenStamp(slot: slot, version: held.version, renewAt: held.renewAt,
                                     readsSystemClock: options.readsSystemClock, now: options.now))
    }
}

/// Which cached token set something was made from, and until when that set is fresh.
///
/// ``isCurrent`` is true while the flow's slot for the provider has not been given another set
/// (a renewal, a logout, a set another process stored) and the renewal time has not come: exactly
/// while ``AuthFlow/cachedTokenSet(for:)`` would still answer the same set.
package struct TokenStamp: Sendable {
    let slot: TokenCache.Slot
    let version: UInt64
    let renewAt: Double
    let readsSystemClock: Bool
    let now: @Sendable () -> Date

    /// True while the set stamped is still the flow's fresh set: one atomic load and one clock read.
    package var isCurrent: Bool {
        guard slot.currentVersion == version else { return false }
        return SystemClock.freshnessSeconds(readsSystemClock: readsSystemClock, now: now) < renewAt
    }
}
