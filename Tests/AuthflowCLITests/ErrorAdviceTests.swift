@testable import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing
import TestSupport

/// The CLI's one table of error → exit status → advice (ErrorAdvice.swift): every row produced
/// through the real error path (a scripted provider, a store, a cancelled login), and the
/// documents that show the table checked against it in both directions.
@Suite("Error advice table", .timeLimit(.minutes(2)))
struct ErrorAdviceTests {
    /// A clock whose sleeps last until the task is cancelled (at most 60 s); counts the sleepers.
    final class HeldClock: Clock, Sendable {
        typealias Instant = ContinuousClock.Instant
        var now: Instant { .now }
        var minimumResolution: Duration { .zero }
        private let waiting = Mutex(0)
        var sleepers: Int { waiting.withLock { $0 } }
        func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
            waiting.withLock { $0 += 1 }
            defer { waiting.withLock { $0 -= 1 } }
            try await Task.sleep(for: .seconds(60))
        }
    }

    /// The lines stderr holds after the `authflow: error:` line (the advice, when there is one).
    static func advice(_ stderr: String) -> [String] {
        let lines = stderr.split(separator: "\n").map(String.init)
        guard let index = lines.firstIndex(where: { $0.hasPrefix("authflow: error:") }) else { return [] }
        return Array(lines[(index + 1)...])
    }

    /// Runs the scenario of row `name` through `authflow`; returns the run and the advice line expected.
    static func scenario(_ name: String, _ h: Harness) async throws -> (run: (status: ExitCode, stdout: String, stderr: String), advice: String?) {
        let config = h.directory.config.path
        let device = catalogEntry(id: "gh", base: h.base)
        let service = catalogEntry(id: "svc", base: h.base, device: false, secret: "s3cret")
        switch name {
        case "database-busy":
            try h.catalog(device)
            return (await h.run(["token", "gh", "--store-plaintext"], environment: ["AUTHFLOW_STORE": "postgresql://127.0.0.1:9/none"]),
                    "This is temporary; try again later.")
        case "interrupted":
            try h.catalog(device)
            h.mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
            h.mock.script(.token, [.oauthError("authorization_pending")])
            let clock = HeldClock()
            let login = Task { await h.run(["login", "gh", "--device"], services: h.services(clock: clock)) }
            for _ in 0..<3000 where clock.sleepers == 0 { try await Task.sleep(for: .milliseconds(10)) }  // at most 30 s
            #expect(clock.sleepers == 1, "the login never waited to poll")
            login.cancel()
            let run = await login.value
            #expect(run.stderr.hasSuffix("authflow: interrupted; nothing was stored.\n"), "\(run.stderr)")
            return (run, nil)
        case "unreachable":
            try h.catalog(service)
            return (await h.run(["token", "svc"], services: h.services(transport: UnreachableTransport())), "This is temporary; try again later.")
        case "client-refused":
            // A person's grant: the refresh of a device login, refused for the client's secret.
            try h.catalog(catalogEntry(id: "gh", base: h.base, secret: "s3cret"))
            #expect(await h.deviceLogin("gh", access: "at-1", refresh: "rt-1") == .success)
            h.clock.advance(by: .seconds(3600))
            h.mock.script(.token, [.oauthError("invalid_client", status: 401)])
            return (await h.run(["token", "gh"]), "The provider refused the client secret of client ID client-gh: check it against the catalog at "
                        + "\(config) and the provider's settings; logging in again cannot fix this.")
        case "credential-refused":
            let file = h.directory.url.appendingPathComponent("subject-token")
            try Data("subject-token-value".utf8).write(to: file)
            try h.catalog(#"{"id": "wl", "tokenURL": "\#(h.base)/token", "clientID": "wl-client", "subjectTokenFile": "\#(file.path)"}"#)
            h.mock.script(.token, [.oauthError("invalid_grant", description: "subject token expired")])
            return (await h.run(["token", "wl"]), "The provider refused the subject token in \(file.path): check that it is still valid there "
                        + "(not deleted, disabled, expired or replaced); logging in again cannot fix this.")
        case "step-up":
            // A resource asks for more than the token carries (RFC 6750 §3.1): `request` names what and the login that gets it.
            try h.catalog(device)
            #expect(await h.deviceLogin("gh", access: "at-1", refresh: "rt-1") == .success)
            h.mock.script(path: "/api/admin", [MockResponse(status: 403, headers: ["WWW-Authenticate": #"Bearer error="insufficient_scope", scope="read admin""#])])
            return (await h.run(["request", "gh", "\(h.base)/api/admin"]), "Log in again with what it asked for: authflow login gh --browser --scope 'read admin'")
        case "login-needed":
            try h.catalog(device)
            #expect(await h.deviceLogin("gh", access: "at-1", refresh: "rt-1") == .success)
            h.clock.advance(by: .seconds(3600))
            h.mock.script(.token, [.oauthError("invalid_grant")])
            return (await h.run(["token", "gh"]), "Log in again: authflow login gh")
        case "temporary":
            try h.catalog(service)
            h.mock.script(.token, [.oauthError("temporarily_unavailable", status: 503)])
            return (await h.run(["token", "svc"]), "This is temporary; try again later.")
        case "storage":
            try h.catalog(device)
            try FileManager.default.createDirectory(at: h.directory.store, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            return (await h.run(["token", "gh"]), nil)
        case "configuration":
            try h.catalog(service)
            h.mock.script(.token, [.oauthError("invalid_scope")])
            return (await h.run(["token", "svc"]), "Check the catalog at \(config).")
        case "denied":
            try h.catalog(device)
            h.mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
            h.mock.script(.token, [.oauthError("access_denied")])
            return (await h.run(["login", "gh", "--device"]), nil)
        default:
            Issue.record("no scenario for row \(name)")
            return ((.failure, "", ""), nil)
        }
    }

    @Test("each row: its exit status and advice line, produced through the real error path", arguments: ErrorAdvice.rows.map(\.name))
    func row(name: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let row = try #require(ErrorAdvice.rows.first { $0.name == name })
        let (run, advice) = try await Self.scenario(name, h)
        #expect(run.status == row.status, "\(name): \(run.stderr)")
        #expect(run.stdout.isEmpty || name == "denied" || name == "interrupted", "\(run.stdout)")
        if name != "interrupted" {
            #expect(run.stderr.contains("authflow: error:"), "\(run.stderr)")
            #expect(Self.advice(run.stderr) == (advice.map { [$0] } ?? []), "\(name): \(run.stderr)")
        }
        #expect(run.stderr.contains("authflow login") == (advice?.contains("authflow login") ?? false), "\(name): \(run.stderr)")
    }

    @Test("the table's statuses: 65 for a refused credential, 77 for a login a person can do, one row per recovery at the end")
    func statuses() {
        let statuses = Dictionary(uniqueKeysWithValues: ErrorAdvice.rows.map { ($0.name, $0.status.rawValue) })
        #expect(statuses == ["database-busy": 75, "interrupted": 130, "unreachable": 69, "client-refused": 65, "credential-refused": 65,
                             "step-up": 77, "login-needed": 77, "temporary": 75, "storage": 65, "configuration": 65, "denied": 77])
        // Every error has a recovery, and the rows for the four recoveries take everything, so one always matches.
        for error in [OAuthError(.transport), OAuthError(.accessDenied), OAuthError(.crypto), OAuthError(.httpStatus, httpStatus: 418)] {
            #expect(ErrorAdvice.rows.contains { $0.matches(error, ErrorAdvice.Subject()) })
        }
    }

    /// The lines of `file`'s section that starts with `heading`, up to the next `## ` heading.
    static func section(_ file: String, _ heading: String) throws -> [String] {
        let text = try ReadmeTests.text("Documentation/\(file)")
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: heading), "\(file) has no \(heading)")
        let end = lines[(start + 1)...].firstIndex { $0.hasPrefix("## ") } ?? lines.endIndex
        return Array(lines[(start + 1)..<end])
    }

    @Test("Errors.md lists exactly the table's rows, in order; CLI.md's exit codes are every ExitCode, each naming exactly the rows that give it")
    func documents() throws {
        let errors = try Self.section("Errors.md", "## In `authflow`: exit status and advice")
        let header = try #require(errors.firstIndex(of: "| Row | When | Exit | Advice |"))
        let documented = errors[(header + 2)...].prefix { $0.hasPrefix("|") }
        let expected = ErrorAdvice.rows.map { "| `\($0.name)` | \($0.condition) | \($0.status.rawValue) | \($0.advice ?? "—") |" }
        #expect(Array(documented) == expected)

        let exits = try Self.section("CLI.md", "## Exit codes").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| Status") }
        var named: [Int32: Set<String>] = [:]
        for line in exits {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let status = try #require(Int32(cells[1]), "\(line)")
            named[status] = Set(cells[3].split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
        }
        #expect(Set(named.keys) == Set(ExitCode.allCases.map(\.rawValue)), "every ExitCode documented, nothing else")
        for code in ExitCode.allCases {
            #expect(named[code.rawValue] == Set(ErrorAdvice.rows.filter { $0.status == code }.map(\.name)), "status \(code.rawValue)")
        }
    }
}
