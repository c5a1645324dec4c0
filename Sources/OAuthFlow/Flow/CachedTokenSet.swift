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
}
