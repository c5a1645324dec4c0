public import Foundation
import Synchronization
public import OAuthFlow

/// A clock whose sleeps return at once and move virtual time forward, with a matching wall clock.
///
/// Pass the clock and its ``date`` into `AuthFlow.Options` (``options(refreshMargin:log:)`` does)
/// to run device polling and expiry instantly; read ``sleeps`` to assert the intervals waited
/// (RFC 8628 `interval`, `slow_down`).
public final class TestClock: Clock, Sendable {
    /// A point in virtual time.
    public struct Instant: InstantProtocol, Sendable {
        /// Time since the clock's start.
        public var offset: Duration
        /// Moves the instant.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The distance to another instant.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        /// Orders instants.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Inner {
        var offset: Duration = .zero
        var sleeps: [Duration] = []
    }
    private let inner = Mutex(Inner())
    /// The wall-clock date at virtual time zero.
    public let start: Date

    /// Creates a clock starting at `start`.
    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { self.start = start }

    /// The current virtual instant.
    public var now: Instant { Instant(offset: inner.withLock { $0.offset }) }
    /// Zero: virtual time has no resolution limit.
    public var minimumResolution: Duration { .zero }
    /// Every duration slept, in order.
    public var sleeps: [Duration] { inner.withLock { $0.sleeps } }
    /// The virtual wall-clock date (`start` + elapsed virtual time).
    public var date: Date {
        let offset = inner.withLock { $0.offset }
        let seconds = Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18
        return start.addingTimeInterval(seconds)
    }

    /// Moves virtual time forward without a sleep (to expire tokens, say).
    public func advance(by duration: Duration) { inner.withLock { $0.offset += duration } }

    /// Returns after moving virtual time to `deadline`; throws `CancellationError` when cancelled.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        inner.withLock { inner in
            let duration = deadline.offset - inner.offset
            inner.sleeps.append(duration)
            if duration > .zero { inner.offset = deadline.offset }
        }
        await Task.yield()
        try Task.checkCancellation()
    }

    /// Options for ``AuthFlow`` that run on this clock.
    public func options(refreshMargin: TimeInterval = 60, log: (@Sendable (LogRecord) -> Void)? = nil) -> AuthFlow.Options {
        AuthFlow.Options(clock: self, now: { [self] in self.date }, refreshMargin: refreshMargin, log: log)
    }
}
