import Foundation
import Glibc
import Testing

/// The loopback django-oauth-toolkit server the integration suite talks to (see `Server/README.md`).
///
/// ``IntegrationServerTrait`` starts one per test process and publishes it through ``current``
/// to every test of the suite it is attached to.
struct IntegrationServer: Sendable {
    /// The port it listens on, on 127.0.0.1 only.
    let port: Int
    /// This run's private state directory (`OAUTHFLOW_IT_HOME` of start.sh/stop.sh).
    let home: URL

    /// `http://127.0.0.1:PORT`.
    var origin: String { "http://127.0.0.1:\(port)" }
    /// The issuer the server puts in discovery, ID tokens and `iss` (RFC 9207).
    var issuer: String { "\(origin)/o" }

    /// An absolute URL on the server; `path` keeps its exact trailing slash.
    func url(_ path: String) -> URL {
        guard let url = URL(string: origin + path) else { preconditionFailure("bad path \(path)") }
        return url
    }

    /// The server of the running suite.
    @TaskLocal static var current: IntegrationServer?

    /// The server of the running suite, or a recorded issue when a test runs outside the trait's scope.
    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> IntegrationServer {
        try #require(current, "no integration server: attach .integrationServer to the suite", sourceLocation: sourceLocation)
    }
}

// MARK: - When to run

/// `OAUTHFLOW_SKIP_INTEGRATION=1` skips the suite locally; CI (`CI` set to anything but `0`/`false`) never skips.
enum IntegrationEnvironment {
    static var skipRequested: Bool { ProcessInfo.processInfo.environment["OAUTHFLOW_SKIP_INTEGRATION"] == "1" }

    static var isCI: Bool {
        let value = (ProcessInfo.processInfo.environment["CI"] ?? "").lowercased()
        return !value.isEmpty && value != "0" && value != "false"
    }

    /// True unless skipping was asked for outside CI.
    static var shouldRun: Bool { !skipRequested || isCI }
}

// MARK: - The suite trait

/// Starts the server once for the suite it is attached to (setup.sh + start.sh on a free port, in a
/// private copy of the prepared state), runs the suite with ``IntegrationServer/current`` set, and
/// stops it afterwards (stop.sh, its own pid only), whether the tests passed, failed or threw.
///
/// A watchdog process stops the server and removes the state directory if this test process dies
/// without tearing down (a crash, `kill -9`, a CI timeout).
struct IntegrationServerTrait: SuiteTrait, TestScoping {
    /// Once for the suite, not once per test.
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let launched = try await ServerLauncher.start()
        do {
            try await IntegrationServer.$current.withValue(launched.server) { try await function() }
        } catch {
            await launched.stop()
            throw error
        }
        await launched.stop()
    }
}

extension Trait where Self == IntegrationServerTrait {
    /// Runs the suite against one loopback authorization server started for it.
    static var integrationServer: Self { Self() }
}

// MARK: - Starting and stopping

/// Thrown when the server cannot be prepared or started; carries the scripts' output.
struct ServerLaunchError: Error, CustomStringConvertible {
    let description: String
}

/// A started server and how to stop it.
struct LaunchedServer: Sendable {
    let server: IntegrationServer

    /// stop.sh for this run's state directory, then removes the directory (which also ends the watchdog).
    func stop() async {
        let started = ContinuousClock.now
        let status = try? await ServerLauncher.run(
            ServerLauncher.serverDirectory.appendingPathComponent("stop.sh").path, [],
            home: server.home, port: server.port, timeout: .seconds(30))
        if status != 0 {
            Issue.record("stop.sh exited with \(status.map(String.init) ?? "a timeout"); see \(server.home.path)/fixture.log")
            return  // keep the directory for diagnosis; the watchdog still stops the server when this process ends
        }
        ServerLauncher.removeHome(server.home)
        ServerLauncher.note("stopped in \(started.duration(to: .now))")
    }
}

enum ServerLauncher {
    /// `Tests/IntegrationTests/Server`.
    static let serverDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Server", isDirectory: true)

    /// The prepared state (venv, migrated DB, keys) shared by runs: `OAUTHFLOW_IT_HOME` or the scripts' default.
    static var sharedHome: URL {
        URL(fileURLWithPath: ProcessInfo.processInfo.environment["OAUTHFLOW_IT_HOME"] ?? "/tmp/oauthflow-it", isDirectory: true)
    }

    static func note(_ text: String) {
        FileHandle.standardError.write(Data("[IntegrationTests] \(text)\n".utf8))
    }

    /// Starts the watchdog, prepares the shared state (setup.sh, serialized across processes by a lock),
    /// copies it into a private directory, and runs start.sh on a free port (three attempts).
    static func start() async throws -> LaunchedServer {
        let started = ContinuousClock.now
        let home = FileManager.default.temporaryDirectory
            .appendingPathComponent("oauthflow-it-run-\(getpid())-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        do {
            try await startWatchdog(home: home)
            try await withSetupLock {
                try await prepareSharedState(log: home)
                try await copySharedState(into: home)
            }
            var lastError: (any Error)?
            for _ in 0..<3 {
                let port = try freePort()
                let status = try await run(serverDirectory.appendingPathComponent("start.sh").path, [], home: home, port: port,
                                           timeout: .seconds(90))
                if status == 0 {
                    note("server ready at http://127.0.0.1:\(port) in \(started.duration(to: .now)) (state \(home.path))")
                    return LaunchedServer(server: IntegrationServer(port: port, home: home))
                }
                lastError = ServerLaunchError(description: "start.sh exited with \(status) on port \(port):\n\(logTail(home))")
            }
            throw lastError ?? ServerLaunchError(description: "start.sh failed")
        } catch {
            // Stop whatever may have come up; the watchdog removes the directory when this process ends.
            _ = try? await run(serverDirectory.appendingPathComponent("stop.sh").path, [], home: home, port: 0, timeout: .seconds(30))
            throw error
        }
    }

    /// Holds an exclusive `flock(2)` on `<shared home>.setup.lock` around `body`, so that concurrent test
    /// processes never run pip or migrate at once, nor copy a database another one is migrating.
    private static func withSetupLock(_ body: () async throws -> Void) async throws {
        let path = sharedHome.standardizedFileURL.path + ".setup.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ServerLaunchError(description: "cannot open \(path): errno \(errno)") }
        defer { close(fd) }  // releases the lock
        let deadline = ContinuousClock.now.advanced(by: .seconds(240))
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else {
                throw ServerLaunchError(description: "could not lock \(path) (errno \(errno)); is another setup stuck?")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        try await body()
    }

    /// Runs setup.sh for the shared state (idempotent; about 0.02 s when up to date, 10-15 s fresh).
    private static func prepareSharedState(log home: URL) async throws {
        let setup = serverDirectory.appendingPathComponent("setup.sh").path
        let status = try await run("/bin/bash", [setup], environment: ["OAUTHFLOW_IT_HOME": sharedHome.standardizedFileURL.path],
                                   log: home, timeout: .seconds(240))
        guard status == 0 else {
            throw ServerLaunchError(description: "setup.sh exited with \(status):\n\(logTail(home))")
        }
    }

    /// A private state directory: the shared venv by symlink; the keys, stamp and a consistent copy of the DB.
    ///
    /// Every run starts from the bootstrapped database and has its own pid file and log, so parallel
    /// test processes (two worktrees, two engineers) never share a server.
    private static func copySharedState(into home: URL) async throws {
        let shared = sharedHome.standardizedFileURL
        try FileManager.default.createSymbolicLink(
            at: home.appendingPathComponent("venv"), withDestinationURL: shared.appendingPathComponent("venv"))
        for name in ["django-secret-key", "oidc-rs256.pem", ".setup-stamp"] {
            try FileManager.default.copyItem(at: shared.appendingPathComponent(name), to: home.appendingPathComponent(name))
        }
        // SQLite's backup API copies a consistent snapshot even if another server uses the shared DB (WAL mode).
        let python = shared.appendingPathComponent("venv/bin/python").path
        let script = "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close(); s.close()"
        let status = try await run(python, ["-c", script, shared.appendingPathComponent("db.sqlite3").path,
                                            home.appendingPathComponent("db.sqlite3").path],
                                   environment: [:], log: home, timeout: .seconds(30))
        guard status == 0 else { throw ServerLaunchError(description: "copying the database failed:\n\(logTail(home))") }
    }

    /// A detached shell (own session, immune to the terminal's and the test process group's signals)
    /// that polls this process every 0.5 s; when it is gone (or a zombie) while the state directory still
    /// exists, it runs stop.sh and removes the directory. A normal teardown removes the directory first,
    /// which ends the watchdog.
    private static func startWatchdog(home: URL) async throws {
        let script = #"""
            exec </dev/null >/dev/null 2>&1
            trap '' INT HUP TERM QUIT
            parent=$1 home=$2 stop=$3
            while [ -d "$home" ]; do
                stat=$(cat "/proc/$parent/stat" 2>/dev/null) || break
                rest=${stat##*) }
                [ "${rest%% *}" = Z ] && break
                sleep 0.5
            done
            if [ -d "$home" ]; then
                OAUTHFLOW_IT_HOME="$home" "$stop" || true
                rm -rf -- "$home"
            fi
            """#
        // setsid --fork returns at once; the watchdog lives on as its child, reparented to init.
        let status = try await run(
            "/usr/bin/setsid",
            ["--fork", "/bin/bash", "-c", script, "oauthflow-it-watchdog", String(getpid()), home.path,
             serverDirectory.appendingPathComponent("stop.sh").path],
            environment: [:], log: home, timeout: .seconds(10))
        guard status == 0 else {
            throw ServerLaunchError(description: "could not start the watchdog (setsid exited with \(status))")
        }
    }

    /// Removes the private directory; the venv symlink is unlinked first so its target is never touched.
    static func removeHome(_ home: URL) {
        unlink(home.appendingPathComponent("venv").path)
        try? FileManager.default.removeItem(at: home)
    }

    /// A port that was free on 127.0.0.1 a moment ago (bind to port 0, read it, close).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServerLaunchError(description: "socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(fd, generic, length) == 0 && getsockname(fd, generic, &length) == 0
            }
        }
        guard bound else { throw ServerLaunchError(description: "could not bind a free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a server script with this run's `OAUTHFLOW_IT_HOME`/`OAUTHFLOW_IT_PORT`.
    static func run(_ script: String, _ arguments: [String], home: URL, port: Int, timeout: Duration) async throws -> Int32 {
        var environment = ["OAUTHFLOW_IT_HOME": home.path]
        if port > 0 { environment["OAUTHFLOW_IT_PORT"] = String(port) }
        return try await run("/bin/bash", [script] + arguments, environment: environment, log: home, timeout: timeout)
    }

    /// Runs a program with extra environment, appending its output to `<log>/fixture.log`; a bounded wait
    /// (SIGTERM to that child alone on timeout). Returns the exit status (128 + signal when killed).
    ///
    /// Uses `posix_spawn` rather than Foundation's `Process`: on Linux, `Process` learns of the exit when
    /// a socket it hands the child closes, and the daemons these scripts leave behind (gunicorn, the
    /// watchdog) would hold it open forever. Here the child gets stdin from /dev/null, stdout and stderr
    /// on the log, and no other descriptor of the test process.
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String], log: URL, timeout: Duration
    ) async throws -> Int32 {
        let logPath = log.appendingPathComponent("fixture.log").path
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard logFD >= 0 else { throw ServerLaunchError(description: "cannot open \(logPath): errno \(errno)") }
        defer { close(logFD) }
        let header = "$ \(([executable] + arguments).joined(separator: " "))\n"
        _ = header.withCString { write(logFD, $0, strlen($0)) }

        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        let pid = try spawn(executable, arguments, environment: merged, outputFD: logFD)

        let deadline = ContinuousClock.now.advanced(by: timeout)
        while true {
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                let signal = status & 0x7f
                return signal == 0 ? (status >> 8) & 0xff : 128 + signal
            }
            if result == -1 && errno != EINTR {
                throw ServerLaunchError(description: "waitpid(\(pid)) failed: errno \(errno)")
            }
            if ContinuousClock.now >= deadline {
                kill(pid, SIGTERM)
                _ = waitpid(pid, &status, 0)
                throw ServerLaunchError(description: "\(executable) \(arguments.joined(separator: " ")) did not finish within \(timeout)")
            }
            try? await Task.sleep(for: .milliseconds(25))
        }
    }

    /// `posix_spawn` with stdin from /dev/null, stdout and stderr on `outputFD`, every other descriptor
    /// closed, an empty signal mask and default dispositions for the usual termination signals.
    private static func spawn(_ executable: String, _ arguments: [String], environment: [String: String], outputFD: Int32) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 1)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 2)
        // Close whatever this process has open beyond 0-2 (what posix_spawn_file_actions_addclosefrom_np
        // does; Swift's Glibc module does not export it). Descriptors closed meanwhile are ignored by glibc.
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap({ Int32($0) }) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw ServerLaunchError(description: "posix_spawn \(executable) failed: errno \(result)") }
        return pid
    }

    /// The last lines of this run's fixture log, for error messages.
    static func logTail(_ home: URL, lines: Int = 40) -> String {
        let text = (try? String(contentsOf: home.appendingPathComponent("fixture.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }
}
