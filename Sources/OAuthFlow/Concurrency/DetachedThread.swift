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
        let context = Unmanaged.passRetained(Context(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            Unmanaged<Context>.fromOpaque(raw).takeRetainedValue().run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<Context>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)   // nobody joins it: its resources go when it ends
        return true
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
