#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// When a token set is renewed: the one rule that the cache, the on-demand refresh, the
/// background timers (``AuthFlow/Options/proactiveRefresh``), ``TokenSource``,
/// ``RefreshScheduler`` and `authflow token`'s answer from the store all read.
///
/// The margin is ``AuthFlow/Options/refreshMargin`` capped at a third of the token's lifetime, so
/// a token is used for two thirds of its life at least and renewed with a third still left (Vault
/// Agent renews at about two thirds of a lease too): a one-hour token 60 s before expiry, a 30 s
/// token 10 s before, a 5 s token 1.7 s before. A fixed margin could not serve a token living
/// less than the margin: it would be stale the moment it arrived.
///
/// The background renewal comes a lead ahead of the on-demand time: one eighth of the margin plus
/// a random part (``AuthFlow/Options/jitter``) of another eighth, so it scales with the lifetime
/// as the margin does (7.5 to 15 s for a one-hour token, 1.25 to 2.5 s for a 30 s token, 0.2 to
/// 0.4 s for a 5 s token). The fixed part leaves the request time to finish while the token is
/// still fresh, so callers keep getting the cached token and never wait; the random part keeps
/// processes that share a store from renewing in the same instant.
enum RenewalTiming {
    /// The largest share of a token's lifetime the margin may take.
    static let lifetimeShare = 1.0 / 3

    /// How long before expiry `set` is renewed on demand: `refreshMargin`, capped at a third of
    /// the lifetime; 0 without an expiry.
    static func margin(of set: TokenSet, refreshMargin: TimeInterval) -> TimeInterval {
        guard let expiresAt = set.expiresAt else { return 0 }
        return min(refreshMargin, max(expiresAt.timeIntervalSince(set.issuedAt) * lifetimeShare, 0))
    }

    /// Seconds since 1970 from which `set` needs renewing (callers renew on demand from then):
    /// expiry minus ``margin(of:refreshMargin:)``; `.infinity` without an expiry.
    static func renewalTime(of set: TokenSet, refreshMargin: TimeInterval) -> Double {
        guard let expiresAt = set.expiresAt else { return .infinity }
        return expiresAt.timeIntervalSince1970 - margin(of: set, refreshMargin: refreshMargin)
    }

    /// Seconds since 1970 at which the background renewal of `set` is due: the on-demand time
    /// minus the lead (an eighth of the margin, plus a `jitter` draw — clamped to 0…1 — of another
    /// eighth). Nil without an expiry, or for a set born expired (a lifetime of 0 or less), which
    /// no renewal ahead can keep fresh; `jitter` is drawn only when a time is returned.
    static func backgroundRenewalTime(of set: TokenSet, refreshMargin: TimeInterval, jitter: () -> Double) -> Double? {
        guard let expiresAt = set.expiresAt, expiresAt > set.issuedAt else { return nil }
        let margin = margin(of: set, refreshMargin: refreshMargin)
        let drawn = jitter()
        let fraction = drawn.isFinite ? min(max(drawn, 0), 1) : 0
        return renewalTime(of: set, refreshMargin: refreshMargin) - margin * (1 + fraction) / 8
    }
}
