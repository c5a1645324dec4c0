public import Foundation
import Glibc
import Synchronization

/// A child process started with `posix_spawn`, with the part of Foundation's `Process` interface the
/// tests use.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3) reads `/proc/self/fd` with a whole-`d_name`
/// copy that can read past glibc's `readdir` buffer and crash the process when more than about
/// 1,360 descriptors are open (swift-corelibs-foundation pull request #5472; the parallel suites
/// reach 1,500–1,800): Testing.md, "After the fix". This one closes every descriptor from 3 up in
/// the child with `posix_spawn_file_actions_addclosefrom_np`, as Foundation meant to.
public final class ChildProcess: @unchecked Sendable {   // configured before run(), then read-only but for `state`
    public var executableURL: URL?
    public var arguments: [String]?
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// A `FileHandle` (`FileHandle.nullDevice` for /dev/null) or a `Pipe`; nil inherits the test's.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    private let state = Mutex<(pid: pid_t, status: Int32?)>((0, nil))

    public init() {}

    public var processIdentifier: Int32 { state.withLock { $0.pid } }

    /// Starts the child.
    /// - Throws: `POSIXError` when it cannot be started.
    public func run() throws {
        guard let executable = executableURL?.path else { throw POSIXError(.ENOENT) }
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { throw POSIXError(.ENOMEM) }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentCloses: [FileHandle] = []
        for (target, stream, reads) in [(Int32(0), standardInput, true), (1, standardOutput, false), (2, standardError, false)] {
            switch stream {
            case let pipe as Pipe:
                let (childEnd, parentsCopy) = reads ? (pipe.fileHandleForReading, pipe.fileHandleForReading)
                                                    : (pipe.fileHandleForWriting, pipe.fileHandleForWriting)
                posix_spawn_file_actions_adddup2(&actions, childEnd.fileDescriptor, target)
                parentCloses.append(parentsCopy)
            case let handle as FileHandle where handle === FileHandle.nullDevice:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", reads ? O_RDONLY : O_WRONLY, 0)
            case let handle as FileHandle:
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, target)
            default:
                break
            }
        }
        if let directory = currentDirectoryURL?.path {
            guard let chdir = Self.addChdir, chdir(&actions, directory) == 0 else { throw POSIXError(.ENOSYS) }
        }
        guard let closeFrom = Self.addCloseFrom, closeFrom(&actions, 3) == 0 else { throw POSIXError(.ENOSYS) }

        let argv = ([executable] + (arguments ?? [])).map { strdup($0) } + [nil]
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in env { free(pointer) }
        }
        // As Foundation does: a process group of its own, every signal unblocked and at its default
        // (the test runner's ignored or blocked signals would otherwise pass to the child).
        var attributes = posix_spawnattr_t()
        guard posix_spawnattr_init(&attributes) == 0 else { throw POSIXError(.ENOMEM) }
        defer { posix_spawnattr_destroy(&attributes) }
        Self.unblockAndResetSignals(&attributes)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        var pid = pid_t()
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, env)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        state.withLock { $0.pid = pid }
        for handle in parentCloses { try? handle.close() }
    }

    /// True until the child has exited (and been reaped here).
    public var isRunning: Bool {
        state.withLock { state in
            guard state.pid > 0, state.status == nil else { return false }
            var status: Int32 = 0
            let reaped = waitpid(state.pid, &status, WNOHANG)
            if reaped == state.pid { state.status = status }
            return reaped == 0
        }
    }

    /// Waits until the child has exited.
    public func waitUntilExit() {
        let pid = state.withLock { $0.status == nil ? $0.pid : 0 }
        guard pid > 0 else { return }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else {
                // Already reaped by isRunning on another thread.
                return
            }
        }
        state.withLock { $0.status = status }
    }

    /// The exit status, or the signal number when a signal ended it (as Foundation reports it).
    public var terminationStatus: Int32 {
        guard let status = state.withLock({ $0.status }) else { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// Sends SIGTERM.
    public func terminate() { send(SIGTERM) }

    /// Sends SIGINT.
    public func interrupt() { send(SIGINT) }

    private func send(_ number: Int32) {
        let pid = processIdentifier
        if pid > 0, isRunning { kill(pid, number) }
    }

    /// Sets `attributes` so the child starts with every signal unblocked and at its default (with
    /// `POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF` in its flags).
    static func unblockAndResetSignals(_ attributes: inout posix_spawnattr_t) {
        var none = sigset_t()
        var all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
    }

    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    /// glibc 2.34+ (Debian 12 has 2.36); not visible to Swift's Glibc module, so looked up.
    static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }
    private static let addChdir: AddChdir? = dlsym(nil, "posix_spawn_file_actions_addchdir_np")
        .map { unsafeBitCast($0, to: AddChdir.self) }
}
