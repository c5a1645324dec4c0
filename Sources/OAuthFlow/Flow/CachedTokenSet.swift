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

    /// ``cachedTokenSet(for:)`` with a stamp that says later, without a lock or an actor hop,
    /// whether the flow still holds that set and it is still fresh.
    ///
    /// For a server that keeps something it made from the set (an encoded answer, an
    /// `Authorization` header line) and wants to give it again without asking the flow: keep the
    /// stamp beside it, and give it again only while ``TokenStamp/isCurrent`` is true; once it is
    /// false, call this again (or ``tokenSet(for:)``, which renews, when it gives nil). A stamp
    /// costs one atomic load and one clock read to check. Put the token in an `Authorization`
    /// header ([RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750#section-2.1)).
    ///
    /// Throws nothing: nil when the flow holds no fresh set for `provider` (none yet, due for
    /// renewal, logged out, or a provider that is not configured).
    public nonisolated func stampedTokenSet(for provider: String) -> (set: TokenSet, stamp: TokenStamp)? {
        guard let slot = tokens.slot(provider), let held = slot.stampedFreshSet(at: freshnessTime()) else { return nil }
        return (held.set, TokenStamp(slot: slot, version: held.version, renewAt: held.renewAt,
                                     readsSystemClock: options.readsSystemClock, now: options.now))
    }

    /// Which cached token set something was made from, and until when that set is fresh
    /// (from ``AuthFlow/stampedTokenSet(for:)``).
    ///
    /// ``isCurrent`` is true while the flow's slot for the provider has not been given another set
    /// (a renewal, a logout, a set another process stored, even one with the same token) and the
    /// set's renewal time has not come: exactly while ``AuthFlow/cachedTokenSet(for:)`` would still
    /// answer the same set. Check it before each reuse; it never turns true again.
    public struct TokenStamp: Sendable {
        let slot: TokenCache.Slot
        let version: UInt64
        let renewAt: Double
        let readsSystemClock: Bool
        let now: @Sendable () -> Date

        /// True while the set stamped is still the flow's fresh set: one atomic load and one clock read.
        public var isCurrent: Bool {
            guard slot.currentVersion == version else { return false }
            return SystemClock.freshnessSeconds(readsSystemClock: readsSystemClock, now: now) < renewAt
        }
    }
}
