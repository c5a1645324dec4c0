#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AuthflowAgent
import Glibc
import OAuthFlow

/// The arguments of `exec`: which provider's token goes into which environment variable, and the
/// command line that replaces `authflow`.
public struct ExecOptions: Sendable, Equatable {
    /// One token to put in the environment.
    public struct Binding: Sendable, Equatable {
        /// The provider whose token it is.
        public var provider: String
        /// The environment variable that holds it.
        public var variable: String

        /// Creates a binding.
        public init(provider: String, variable: String) {
            self.provider = provider
            self.variable = variable
        }
    }

    /// The tokens, in the order given.
    public var bindings: [Binding]
    /// The command and its arguments: what follows `--`.
    public var command: [String]

    /// The variable of a `PROVIDER` given without `=NAME` and without `--env`.
    public static let defaultVariable = "AUTHFLOW_TOKEN"

    /// Creates exec options.
    public init(bindings: [Binding], command: [String]) {
        self.bindings = bindings
        self.command = command
    }

    /// Reads `PROVIDER` and `PROVIDER=NAME` words; `variable` (`--env NAME`) names the variable of
    /// every `PROVIDER` given without `=NAME`, ``defaultVariable`` without it.
    /// - Throws: ``UsageError`` for a word that is not a provider id (with a variable name), a
    ///   name that is not a portable variable name, `--env` with no bare `PROVIDER`, or two tokens
    ///   for one variable.
    static func parse(_ words: [String], variable: String?, command: [String]) throws(UsageError) -> ExecOptions {
        if let variable, !isVariableName(variable) {
            throw UsageError("--env '\(DisplayText.escape(String(variable.prefix(80))))' is not a variable name "
                + "(letters, digits and '_', not starting with a digit)", command: "exec")
        }
        var bindings: [Binding] = []
        for word in words {
            let parts = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let name = parts.count == 2 ? parts[1] : variable ?? defaultVariable
            guard isProviderID(parts[0]), isVariableName(name) else {
                throw UsageError("'\(DisplayText.escape(String(word.prefix(200))))' is not PROVIDER or PROVIDER=NAME (a provider id, "
                    + "and a variable name of letters, digits and '_', not starting with a digit)", command: "exec")
            }
            if let taken = bindings.first(where: { $0.variable == name }) {
                throw UsageError("\(name) would hold the tokens of both \(taken.provider) and \(parts[0]); name a variable for each: "
                    + "PROVIDER=NAME", command: "exec")
            }
            bindings.append(Binding(provider: parts[0], variable: name))
        }
        if variable != nil, !words.contains(where: { !$0.contains("=") }) {
            throw UsageError("--env names the variable of a PROVIDER given without =NAME, and there is none", command: "exec")
        }
        return ExecOptions(bindings: bindings, command: command)
    }

    /// A portable environment variable name (POSIX.1-2017 §8.1): `[A-Za-z_][A-Za-z0-9_]*`, at
    /// most 128 characters.
    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 128, !(0x30...0x39).contains(first) else { return false }
        return name.utf8.allSatisfy { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A || (0x30...0x39).contains($0) || $0 == 0x5F }
    }
}

/// What `exec` replaces the process with: a program's path, its arguments and its environment.
///
/// Its description shows the path and the arguments, and only the number of environment
/// variables: the environment holds tokens.
public struct ProcessImage: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The program's path: the command as given when it names a path, else where `PATH` has it.
    public var path: String
    /// The program's arguments, the command as typed first (`argv`).
    public var arguments: [String]
    /// The environment, tokens included.
    public var environment: [String: String]

    /// Creates an image.
    public init(path: String, arguments: [String], environment: [String: String]) {
        self.path = path
        self.arguments = arguments
        self.environment = environment
    }

    /// `ProcessImage(/usr/bin/env [env, -0], 12 variables)`.
    public var description: String {
        "ProcessImage(\(path) \(arguments), \(environment.count) variables)"
    }

    /// The path and the arguments; the environment's values are left out.
    public var customMirror: Mirror { Mirror(self, children: ["path": path, "arguments": arguments]) }

    /// Replaces the running process with this image (`execve(2)`): on success it never returns.
    ///
    /// `inherited` is the state the process started with (``InheritedProcessState/capture()``),
    /// restored first, so the program gets what `authflow`'s own parent gave it and nothing
    /// `authflow` made.
    /// - Returns: the error number when `execve` fails.
    func replace(restoring inherited: InheritedProcessState? = nil) -> Int32 {
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        inherited?.restore()
        execve(path, argv, envp)
        return errno
    }

    /// Where `command` runs from, as `execvp(3)` finds it: `command` itself when it holds a `/`,
    /// else the first executable regular file named `command` in a directory of `searchPath` (an
    /// empty entry is the current directory; without `PATH`, `/usr/local/bin:/usr/bin:/bin`).
    /// - Returns: the path, or the error number: `ENOENT` when nothing is found, `EACCES` when
    ///   only files that cannot be run are.
    static func locate(_ command: String, searchPath: String?) -> Location {
        guard !command.isEmpty else { return .failed(ENOENT) }
        if command.contains("/") { return failure(running: command).map(Location.failed) ?? .found(command) }
        var error = ENOENT
        for directory in (searchPath ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
            guard let code = failure(running: candidate) else { return .found(candidate) }
            if code != ENOENT { error = code }
        }
        return .failed(error)
    }

    /// Where ``locate(_:searchPath:)`` found a command, or the error number of not finding it.
    enum Location: Equatable {
        case found(String)
        case failed(Int32)
    }

    /// Nil when `path` is an executable regular file; else the error `execve` would meet.
    private static func failure(running path: String) -> Int32? {
        var info = stat()
        guard stat(path, &info) == 0 else { return errno == ENOTDIR ? ENOENT : errno }
        guard info.st_mode & S_IFMT == S_IFREG, access(path, X_OK) == 0 else { return EACCES }
        return nil
    }
}

/// What a process inherited when it started that `authflow` may have changed since: the signal
/// mask, the signals set to be ignored, and the open descriptors. `exec` restores it before
/// `execve`, so the program gets what `authflow`'s parent gave it.
///
/// The mask matters because `execve` keeps the calling thread's: the concurrency runtime's threads
/// block signals such as SIGTERM, and a program started from one would never see them. Ignored
/// signals stay ignored across `execve`. Descriptors `authflow` opened (the store's files, a
/// connection to the provider or the agent) would be the program's to keep.
struct InheritedProcessState: @unchecked Sendable {   // safe: plain values, only read after the capture
    private var mask = sigset_t()
    private var ignored: Set<Int32> = []
    private var descriptors: Set<Int32> = []

    /// The state now: call it first thing, before any thread or descriptor of `authflow`'s exists.
    static func capture() -> InheritedProcessState {
        var state = InheritedProcessState()
        pthread_sigmask(SIG_SETMASK, nil, &state.mask)
        for number in Int32(1)..<Int32(65) where isIgnored(number) { state.ignored.insert(number) }
        state.descriptors = Set(openDescriptors())
        return state
    }

    /// Puts the calling thread's mask back, every signal ignored since the capture back to its
    /// default, and marks every descriptor opened since close-on-exec.
    func restore() {
        for number in Int32(1)..<Int32(65) where number != SIGKILL && number != SIGSTOP && !ignored.contains(number) && Self.isIgnored(number) {
            signal(number, SIG_DFL)
        }
        var mask = self.mask
        pthread_sigmask(SIG_SETMASK, &mask, nil)
        for fd in Self.openDescriptors() where fd > 2 && !descriptors.contains(fd) {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
    }

    private static func isIgnored(_ number: Int32) -> Bool {
        var action = sigaction()
        guard sigaction(number, nil, &action) == 0 else { return false }
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    /// The open descriptors, from `/proc/self/fd`, less the listing's own (closed after it, so
    /// the next file opened may get its number).
    private static func openDescriptors() -> [Int32] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        let own = dirfd(directory)
        var descriptors: [Int32] = []
        // d_name is read in place, up to its NUL: a record can end before the field's 256 bytes do.
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19
        while let entry = readdir(directory) {
            let name = String(cString: UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self))
            if let fd = Int32(name), fd != own { descriptors.append(fd) }
        }
        return descriptors
    }
}

extension Context {
    /// `authflow exec PROVIDER[=NAME]... [--env NAME] -- COMMAND [ARGUMENT]...` by the full path:
    /// COMMAND is found, the tokens got as `authflow token` gets them (never a login), and the
    /// process replaced (``ProcessImage/replace(restoring:)`` through ``Authflow/Services/replaceProcess``).
    /// - Returns: only when COMMAND did not start: 127 not found, 126 cannot run, 77 when a
    ///   provider a person logs in to has nothing stored, 65 for a token that is not a bearer token.
    func exec(_ options: ExecOptions) async throws(CLIError) -> ExitCode {
        let path: String
        switch ProcessImage.locate(options.command[0], searchPath: environment["PATH"]) {
        case .found(let found): path = found
        case .failed(let code): return execFailed(options.command[0], code)
        }
        guard let tokens = try await helperTokens(options.bindings.map(\.provider)) else { return .denied }
        return execReplacing(try execImage(options, path: path, tokens: tokens))
    }

    /// The image of `options`: the process's environment with each binding's variable set to its
    /// provider's token.
    /// - Throws: ``CLIError/data(_:)`` for a token that is not a bearer token.
    func execImage(_ options: ExecOptions, path: String, tokens: [String: HelperToken]) throws(CLIError) -> ProcessImage {
        var variables = environment
        for binding in options.bindings {
            guard let token = tokens[binding.provider] else { throw .data("no token for \(binding.provider)") }
            variables[binding.variable] = try token.bearer(of: binding.provider, refusing: "exec does not put it in an environment").reveal()
        }
        return ProcessImage(path: path, arguments: options.command, environment: variables)
    }

    /// Replaces the process with `image`; returns only when that failed, after saying why (or,
    /// when ``Authflow/Services/replaceProcess`` took the image without replacing anything, 0).
    func execReplacing(_ image: ProcessImage) -> ExitCode {
        let code = services.replaceProcess(image)
        return code == 0 ? .success : execFailed(image.arguments[0], code)
    }

    /// Reports that `command` could not be run (`code`: its error number) and returns 127 for a
    /// command not found, 126 otherwise.
    func execFailed(_ command: String, _ code: Int32) -> ExitCode {
        let reason = code == ENOENT ? "command not found" : String(cString: strerror(code))
        err.write("\(errStyle.red("authflow: error:")) exec: \(escaped(String(command.prefix(200)))): \(reason)\n")
        return code == ENOENT ? .commandNotFound : .cannotExecute
    }
}

extension Authflow {
    /// `exec` before the concurrency runtime starts: COMMAND is found, and when every token comes
    /// from the agent or fresh from the store (``quickTokens(_:invocation:output:environment:services:)``)
    /// the process is replaced here, on the main thread.
    /// - Returns: nil, with nothing printed, when the full path must get a token; otherwise the
    ///   status of a failure (COMMAND not found, the agent's refusal, a token that is not a bearer token).
    static func execBeforeRuntime(
        _ options: ExecOptions, invocation: Invocation, output: Output, environment: [String: String], services: Services
    ) -> ExitCode? {
        let context = Context(invocation: invocation, output: output, environment: environment, services: services)
        let path: String
        switch ProcessImage.locate(options.command[0], searchPath: environment["PATH"]) {
        case .found(let found): path = found
        case .failed(let code): return context.execFailed(options.command[0], code)
        }
        switch quickTokens(options.bindings.map(\.provider), invocation: invocation, output: output, environment: environment,
                           services: services) {
        case nil:
            return nil
        case .failure(let refusal)?:
            output.stderr.write("\(context.errStyle.red("authflow: error:")) \(refusal.message)\n")
            return refusal.status
        case .success(let tokens)?:
            do throws(CLIError) {
                return context.execReplacing(try context.execImage(options, path: path, tokens: tokens))
            } catch {
                return context.report(error)
            }
        }
    }
}
