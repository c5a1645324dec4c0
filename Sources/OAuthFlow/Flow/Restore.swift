#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// What the store holds: restoring it, reading and decoding entries, saving one.
extension AuthFlow {
    /// Reads every stored authorization again and publishes `.authorized` for each provider.
    ///
    /// The initializer calls it unless ``Options/restoresAtStart`` is false; turn that off and call
    /// this after subscribing to ``states`` to see one `.authorized` per restored provider. An entry
    /// that cannot be read is published as `.error` for its provider (and left on disk untouched)
    /// while the others still load. Entries of providers that are not configured are ignored.
    /// - Returns: what was restored, by provider id.
    /// - Throws: ``OAuthError`` `.storage` when the store cannot even list its entries (published as
    ///   `.error` with provider nil: the failure is the store's, not one provider's).
    @discardableResult
    public func restore() async throws(OAuthError) -> [String: Authorization] {
        let keys: [String]
        do { keys = try await store.keys() } catch { throw fail(nil, error) }
        var restored: [String: Authorization] = [:]
        for id in providers.keys.sorted() where !keys.contains(id) { tokens[id] = nil }
        for key in keys where providers[key] != nil {
            let generation = ledger.generation(key)
            do {
                guard let set = try await loadStored(key) else { continue }
                // A logout that began while the entry was read wins: nothing is cached or published.
                guard ledger.generation(key) == generation else { continue }
                cache(set)
                restored[key] = set.authorization
                publish(.authorized(provider: key, set.authorization))
            } catch {
                tokens[key] = nil
                publish(.error(provider: key, error))
            }
        }
        return restored
    }

    func loadStored(_ key: String) async throws(OAuthError) -> TokenSet? {
        guard let data = try await store.load(key) else { return nil }
        return try Self.decodeStored(data, key: key)
    }

    /// A stored entry as ``restore()`` caches it.
    static func decodeStored(_ data: Data, key: String) throws(OAuthError) -> TokenSet {
        var set = try StoredEntry.decode(data, key: key)
        // An ID token stored without the validated mark (by a version that kept unvalidated ones)
        // is never used: not exposed, not sent as id_token_hint, gone from the next save.
        if set.validatedIDToken == nil { set.idToken = nil }
        return set
    }

    /// What ``tokenSet(for:)`` would answer from memory right after ``restore()`` read `data`
    /// (the bytes of `key`'s stored entry): the set, when it is fresh at `now` by the same rule
    /// (expiry minus the renewal margin: `refreshMargin`, at most a third of the lifetime); nil when it
    /// needs a renewal.
    ///
    /// For a short-lived process that answers a fresh token without making a flow (`authflow
    /// token`), or one that looks at a store other processes write (whether a login is stored
    /// already): read the entry with ``SecretStore/load(_:)``, and on nil make an ``AuthFlow`` and
    /// call ``tokenSet(for:)``, which renews. Check ``TokenSet/Fields/needsReauthorization`` before using
    /// the set for a person's grant.
    /// - Throws: ``OAuthError`` `.storage` as ``restore()`` would report for the entry.
    public static func freshStoredSet(
        _ data: Data, key: String, now: Date, refreshMargin: TimeInterval = Options.defaultRefreshMargin
    ) throws(OAuthError) -> TokenSet? {
        let set = try decodeStored(data, key: key)
        return now.timeIntervalSince1970 < RenewalTiming.renewalTime(of: set, refreshMargin: refreshMargin) ? set : nil
    }

    func save(_ set: TokenSet) async throws(OAuthError) {
        try await store.save(StoredEntry.encode(set), for: set.providerID)
        cache(set)
    }
}
