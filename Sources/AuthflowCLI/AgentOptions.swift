public import OAuthFlow

/// The arguments of `authflow agent`.
public struct AgentOptions: Sendable, Equatable {
    /// `--sink PROVIDER=FILE[,mode=0640][,owner=USER:GROUP][,format=raw|json|header]`, parsed.
    public struct Sink: Sendable, Equatable {
        /// The provider whose token the file holds.
        public var provider: String
        /// The file's absolute path.
        public var path: String
        /// The file's mode (default 0600; never any permission for others).
        public var mode: UInt32
        /// The owner's user name or number, when given.
        public var owner: String?
        /// The group's name or number, when given.
        public var group: String?
        /// What the file holds.
        public var format: TokenSink.Format

        /// Creates a sink description.
        public init(provider: String, path: String, mode: UInt32 = 0o600, owner: String? = nil, group: String? = nil,
                    format: TokenSink.Format = .raw) {
            self.provider = provider
            self.path = path
            self.mode = mode
            self.owner = owner
            self.group = group
            self.format = format
        }
    }

    /// `--socket PATH`; nil: the default (see ``Authflow/defaultAgentSocket(environment:)``).
    public var socketPath: String?
    /// `--sink` values, in order.
    public var sinks: [Sink]
    /// `--notify-command COMMAND`: run through `/bin/sh -c` when a person must approve a login.
    public var notifyCommand: String?
    /// `--metrics-file FILE`: Prometheus text, rewritten atomically.
    public var metricsFile: String?
    /// `--client-timeout SECONDS`: how long a client may take to send its line or read the answer.
    public var clientTimeout: Int

    /// The default ``clientTimeout``: 5 seconds.
    public static let defaultClientTimeout = 5

    /// Creates agent options.
    public init(socketPath: String? = nil, sinks: [Sink] = [], notifyCommand: String? = nil, metricsFile: String? = nil,
                clientTimeout: Int = AgentOptions.defaultClientTimeout) {
        self.socketPath = socketPath
        self.sinks = sinks
        self.notifyCommand = notifyCommand
        self.metricsFile = metricsFile
        self.clientTimeout = clientTimeout
    }

    /// The options `agent` takes that need a value.
    static let valueOptions: Set<String> = ["--socket", "--sink", "--notify-command", "--metrics-file", "--client-timeout"]

    /// Builds the options from the parsed `--name value` pairs.
    static func parse(_ options: [(name: String, value: String?)]) throws(UsageError) -> AgentOptions {
        var result = AgentOptions()
        for option in options {
            let value = option.value ?? ""
            switch option.name {
            case "--socket":
                guard value.hasPrefix("/") else { throw UsageError("--socket needs an absolute path", command: "agent") }
                guard value.utf8.count < 108 else { throw UsageError("--socket: the path is longer than a Unix socket address can hold (107 bytes)", command: "agent") }
                result.socketPath = value
            case "--sink": result.sinks.append(try parseSink(value))
            case "--notify-command":
                guard !value.isEmpty else { throw UsageError("--notify-command needs a command", command: "agent") }
                result.notifyCommand = value
            case "--metrics-file":
                guard value.hasPrefix("/") else { throw UsageError("--metrics-file needs an absolute path", command: "agent") }
                result.metricsFile = value
            case "--client-timeout":
                guard let seconds = Int(value), (1...3600).contains(seconds) else {
                    throw UsageError("--client-timeout needs a number of seconds from 1 to 3600, not '\(DisplayText.escape(value))'", command: "agent")
                }
                result.clientTimeout = seconds
            default:
                throw UsageError("unknown option '\(option.name)' for 'agent'", command: "agent")
            }
        }
        return result
    }

    /// `PROVIDER=FILE[,mode=0640][,owner=USER:GROUP][,format=raw|json|header]`.
    static func parseSink(_ text: String) throws(UsageError) -> Sink {
        func fail(_ reason: String) -> UsageError {
            UsageError("--sink '\(DisplayText.escape(String(text.prefix(200))))': \(reason)", command: "agent")
        }
        guard let equals = text.firstIndex(of: "=") else { throw fail("expected PROVIDER=FILE[,mode=0640][,owner=USER:GROUP][,format=raw|json|header]") }
        let provider = String(text[..<equals])
        let parts = text[text.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard isProviderID(provider) else { throw fail("'\(DisplayText.escape(provider))' is not a provider id") }
        guard let path = parts.first, path.hasPrefix("/"), !path.hasSuffix("/") else { throw fail("FILE must be an absolute file path") }
        var sink = Sink(provider: provider, path: path)
        for part in parts.dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { throw fail("'\(DisplayText.escape(part))' is not KEY=VALUE") }
            switch pair[0] {
            case "mode":
                guard let mode = UInt32(pair[1], radix: 8), mode & ~0o777 == 0 else { throw fail("mode must be octal, such as 0640") }
                guard mode & 0o007 == 0 else { throw fail("a token file may not be accessible by others (mode \(pair[1]))") }
                sink.mode = mode
            case "owner":
                let names = pair[1].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                sink.owner = names[0].isEmpty ? nil : names[0]
                sink.group = names.count > 1 && !names[1].isEmpty ? names[1] : nil
                guard sink.owner != nil || sink.group != nil else { throw fail("owner needs USER, USER:GROUP or :GROUP") }
            case "format":
                guard let format = TokenSink.Format(rawValue: pair[1]) else { throw fail("format must be raw, json or header") }
                sink.format = format
            default:
                throw fail("unknown key '\(DisplayText.escape(pair[0]))' (mode, owner, format)")
            }
        }
        return sink
    }
}

/// The catalog's rule for ids: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
func isProviderID(_ id: String) -> Bool {
    guard (1...128).contains(id.utf8.count), !id.hasPrefix(".") else { return false }
    return id.utf8.allSatisfy(isProviderIDByte)
}

/// True for a byte a provider id may hold: an ASCII letter or digit, `.`, `_` or `-`.
func isProviderIDByte(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
        || byte == UInt8(ascii: "-")
}
