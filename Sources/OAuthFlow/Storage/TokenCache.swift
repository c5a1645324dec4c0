#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The flow's token sets, one slot per configured provider, so that a cached token is answered
/// without an actor hop and without any lock a refresh holds.
///
/// The providers are fixed when the flow is made, so the slot table never changes and is read
/// without a lock; each slot has its own `Mutex`, held only to copy a value in or out (nothing
/// else, never a clock read or a callback). A refresh runs on the actor and under the store's lock
/// and takes a slot's lock only to put the new set in.
@usableFromInline
final class TokenCache: Sendable {
    /// What the hot path needs, worked out once when a set is cached.
    struct Entry: Sendable {
        var set: TokenSet
        /// `set.accessToken`, kept apart so the hot path copies only it.
        var token: Secret
        /// Seconds since 1970 from which the set needs renewing (``RenewalTiming``);
        /// `.infinity` when it never expires.
        var renewAt: Double
    }

    /// One provider's cached set. A ``TokenSource`` keeps its slot, so its lookups skip the table.
    @usableFromInline
    final class Slot: Sendable {
        private let entry = Mutex<Entry?>(nil)
        /// How many times ``store(_:)`` has replaced the entry: raised under the entry's lock, so
        /// a version read with an entry belongs to it, and read without the lock by
        /// ``AuthFlow/TokenStamp/isCurrent``.
        private let version = Atomic<UInt64>(0)

        /// The access token while `now` (seconds since 1970) is before the renewal time.
        @usableFromInline
        func freshToken(at now: Double) -> Secret? {
            entry.withLock { entry in
                guard let entry, now < entry.renewAt else { return nil }
                return entry.token
            }
        }

        /// The whole set while `now` is before the renewal time.
        func freshSet(at now: Double) -> TokenSet? {
            entry.withLock { entry in
                guard let entry, now < entry.renewAt else { return nil }
                return entry.set
            }
        }

        /// The whole set while `now` is before the renewal time, with the version it belongs to
        /// and that renewal time.
        func stampedFreshSet(at now: Double) -> (set: TokenSet, version: UInt64, renewAt: Double)? {
            entry.withLock { entry in
                guard let entry, now < entry.renewAt else { return nil }
                return (entry.set, version.load(ordering: .relaxed), entry.renewAt)
            }
        }

        /// The version of the entry held now (see ``stampedFreshSet(at:)``).
        var currentVersion: UInt64 { version.load(ordering: .acquiring) }

        var set: TokenSet? { entry.withLock { $0?.set } }

        func store(_ new: Entry?) {
            entry.withLock {
                $0 = new
                version.wrappingAdd(1, ordering: .releasing)
            }
        }
    }

    private let slots: [String: Slot]
    /// The same slots in a list, searched instead of the table for a few providers: comparing a
    /// short id is cheaper than hashing it.
    private let list: [(id: String, slot: Slot)]
    /// Up to this many providers, ``slot(_:)`` scans ``list``.
    private static let scanLimit = 8
    /// ``AuthFlow/Options/refreshMargin``.
    let refreshMargin: TimeInterval

    init(providers: some Sequence<String>, refreshMargin: TimeInterval) {
        var slots: [String: Slot] = [:]
        for id in providers where slots[id] == nil { slots[id] = Slot() }
        self.slots = slots
        self.list = slots.map { (id: $0.key, slot: $0.value) }
        self.refreshMargin = refreshMargin
    }

    /// The slot of a configured provider.
    @inline(__always)
    func slot(_ provider: String) -> Slot? {
        if list.count <= Self.scanLimit {
            for entry in list where entry.id == provider { return entry.slot }
            return nil
        }
        return slots[provider]
    }

    /// The set held for `provider` (fresh or not). Setting a set for a provider that is not
    /// configured does nothing.
    subscript(provider: String) -> TokenSet? {
        get { slot(provider)?.set }
        set { slot(provider)?.store(newValue.map(entry)) }
    }

    var all: [String: TokenSet] { slots.compactMapValues(\.set) }

    func removeAll() { for slot in slots.values { slot.store(nil) } }

    func entry(_ set: TokenSet) -> Entry {
        Entry(set: set, token: set.accessToken, renewAt: RenewalTiming.renewalTime(of: set, refreshMargin: refreshMargin))
    }
}
