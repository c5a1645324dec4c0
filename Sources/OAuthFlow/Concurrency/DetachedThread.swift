import Glibc

/// A POSIX thread of its own for work that blocks in the kernel (libcurl's poll loop, the
/// loopback receiver's `poll`), so it never holds one of the concurrency runtime's threads.
///
/// Foundation's `Thread` would do the same, but it lives in swift-corelibs-foundation, which the
/// library does not link (FoundationEssentials only: a smaller executable that starts faster).
package enum DetachedThread {
    /// Runs `body` on a new detached thread named `name` (its first 15 bytes, the kernel's limit).
    /// - Returns: false when the system could not create a thread; `body` then never runs.
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        guard let thread = spawn(name: name, body) else { return false }
        pthread_detach(thread)   // nobody joins it: its resources go when it ends
        return true
    }

    /// Starts `body` on a new thread named `name`: the one `pthread_create` of the detached and the
    /// joinable threads. Nil when the system could not create a thread; `body` then never runs.
    fileprivate static func spawn(name: String, _ body: @escaping @Sendable () -> Void) -> pthread_t? {
        let context = Unmanaged.passRetained(Context(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            Unmanaged<Context>.fromOpaque(raw).takeRetainedValue().run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<Context>.fromOpaque(context).release()
            return nil
        }
        return thread
    }

    private final class Context: Sendable {
        let name: [UInt8]
        let body: @Sendable () -> Void

        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = Array(name.utf8.prefix(15))
            self.body = body
        }

        /// Names the thread (what `top -H`, `ps -L` and debuggers show), then runs the body.
        /// `pthread_setname_np` is not visible to Swift without `_GNU_SOURCE`; writing the name to
        /// the thread's `comm` file is what it does on Linux. A failure leaves the thread unnamed.
        func run() {
            do throws(SystemError) {
                let comm = try FileDescriptor(opening: "/proc/thread-self/comm", O_WRONLY)
                _ = name.withUnsafeBytes { write(comm.raw, $0.baseAddress, $0.count) }
            } catch {}
            body()
        }
    }
}

/// A POSIX thread that someone joins (the test servers' threads, which their `stop()` waits for),
/// named and started as ``DetachedThread`` starts its threads.
package struct JoinableThread: Sendable {
    private let thread: pthread_t

    /// Starts `body` on a new thread named `name` (its first 15 bytes); nil when no thread could be made.
    package init?(name: String, _ body: @escaping @Sendable () -> Void) {
        guard let thread = DetachedThread.spawn(name: name, body) else { return nil }
        self.thread = thread
    }

    /// Waits until the thread has ended and frees it; call exactly once.
    package func join() {
        _ = pthread_join(thread, nil)
    }
}
