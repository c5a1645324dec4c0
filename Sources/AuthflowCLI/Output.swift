#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Synchronization

/// Where the CLI writes text: a terminal, a pipe, or a buffer in tests.
public protocol TextSink: Sendable {
    /// Writes `text` as is (no newline is added).
    func write(_ text: String)
}

/// A sink over a file descriptor; each call is one unbuffered `write(2)` loop.
public struct FileDescriptorSink: TextSink {
    /// The descriptor written to.
    public let fd: Int32

    /// Wraps `fd` (1 for standard output, 2 for standard error).
    public init(fd: Int32) { self.fd = fd }

    /// Writes every byte of `text`, retrying on `EINTR`; a closed reader ends the write silently.
    public func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            offset += count
        }
    }
}

/// A sink that keeps everything written, for tests.
public final class BufferSink: TextSink {
    private let buffer = Mutex("")

    /// An empty buffer.
    public init() {}

    /// Appends `text`.
    public func write(_ text: String) { buffer.withLock { $0 += text } }

    /// Everything written so far.
    public var text: String { buffer.withLock { $0 } }

    /// The text split into lines (without the final empty one).
    public var lines: [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast(text.hasSuffix("\n") ? 1 : 0)
    }
}

/// The two output streams of a run and what they are connected to.
public struct Output: Sendable {
    /// Results: tokens, JSON lines, tables, the device code to type.
    public var stdout: any TextSink
    /// Progress, countdowns, notes and errors.
    public var stderr: any TextSink
    /// True when standard output is a terminal (enables colour there).
    public var stdoutIsTerminal: Bool
    /// True when standard error is a terminal (enables the in-place countdown and colour).
    public var stderrIsTerminal: Bool

    /// Creates an output from two sinks.
    public init(stdout: any TextSink, stderr: any TextSink, stdoutIsTerminal: Bool = false, stderrIsTerminal: Bool = false) {
        self.stdout = stdout
        self.stderr = stderr
        self.stdoutIsTerminal = stdoutIsTerminal
        self.stderrIsTerminal = stderrIsTerminal
    }

    /// The process's standard output and standard error, with `isatty(3)` for each.
    public static var standard: Output {
        Output(stdout: FileDescriptorSink(fd: 1), stderr: FileDescriptorSink(fd: 2),
               stdoutIsTerminal: isatty(1) == 1, stderrIsTerminal: isatty(2) == 1)
    }

    /// An output that records both streams, for tests.
    public static func capture(stderrIsTerminal: Bool = false) -> (output: Output, stdout: BufferSink, stderr: BufferSink) {
        let out = BufferSink()
        let err = BufferSink()
        return (Output(stdout: out, stderr: err, stderrIsTerminal: stderrIsTerminal), out, err)
    }
}

/// ANSI styling that switches itself off for non-terminals, `NO_COLOR` and `TERM=dumb`.
struct Style: Sendable {
    let enabled: Bool

    init(terminal: Bool, environment: [String: String]) {
        enabled = terminal && (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
    }

    private func wrap(_ text: String, _ code: String) -> String { enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
    func bold(_ text: String) -> String { wrap(text, "1") }
    func dim(_ text: String) -> String { wrap(text, "2") }
    func red(_ text: String) -> String { wrap(text, "31") }
    func green(_ text: String) -> String { wrap(text, "32") }
    func yellow(_ text: String) -> String { wrap(text, "33") }
}
