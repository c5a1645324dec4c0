public import Foundation
import Glibc
import Synchronization

/// A program run on a pseudo-terminal of its own, as a person at a terminal runs it.
///
/// Its standard input, output and error are the terminal's slave side, which is its controlling
/// terminal (a new session, the slave opened after `setsid`), with the kernel's default settings:
/// canonical lines, echo, signals. So what ``type(_:)`` writes to the master side goes through the
/// line discipline exactly as keystrokes do: `\u{03}` (Ctrl-C) sends SIGINT to the program's
/// process group, `\u{04}` (Ctrl-D) at the start of a line is the end of input, and a line longer
/// than the terminal's line buffer is cut. Everything the program writes, and the echo, is read
/// on a thread of its own into ``output``. The master closes with this value.
public final class TerminalSession: Sendable {
    private let master: Int32
    private let pid: pid_t
    private let screen = Screen()
    private let status = Mutex<Int32?>(nil)

    /// What the reading thread fills; it holds this, not the session, so a session dropped by a
    /// failing test still ends (its deinit kills the program).
    private final class Screen: Sendable {
        let bytes = Mutex([UInt8]())
        let reading = Mutex(true)
    }

    /// Starts `executable arguments` with exactly `environment` on a new terminal `columns` wide.
    /// - Throws: `POSIXError` when the terminal cannot be made or the program cannot be started.
    public init(_ executable: URL, _ arguments: [String], environment: [String: String], columns: UInt16 = 100) throws {
        // /dev/ptmx, unlocked, and the slave's name: posix_openpt, unlockpt and ptsname, which Swift's
        // Glibc module does not show. TIOCSPTLCK and TIOCGPTN are _IOW/_IOR macros (asm-generic
        // layout, the same on x86_64 and aarch64), so their values are written here.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        var size = winsize(ws_row: 40, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        guard ioctl(master, UInt(0x4004_5431), &unlock) == 0, ioctl(master, UInt(0x8004_5430), &number) == 0,
              ioctl(master, UInt(TIOCSWINSZ), &size) == 0
        else {
            let code = errno
            close(master)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Opened in the child after setsid and without O_NOCTTY: it becomes the controlling terminal.
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/pts/\(number)", O_RDWR, 0)
        posix_spawn_file_actions_adddup2(&actions, 0, 1)
        posix_spawn_file_actions_adddup2(&actions, 0, 2)
        if let closeFrom = ChildProcess.addCloseFrom { _ = closeFrom(&actions, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        ChildProcess.unblockAndResetSignals(&attributes)
        // POSIX_SPAWN_SETSID is 0x80 in glibc 2.26 and later (spawn.h, under __USE_GNU, which Swift's
        // Glibc module does not define); glibc runs setsid before the file actions.
        posix_spawnattr_setflags(&attributes, Int16(0x80 | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child = pid_t()
        let result = posix_spawn(&child, executable.path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            close(master)
            throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO)
        }
        self.master = master
        self.pid = child
        let screen = self.screen
        Thread { Self.readAll(master, into: screen) }.start()
    }

    deinit {
        if status.withLock({ $0 }) == nil {
            kill(pid, SIGKILL)
            var raw: Int32 = 0
            _ = waitpid(pid, &raw, 0)
        }
        // The reader ends with EIO once the child is gone; the master closes after it.
        let deadline = ContinuousClock.now + .seconds(5)
        while screen.reading.withLock({ $0 }), ContinuousClock.now < deadline { usleep(1000) }
        close(master)
    }

    private static func readAll(_ master: Int32, into screen: Screen) {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(master, &chunk, chunk.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }   // EIO: every slave descriptor is closed (the program ended)
            screen.bytes.withLock { $0 += chunk[0..<count] }
        }
        screen.reading.withLock { $0 = false }
    }

    /// Writes `text` to the terminal as typed or pasted (`"\u{03}"` is Ctrl-C, `"\u{04}"` Ctrl-D).
    public func type(_ text: String) {
        var data = Array(text.utf8)
        var offset = 0
        while offset < data.count {
            let count = data.withUnsafeMutableBytes { write(master, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0, errno == EINTR || errno == EAGAIN { continue }
            guard count > 0 else { return }
            offset += count
        }
    }

    /// Everything read from the terminal so far (the program's output and the echo), with the
    /// terminal's CR LF as LF.
    public var output: String {
        String(decoding: screen.bytes.withLock { $0 }, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
    }

    /// Waits until ``output`` contains `text`; false after `timeout` or once the program has ended
    /// without it.
    public func waitFor(_ text: String, timeout: Duration = .seconds(60)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.contains(text) { return true }
            if !screen.reading.withLock({ $0 }) { return output.contains(text) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Waits for the exit (killing the program after `timeout`) and for its output to be read;
    /// returns the exit status, 128 + the signal for a program a signal ended, -1 after the kill.
    public func wait(timeout: Duration = .seconds(60)) async -> Int32 {
        let deadline = ContinuousClock.now + timeout
        var raw: Int32 = 0
        while true {
            if let known = status.withLock({ $0 }) { return known }
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == pid {
                let signal = raw & 0x7f
                let code = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
                status.withLock { $0 = code }
                let drained = ContinuousClock.now + .seconds(10)
                while screen.reading.withLock({ $0 }), ContinuousClock.now < drained { try? await Task.sleep(for: .milliseconds(5)) }
                return code
            }
            if reaped < 0, errno != EINTR { return -1 }
            if ContinuousClock.now >= deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &raw, 0)
                status.withLock { $0 = -1 }
                return -1
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
