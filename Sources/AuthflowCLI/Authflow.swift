#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Dispatch
import Glibc
public import OAuthFlow
import OAuthFlowPostgres
import Synchronization

/// The `authflow` command-line tool: parse, call the library, print, exit.
///
/// `Sources/authflow/main.swift` calls ``start()``. Tests call ``parse(_:)`` and
/// ``run(arguments:output:environment:services:)`` in-process with a mock transport and a test clock.
public enum Authflow {
    /// What a run uses from the outside world; tests replace each part.
    public struct Services: Sendable {
        /// The HTTP transport; nil means a `CurlTransport`, which loads libcurl on its first request only.
        public var transport: (any HTTPTransport)?
        /// Sleeps between device polls.
        public var clock: any Clock<Duration>
        /// The wall clock for expiry.
        public var now: @Sendable () -> Date
        /// Opens a URL in a browser (`xdg-open` by default); called only when a display is present.
        public var openURL: @Sendable (URL) -> Void
        /// How long a command waits for another process holding a store lock.
        public var lockTimeout: Duration
        /// Standard input to its end, at most 64 KiB (what git sends `git-credential`); read only by that command.
        public var standardInput: @Sendable () -> String

        /// The real world: network, wall clock, `xdg-open`.
        public init(
            transport: (any HTTPTransport)? = nil, clock: any Clock<Duration> = ContinuousClock(),
            now: @escaping @Sendable () -> Date = { Date() }, openURL: @escaping @Sendable (URL) -> Void = Authflow.xdgOpen,
            lockTimeout: Duration = .seconds(30), standardInput: @escaping @Sendable () -> String = Authflow.readStandardInput
        ) {
            self.standardInput = standardInput
            self.transport = transport
            self.clock = clock
            self.now = now
            self.openURL = openURL
            self.lockTimeout = lockTimeout
        }
    }

    /// Runs `authflow` as a process from synchronous code (`Sources/authflow/main.swift`): parses
    /// `CommandLine.arguments`, answers `authflow token` from the store when it can
    /// (``tokenFromStore(_:output:environment:services:)``) without starting the concurrency
    /// runtime, and otherwise runs the command in a task while the main thread serves the main
    /// queue (`dispatchMain()`), then exits with its status. `login` and `demo` turn SIGINT into
    /// task cancellation (a second Ctrl-C exits at once); other commands keep the default SIGINT
    /// behaviour. Never returns.
    public static func start() -> Never {
        let (invocation, output, environment) = prepare()
        if let status = tokenFromAgent(invocation, output: output, environment: environment) { exit(status.rawValue) }
        if let status = tokenFromStore(invocation, output: output, environment: environment, services: Services()) {
            exit(status.rawValue)
        }
        Task { await run(invocation, output: output, environment: environment) }
        dispatchMain()
    }

    /// The parsed command line, the standard streams and the environment; a usage error exits 64 here.
    private static func prepare() -> (Invocation, Output, [String: String]) {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let output = Output.standard
        let environment = processEnvironment()
        do {
            return (try parse(arguments), output, environment)
        } catch {
            exit(report(error, output: output, environment: environment).rawValue)
        }
    }

    /// The process environment exactly as `ProcessInfo.processInfo.environment` reads it (split at
    /// the first `=`, entries without one skipped, the last of duplicate names kept, invalid UTF-8
    /// repaired), in a third of its instructions: it compares bytes where ProcessInfo searches
    /// `Character`s, and sizes the dictionary once. `authflow token` pays it on every start.
    package static func processEnvironment() -> [String: String] {
        var count = 0
        var cursor: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ  // NULL after clearenv(3)
        while let entries = cursor, entries.pointee != nil {
            count += 1
            cursor = entries + 1
        }
        var environment: [String: String] = Dictionary(minimumCapacity: count)
        cursor = environ
        while let entries = cursor, let entry = entries.pointee {
            let length = strlen(entry)
            entry.withMemoryRebound(to: UInt8.self, capacity: length) { start in
                let bytes = UnsafeBufferPointer(start: start, count: length)
                if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                    environment[String(decoding: bytes[..<equals], as: UTF8.self)] = String(decoding: bytes[(equals + 1)...], as: UTF8.self)
                }
            }
            cursor = entries + 1
        }
        return environment
    }

    /// The full path of a process: runs the command in a task (cancelled by SIGINT for `login`
    /// and `demo`) and exits with its status.
    private static func run(_ invocation: Invocation, output: Output, environment: [String: String]) async -> Never {
        let task = Task { await execute(invocation, output: output, environment: environment, services: Services()) }
        var source: (any DispatchSourceSignal)?
        switch invocation.command {
        case .login, .demo: source = cancelOnInterrupt(task)
        default: break
        }
        let status = await task.value
        source?.cancel()
        exit(status.rawValue)
    }

    /// Parses and runs one command line; never exits the process.
    /// - Returns: the exit status (see ``ExitCode``).
    public static func run(
        arguments: [String], output: Output, environment: [String: String] = ProcessInfo.processInfo.environment,
        services: Services = Services()
    ) async -> ExitCode {
        do {
            let invocation = try parse(arguments)
            if let status = tokenFromAgent(invocation, output: output, environment: environment) { return status }
            if let status = tokenFromStore(invocation, output: output, environment: environment, services: services) { return status }
            return await execute(invocation, output: output, environment: environment, services: services)
        } catch {
            return report(error, output: output, environment: environment)
        }
    }

    /// Runs a parsed command line; never exits the process.
    public static func execute(
        _ invocation: Invocation, output: Output, environment: [String: String], services: Services
    ) async -> ExitCode {
        let context = Context(invocation: invocation, output: output, environment: environment, services: services)
        do throws(CLIError) {
            return try await run(invocation.command, context: context, output: output)
        } catch {
            return context.report(error)
        }
    }

    /// Runs one parsed command. Each case returns at once: Swift 6.3's optimizer crashed ("while
    /// splitting coroutine") on the earlier shape, one `status` assigned in every case of a `do`.
    private static func run(_ command: Command, context: Context, output: Output) async throws(CLIError) -> ExitCode {
        switch command {
        case .help(let topic):
            output.stdout.write(helpText(topic))
            return .success
        case .version:
            output.stdout.write("authflow \(version)\n")
            return .success
        case .providers(let json): return try await context.providers(json: json)
        case .login(let options): return try await context.login(options)
        case .token(let provider, let json): return try await context.token(provider, json: json)
        case .tokenProof(let provider, let method, let url): return try await context.tokenProof(provider, method: method, url: url)
        case .status(let provider, let json): return try await context.status(provider, json: json)
        case .logout(let provider, let localOnly): return try await context.logout(provider, localOnly: localOnly)
        case .discover(let options): return try await context.discover(options)
        case .userinfo(let provider): return try await context.userinfo(provider)
        case .demo: return await Demo(context: context).run()
        case .tokenHeader(let provider): return try await context.tokenHeader(provider)
        case .gitCredential(let provider, let action): return try await context.gitCredential(provider, action: action)
        case .kubeCredential(let provider): return try await context.kubeCredential(provider)
        case .completion(let shell?):
            output.stdout.write(Completion.script(for: Completion.Shell(rawValue: shell) ?? .bash))
            return .success
        case .completion(nil):
            output.stdout.write(try context.catalogEntries().compactMap { $0["id"]?.stringValue }.filter(Completion.isWord)
                .map { $0 + "\n" }.joined())
            return .success
        case .manPage:
            output.stdout.write(ManPage.roff())
            return .success
        case .agent(let options): return try await context.agent(options)
        }
    }

    /// Prints a usage error and returns 64.
    static func report(_ error: UsageError, output: Output, environment: [String: String]) -> ExitCode {
        let style = Style(terminal: output.stderrIsTerminal, environment: environment)
        output.stderr.write("\(style.red("authflow: error:")) \(escaped(error.message))\nusage: \(usageLine(error.command ?? ""))\n"
            + "Run 'authflow help\(error.command.map { " \($0)" } ?? "")' for more.\n")
        return .usage
    }

    /// Opens `url` with `xdg-open` (found on `PATH`), its input and output `/dev/null`; a failure to
    /// start it is ignored (the URL is printed as well). The child is reaped when it exits.
    @Sendable public static func xdgOpen(_ url: URL) {
        _ = spawnDetached("xdg-open", [url.absoluteString])
    }

    /// Starts `program` (a path, or a name looked up on `PATH`) with `arguments`, the environment of
    /// this process, and `/dev/null` as its standard input, output and error; a thread of the global
    /// queue reaps it when it exits. Returns 0 when it started, or the error number `posix_spawnp`
    /// gave (`ENOENT` when there is no such program).
    static func spawnDetached(_ program: String, _ arguments: [String]) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        let initialized = posix_spawn_file_actions_init(&actions)
        guard initialized == 0 else { return initialized }
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        let words = [program] + arguments
        let argv = words.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var spawned: pid_t = 0
        let result = posix_spawnp(&spawned, program, &actions, nil, argv, environ)
        guard result == 0 else { return result }
        let pid = spawned
        DispatchQueue.global().async {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        return 0
    }

    /// Ignores SIGINT and cancels `task` on the first Ctrl-C instead; the second exits with 130.
    private static func cancelOnInterrupt(_ task: Task<ExitCode, Never>) -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        let count = Mutex(0)
        source.setEventHandler {
            let presses = count.withLock { count -> Int in
                count += 1
                return count
            }
            if presses > 1 { exit(ExitCode.interrupted.rawValue) }
            task.cancel()
        }
        source.resume()
        return source
    }
}

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

    /// Prints a failure on stderr (with the next step) and returns its exit status.
    func report(_ error: CLIError) -> ExitCode {
        let style = errStyle
        switch error {
        case .usage(let usage):
            return Authflow.report(usage, output: output, environment: environment)
        case .data(let message):
            err.write("\(style.red("authflow: error:")) \(escaped(message))\n")
            return .dataError
        case .oauth(let error, let provider):
            let status = ExitCode(error)
            if status == .interrupted {
                err.write("authflow: interrupted; nothing was stored.\n")
                return status
            }
            err.write("\(style.red("authflow: error:")) \(Self.explain(error))\n")
            if let hint = hint(for: error, provider: provider ?? error.providerID) { err.write("\(hint)\n") }
            return status
        }
    }

    /// A sentence for people: the code, then the server's error or the library's message, with
    /// control characters escaped. Never a secret.
    static func explain(_ error: OAuthError) -> String {
        var text = ""
        if let provider = error.providerID, !(error.message ?? "").contains("\"\(provider)\"") { text += "\(provider): " }
        if let response = error.response {
            text += "the provider answered \(response.code.rawValue)"
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

    private func hint(for error: OAuthError, provider: String?) -> String? {
        switch error.recovery {
        case .retryLater: return "This is temporary; try again later."
        case .reauthorize: return provider.map { "Log in again: authflow login \($0)" } ?? "Log in again with authflow login."
        case .fixConfiguration:
            if error.code == .storage { return nil }
            return (try? configURL().path).map { "Check the catalog at \($0)." }
        case .none: return nil
        }
    }
}
