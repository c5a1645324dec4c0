#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import OAuthFlowPostgres

/// A failure a command reports: a library error or one of the CLI's own.
enum CLIError: Error {
    case oauth(OAuthError, provider: String?)
    case usage(UsageError)
    case data(String)
}

/// Everything one run needs, with helpers the commands share.
struct Context: Sendable {
    let invocation: Invocation
    let output: Output
    let environment: [String: String]
    let services: Services

    typealias Services = Authflow.Services

    var out: any TextSink { output.stdout }
    var err: any TextSink { output.stderr }
    var errStyle: Style { Style(terminal: output.stderrIsTerminal, environment: environment) }
    var outStyle: Style { Style(terminal: output.stdoutIsTerminal, environment: environment) }

    // MARK: Paths

    /// `--config`, else `$AUTHFLOW_CONFIG`, else `$XDG_CONFIG_HOME/authflow/providers.json`, else `~/.config/authflow/providers.json`.
    func configURL() throws(CLIError) -> URL {
        if let path = invocation.configPath { return URL(fileURLWithPath: path) }
        if let path = environment["AUTHFLOW_CONFIG"], !path.isEmpty { return URL(fileURLWithPath: path) }
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") {
            return URL(fileURLWithPath: base).appendingPathComponent("authflow/providers.json")
        }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return URL(fileURLWithPath: home).appendingPathComponent(".config/authflow/providers.json")
        }
        throw .data("no catalog: pass --config FILE or set AUTHFLOW_CONFIG (HOME is not set)")
    }

    /// `--store`, else `$AUTHFLOW_STORE`, else `$XDG_STATE_HOME/authflow`, else `~/.local/state/authflow`.
    func storeURL() throws(CLIError) -> URL {
        if let path = invocation.storePath { return URL(fileURLWithPath: path, isDirectory: true) }
        if let path = environment["AUTHFLOW_STORE"], !path.isEmpty { return URL(fileURLWithPath: path, isDirectory: true) }
        do {
            return try FileSecretStore.defaultDirectory(name: "authflow", environment: environment)
        } catch {
            throw .data("no store: pass --store DIR or set AUTHFLOW_STORE (neither XDG_STATE_HOME nor HOME is an absolute path)")
        }
    }

    // MARK: Building blocks

    /// The catalog file, which must exist.
    func catalogFile() throws(CLIError) -> URL {
        let url = try configURL()
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw .data("no provider catalog at \(url.path); write one (see Documentation/Catalog.md) or pass --config FILE")
        }
        return url
    }

    /// True unless `AUTHFLOW_CATALOG_STRICT=0`: the CLI refuses unknown catalog keys, naming the
    /// closest known one, so a typo such as `clientSecrett` is not silently ignored.
    var strictCatalog: Bool { environment["AUTHFLOW_CATALOG_STRICT"] != "0" }

    /// The validated providers of the catalog.
    func catalog() throws(CLIError) -> [Provider] {
        let url = try catalogFile()
        do {
            return try ProviderCatalog.load(contentsOf: url, environment: environment, strict: strictCatalog).map(debugging)
        } catch {
            throw .oauth(error, provider: nil)
        }
    }

    /// The provider `id` from the catalog; an unknown id is a usage error that lists the known ones.
    ///
    /// Only that entry's secret is resolved, so another provider's unset `clientSecretEnv` does not
    /// stop a command about this one.
    func provider(_ id: String) throws(CLIError) -> Provider {
        let url = try catalogFile()
        let selected: Provider?
        do {
            selected = try ProviderCatalog.load(contentsOf: url, only: id, environment: environment, strict: strictCatalog)
        } catch {
            throw .oauth(error, provider: id)
        }
        if let selected { return debugging(selected) }
        let known: String
        do {
            let ids = try ProviderCatalog.load(contentsOf: url, environment: environment, strict: strictCatalog).map(\.id)
            known = ids.isEmpty ? " (it lists none)" : "; configured: \(ids.joined(separator: ", "))"
        } catch {
            known = " (and the catalog has other errors: run authflow providers)"
        }
        throw .usage(UsageError("no provider '\(id)' in \(url.path)\(known)", command: invocation.command.name))
    }

    /// The file store, or the PostgreSQL fleet store when `--store` / `$AUTHFLOW_STORE` is a
    /// `postgresql://` (or `postgres://`) URI. The database store needs a key (`--store-key-file`)
    /// or `--store-plaintext`; the URI's password (or `PGPASSWORD`, `~/.pgpass`) is never printed.
    /// One command opens one database connection (no `LISTEN` connection: it caches nothing),
    /// and libpq is loaded only for a database store. `listening` (the agent, which caches for
    /// as long as it runs) adds the `LISTEN` connection, so a logout elsewhere reaches it at once.
    func store(encryption given: EntryEncryption? = nil, listening: Bool = false) throws(CLIError) -> any SecretStore {
        var encryption = given
        if encryption == nil { encryption = try storeEncryption() }
        if encryption != nil, invocation.storePlaintext {
            throw .usage(UsageError("--store-plaintext and a store key exclude each other; choose one", command: invocation.command.name))
        }
        if let connection = databaseStore() {
            do {
                return try PostgresSecretStore(
                    connection: connection, encryption: encryption, allowPlaintext: invocation.storePlaintext,
                    options: .init(lockTimeout: services.lockTimeout, connectTimeout: 4, listensForDeletions: listening), environment: environment)
            } catch {
                throw .oauth(error, provider: nil)
            }
        }
        // A file store is plaintext unless it has a key, so the option would change nothing: refuse it rather than ignore it.
        if invocation.storePlaintext {
            throw .usage(UsageError("--store-plaintext applies to a postgresql:// store only; a directory store is plaintext without --store-key-file",
                                    command: invocation.command.name))
        }
        let directory = try storeURL()
        do {
            return try FileSecretStore(directory: directory, environment: environment, lockTimeout: services.lockTimeout,
                                       encryption: encryption)
        } catch {
            throw .oauth(error, provider: nil)
        }
    }

    /// The connection string when the store is a database: `--store`, else `$AUTHFLOW_STORE`, starting `postgresql://` or `postgres://`.
    func databaseStore() -> String? {
        let location = invocation.storePath ?? environment["AUTHFLOW_STORE"].flatMap { $0.isEmpty ? nil : $0 }
        guard let location, location.hasPrefix("postgresql://") || location.hasPrefix("postgres://") else { return nil }
        return location
    }

    /// `--store-key-file`, else `$AUTHFLOW_STORE_KEY_FILE`, with any `--store-previous-key-file`; nil: no encryption.
    func storeEncryption() throws(CLIError) -> EntryEncryption? {
        let fromEnvironment = environment["AUTHFLOW_STORE_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        guard let path = invocation.storeKeyPath ?? fromEnvironment else {
            guard invocation.previousStoreKeyPaths.isEmpty else {
                throw .usage(UsageError("--store-previous-key-file needs --store-key-file or AUTHFLOW_STORE_KEY_FILE",
                                        command: invocation.command.name))
            }
            return nil
        }
        do throws(OAuthError) {
            let key = try StoreKey(contentsOf: URL(fileURLWithPath: path))
            var previous: [StoreKey] = []
            for previousPath in invocation.previousStoreKeyPaths {
                previous.append(try StoreKey(contentsOf: URL(fileURLWithPath: previousPath)))
            }
            return EntryEncryption(key: key, previousKeys: previous)
        } catch {
            throw .data(error.message ?? error.description)  // names the key file and the reason, never its content
        }
    }

    var transport: any HTTPTransport { services.transport ?? CurlTransport() }

    /// The flow's options; `log` gets the records, and so does stderr when debugging (see `DebugLog.swift`).
    func flowOptions(log: (@Sendable (LogRecord) -> Void)? = nil, providers: [Provider] = []) -> AuthFlow.Options {
        AuthFlow.Options(clock: services.clock, now: services.now, userAgent: "authflow/\(Authflow.version)",
                         log: logHook(log, providers: providers))
    }

    func flow(
        _ providers: [Provider], store: any SecretStore, log: (@Sendable (LogRecord) -> Void)? = nil
    ) async throws(CLIError) -> AuthFlow {
        do throws(OAuthError) {
            return try await AuthFlow(providers: providers, store: store, transport: transport,
                                      options: flowOptions(log: log, providers: providers))
        } catch {
            throw .oauth(error, provider: nil)
        }
    }

    // MARK: Errors

    /// Prints a failure on stderr, with the advice line of ``ErrorAdvice`` under a library error,
    /// and returns its exit status.
    func report(_ error: CLIError) -> ExitCode {
        let style = errStyle
        switch error {
        case .usage(let usage):
            return Authflow.report(usage, output: output, environment: environment)
        case .data(let message):
            err.write("\(style.red("authflow: error:")) \(escaped(message))\n")
            return .dataError
        case .oauth(let error, let provider):
            let subject = adviceSubject(provider ?? error.providerID, for: error)
            let row = ErrorAdvice.row(for: error, subject)
            if row.status == .interrupted {
                err.write("authflow: interrupted; nothing was stored.\n")
                return row.status
            }
            err.write("\(style.red("authflow: error:")) \(Self.explain(error))\n")
            if let advice = ErrorAdvice.line(row, subject) { err.write("\(advice)\n") }
            return row.status
        }
    }

    /// A sentence for people: the code, then the server's error or the library's message, with
    /// control characters escaped. Never a secret.
    static func explain(_ error: OAuthError) -> String {
        var text = ""
        if let provider = error.providerID, !(error.message ?? "").contains("\"\(provider)\"") { text += "\(provider): " }
        if let response = error.response {
            text += "the \(error.endpoint == .resource ? "resource" : "provider") answered \(response.code.rawValue)"
            if let detail = response.errorDescription { text += " (\(detail))" }
            if let message = error.message { text += "; \(message)" }
        } else if let message = error.message {
            text += message
        } else {
            text += "\(error.code)"
        }
        if let status = error.httpStatus, error.response == nil, !text.contains("HTTP \(status)") { text += " [HTTP \(status)]" }
        return escaped(text) + " [\(error.code)]"
    }
}
