import Foundation
import TestSupport

/// What an agent's `--notify-command` wrote to `path` (`env | grep '^AUTHFLOW_' > path`): its
/// variables, read again every 20 ms until `key` is among them, at most 1500 times (30 s); without
/// `key` when it never came.
func notifiedVariables(_ path: String, until key: String) async throws -> [String: String] {
    var variables: [String: String] = [:]
    for _ in 0..<1500 where variables[key] == nil {
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            for line in text.split(separator: "\n") {
                let pair = line.split(separator: "=", maxSplits: 1).map(String.init)
                if pair.count == 2 { variables[pair[0]] = pair[1] }
            }
        }
        if variables[key] == nil { try await Task.sleep(for: .milliseconds(20)) }
    }
    return variables
}

/// `authflow agent` on `catalog`, its store and socket in `directory`, its `--notify-command`
/// writing the `AUTHFLOW_` variables to ``notified`` (whole, through a rename), with `arguments`
/// after the agent's own and `variables` added to its environment.
struct NotifyingAgent {
    let process: RunningBinary
    let socket: String
    let notified: String
    /// What the agent and the `authflow` commands of a test run with.
    let environment: [String: String]

    init(directory: URL, catalog: URL, arguments: [String] = [], variables: [String: String] = [:]) throws {
        socket = directory.appendingPathComponent("agent.sock").path
        notified = directory.appendingPathComponent("notified").path
        environment = ["PATH": "/usr/bin:/bin", "HOME": directory.path, "NO_COLOR": "1", "no_proxy": "127.0.0.1,localhost"]
        process = try RunningBinary(
            ["--config", catalog.path, "--store", directory.appendingPathComponent("store").path, "agent", "--socket", socket,
             "--notify-command", "env | grep '^AUTHFLOW_' > \(notified).tmp && mv \(notified).tmp \(notified)"] + arguments,
            environment: environment.merging(variables) { _, new in new })
    }

    /// The environment of an `authflow token` that asks this agent.
    var clientEnvironment: [String: String] { environment.merging(["AUTHFLOW_AGENT": socket]) { _, new in new } }
    var pid: Int32 { process.pid }
    var stderr: String { process.stderr }
    func wait(timeout: Duration) async -> Int32 { await process.wait(timeout: timeout) }
}
