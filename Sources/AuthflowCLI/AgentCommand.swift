#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AuthflowAgent
import Glibc
import OAuthFlow

// `authflow agent` (the agent itself is the AuthflowAgent target; Documentation/Agent.md) and the
// agent path of `authflow token`.
extension Context {
    /// `authflow agent`: serves tokens on a Unix socket and keeps them fresh until SIGTERM.
    func agent(_ options: AgentOptions) async throws(CLIError) -> ExitCode {
        // The store key from systemd's `LoadCredential=`, when no key file is named.
        var credential: EntryEncryption?
        if invocation.storeKeyPath == nil, (environment["AUTHFLOW_STORE_KEY_FILE"] ?? "").isEmpty {
            do { credential = try Systemd.storeKeyCredential(environment: environment) } catch { throw CLIError(error) }
        }
        // A database store listens (LISTEN): a logout on another machine drops the token here at once.
        let store = try store(encryption: credential, listening: true)
        let context = self
        let host = AgentHost(
            environment: environment, store: store, transport: transport, clock: services.clock, now: services.now,
            catalog: { () throws(AgentError) -> AgentCatalog in
                do throws(CLIError) {
                    return AgentCatalog(providers: try context.catalog(), file: try context.catalogFile())
                } catch {
                    throw AgentError(error)
                }
            },
            flowOptions: { providers, log in context.flowOptions(log: log, providers: providers) },
            explain: Context.explain, standardError: { context.err.write($0) },
            advice: { error, provider in ErrorAdvice.line(for: error, of: provider, catalog: try? context.configURL().path) })
        do throws(AgentError) {
            try await AgentService(host: host, options: options).run()
        } catch {
            throw CLIError(error)
        }
        return .success
    }
}

extension CLIError {
    /// The agent's failure as the CLI reports it.
    init(_ error: AgentError) {
        switch error {
        case .usage(let message): self = .usage(UsageError(message, command: "agent"))
        case .data(let message): self = .data(message)
        case .oauth(let error, let provider): self = .oauth(error, provider: provider)
        }
    }
}

extension AgentError {
    /// A failure of the CLI's catalog loading, as the agent passes it back.
    init(_ error: CLIError) {
        switch error {
        case .usage(let usage): self = .usage(usage.message)
        case .data(let message): self = .data(message)
        case .oauth(let error, let provider): self = .oauth(error, provider: provider)
        }
    }
}

extension Authflow {
    /// Answers `authflow token PROVIDER [--json]` from a running `authflow agent`.
    ///
    /// The agent is the one ``agentToken(_:invocation:environment:)`` asks. Blocks for at most 30 s
    /// on the socket.
    /// - Returns: nil, having printed nothing, when no agent answers (no socket, nobody listening,
    ///   an answer that is not the protocol's): the store answers then. Otherwise the status after
    ///   printing the token, or the agent's error on stderr with the status ``ErrorAdvice`` gives
    ///   the recovery the agent answers (77 refused or a login is needed, 75 try later, 65
    ///   configuration or a refused credential), 64 for an unknown provider.
    public static func tokenFromAgent(_ invocation: Invocation, output: Output, environment: [String: String]) -> ExitCode? {
        guard case .token(let id, let json) = invocation.command else { return nil }
        switch agentToken(id, invocation: invocation, environment: environment) {
        case nil:
            return nil
        case .refused(let status, let message)?:
            let style = Style(terminal: output.stderrIsTerminal, environment: environment)
            output.stderr.write("\(style.red("authflow: error:")) \(message)\n")
            return status
        case .token(let token)?:
            if json {
                output.stdout.write(JSONValue.line([
                    ("access_token", .string(token.token.reveal())), ("token_type", .string(token.tokenType)),
                    ("expires_at", .date(token.expiresAt)), ("scopes", .strings(token.scopes)),
                ]))
            } else {
                output.stdout.write(token.token.reveal() + "\n")
            }
            return .success
        }
    }

    /// What a running agent answered for one provider's token.
    enum AgentTokenAnswer {
        /// The token, header-safe.
        case token(HelperToken)
        /// The agent refused or failed: the status to exit with, and the line to print after
        /// `authflow: error:` (escaped; it names the socket and the agent's error code).
        case refused(ExitCode, message: String)
    }

    /// Asks a running `authflow agent` for `id`'s token, as `authflow token` does first.
    ///
    /// The agent is the socket `AUTHFLOW_AGENT` names, else the default socket
    /// (``AgentService/defaultSocketPath(environment:)``) when it exists and neither a `--config`, `--store` or
    /// store key option nor `AUTHFLOW_CONFIG`, `AUTHFLOW_STORE` or `AUTHFLOW_STORE_KEY_FILE` was
    /// given (those ask for a particular catalog or store). `AUTHFLOW_AGENT=off` turns it off.
    /// Blocks for at most 30 s on the socket: call it before the concurrency runtime starts.
    /// - Returns: nil when no agent answers (no socket, nobody listening, an answer that is not the
    ///   protocol's, a token a header cannot carry); the store answers then. Otherwise the token, or
    ///   the refusal with its status: 77 refused or a login is needed, 75 try later, 65
    ///   configuration, 64 unknown provider.
    static func agentToken(_ id: String, invocation: Invocation, environment: [String: String]) -> AgentTokenAnswer? {
        let named = environment["AUTHFLOW_AGENT"] ?? ""
        if named == "off" || named == "0" { return nil }
        let path: String
        if !named.isEmpty {
            path = named
        } else {
            guard invocation.configPath == nil, invocation.storePath == nil, invocation.storeKeyPath == nil,
                  invocation.previousStoreKeyPaths.isEmpty, !invocation.storePlaintext,
                  ["AUTHFLOW_CONFIG", "AUTHFLOW_STORE", "AUTHFLOW_STORE_KEY_FILE"].allSatisfy({ (environment[$0] ?? "").isEmpty }),
                  let defaultPath = AgentService.defaultSocketPath(environment: environment), access(defaultPath, F_OK) == 0
            else { return nil }
            path = defaultPath
        }
        guard let answer = AgentClient.ask(path, request: JSONValue.line([("v", .int(AgentProtocol.version)), ("token", .string(id))])) else { return nil }
        if let token = answer["access_token"]?.stringValue {
            guard Context.isHeaderSafe(Secret(token)) else { return nil }
            return .token(HelperToken(
                token: Secret(token), tokenType: answer["token_type"]?.stringValue ?? "Bearer",
                expiresAt: answer["expires_at"]?.integerValue.map { Date(timeIntervalSince1970: Double($0)) },
                scopes: answer["scopes"]?.arrayValue?.compactMap(\.stringValue) ?? []))
        }
        guard let code = answer["error"]?.stringValue else { return nil }
        let message = "agent \(escaped(path)): \(escaped(answer["message"]?.stringValue ?? code)) [\(escaped(code))]"
        if code == "unknown_provider" { return .refused(.usage, message: message) }
        // The status of the CLI's own advice table for the recovery the agent answers.
        guard let recovery = answer["recovery"]?.stringValue.flatMap(AgentProtocol.recovery(named:)) else {
            return .refused(.denied, message: message)
        }
        return .refused(ErrorAdvice.status(for: recovery), message: message)
    }
}

extension AgentOptions {
    /// The options `agent` takes that need a value.
    static let valueOptions: Set<String> = ["--socket", "--sink", "--notify-command", "--metrics-file", "--client-timeout",
                                                  "--ciba-notification-listen"]

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
            case "--ciba-notification-listen": result.cibaNotificationListen = try parseListenAddress(value)
            default:
                throw UsageError("unknown option '\(option.name)' for 'agent'", command: "agent")
            }
        }
        return result
    }

    /// `ADDRESS:PORT`: an IPv4 address, a bracketed IPv6 address or `localhost` (127.0.0.1), and a
    /// port from 0 (any free one) to 65535.
    static func parseListenAddress(_ text: String) throws(UsageError) -> ListenAddress {
        func fail(_ reason: String) -> UsageError {
            UsageError("--ciba-notification-listen '\(DisplayText.escape(String(text.prefix(200))))': \(reason)", command: "agent")
        }
        guard let colon = text.lastIndex(of: ":") else { throw fail("expected ADDRESS:PORT, such as 127.0.0.1:8443") }
        var host = String(text[..<colon])
        guard let port = UInt16(text[text.index(after: colon)...]) else { throw fail("the port must be a number from 0 to 65535") }
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            var address = in6_addr()
            guard inet_pton(AF_INET6, host, &address) == 1 else { throw fail("'\(DisplayText.escape(host))' is not an IPv6 address") }
        } else if host == "localhost" {
            host = "127.0.0.1"
        } else {
            var address = in_addr()
            guard inet_pton(AF_INET, host, &address) == 1 else {
                throw fail("the address must be an IPv4 address, a bracketed IPv6 address or localhost")
            }
        }
        return ListenAddress(host: host, port: port)
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
