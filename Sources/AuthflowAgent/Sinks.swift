import OAuthFlow

/// The token files of `--sink`: made once at start (owners and groups resolved then), each
/// rewritten after every new token of its provider (``TokenSink``, Documentation/Agent.md "Token files").
struct TokenSinks: Sendable {
    private let sinks: [TokenSink]

    /// The files `specs` describe.
    /// - Throws: ``AgentError`` `.usage` for an owner or group that does not exist; `.oauth` for a
    ///   path or mode ``TokenSink`` refuses.
    init(_ specs: [AgentOptions.Sink]) throws(AgentError) {
        var sinks: [TokenSink] = []
        for sink in specs {
            let owner = try sink.owner.map { name throws(AgentError) -> UInt32 in
                guard let uid = AgentAccess.userID(name) else { throw .usage("--sink: no user '\(DisplayText.escape(name))'") }
                return uid
            }
            let group = try sink.group.map { name throws(AgentError) -> UInt32 in
                guard let (gid, _) = AgentAccess.group(name) else { throw .usage("--sink: no group '\(DisplayText.escape(name))'") }
                return gid
            }
            do {
                sinks.append(try TokenSink(providerID: sink.provider, path: sink.path, mode: sink.mode, owner: owner, group: group, format: sink.format))
            } catch {
                throw .oauth(error, provider: sink.provider)
            }
        }
        self.sinks = sinks
    }

    /// The provider of the first file whose provider is not among `providers`.
    func first(notIn providers: [Provider]) -> String? {
        sinks.first { sink in !providers.contains { $0.id == sink.providerID } }?.providerID
    }

    /// Writes `set` to every file of its provider; a failure goes to `failed` and the next token is written again.
    func write(_ set: TokenSet, failed: (OAuthError) -> Void) {
        for sink in sinks where sink.providerID == set.providerID {
            do {
                try sink.write(set)
            } catch {
                failed(error)
            }
        }
    }
}
