#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import OAuthFlow

/// What the program that runs the agent gives it (`authflow agent`: its catalog, store and
/// transport as the command line chose them), so the agent needs nothing of the program but this.
package struct AgentHost: Sendable {
    /// The process environment (systemd's variables, `XDG_RUNTIME_DIR`, `CREDENTIALS_DIRECTORY`).
    package var environment: [String: String]
    /// The store every flow of the agent reads and writes (kept across SIGHUP reloads).
    package var store: any SecretStore
    /// The HTTP transport of every flow.
    package var transport: any HTTPTransport
    /// Sleeps between re-authorization attempts.
    package var clock: any Clock<Duration>
    /// The wall clock.
    package var now: @Sendable () -> Date
    /// Loads the catalog: at start and on every SIGHUP.
    package var catalog: @Sendable () throws(AgentError) -> AgentCatalog
    /// The options of a flow over `providers`, whose log records go to `log`.
    package var flowOptions: @Sendable (_ providers: [Provider], _ log: @escaping @Sendable (LogRecord) -> Void) -> AuthFlow.Options
    /// A sentence for people about a library error, never a secret (the log and the protocol's `message`).
    package var explain: @Sendable (OAuthError) -> String
    /// Writes one line (with its newline) to standard error.
    package var standardError: @Sendable (String) -> Void
    /// The program's advice for a library error of a provider, logged beside a failure the
    /// configuration or a credential must fix (`authflow agent`: its error-advice table, which
    /// names a refused key or credential file); nil for none.
    package var advice: @Sendable (OAuthError, Provider) -> String?

    /// Creates a host description.
    package init(environment: [String: String], store: any SecretStore, transport: any HTTPTransport, clock: any Clock<Duration>,
                 now: @escaping @Sendable () -> Date, catalog: @escaping @Sendable () throws(AgentError) -> AgentCatalog,
                 flowOptions: @escaping @Sendable ([Provider], @escaping @Sendable (LogRecord) -> Void) -> AuthFlow.Options,
                 explain: @escaping @Sendable (OAuthError) -> String, standardError: @escaping @Sendable (String) -> Void,
                 advice: @escaping @Sendable (OAuthError, Provider) -> String? = { _, _ in nil }) {
        self.environment = environment
        self.store = store
        self.transport = transport
        self.clock = clock
        self.now = now
        self.catalog = catalog
        self.flowOptions = flowOptions
        self.explain = explain
        self.standardError = standardError
        self.advice = advice
    }
}

/// A loaded catalog: its providers, and the file their `agentAllow` lists are read from.
package struct AgentCatalog: Sendable {
    /// The validated providers.
    package var providers: [Provider]
    /// The catalog file.
    package var file: URL

    /// Creates a catalog description.
    package init(providers: [Provider], file: URL) {
        self.providers = providers
        self.file = file
    }
}

/// Why the agent could not start (or reload): the program reports it as it reports its own errors.
package enum AgentError: Error {
    /// The command line asks for something impossible (a `--sink` naming an unknown user or provider, no socket path).
    case usage(String)
    /// A file, the socket or the system refused (the message names what and why).
    case data(String)
    /// The library refused (the catalog, the store, a flow).
    case oauth(OAuthError, provider: String?)
}
