/// The bookkeeping of the logout race (see ``AuthFlow/clear(provider:)``): per provider, the
/// generation of the last logout begun and of the last one finished, and the token sets a grant or
/// refresh received while a logout waited for the store's lock.
///
/// A value the actor owns (``AuthFlow/ledger``): no I/O, no publishing. ``begin(_:)`` makes every
/// call that began before stale; a call keeps the ``Ticket`` it took when it began and checks it
/// (``isCurrent(_:_:)``) before anything it received is stored or published.
struct LogoutLedger {
    /// What a call that stores tokens knew when it began; checked before its result is stored.
    struct Ticket: Sendable {
        /// The provider's logout generation then.
        var generation: UInt64
        /// True when the store held an entry for the provider then. If it is gone when the result
        /// arrives, another process logged out meanwhile (deletes take the lock; a login's commit
        /// too), and the login does not undo that logout. Renewals, which re-read under the lock
        /// from the start, do not need it.
        var storedAtStart: Bool
    }

    /// Bumped for a provider by ``AuthFlow/clear(provider:)``, ``AuthFlow/clear()`` and
    /// ``AuthFlow/revoke(provider:)`` before they wait for the store's lock. A grant, refresh or
    /// restore that began under an older generation is discarded instead of stored or published.
    private var generations: [String: UInt64] = [:]
    /// The generation of the provider's last logout that finished (deleted and forgot); behind
    /// ``generations`` while a logout waits for the lock or after one failed.
    private var settled: [String: UInt64] = [:]
    /// Token sets that a refresh or grant received while a logout was waiting for the lock, and
    /// discarded: ``AuthFlow/revoke(provider:)`` revokes them too, then they are dropped.
    private var superseded: [String: [TokenSet]] = [:]
    /// The most superseded sets kept per provider.
    static let maximumSuperseded = 4

    /// The provider's current logout generation.
    func generation(_ id: String) -> UInt64 { generations[id, default: 0] }

    /// The ticket of a call beginning now.
    func ticket(_ id: String, storedAtStart: Bool) -> Ticket { Ticket(generation: generation(id), storedAtStart: storedAtStart) }

    /// True when no logout of `id` began since `ticket` was taken.
    func isCurrent(_ ticket: Ticket, _ id: String) -> Bool { generation(id) == ticket.generation }

    /// True when a logout of `id` began since `ticket` was taken and has finished.
    func loggedOut(since ticket: Ticket, _ id: String) -> Bool {
        let current = generation(id)
        return current != ticket.generation && settled[id, default: 0] == current
    }

    /// Starts a logout of `id`: everything that began before is now stale. Returns its generation.
    mutating func begin(_ id: String) -> UInt64 {
        let generation = generation(id) &+ 1
        generations[id] = generation
        return generation
    }

    /// The logout of `generation` finished: the superseded sets are dropped.
    mutating func settle(_ id: String, generation: UInt64) {
        superseded[id] = nil
        settled[id] = max(settled[id, default: 0], generation)
    }

    /// Keeps a set a stale call received for a logout still waiting (a ``AuthFlow/revoke(provider:)``
    /// revokes it); nothing when no logout waits.
    mutating func supersede(_ set: TokenSet) {
        let id = set.providerID
        guard settled[id, default: 0] < generation(id) else { return }
        superseded[id, default: []].append(set)
        if superseded[id, default: []].count > Self.maximumSuperseded { superseded[id]?.removeFirst() }
    }

    /// The sets superseded for `id`, oldest first.
    func superseded(_ id: String) -> [TokenSet] { superseded[id] ?? [] }
}
