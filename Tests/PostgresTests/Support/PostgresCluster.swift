import Dispatch
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// A private PostgreSQL cluster for the suite: `initdb` into a temporary directory, `pg_ctl start`
/// on a free loopback port (Unix socket in the same directory), password (SCRAM) authentication
/// for TCP, and `pg_ctl stop` at the end. Never the system service.
///
/// PostgreSQL refuses to run as root, so as root (CI) every server command runs as the `postgres`
/// user (created by Debian's `postgresql` package) through `runuser`. A watchdog stops the cluster
/// and removes the directory if this test process dies without tearing down.
struct PostgresCluster: Sendable {
    let directory: URL
    let port: Int
    let user = "fleet"
    let password: String
    let binaries: URL

    /// The suite's cluster.
    @TaskLocal static var current: PostgresCluster?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> PostgresCluster {
        try #require(current, "no cluster: attach .postgresCluster to the suite", sourceLocation: sourceLocation)
    }

    /// The URI with the password in it.
    var uri: String { "postgresql://\(user):\(password)@127.0.0.1:\(port)/postgres" }
    /// The data directory.
    var data: URL { directory.appendingPathComponent("data", isDirectory: true) }

    /// The prefix that runs a server command as a non-root user when we are root.
    static var asServerUser: [String] { geteuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : [] }

    // MARK: Start and stop

    static func start() async throws -> PostgresCluster {
        let binaries = try findBinaries()
        let directory = URL(fileURLWithPath: "/tmp/oauthflow-pg-\(getpid())-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let password = "pw-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(20)
        try Data(password.utf8).write(to: directory.appendingPathComponent("pwfile"))
        if geteuid() == 0 {
            guard let entry = getpwnam("postgres") else { throw ClusterError("no postgres user to run the cluster as (install postgresql)") }
            let owner = (entry.pointee.pw_uid, entry.pointee.pw_gid)
            for path in [directory.path, directory.appendingPathComponent("pwfile").path] { chown(path, owner.0, owner.1) }
        }
        let cluster = PostgresCluster(directory: directory, port: Int(try LoopbackSocket.closedPort()), password: String(password), binaries: binaries)
        try startWatchdog(cluster)
        let initdb = try await run(asServerUser + [binaries.appendingPathComponent("initdb").path, "-D", cluster.data.path, "-U", cluster.user,
                                                   "--pwfile=\(directory.path)/pwfile", "--auth-local=trust", "--auth-host=scram-sha-256",
                                                   "-E", "UTF8", "--locale=C", "--no-sync"], timeout: .seconds(120))
        guard initdb.status == 0 else { throw ClusterError("initdb failed: \(initdb.output)") }
        // The port was free when chosen, but a parallel test may bind it before the server does:
        // then the server exits with "Address already in use", and another free port is tried.
        var attempt = cluster
        var tries = 1
        while true {
            do {
                try await attempt.startServer()
                return attempt
            } catch let error as ClusterError where error.description.contains("Address already in use") && tries < 5 {
                tries += 1
                attempt = PostgresCluster(directory: directory, port: Int(try LoopbackSocket.closedPort()), password: String(password), binaries: binaries)
            }
        }
    }

    /// `pg_ctl start`, waiting until it accepts connections.
    func startServer() async throws {
        let options = "-k \(directory.path) -p \(port) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
        let started = try await Self.run(Self.asServerUser + [binaries.appendingPathComponent("pg_ctl").path, "-D", data.path, "-l",
                                                              "\(directory.path)/server.log", "-w", "-t", "60", "-o", options, "start"],
                                         timeout: .seconds(90))
        guard started.status == 0 else {
            let log = (try? String(contentsOf: directory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
            throw ClusterError("pg_ctl start failed: \(started.output)\n\(log.suffix(2000))")
        }
    }

    /// `pg_ctl stop -m fast`: every connection is closed by the server.
    func stopServer() async throws {
        let stopped = try await Self.run(Self.asServerUser + [binaries.appendingPathComponent("pg_ctl").path, "-D", data.path, "-w", "-t", "60",
                                                              "-m", "fast", "stop"], timeout: .seconds(90))
        guard stopped.status == 0 else { throw ClusterError("pg_ctl stop failed: \(stopped.output)") }
    }

    /// Stops the server and removes the directory.
    func tearDown() async {
        do { try await stopServer() } catch { Issue.record("\(error)") }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs SQL with psql over TCP with the password, returning unaligned tuples-only output.
    func psql(_ sql: String) async throws -> String {
        let result = try await Self.run(
            [binaries.appendingPathComponent("psql").path, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", String(port),
             "-U", user, "-d", "postgres", "-c", sql],
            environment: ["PGPASSWORD": password, "PATH": "/usr/bin:/bin"], timeout: .seconds(30))
        guard result.status == 0 else { throw ClusterError("psql failed: \(result.output)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: Helpers

    private static func findBinaries() throws -> URL {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() {
            let bin = URL(fileURLWithPath: "\(root)/\(version)/bin", isDirectory: true)
            if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        throw ClusterError("no PostgreSQL server binaries under \(root) (apt-get install postgresql)")
    }

    /// A shell that waits for this process to end, then stops the cluster and removes its directory.
    private static func startWatchdog(_ cluster: PostgresCluster) throws {
        let stop = (asServerUser + [cluster.binaries.appendingPathComponent("pg_ctl").path, "-D", cluster.data.path, "-m", "immediate", "stop"])
            .map { "'\($0)'" }.joined(separator: " ")
        let script = "while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done; \(stop) >/dev/null 2>&1; rm -rf '\(cluster.directory.path)'"
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    struct Output: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
        var output: String { stdout + stderr }
    }

    /// Runs a command to completion on a thread of its own, killing it after `timeout`.
    static func run(
        _ command: [String], environment: [String: String]? = nil, timeout: Duration, started: (@Sendable (Int32) -> Void)? = nil
    ) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try runBlocking(command, environment: environment, timeout: timeout, started: started) })
            }
            thread.start()
        }
    }

    private static let spawnLock = Mutex(())

    /// posix_spawn + waitpid (Foundation's `Process` can miss the exit of a `runuser` child and
    /// wait forever). Runs `command` from /tmp, stdin from /dev/null, pipes closed on exec elsewhere.
    private static func runBlocking(
        _ command: [String], environment: [String: String]?, timeout: Duration, started: (@Sendable (Int32) -> Void)?
    ) throws -> Output {
        // Serialized: a pipe made here must be close-on-exec before any other thread spawns.
        let (pid, outRead, errRead) = try spawnLock.withLock { _ throws -> (pid_t, Int32, Int32) in
            var outPipe: [Int32] = [-1, -1]
            var errPipe: [Int32] = [-1, -1]
            guard pipe(&outPipe) == 0 else { throw ClusterError("pipe failed") }
            guard pipe(&errPipe) == 0 else {
                close(outPipe[0]); close(outPipe[1])
                throw ClusterError("pipe failed")
            }
            for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
            posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
            let shell = ["/bin/sh", "-c", "cd /tmp && exec \"$0\" \"$@\""] + command
            let argv: [UnsafeMutablePointer<CChar>?] = shell.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            let variables = environment.map { $0.map { "\($0.key)=\($0.value)" } }
            let envp: [UnsafeMutablePointer<CChar>?]? = variables.map { $0.map { strdup($0) } + [nil] }
            defer { for pointer in envp ?? [] { free(pointer) } }
            var pid: pid_t = 0
            let spawned: Int32
            if let envp { spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, envp) } else { spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ) }
            close(outPipe[1])
            close(errPipe[1])
            guard spawned == 0 else {
                close(outPipe[0]); close(errPipe[0])
                throw ClusterError("cannot run \(command[0]): errno \(spawned)")
            }
            return (pid, outPipe[0], errPipe[0])
        }
        started?(pid)
        let collected = Mutex((Data(), Data()))
        let finished = DispatchSemaphore(value: 0)
        for (fd, isOut) in [(outRead, true), (errRead, false)] {
            let thread = Thread {
                var data = Data()
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = read(fd, &chunk, chunk.count)
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    data.append(contentsOf: chunk[0..<count])
                }
                close(fd)
                collected.withLock { if isOut { $0.0 = data } else { $0.1 = data } }
                finished.signal()
            }
            thread.start()
        }
        var status: Int32 = 0
        let deadline = ContinuousClock.now + timeout
        var reaped = false
        while ContinuousClock.now < deadline {
            if waitpid(pid, &status, WNOHANG) == pid {
                reaped = true
                break
            }
            usleep(10_000)
        }
        if !reaped {
            kill(pid, SIGKILL)
            while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        }
        // Both pipes reach end of file once the process (and anything it forked that kept them) is gone; bounded.
        for _ in 0..<2 { _ = finished.wait(timeout: .now() + 5) }
        let (stdout, stderr) = collected.withLock { $0 }
        let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Output(status: code, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }
}

struct ClusterError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Starts the cluster once for the suite it is attached to and stops it afterwards.
struct PostgresClusterTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let cluster = try await PostgresCluster.start()
        do {
            try await PostgresCluster.$current.withValue(cluster) { try await function() }
        } catch {
            await cluster.tearDown()
            throw error
        }
        await cluster.tearDown()
    }
}

extension Trait where Self == PostgresClusterTrait {
    /// Runs the suite against one private PostgreSQL cluster on loopback.
    static var postgresCluster: Self { Self() }
}
