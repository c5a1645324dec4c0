#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The device code's remaining time on stderr: updated in place every second on a terminal,
/// a plain line each minute otherwise. Notes (such as `slow_down`) are printed above it.
final class Countdown: Sendable {
    private struct Inner {
        var expiresAt: Date?
        /// What expires: "the code" (device), "the request" (CIBA).
        var what = "the code"
        var task: Task<Void, Never>?
        var drawn = false
    }
    private let inner = Mutex(Inner())
    private let sink: any TextSink
    private let terminal: Bool
    private let style: Style
    private let now: @Sendable () -> Date

    init(sink: any TextSink, terminal: Bool, style: Style, now: @escaping @Sendable () -> Date) {
        self.sink = sink
        self.terminal = terminal
        self.style = style
        self.now = now
    }

    /// Starts counting down to `expiresAt`, when `what` expires (ticking on the real clock: this is for people).
    func start(expiresAt: Date, what: String = "the code") {
        let previous = inner.withLock { inner -> Task<Void, Never>? in
            inner.expiresAt = expiresAt
            inner.what = what
            defer { inner.task = nil }
            return inner.task
        }
        previous?.cancel()
        let tick: Duration = terminal ? .seconds(1) : .seconds(60)
        let task = Task { [self] in
            while !Task.isCancelled {
                draw()
                try? await Task.sleep(for: tick)
            }
        }
        let stopped = inner.withLock { inner -> Bool in
            guard inner.expiresAt != nil else { return true }
            inner.task = task
            return false
        }
        if stopped { task.cancel() }
    }

    /// Prints `text` as its own line, then redraws the countdown under it.
    func note(_ text: String) {
        inner.withLock { inner in
            sink.write((inner.drawn ? "\r\u{1B}[2K" : "") + text + "\n")
            inner.drawn = false
        }
        if terminal { draw() }
    }

    /// Stops and erases the countdown line.
    func stop() {
        let task = inner.withLock { inner -> Task<Void, Never>? in
            if inner.drawn { sink.write("\r\u{1B}[2K") }
            inner.drawn = false
            defer { inner.task = nil; inner.expiresAt = nil }
            return inner.task
        }
        task?.cancel()
    }

    private func draw() {
        inner.withLock { inner in
            guard let expiresAt = inner.expiresAt else { return }
            let remaining = Timestamps.clock(Timestamps.wholeSeconds(expiresAt.timeIntervalSince(now()).rounded(.up)))
            if terminal {
                sink.write("\r\u{1B}[2K" + style.dim("Waiting for approval… \(inner.what) expires in \(remaining)"))
                inner.drawn = true
            } else {
                sink.write("Waiting for approval; \(inner.what) expires in \(remaining).\n")
            }
        }
    }
}
