import Glibc

/// Runs a command for what it prints: a command subject-token source (``SubjectTokenSource/command(_:timeout:)``)
/// and the executable source of a Google `external_account` file.
///
/// The program is started with `posix_spawnp` (as the CLI starts `xdg-open` and the agent its
/// notify command), never through a shell: its arguments are passed as they are. Its input is
/// `/dev/null`, its standard output a pipe read here, its standard error this process's (so a
/// helper's diagnostics reach the person or the journal), its environment this process's plus
/// the given variables. It runs in a process group of its own, so that a timeout, too much
/// output or cancellation kills it and everything it started (`kill(-pgid, SIGKILL)`), and the
/// signals this process ignores are reset to their defaults for it.
///
/// The pipe is read and the child reaped on a thread of its own (``DetachedThread``): a thread of
/// the concurrency runtime never waits on another process. Both waits are bounded by the timeout.
enum CommandRunner {
    /// How a run ended.
    enum Outcome: Sendable {
        /// The program exited with `status`, having printed `output` (at most the limit).
        case exited(status: Int32, output: [UInt8])
        /// The program was ended by `signal` (not one of ours).
        case signalled(Int32, output: [UInt8])
        /// The timeout passed; the program and its group were killed.
        case timedOut
        /// It printed more than the limit; the program and its group were killed.
        case tooMuchOutput
        /// The task was cancelled; the program and its group were killed.
        case cancelled
        /// It could not be started: the `errno` (`ENOENT` for no such program, `EACCES`).
        case cannotStart(Int32)
    }

    /// Runs `arguments` (the program first) and returns how it ended.
    static func run(_ arguments: [String], environment extra: [(String, String)], timeout: Duration, outputLimit: Int) async -> Outcome {
        guard !Task.isCancelled else { return .cancelled }
        guard !arguments.isEmpty else { return .cannotStart(ENOENT) }
        let output: FileDescriptor.Pipe
        do throws(SystemError) {
            output = try FileDescriptor.pipe()
        } catch {
            return .cannotStart(error.code)
        }
        let wake: FileDescriptor.Pipe
        do throws(SystemError) {
            wake = try FileDescriptor.pipe(O_NONBLOCK)
        } catch {
            return .cannotStart(error.code)
        }
        let spawned = spawn(arguments, environment: extra, output: output.write.raw)
        // This process's copy of the write end goes now: the reader sees the end of the output
        // when the child (and whatever it started) has closed its copies.
        _ = try? output.write.close()
        let reader = SharedFileDescriptor(output.read)
        let wakeRead = SharedFileDescriptor(wake.read)
        let wakeWrite = SharedFileDescriptor(wake.write)
        let pid: pid_t
        switch spawned {
        case .failure(let error): return .cannotStart(error.code)
        case .success(let started): pid = started
        }
        let deadline = monotonicNanoseconds() &+ nanoseconds(timeout)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let started = DetachedThread.start(name: "authflow-command") {
                    continuation.resume(returning: collect(pid, reader: reader, wake: wakeRead, deadline: deadline, limit: outputLimit))
                }
                if !started {
                    stop(pid)
                    continuation.resume(returning: .cannotStart(EAGAIN))
                }
            }
        } onCancel: {
            var byte: UInt8 = 1
            _ = write(wakeWrite.raw, &byte, 1)
        }
    }

    /// Starts the program with its output on `output`, in a new process group.
    private static func spawn(_ arguments: [String], environment extra: [(String, String)], output: Int32) -> Result<pid_t, SystemError> {
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { return .failure(SystemError(code: ENOMEM)) }
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        var attributes = posix_spawnattr_t()
        guard posix_spawnattr_init(&attributes) == 0 else { return .failure(SystemError(code: ENOMEM)) }
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setpgroup(&attributes, 0)
        // The CLI ignores SIGINT while a grant runs, and an ignored signal stays ignored across
        // exec: the child gets the defaults back, and an empty signal mask.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let result: Int32
        if extra.isEmpty {
            result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, environ)
        } else {
            let envp = environment(adding: extra).map { strdup($0) } + [nil]
            defer { for entry in envp { free(entry) } }
            result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        }
        return result == 0 ? .success(pid) : .failure(SystemError(code: result))
    }

    /// This process's environment with `extra` set (replacing variables of the same names).
    static func environment(adding extra: [(String, String)]) -> [String] {
        let replaced = Set(extra.map(\.0))
        var entries: [String] = []
        var pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            let name = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? text
            if !replaced.contains(name) { entries.append(text) }
            pointer += 1
        }
        return entries + extra.map { "\($0.0)=\($0.1)" }
    }

    /// On the reading thread: the output until its end, then the exit, each until the deadline.
    private static func collect(
        _ pid: pid_t, reader: SharedFileDescriptor, wake: SharedFileDescriptor, deadline: UInt64, limit: Int
    ) -> Outcome {
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        func abandon(_ outcome: Outcome) -> Outcome {
            stop(pid)
            wipe(&output)
            return outcome
        }
        reading: while true {
            let now = monotonicNanoseconds()
            guard now < deadline else { return abandon(.timedOut) }
            var descriptors = [pollfd(fd: reader.raw, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.raw, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&descriptors, 2, milliseconds(until: deadline, from: now))
            if ready < 0, errno == EINTR { continue }
            guard ready >= 0 else { return abandon(.cannotStart(errno)) }
            if descriptors[1].revents != 0 { return abandon(.cancelled) }
            guard descriptors[0].revents != 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(reader.raw, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR || errno == EAGAIN { continue }
            guard count > 0 else { break reading }   // the end of the output (or an error reading it)
            output += buffer[..<count]
            guard output.count <= limit else { return abandon(.tooMuchOutput) }
        }
        wipe(&buffer)
        while true {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid {
                let signal = status & 0x7F
                return signal == 0 ? .exited(status: (status >> 8) & 0xFF, output: output) : .signalled(signal, output: output)
            }
            if reaped < 0, errno != EINTR { return abandon(.cannotStart(errno)) }
            let now = monotonicNanoseconds()
            guard now < deadline else { return abandon(.timedOut) }
            // The output has ended but the program has not exited yet: look again shortly, or stop at a cancellation.
            var descriptor = pollfd(fd: wake.raw, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, min(10, milliseconds(until: deadline, from: now))) > 0 { return abandon(.cancelled) }
        }
    }

    /// Kills the program and its process group, and reaps it (SIGKILL cannot be caught, so the wait is short).
    private static func stop(_ pid: pid_t) {
        _ = kill(-pid, SIGKILL)
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    private static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
    }

    /// The poll timeout from `now` to `deadline`, rounded up, at most one second.
    private static func milliseconds(until deadline: UInt64, from now: UInt64) -> Int32 {
        Int32(min((deadline - now) / 1_000_000 + 1, 1_000))
    }
}
