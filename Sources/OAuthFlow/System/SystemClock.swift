#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Glibc

/// The system's wall clock, read the cheap way for freshness checks.
@usableFromInline
enum SystemClock {
    /// `CLOCK_REALTIME_COARSE` in seconds since 1970: the time of the last scheduler tick (1–4 ms
    /// behind `CLOCK_REALTIME`), read from the vDSO without touching the TSC.
    @usableFromInline
    static func coarseSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Now, in seconds since 1970, for a freshness check: ``coarseSeconds()`` when
    /// `readsSystemClock` (``AuthFlow/Options/now`` is the system clock, see
    /// ``AuthFlow/Options/readsSystemClock``), else `now()`.
    @inlinable
    static func freshnessSeconds(readsSystemClock: Bool, now: () -> Date) -> Double {
        readsSystemClock ? coarseSeconds() : now().timeIntervalSince1970
    }
}
