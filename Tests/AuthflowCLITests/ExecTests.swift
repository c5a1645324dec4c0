@testable import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import TestSupport
import Testing

/// `authflow exec`: the parser; in-process runs that record the image the process would be
/// replaced with; then the built binary replacing itself with a shell script that reports what it
/// got (its environment, its descriptors, its process id), traps SIGTERM and sets its exit status.
@Suite("authflow exec", .timeLimit(.minutes(3)))
struct ExecTests {
    // MARK: Parsing

    @Test("exec PROVIDER[=NAME]... [--env NAME] -- COMMAND: which token goes into which variable, and the command line untouched", arguments: [
        (["exec", "gh", "--", "env"], [("gh", "AUTHFLOW_TOKEN")], ["env"]),
        (["exec", "gh", "--env", "GH_TOKEN", "--", "gh", "api", "/user"], [("gh", "GH_TOKEN")], ["gh", "api", "/user"]),
        (["exec", "--env=GH_TOKEN", "gh", "--", "sh", "-c", "echo --help --config x"], [("gh", "GH_TOKEN")], ["sh", "-c", "echo --help --config x"]),
        (["exec", "gh=GH_TOKEN", "billing=_B1", "--", "deploy", "--", "-x"], [("gh", "GH_TOKEN"), ("billing", "_B1")], ["deploy", "--", "-x"]),
        (["exec", "gh", "gh=GITHUB_TOKEN", "--", "a"], [("gh", "AUTHFLOW_TOKEN"), ("gh", "GITHUB_TOKEN")], ["a"]),
        (["--config", "/c.json", "exec", "gh", "--", "--config", "x"], [("gh", "AUTHFLOW_TOKEN")], ["--config", "x"]),
    ] as [([String], [(String, String)], [String])])
    func parses(arguments: [String], bindings: [(String, String)], command: [String]) throws {
        let invocation = try Authflow.parse(arguments)
        #expect(invocation.command == .exec(ExecOptions(bindings: bindings.map { ExecOptions.Binding(provider: $0.0, variable: $0.1) },
                                                        command: command)))
    }

    @Test("bad exec lines are usage errors (64) that say what is wrong", arguments: [
        (["exec", "gh", "env"], "put -- before the command"),
        (["exec", "gh", "--"], "missing COMMAND after --"),
        (["exec", "--", "env"], "missing PROVIDER"),
        (["exec", "gh", "--env", "1X", "--", "env"], "is not a variable name"),
        (["exec", "gh", "--env", "A-B", "--", "env"], "is not a variable name"),
        (["exec", "gh=", "--", "env"], "is not PROVIDER or PROVIDER=NAME"),
        (["exec", "gh=X=Y", "--", "env"], "is not PROVIDER or PROVIDER=NAME"),
        (["exec", ".gh", "--", "env"], "is not PROVIDER or PROVIDER=NAME"),
        (["exec", "gh", "gl", "--", "env"], "AUTHFLOW_TOKEN would hold the tokens of both gh and gl"),
        (["exec", "gh=T", "gl=T", "--", "env"], "T would hold the tokens of both gh and gl"),
        (["exec", "gh=T", "--env", "U", "--", "env"], "--env names the variable of a PROVIDER given without =NAME"),
        (["exec", "a", "b=B", "c=C", "d=D", "e=E", "f=F", "g=G", "h=H", "i=I", "--", "env"], "unexpected argument 'i=I'"),
    ])
    func badUsage(arguments: [String], message: String) {
        #expect(throws: UsageError.self) { try Authflow.parse(arguments) }
        do {
            _ = try Authflow.parse(arguments)
        } catch {
            #expect(error.message.contains(message), "\(error.message)")
            #expect(error.command == "exec")
        }
    }

    @Test("COMMAND is found as execvp finds it: a path as given, else the first executable file on PATH")
    func locate() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let plain = directory.url.appendingPathComponent("plain").path
        try Data("data".utf8).write(to: URL(fileURLWithPath: plain))
        #expect(ProcessImage.locate("sh", searchPath: "/nonexistent:/usr/bin:/bin") == .found("/usr/bin/sh"))
        #expect(ProcessImage.locate("/bin/sh", searchPath: nil) == .found("/bin/sh"))
        #expect(ProcessImage.locate("no-such-command-authflow", searchPath: "/usr/bin:/bin") == .failed(ENOENT))
        #expect(ProcessImage.locate("plain", searchPath: directory.path) == .failed(EACCES), "found, but not executable")
        #expect(ProcessImage.locate(plain, searchPath: nil) == .failed(EACCES))
        #expect(ProcessImage.locate(directory.path, searchPath: nil) == .failed(EACCES), "a directory is no program")
        #expect(ProcessImage.locate("", searchPath: "/usr/bin") == .failed(ENOENT))
    }

    @Test("what exec puts back before execve: signals ignored or blocked since the start, and descriptors opened since; not what was so before")
    func restoresInheritedState() throws {
        // Two real-time signals nobody sends; SIGPIPE ignored first, as other tests set it, so the
        // restore never turns it back on for this process. No suspension point: one thread throughout.
        let (before, since): (Int32, Int32) = (40, 41)
        signal(SIGPIPE, SIG_IGN)
        signal(before, SIG_IGN)
        let openBefore = open("/dev/null", O_RDONLY)
        defer {
            signal(before, SIG_DFL)
            signal(since, SIG_DFL)
            close(openBefore)
        }
        // This thread's mask as it was, put back at the end: the runtime's threads block most
        // signals, so `since` is unblocked for the capture and blocked after it.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, since)
        var original = sigset_t()
        pthread_sigmask(SIG_UNBLOCK, &signals, &original)
        defer { pthread_sigmask(SIG_SETMASK, &original, nil) }
        let inherited = InheritedProcessState.capture()
        signal(since, SIG_IGN)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let openSince = open("/dev/null", O_RDONLY)
        defer { close(openSince) }

        inherited.restore()

        func disposition(_ number: Int32) -> Int {
            var action = sigaction()
            sigaction(number, nil, &action)
            return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
        }
        #expect(disposition(since) == unsafeBitCast(SIG_DFL, to: Int.self), "ignored since the start: back to its default")
        #expect(disposition(before) == unsafeBitCast(SIG_IGN, to: Int.self), "ignored before: stays ignored")
        var mask = sigset_t()
        pthread_sigmask(SIG_SETMASK, nil, &mask)
        #expect(sigismember(&mask, since) == 0, "blocked since the start: unblocked")
        #expect(fcntl(openSince, F_GETFD) & FD_CLOEXEC != 0, "opened since: closed by execve")
        #expect(fcntl(openBefore, F_GETFD) & FD_CLOEXEC == 0, "open before: the program's to keep")
    }

    // MARK: In-process: the image the process would become

    /// Records what `exec` would replace the process with, and returns `result` as `execve` would.
    final class Replacer: Sendable {
        let images = Mutex<[ProcessImage]>([])
        let result: Int32
        init(result: Int32 = 0) { self.result = result }
        var replace: @Sendable (ProcessImage) -> Int32 { { image in self.images.withLock { $0.append(image) }; return self.result } }
        var recorded: [ProcessImage] { images.withLock { $0 } }
    }

    /// Two client-credentials providers (`svc`, `billing`) and a device one (`gh`) on the mock.
    static func catalog(_ h: Harness) throws {
        try h.catalog(catalogEntry(id: "svc", base: h.base, device: false, secret: "s3cret"),
                      catalogEntry(id: "billing", base: h.base, device: false, secret: "s3cret"),
                      catalogEntry(id: "gh", base: h.base), DPoPProofCLITests.entry(h.base))
    }

    static let path = ["PATH": "/nonexistent:/usr/bin:/bin"]

    @Test("the image: COMMAND found on PATH, its arguments as given, the environment with each token under its name; nothing printed")
    func image() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        h.mock.script(.token, [.token(access: "at-svc-1", expiresIn: 3600), .token(access: "at-billing-1", expiresIn: 3600)])
        let replacer = Replacer()
        let run = await h.run(["exec", "svc", "billing=BILLING_TOKEN", "--", "sh", "-c", "exit 0", "--config"],
                              environment: Self.path.merging(["KEEP": "kept"]) { $1 }, services: h.services(replaceProcess: replacer.replace))
        #expect(run.status == .success, "\(run.stderr)")
        #expect(run.stdout.isEmpty && run.stderr.isEmpty)
        let image = try #require(replacer.recorded.first)
        #expect(replacer.recorded.count == 1)
        #expect(image.path == "/usr/bin/sh")
        #expect(image.arguments == ["sh", "-c", "exit 0", "--config"])
        #expect(image.environment["AUTHFLOW_TOKEN"] == "at-svc-1")
        #expect(image.environment["BILLING_TOKEN"] == "at-billing-1")
        #expect(image.environment["KEEP"] == "kept" && image.environment["PATH"] == Self.path["PATH"])
        #expect(image.environment.filter { $0.value.hasPrefix("at-") }.count == 2, "no token under any other name")
        #expect(h.mock.requests(.token).map { $0.form["grant_type"] } == ["client_credentials", "client_credentials"])
        // What a log or a dump of the image could show holds no token.
        for rendering in [String(describing: image), String(reflecting: image), { var text = ""; dump(image, to: &text); return text }()] {
            #expect(!rendering.contains("at-svc-1") && !rendering.contains("at-billing-1"), "\(rendering)")
        }

        // A token still fresh in the store is read before the runtime, as `token` reads it: no request.
        let again = await h.run(["exec", "svc", "--env", "SVC", "--", "env"], environment: Self.path,
                                services: h.services(replaceProcess: replacer.replace))
        #expect(again.status == .success)
        #expect(replacer.recorded.last?.environment["SVC"] == "at-svc-1" && replacer.recorded.last?.path == "/usr/bin/env")
        #expect(h.mock.requests(.token).count == 2)
    }

    @Test("a provider a person logs in to, with nothing stored: 77 and one line naming authflow login; COMMAND never runs, nothing is sent")
    func needsPerson() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        h.mock.script(.token, [.token(access: "at-svc-1", expiresIn: 3600)])
        let replacer = Replacer()
        let run = await h.run(["exec", "svc", "gh=GH", "--", "env"], environment: Self.path, services: h.services(replaceProcess: replacer.replace))
        #expect(run.status == .denied)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr == "authflow: error: not logged in to gh; run: authflow login gh\n")
        #expect(replacer.recorded.isEmpty)
        #expect(!run.stderr.contains("at-svc-1"))
    }

    @Test("a DPoP-bound token is refused (65): it is useless in an environment without its key and a proof per request")
    func refusesDPoP() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        h.mock.script(.token, [.token(access: "at-dpop-1", type: "DPoP", expiresIn: 3600)])
        let replacer = Replacer()
        let run = await h.run(["exec", "pay", "--", "env"], environment: Self.path, services: h.services(replaceProcess: replacer.replace))
        #expect(run.status == .dataError)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.hasPrefix("authflow: error: the token of pay is DPoP-bound (RFC 9449): it is useless without its key and a proof "
            + "made for each request, so exec does not put it in an environment; use authflow token pay --dpop-proof METHOD URL"), "\(run.stderr)")
        #expect(!run.stderr.contains("at-dpop-1"))
        #expect(replacer.recorded.isEmpty)
    }

    @Test("COMMAND not found: 127, not runnable: 126, both before any token is fetched; a failed execve: 126 with its reason")
    func commandFailures() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        let plain = h.directory.url.appendingPathComponent("not-a-program").path
        try Data("data".utf8).write(to: URL(fileURLWithPath: plain))
        let replacer = Replacer(result: ENOEXEC)
        let services = h.services(replaceProcess: replacer.replace)

        let missing = await h.run(["exec", "svc", "--", "no-such-command-authflow", "x"], environment: Self.path, services: services)
        #expect(missing.status == .commandNotFound && missing.status.rawValue == 127)
        #expect(missing.stderr == "authflow: error: exec: no-such-command-authflow: command not found\n")
        let denied = await h.run(["exec", "svc", "--", plain], environment: Self.path, services: services)
        #expect(denied.status == .cannotExecute && denied.status.rawValue == 126)
        #expect(denied.stderr == "authflow: error: exec: \(plain): Permission denied\n")
        #expect(h.mock.requests(.token).isEmpty, "no token is fetched for a command that cannot run")

        h.mock.script(.token, [.token(access: "at-svc-1", expiresIn: 3600)])
        let failed = await h.run(["exec", "svc", "--", "sh"], environment: Self.path, services: services)
        #expect(failed.status == .cannotExecute)
        #expect(failed.stderr == "authflow: error: exec: sh: Exec format error\n")
        #expect(replacer.recorded.count == 1 && !failed.stderr.contains("at-svc-1"))
    }

    // MARK: The binary replaces itself

    /// A script that writes its environment, its open descriptors' targets and its command line
    /// into DIR, prints `ready PID` once it traps SIGTERM, and then waits: SIGTERM makes it print
    /// `trapped TERM` and exit 42.
    static let child = """
        #!/bin/sh
        dir="$1"
        env > "$dir/env"
        for fd in /proc/$$/fd/*; do echo "${fd##*/} $(readlink "$fd")"; done > "$dir/fds"
        tr '\\000' ' ' < /proc/$$/cmdline > "$dir/cmdline"
        trap 'kill "$sleeper" 2>/dev/null; echo "trapped TERM"; exit 42' TERM
        sleep 60 &
        sleeper=$!
        echo "ready $$"
        wait "$sleeper"
        echo "not signalled"
        exit 3

        """

    struct Rig {
        let directory: TemporaryDirectory
        let server: TestHTTPServer
        let script: String

        init() throws {
            directory = try TemporaryDirectory()
            // Kept alive: a connection the CLI kept open would be a descriptor the child inherits.
            server = try TestHTTPServer(keepAlive: true)
            script = directory.url.appendingPathComponent("child.sh").path
            try Data(ExecTests.child.utf8).write(to: URL(fileURLWithPath: script))
            chmod(script, 0o755)
        }

        var environment: [String: String] {
            cleanEnvironment(directory, ["AUTHFLOW_CONFIG": directory.config.path, "AUTHFLOW_STORE": directory.store.path,
                                         "PATH": "/usr/bin:/bin", "AUTHFLOW_AGENT": "off"])
        }

        func file(_ name: String) -> String { directory.url.appendingPathComponent(name).path }

        func remove() {
            server.stop()
            directory.remove()
        }
    }

    /// Runs `authflow arguments -- CHILD DIR`, checks the child is the same process, that it
    /// traps SIGTERM and exits 42 with it, and returns its environment and descriptors.
    static func runChild(_ rig: Rig, _ arguments: [String], environment: [String: String], tokens: [String]) async throws
        -> (environment: [String: String], descriptors: [String])
    {
        let report = try TemporaryDirectory("authflow-exec-child")
        defer { report.remove() }
        let running = try RunningBinary(arguments + ["--", rig.script, report.path], environment: environment)
        let line = try #require(await running.waitForLine(containing: "ready "), "the child never got ready: \(running.stderr)")
        // exec replaced authflow: the script runs in the process authflow was started as.
        #expect(line == "ready \(running.pid)")
        let commandLine = try String(contentsOfFile: "/proc/\(running.pid)/cmdline", encoding: .utf8)
        #expect(commandLine.contains("child.sh"))
        kill(running.pid, SIGTERM)
        let status = await running.wait()
        #expect(status == 42, "the child's trap ended it with its own status: \(running.stdout) \(running.stderr)")
        #expect(running.stdout == line + "\ntrapped TERM\n")
        #expect(running.stderr.isEmpty)
        for token in tokens {
            #expect(!commandLine.contains(token) && !running.stdout.contains(token) && !running.stderr.contains(token))
            let written = try String(contentsOfFile: report.url.appendingPathComponent("cmdline").path, encoding: .utf8)
            #expect(!written.contains(token), "a token on the child's command line")
        }
        let lines = try String(contentsOfFile: report.url.appendingPathComponent("env").path, encoding: .utf8).split(separator: "\n")
        var variables: [String: String] = [:]
        for line in lines {
            guard let equals = line.firstIndex(of: "=") else { continue }
            variables[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        let descriptors = try String(contentsOfFile: report.url.appendingPathComponent("fds").path, encoding: .utf8)
            .split(separator: "\n").map(String.init)
        // What the child holds: its standard streams and what the shell opened for the script
        // itself; never a socket (a connection to the provider or the agent), an epoll or event
        // descriptor of the runtime, or a file of the store or the catalog.
        for descriptor in descriptors {
            let target = descriptor.split(separator: " ", maxSplits: 1).last.map(String.init) ?? ""
            #expect(!target.hasPrefix("socket:") && !target.hasPrefix("anon_inode:"), "the child inherited \(descriptor)")
            #expect(!target.hasPrefix(rig.directory.store.path) && target != rig.directory.config.path, "the child inherited \(descriptor)")
        }
        return (variables, descriptors)
    }

    @Test("the binary becomes COMMAND: the same pid, the tokens under their names, SIGTERM reaches its trap, its status (42) is the exit status; through the runtime and before it")
    func binaryReplacesItself() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([
            #"{ "id": "svc", "clientID": "c-svc", "clientSecret": "s3cret", "tokenURL": "\#(rig.server.baseURL)/svc/token" }"#,
            #"{ "id": "billing", "clientID": "c-bill", "clientSecret": "s3cret", "tokenURL": "\#(rig.server.baseURL)/billing/token" }"#,
            #"{ "id": "probe", "clientID": "c-probe", "clientSecret": "s3cret", "tokenURL": "\#(rig.server.baseURL)/probe/token" }"#,
        ])
        rig.server.script("/svc/token", [.token("at-exec-svc", expiresIn: 3600)])
        rig.server.script("/billing/token", [.token("at-exec-billing", expiresIn: 3600)])
        rig.server.script("/probe/token", [.token("at-exec-probe", expiresIn: 3600)])
        let tokens = ["at-exec-svc", "at-exec-billing"]

        // grep reads its own signal state, inherited through execve: nothing blocked and nothing
        // ignored, as the test started authflow (first through the runtime, whose threads block
        // most signals, then before it). Signals 32 and 33 are the C library's own (glibc's
        // sigaction refuses them; its posix_spawn leaves them ignored in the child it starts), so
        // they are not compared.
        let probe = ["exec", "probe", "--", "grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"]
        func signalState(_ text: String) -> (blocked: UInt64?, ignored: UInt64?) {
            var fields: [String: UInt64] = [:]
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: "\t")
                if parts.count == 2 { fields[String(parts[0])] = UInt64(parts[1], radix: 16) }
            }
            let libraryOwn: UInt64 = 1 << 31 | 1 << 32
            return (fields["SigBlk:"], fields["SigIgn:"].map { $0 & ~libraryOwn })
        }
        for path in ["through the runtime", "before the runtime"] {
            let run = try await runBinary(probe, environment: rig.environment)
            #expect(run.status == 0, "\(path): \(run.stderr)")
            let state = signalState(run.stdout)
            #expect(state.blocked == 0 && state.ignored == 0, "\(path): \(run.stdout)")
        }
        #expect(rig.server.requests("/probe/token").count == 1, "the second run read the stored token")

        // Nothing stored: the tokens are fetched in the concurrency runtime, and a thread of its
        // pool calls execve (the mask it blocks signals with must not reach the child).
        let first = try await Self.runChild(rig, ["exec", "svc", "billing=BILLING_TOKEN"], environment: rig.environment, tokens: tokens)
        #expect(first.environment["AUTHFLOW_TOKEN"] == "at-exec-svc")
        #expect(first.environment["BILLING_TOKEN"] == "at-exec-billing")
        #expect(first.environment.values.filter { $0.hasPrefix("at-exec") }.count == 2)
        #expect(first.environment["AUTHFLOW_CONFIG"] == rig.directory.config.path, "the rest of the environment is kept")
        #expect(rig.server.requests().count == 3)
        #expect(rig.directory.storedKeys == ["billing", "probe", "svc"])

        // Stored and fresh: answered before the runtime starts, on the main thread; no request.
        let second = try await Self.runChild(rig, ["exec", "svc", "--env", "SVC_TOKEN", "billing=BILLING_TOKEN"], environment: rig.environment,
                                             tokens: tokens)
        #expect(second.environment["SVC_TOKEN"] == "at-exec-svc" && second.environment["AUTHFLOW_TOKEN"] == nil)
        #expect(second.environment["BILLING_TOKEN"] == "at-exec-billing")
        #expect(rig.server.requests().count == 3)

        let status = try await runBinary(["exec", "svc", "--", "sh", "-c", "exit 7"], environment: rig.environment)
        #expect(status.status == 7 && status.stdout.isEmpty && status.stderr.isEmpty)
    }

    @Test("the binary, with nothing stored for a provider a person logs in to: 77, the one line, and the child never ran (its marker is absent)")
    func binaryNeedsPerson() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([catalogEntry(id: "gh", base: rig.server.baseURL)])
        let marker = rig.file("marker")
        let run = try await runBinary(["exec", "gh", "--", "sh", "-c", "touch \"$0\"", marker], environment: rig.environment)
        #expect(run.status == 77)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr == "authflow: error: not logged in to gh; run: authflow login gh\n")
        #expect(!FileManager.default.fileExists(atPath: marker))
        #expect(rig.server.requests().isEmpty)

        let missing = try await runBinary(["exec", "gh", "--", "no-such-command-authflow"], environment: rig.environment)
        #expect(missing.status == 127 && missing.stderr == "authflow: error: exec: no-such-command-authflow: command not found\n")
    }

    @Test("the binary refuses a DPoP-bound token (65) and names why; the child never ran, no token printed")
    func binaryRefusesDPoP() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([#"{ "id": "pay", "clientID": "c", "clientSecret": "s3cret", "tokenURL": "\#(rig.server.baseURL)/token", "dpop": true }"#])
        rig.server.script("/token", [.json(#"{"access_token":"at-dpop-exec","token_type":"DPoP","expires_in":3600}"#)])
        let marker = rig.file("marker")
        let run = try await runBinary(["exec", "pay", "--", "sh", "-c", "touch \"$0\"", marker], environment: rig.environment)
        #expect(run.status == 65, "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("the token of pay is DPoP-bound (RFC 9449)"), "\(run.stderr)")
        #expect(!run.stderr.contains("at-dpop-exec"))
        #expect(rig.server.requests("/token").first?.headers["dpop"] != nil, "the token was bound: the request carried a proof")
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test("with an agent running, the token comes from its socket (no catalog at all); the agent's refusal ends exec with its status")
    func binaryFromAgent() async throws {
        let rig = try AgentTests.Rig()
        defer { rig.remove() }
        let agent = try await rig.startServing("at-agent-exec")   // killed by its deinit if the test stops early
        let child = try Rig()
        defer { child.remove() }
        let environment = cleanEnvironment(rig.directory, ["AUTHFLOW_AGENT": rig.socket, "AUTHFLOW_CONFIG": rig.file("none.json"),
                                                           "PATH": "/usr/bin:/bin"])
        let got = try await Self.runChild(child, ["exec", "svc"], environment: environment, tokens: ["at-agent-exec"])
        #expect(got.environment["AUTHFLOW_TOKEN"] == "at-agent-exec")

        let marker = rig.file("marker")
        let unknown = try await runBinary(["exec", "nope", "--", "sh", "-c", "touch \"$0\"", marker], environment: environment)
        #expect(unknown.status == 64 && unknown.stderr.contains("[unknown_provider]"), "\(unknown.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker))
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
        #expect(!agent.stderr.contains("at-agent-exec"))
    }
}
