#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Dispatch
import Glibc
public import OAuthFlow
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
        /// Standard input to its end, at most 64 KiB (what git sends `git-credential`, what Docker
        /// sends `docker-credential`); read only by those commands.
        public var standardInput: @Sendable () -> String
        /// Replaces the process with a program (`exec`): `execve(2)`, which never returns when it
        /// succeeds; it returns the error number when it fails. Tests record the image instead and
        /// return 0, which `exec` then returns as its status.
        public var replaceProcess: @Sendable (ProcessImage) -> Int32

        /// The real world: network, wall clock, `xdg-open`, `execve`.
        public init(
            transport: (any HTTPTransport)? = nil, clock: any Clock<Duration> = ContinuousClock(),
            now: @escaping @Sendable () -> Date = { Date() }, openURL: @escaping @Sendable (URL) -> Void = Authflow.xdgOpen,
            lockTimeout: Duration = .seconds(30), standardInput: @escaping @Sendable () -> String = Authflow.readStandardInput,
            replaceProcess: @escaping @Sendable (ProcessImage) -> Int32 = Authflow.replaceProcess(with:)
        ) {
            self.standardInput = standardInput
            self.replaceProcess = replaceProcess
            self.transport = transport
            self.clock = clock
            self.now = now
            self.openURL = openURL
            self.lockTimeout = lockTimeout
        }
    }

    /// Runs `authflow` as a process from synchronous code (`Sources/authflow/main.swift`): parses
    /// `CommandLine.arguments`, answers `authflow token` from the agent or the store when it can
    /// (``answerBeforeRuntime(_:output:environment:services:)``) without starting the concurrency
    /// runtime, and otherwise runs the command in a task while the main thread waits for signals
    /// (``parkMainThread()``), then exits with its status. `login` and `demo` turn SIGINT into
    /// task cancellation (a second Ctrl-C exits at once); other commands keep the default SIGINT
    /// behaviour. Run as `docker-credential-authflow` (a link to `authflow`), it is Docker's
    /// credential helper. Never returns.
    public static func start() -> Never {
        let (invocation, output, environment) = prepare()
        let services = processServices(invocation)
        if let status = answerBeforeRuntime(invocation, output: output, environment: environment, services: services) {
            exit(status.rawValue)
        }
        Task { await run(invocation, output: output, environment: environment, services: services) }
        parkMainThread()
    }

    /// Leaves the main thread as `dispatchMain()` leaves it, blocking no signal and waiting in
    /// `sigsuspend(2)` (so SIGINT, SIGTERM and SIGHUP reach their handlers as before), without
    /// getting there through `pthread_exit(3)`. That exit unwinds the main thread's stack, and the
    /// unwinder's search of the executable's unwind tables brings hundreds of KiB of them into
    /// every long-running command's resident set (`authflow agent`'s most of all). Nothing in
    /// `authflow` uses the main queue or the main actor, which `dispatchMain()` would serve.
    private static func parkMainThread() -> Never {
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        while true { sigsuspend(&none) }
    }

    /// The real world's services, with what `exec` and `docker-credential` need of this process:
    /// the state it started with, captured before anything changes it (restored before `execve`),
    /// and stdin read once (both paths of `docker-credential get` read the server URL).
    private static func processServices(_ invocation: Invocation) -> Services {
        var services = Services()
        switch invocation.command {
        case .exec:
            let inherited = InheritedProcessState.capture()
            services.replaceProcess = { $0.replace(restoring: inherited) }
        case .dockerCredential(_, let action) where ["get", "store", "erase"].contains(action):
            let input = readStandardInput()
            services.standardInput = { input }
        default:
            break
        }
        return services
    }

    /// The commands answered before the concurrency runtime starts when they can be: `token` from
    /// the agent or the store (``tokenFromAgent(_:output:environment:)``,
    /// ``tokenFromStore(_:output:environment:services:)``), and `exec` and `docker-credential get`
    /// when their tokens come the same way.
    /// - Returns: nil, with nothing printed, when the command must run in full.
    static func answerBeforeRuntime(_ invocation: Invocation, output: Output, environment: [String: String], services: Services) -> ExitCode? {
        switch invocation.command {
        case .token:
            return tokenFromAgent(invocation, output: output, environment: environment)
                ?? tokenFromStore(invocation, output: output, environment: environment, services: services)
        case .exec(let options):
            return execBeforeRuntime(options, invocation: invocation, output: output, environment: environment, services: services)
        case .dockerCredential(let provider, "get"):
            return dockerGetBeforeRuntime(provider, invocation: invocation, output: output, environment: environment, services: services)
        default:
            return nil
        }
    }

    /// The parsed command line, the standard streams and the environment; a usage error exits 64
    /// here. Called as `docker-credential-authflow`, the arguments are the helper's.
    private static func prepare() -> (Invocation, Output, [String: String]) {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let output = Output.standard
        let environment = processEnvironment()
        if CommandLine.arguments.first?.split(separator: "/").last.map(String.init) == DockerCredential.programName {
            return (DockerCredential.invocation(arguments), output, environment)
        }
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
    private static func run(_ invocation: Invocation, output: Output, environment: [String: String], services: Services) async -> Never {
        let task = Task { await execute(invocation, output: output, environment: environment, services: services) }
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
            if let status = answerBeforeRuntime(invocation, output: output, environment: environment, services: services) { return status }
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
        case .logoutUnregister(let provider, let localOnly): return try await context.logoutUnregistering(provider, localOnly: localOnly)
        case .request(let options): return try await context.request(options)
        case .discover(let options): return try await context.discover(options)
        case .userinfo(let provider): return try await context.userinfo(provider)
        case .demo: return await Demo(context: context).run()
        case .tokenHeader(let provider): return try await context.tokenHeader(provider)
        case .gitCredential(let provider, let action): return try await context.gitCredential(provider, action: action)
        case .kubeCredential(let provider): return try await context.kubeCredential(provider)
        case .exec(let options): return try await context.exec(options)
        case .dockerCredential(let provider, let action): return await context.dockerCredential(provider, action: action)
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

    /// Replaces the running process with `image` (`execve(2)`): on success it never returns.
    /// - Returns: the error number when `execve` fails.
    @Sendable public static func replaceProcess(with image: ProcessImage) -> Int32 {
        image.replace()
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
