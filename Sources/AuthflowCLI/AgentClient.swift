#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow

extension Authflow {
    /// The agent's socket when `--socket` is not given: `$XDG_RUNTIME_DIR/authflow/agent.sock`,
    /// else `/run/authflow/agent.sock` for root; nil for another user without `XDG_RUNTIME_DIR`.
    public static func defaultAgentSocket(environment: [String: String]) -> String? {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return runtime + "/authflow/agent.sock" }
        return geteuid() == 0 ? "/run/authflow/agent.sock" : nil
    }

    /// Answers `authflow token PROVIDER [--json]` from a running `authflow agent`.
    ///
    /// The agent is the socket `AUTHFLOW_AGENT` names, else the default socket
    /// (``defaultAgentSocket(environment:)``) when it exists and neither a `--config`, `--store` or
    /// store key option nor `AUTHFLOW_CONFIG`, `AUTHFLOW_STORE` or `AUTHFLOW_STORE_KEY_FILE` was
    /// given (those ask for a particular catalog or store). `AUTHFLOW_AGENT=off` turns it off.
    /// Blocks for at most 30 s on the socket.
    /// - Returns: nil, having printed nothing, when no agent answers (no socket, nobody listening,
    ///   an answer that is not the protocol's): the store answers then. Otherwise the status after
    ///   printing the token, or the agent's error on stderr: 77 refused or a login is needed, 75
    ///   try later, 65 configuration, 64 unknown provider.
    public static func tokenFromAgent(_ invocation: Invocation, output: Output, environment: [String: String]) -> ExitCode? {
        guard case .token(let id, let json) = invocation.command else { return nil }
        let named = environment["AUTHFLOW_AGENT"] ?? ""
        if named == "off" || named == "0" { return nil }
        let path: String
        if !named.isEmpty {
            path = named
        } else {
            guard invocation.configPath == nil, invocation.storePath == nil, invocation.storeKeyPath == nil,
                  invocation.previousStoreKeyPaths.isEmpty, !invocation.storePlaintext,
                  ["AUTHFLOW_CONFIG", "AUTHFLOW_STORE", "AUTHFLOW_STORE_KEY_FILE"].allSatisfy({ (environment[$0] ?? "").isEmpty }),
                  let defaultPath = defaultAgentSocket(environment: environment), access(defaultPath, F_OK) == 0
            else { return nil }
            path = defaultPath
        }
        guard let answer = AgentClient.ask(path, request: JSONValue.line([("v", .int(AgentProtocol.version)), ("token", .string(id))])) else { return nil }
        if let token = answer["access_token"]?.stringValue {
            guard Context.isHeaderSafe(Secret(token)) else { return nil }
            if json {
                let expiry = answer["expires_at"]?.integerValue.map { Date(timeIntervalSince1970: Double($0)) }
                output.stdout.write(JSONValue.line([
                    ("access_token", .string(token)), ("token_type", .string(answer["token_type"]?.stringValue ?? "Bearer")),
                    ("expires_at", .date(expiry)), ("scopes", .strings(answer["scopes"]?.arrayValue?.compactMap(\.stringValue) ?? [])),
                ]))
            } else {
                output.stdout.write(token + "\n")
            }
            return .success
        }
        guard let code = answer["error"]?.stringValue else { return nil }
        let message = answer["message"]?.stringValue ?? code
        let style = Style(terminal: output.stderrIsTerminal, environment: environment)
        output.stderr.write("\(style.red("authflow: error:")) agent \(escaped(path)): \(escaped(message)) [\(escaped(code))]\n")
        switch (code, answer["recovery"]?.stringValue) {
        case ("unknown_provider", _): return .usage
        case (_, "retry_later"): return .temporaryFailure
        case (_, "fix_configuration"): return .dataError
        default: return .denied
        }
    }
}

/// A blocking client of the agent's socket, for `authflow token` before the concurrency runtime starts.
enum AgentClient {
    /// Sends `request` (one line) to the agent at `path` and reads one answer line.
    /// - Returns: the answer object; nil when nobody answers or the answer is not a JSON object.
    static func ask(_ path: String, request: String, timeout: Int = 30) -> JSONValue? {
        guard let fd = try? UnixSocket.connect(path) else { return nil }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd.raw, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd.raw, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { send(fd.raw, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            sent += count
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while !answer.contains(UInt8(ascii: "\n")), answer.count < 1 << 20 {
            let count = chunk.withUnsafeMutableBytes { recv(fd.raw, $0.baseAddress!, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            answer += chunk[0..<count]
        }
        guard let newline = answer.firstIndex(of: UInt8(ascii: "\n")),
              let value = try? JSONValue.parse(Data(answer[..<newline])), value.objectValue != nil
        else { return nil }
        return value
    }
}
