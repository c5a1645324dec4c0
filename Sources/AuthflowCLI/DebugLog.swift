import OAuthFlow

/// Debug logging: `AUTHFLOW_DEBUG=1`, or `"debug": true` on a provider in the catalog, sends the
/// library's log lines (``LogRecord``: shapes, names, counts and codes, never a secret value) to
/// stderr, one line each, escaped like everything else the CLI shows.
extension Context {
    /// True when `AUTHFLOW_DEBUG` is set to anything but the empty string or `0`.
    var debugFromEnvironment: Bool {
        let value = environment["AUTHFLOW_DEBUG"] ?? ""
        return !value.isEmpty && value != "0"
    }

    /// `provider` with ``Provider/Settings/debug`` turned on when `AUTHFLOW_DEBUG` asks for it.
    func debugging(_ provider: Provider) -> Provider {
        guard debugFromEnvironment, !provider.debug else { return provider }
        var debugged = provider
        debugged.debug = true
        return debugged
    }

    /// The log hook of a flow over `providers`: `log` (a command's own use of the records) and, when
    /// debugging, a line on stderr per record: every record with `AUTHFLOW_DEBUG`, otherwise those
    /// of providers with `debug` (and the library's provider-less ones when any has it).
    func logHook(_ log: (@Sendable (LogRecord) -> Void)?, providers: [Provider]) -> (@Sendable (LogRecord) -> Void)? {
        let everything = debugFromEnvironment
        let debugged = Set(providers.filter(\.debug).map(\.id))
        guard everything || !debugged.isEmpty else { return log }
        let err = self.err
        return { record in
            log?(record)
            guard everything || record.providerID.map(debugged.contains) ?? true else { return }
            err.write(Self.debugLine(level: record.level.rawValue, provider: record.providerID, message: record.message))
        }
    }

    /// `authflow debug: PROVIDER: MESSAGE` (or `info`, `warning`), escaped (``escaped(_:)``), with a newline.
    static func debugLine(level: String, provider: String?, message: String) -> String {
        escaped("authflow \(level): \(provider.map { "\($0): " } ?? "")\(message)") + "\n"
    }
}
