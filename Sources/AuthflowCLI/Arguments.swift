public import AuthflowAgent
import OAuthFlow

/// A parsed command line.
public struct Invocation: Sendable, Equatable {
    /// `--config FILE`, when given.
    public var configPath: String?
    /// `--store DIR` or `--store postgresql://…`, when given.
    public var storePath: String?
    /// `--store-key-file FILE`, when given: the key that encrypts the store's entries.
    public var storeKeyPath: String?
    /// `--store-previous-key-file FILE` values, in order: older keys still accepted for reading.
    public var previousStoreKeyPaths: [String]
    /// `--store-plaintext`: a database store may keep entries unencrypted (no key given).
    public var storePlaintext: Bool
    /// The command to run.
    public var command: Command

    /// Creates an invocation.
    public init(
        configPath: String? = nil, storePath: String? = nil, storeKeyPath: String? = nil, previousStoreKeyPaths: [String] = [],
        storePlaintext: Bool = false, command: Command
    ) {
        self.configPath = configPath
        self.storePath = storePath
        self.storeKeyPath = storeKeyPath
        self.previousStoreKeyPaths = previousStoreKeyPaths
        self.storePlaintext = storePlaintext
        self.command = command
    }
}

/// One `authflow` command with its arguments.
public enum Command: Sendable, Equatable {
    /// `providers [--json]`.
    case providers(json: Bool)
    /// `login PROVIDER [--device | --browser | --paste | --client-credentials | --ciba] [--scope S]... [--json]
    /// [--timeout SECONDS] [--listen-port PORT] [CIBA options]`.
    case login(LoginOptions)
    /// `token PROVIDER [--json]`.
    case token(provider: String, json: Bool)
    /// `token PROVIDER --dpop-proof METHOD URL`: the two header lines of a DPoP-bound request.
    case tokenProof(provider: String, method: String, url: String)
    /// `status [PROVIDER] [--json]`.
    case status(provider: String?, json: Bool)
    /// `logout PROVIDER [--local]`.
    case logout(provider: String, localOnly: Bool)
    /// `logout PROVIDER --unregister [--local]`: the logout, then the client's registration deleted (RFC 7592 §2.3).
    case logoutUnregister(provider: String, localOnly: Bool)
    /// `request PROVIDER URL [--method M] [--data DATA] [--add-header H]...`.
    case request(RequestOptions)
    /// `discover ISSUER [--id ID] [--client-id ID] [--json]`.
    case discover(DiscoverOptions)
    /// `userinfo PROVIDER`.
    case userinfo(provider: String)
    /// `demo`.
    case demo
    /// `token PROVIDER --header`: `Authorization: Bearer …` for `curl -H @-`.
    case tokenHeader(provider: String)
    /// `git-credential PROVIDER ACTION`: git's credential helper (`get`, `store`, `erase`).
    case gitCredential(provider: String, action: String)
    /// `kube-credential PROVIDER`: kubectl's exec credential plugin.
    case kubeCredential(provider: String)
    /// `exec PROVIDER[=NAME]... [--env NAME] -- COMMAND [ARGUMENT]...`: COMMAND in place of
    /// `authflow`, with tokens in its environment.
    case exec(ExecOptions)
    /// `docker-credential PROVIDER ACTION`, or `docker-credential-authflow ACTION` (provider nil:
    /// chosen by the catalog's `registries`): Docker's credential helper.
    case dockerCredential(provider: String?, action: String)
    /// `completion bash|zsh|fish`; nil: `completion --provider-ids`.
    case completion(shell: String?)
    /// `man`: the manual page in roff.
    case manPage
    /// `agent [--socket PATH] [--sink SPEC]... [--notify-command CMD] [--metrics-file FILE]`.
    case agent(AgentOptions)
    /// `help [COMMAND]`, `--help`, `-h`.
    case help(topic: String?)
    /// `--version`.
    case version

    /// The command's name as typed.
    public var name: String {
        switch self {
        case .providers: return "providers"
        case .login: return "login"
        case .token, .tokenProof: return "token"
        case .status: return "status"
        case .logout, .logoutUnregister: return "logout"
        case .request: return "request"
        case .discover: return "discover"
        case .userinfo: return "userinfo"
        case .demo: return "demo"
        case .tokenHeader: return "token"
        case .gitCredential: return "git-credential"
        case .kubeCredential: return "kube-credential"
        case .exec: return "exec"
        case .dockerCredential: return "docker-credential"
        case .completion: return "completion"
        case .manPage: return "man"
        case .agent: return "agent"
        case .help: return "help"
        case .version: return "--version"
        }
    }
}

/// The arguments of `login`.
public struct LoginOptions: Sendable, Equatable {
    /// A grant forced by a flag.
    public enum Method: String, Sendable, Equatable, CaseIterable {
        /// `--device`: RFC 8628 device authorization.
        case device
        /// `--browser`: authorization code + PKCE with a loopback redirect (RFC 8252).
        case browser
        /// `--paste`: authorization code + PKCE, the URL the browser ended on pasted back (no listener).
        case paste
        /// `--client-credentials`: RFC 6749 §4.4.
        case clientCredentials = "client-credentials"
        /// `--ciba`: OpenID Connect CIBA; the provider asks the person on their own device.
        case ciba
    }

    /// The provider id.
    public var provider: String
    /// The forced grant; nil lets `authflow` choose.
    public var method: Method?
    /// `--scope` values; empty means the provider's scopes.
    public var scopes: [String]
    /// `--json`: JSON Lines on stdout.
    public var json: Bool
    /// `--timeout`: how long a browser login waits for its callback, in seconds.
    public var timeout: Int
    /// `--qr` (true) or `--no-qr` (false): whether a device login draws its link as a QR code;
    /// nil draws it when stderr is a terminal wide enough, colour is allowed and libqrencode loads.
    public var qr: Bool?
    /// The CIBA options (`--login-hint`, `--binding-message`…); any of them implies `--ciba`.
    public var ciba: CIBALoginOptions
    /// `--listen-port`: the loopback port a browser login listens on (and sends in its redirect URI),
    /// instead of the catalog redirect URI's port or an ephemeral one.
    public var listenPort: Int?

    /// `--resource URL` (or a URL in place of PROVIDER): the protected resource to log in to (RFC 9728).
    public var resource: String?
    /// `--issuer`: with a resource, the authorization server to use (one the resource lists).
    public var issuer: String?
    /// `--initial-access-token-file`: the initial access token a registration presents (RFC 7591 §3).
    public var initialAccessTokenFile: String?
    /// `--acr-values`: the authentication context classes to ask for (RFC 9470 §4).
    public var acrValues: String?
    /// `--max-age`: the oldest authentication accepted, in seconds (RFC 9470 §4).
    public var maxAge: Int?

    /// The default browser wait: 5 minutes.
    public static let defaultTimeout = 300

    /// Creates login options.
    public init(
        provider: String, method: Method? = nil, scopes: [String] = [], json: Bool = false, timeout: Int = LoginOptions.defaultTimeout,
        qr: Bool? = nil, ciba: CIBALoginOptions = CIBALoginOptions(), listenPort: Int? = nil, resource: String? = nil,
        issuer: String? = nil, initialAccessTokenFile: String? = nil, acrValues: String? = nil, maxAge: Int? = nil
    ) {
        self.resource = resource
        self.issuer = issuer
        self.initialAccessTokenFile = initialAccessTokenFile
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.qr = qr
        self.ciba = ciba
        self.listenPort = listenPort
        self.provider = provider
        self.method = method
        self.scopes = scopes
        self.json = json
        self.timeout = timeout
    }
}

/// A command line that cannot be run; exits 64 with the message and the command's usage.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// The command whose usage to show, when known.
    public var command: String?

    /// Creates a usage error.
    public init(_ message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }

    /// The message.
    public var description: String { message }
}

extension Authflow {
    /// The commands, in the order `--help` lists them (from ``commands``).
    static let commandNames = commands.map(\.name)

    /// Every option that takes a value, global or of any command (from ``globalOptions`` and ``commands``).
    private static let valueOptions: Set<String> =
        Set((globalOptions + commands.flatMap(\.options)).filter { $0.value != nil }.map(\.name))

    /// Parses the arguments after the program name.
    ///
    /// Global options (`--config`, `--store`, `--store-key-file`, `--store-previous-key-file`,
    /// `--store-plaintext`) may come before or after the command; `--` ends
    /// options. `--help` anywhere asks for the command's help.
    /// - Throws: ``UsageError`` for anything that cannot be run.
    public static func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        var configPath: String?
        var storePath: String?
        var storeKeyPath: String?
        var previousStoreKeyPaths: [String] = []
        var storePlaintext = false
        var commandName: String?
        var positionals: [String] = []
        var options: [(name: String, value: String?)] = []
        var wantsHelp = false
        var wantsVersion = false

        var index = 0
        var optionsEnded = false
        // How many positionals came before `--`: what follows it is `exec`'s command line.
        var positionalsBeforeEnd: Int?
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                if commandName == nil { commandName = argument } else { positionals.append(argument) }
                continue
            }
            if argument == "--" {
                optionsEnded = true
                positionalsBeforeEnd = positionals.count
                continue
            }
            var name = argument
            var value: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            if valueOptions.contains(name), value == nil {
                guard index < arguments.count else { throw UsageError("\(name) needs a value", command: commandName) }
                value = arguments[index]
                index += 1
            } else if !valueOptions.contains(name), value != nil {
                throw UsageError("\(name) takes no value", command: commandName)
            }
            switch name {
            case "--help", "-h": wantsHelp = true
            case "--version", "-V": wantsVersion = true
            case "--config":
                guard let value, !value.isEmpty else { throw UsageError("--config needs a file", command: commandName) }
                configPath = value
            case "--store":
                guard let value, !value.isEmpty else { throw UsageError("--store needs a directory or a postgresql:// URI", command: commandName) }
                storePath = value
            case "--store-key-file":
                guard let value, !value.isEmpty else { throw UsageError("--store-key-file needs a file", command: commandName) }
                storeKeyPath = value
            case "--store-previous-key-file":
                guard let value, !value.isEmpty else { throw UsageError("--store-previous-key-file needs a file", command: commandName) }
                previousStoreKeyPaths.append(value)
            case "--store-plaintext": storePlaintext = true
            default: options.append((name, value))
            }
        }

        func invocation(_ command: Command) -> Invocation {
            Invocation(configPath: configPath, storePath: storePath, storeKeyPath: storeKeyPath,
                       previousStoreKeyPaths: previousStoreKeyPaths, storePlaintext: storePlaintext, command: command)
        }
        if wantsHelp {
            if let commandName, commandName != "help", !commandNames.contains(commandName) {
                throw UsageError("unknown command '\(commandName)'")
            }
            return invocation(.help(topic: commandName == "help" ? positionals.first : commandName))
        }
        if wantsVersion { return invocation(.version) }
        guard let commandName else { throw UsageError("no command given") }
        guard commandNames.contains(commandName) else {
            throw UsageError("unknown command '\(commandName)'")
        }

        // The command's entry in the table says which options it takes and how many positionals.
        let spec = command(commandName)
        for option in options where !(spec?.optionNames.contains(option.name) ?? false) {
            throw UsageError("unknown option '\(option.name)' for '\(commandName)'", command: commandName)
        }
        // `exec`: the words after `--` are the command it runs, never read as options or counted.
        var commandLine: [String] = []
        if commandName == "exec" {
            guard let end = positionalsBeforeEnd else {
                throw UsageError("put -- before the command to run: authflow exec PROVIDER -- COMMAND [ARGUMENT]...", command: commandName)
            }
            commandLine = Array(positionals[end...])
            positionals = Array(positionals[..<end])
            guard !commandLine.isEmpty else { throw UsageError("missing COMMAND after --", command: commandName) }
        }
        let range = spec?.positionals ?? 0...0
        if positionals.count < range.lowerBound {
            throw UsageError("missing \(spec?.positionalNames[positionals.count] ?? "argument")", command: commandName)
        }
        if positionals.count > range.upperBound {
            throw UsageError("unexpected argument '\(positionals[range.upperBound])'", command: commandName)
        }
        func flag(_ name: String) -> Bool { options.contains { $0.name == name } }

        switch commandName {
        case "providers":
            return invocation(.providers(json: flag("--json")))
        case "login":
            let methods = LoginOptions.Method.allCases.filter { flag("--\($0.rawValue)") }
            guard methods.count <= 1 else {
                throw UsageError("choose one of " + LoginOptions.Method.allCases.map { "--\($0.rawValue)" }.joined(separator: ", "),
                                 command: commandName)
            }
            let ciba = try CIBALoginOptions.parse(options)
            var method = methods.first
            if !ciba.isEmpty {
                guard method == nil || method == .ciba else {
                    throw UsageError("--login-hint, --binding-message and the other CIBA options are for --ciba", command: commandName)
                }
                method = .ciba
            }
            var scopes: [String] = []
            for option in options where option.name == "--scope" {
                let split = (option.value ?? "").split(separator: " ").map(String.init)
                guard !split.isEmpty else { throw UsageError("--scope needs a scope", command: commandName) }
                // The same rule the catalog applies to its scopes (RFC 6749 §3.3).
                for scope in split where !Provider.isValidScopeToken(scope) {
                    throw UsageError("--scope '\(DisplayText.escape(scope))' is not a valid scope token (RFC 6749 §3.3 allows "
                        + "printable ASCII except space, '\"' and '\\')", command: commandName)
                }
                scopes += split
            }
            var timeout = LoginOptions.defaultTimeout
            if let text = options.last(where: { $0.name == "--timeout" })?.value {
                guard let seconds = Int(text), seconds > 0 else {
                    throw UsageError("--timeout needs a positive number of seconds, not '\(text)'", command: commandName)
                }
                timeout = seconds
            }
            guard !(flag("--qr") && flag("--no-qr")) else { throw UsageError("choose one of --qr, --no-qr", command: commandName) }
            // --listen-port is the browser login's: it asks for that grant, and no other.
            var listenPort: Int?
            if let text = options.last(where: { $0.name == "--listen-port" })?.value {
                guard let port = Int(text), (1...65535).contains(port) else {
                    throw UsageError("--listen-port needs a port from 1 to 65535, not '\(DisplayText.escape(text))'", command: commandName)
                }
                guard method == nil || method == .browser else {
                    throw UsageError("--listen-port is for the browser login (the loopback port its redirect comes back to); "
                        + "drop --\(method?.rawValue ?? "")", command: commandName)
                }
                method = .browser
                listenPort = port
            }
            var login = LoginOptions(provider: positionals[0], method: method, scopes: scopes,
                                     json: flag("--json"), timeout: timeout,
                                     qr: flag("--qr") ? true : flag("--no-qr") ? false : nil, ciba: ciba,
                                     listenPort: listenPort)
            try ResourceLogin.parse(options, into: &login)
            return invocation(.login(login))
        case "token":
            if flag("--dpop-proof") {
                guard !flag("--json"), !flag("--header") else { throw UsageError("--dpop-proof prints header lines; drop --json and --header", command: commandName) }
                guard positionals.count == 3 else { throw UsageError("--dpop-proof needs PROVIDER METHOD URL", command: commandName) }
                try DPoPProofCommand.check(method: positionals[1], url: positionals[2])
                return invocation(.tokenProof(provider: positionals[0], method: positionals[1], url: positionals[2]))
            }
            if positionals.count > 1 { throw UsageError("unexpected argument '\(positionals[1])'", command: commandName) }
            if flag("--header") {
                guard !flag("--json") else { throw UsageError("choose one of --json, --header", command: commandName) }
                return invocation(.tokenHeader(provider: positionals[0]))
            }
            return invocation(.token(provider: positionals[0], json: flag("--json")))
        case "git-credential":
            return invocation(.gitCredential(provider: positionals[0], action: positionals[1]))
        case "kube-credential":
            return invocation(.kubeCredential(provider: positionals[0]))
        case "exec":
            return invocation(.exec(try ExecOptions.parse(positionals, variable: options.last { $0.name == "--env" }?.value,
                                                          command: commandLine)))
        case "docker-credential":
            return invocation(.dockerCredential(provider: positionals[0], action: positionals[1]))
        case "completion":
            if flag("--provider-ids") {
                guard positionals.isEmpty else { throw UsageError("--provider-ids takes no SHELL", command: commandName) }
                return invocation(.completion(shell: nil))
            }
            guard let shell = positionals.first else { throw UsageError("missing SHELL", command: commandName) }
            guard Completion.Shell(rawValue: shell) != nil else {
                throw UsageError("no completion for '\(DisplayText.escape(shell))'; choose bash, zsh or fish", command: commandName)
            }
            return invocation(.completion(shell: shell))
        case "man":
            return invocation(.manPage)
        case "status":
            return invocation(.status(provider: positionals.first, json: flag("--json")))
        case "userinfo":
            return invocation(.userinfo(provider: positionals[0]))
        case "logout":
            if flag("--unregister") { return invocation(.logoutUnregister(provider: positionals[0], localOnly: flag("--local"))) }
            return invocation(.logout(provider: positionals[0], localOnly: flag("--local")))
        case "request":
            return invocation(.request(try RequestOptions.parse(provider: positionals[0], url: positionals[1], options)))
        case "discover":
            return invocation(.discover(DiscoverOptions(
                issuer: positionals[0], id: options.last { $0.name == "--id" }?.value,
                clientID: options.last { $0.name == "--client-id" }?.value, json: flag("--json"))))
        case "demo":
            return invocation(.demo)
        case "agent":
            return invocation(.agent(try AgentOptions.parse(options)))
        default:  // help
            if let topic = positionals.first, !commandNames.contains(topic) {
                throw UsageError("unknown command '\(topic)'", command: "help")
            }
            return invocation(.help(topic: positionals.first))
        }
    }
}
