public import OAuthFlow

/// What `authflow agent` is told on its command line (the CLI parses it; Documentation/Agent.md).
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

    /// `--socket PATH`; nil: the default (see ``AgentService/defaultSocketPath(environment:)``).
    public var socketPath: String?
    /// `--sink` values, in order.
    public var sinks: [Sink]
    /// `--notify-command COMMAND`: run through `/bin/sh -c` when a person must approve a login.
    public var notifyCommand: String?
    /// `--metrics-file FILE`: Prometheus text, rewritten atomically.
    public var metricsFile: String?
    /// `--client-timeout SECONDS`: how long a client may take to send its line or read the answer.
    public var clientTimeout: Int
    /// `--ciba-notification-listen ADDRESS:PORT`: where the agent receives the pings of CIBA
    /// ping-mode providers (Documentation/Agent.md, "Re-authorization"); nil: it receives none.
    public var cibaNotificationListen: ListenAddress?

    /// An IP address and a TCP port to listen on.
    public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
        /// An IPv4 address in dotted form, or an IPv6 address without brackets.
        public var host: String
        /// The port; 0 lets the system choose one.
        public var port: UInt16

        /// Creates a listening address.
        public init(host: String, port: UInt16) {
            self.host = host
            self.port = port
        }

        /// `127.0.0.1:8080` or `[::1]:8080`.
        public var description: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
    }

    /// The default ``clientTimeout``: 5 seconds.
    public static let defaultClientTimeout = 5

    /// Creates agent options.
    public init(socketPath: String? = nil, sinks: [Sink] = [], notifyCommand: String? = nil, metricsFile: String? = nil,
                clientTimeout: Int = AgentOptions.defaultClientTimeout, cibaNotificationListen: ListenAddress? = nil) {
        self.socketPath = socketPath
        self.sinks = sinks
        self.notifyCommand = notifyCommand
        self.metricsFile = metricsFile
        self.clientTimeout = clientTimeout
        self.cibaNotificationListen = cibaNotificationListen
    }
}
