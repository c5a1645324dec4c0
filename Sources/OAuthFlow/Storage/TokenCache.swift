import Synchronization

/// The flow's token sets by provider, behind a lock so reads need no actor hop.
final class TokenCache: Sendable {
    private let entries = Mutex<[String: TokenSet]>([:])

    subscript(provider: String) -> TokenSet? {
        get { entries.withLock { $0[provider] } }
        set { entries.withLock { $0[provider] = newValue } }
    }

    var all: [String: TokenSet] { entries.withLock { $0 } }

    /// The access token of `provider` when its set passes `isFresh`, read under the lock.
    func freshAccessToken(_ provider: String, isFresh: (TokenSet) -> Bool) -> Secret? {
        entries.withLock { entries in
            guard let set = entries[provider], isFresh(set) else { return nil }
            return set.accessToken
        }
    }

    func removeAll() { entries.withLock { $0.removeAll() } }
}
