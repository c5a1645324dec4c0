import Glibc

/// A POSIX thread that someone joins: the test servers' threads, which ``TestHTTPServer/stop()``
/// waits for (Foundation's `Thread` cannot be joined).
struct JoinableThread: Sendable {
    private let thread: pthread_t

    /// Starts `body` on a new thread named `name` (its first 15 bytes); nil when no thread could be made.
    init?(name: String, _ body: @escaping @Sendable () -> Void) {
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
        self.thread = thread
    }

    /// Waits until the thread has ended and frees it; call exactly once.
    func join() {
        _ = pthread_join(thread, nil)
    }

    private final class Context: Sendable {
        let name: String
        let body: @Sendable () -> Void

        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }

        /// Names the thread through `/proc/thread-self/comm` (what `pthread_setname_np` does), then runs the body.
        func run() {
            let comm = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            if comm >= 0 {
                _ = Array(name.utf8.prefix(15)).withUnsafeBytes { write(comm, $0.baseAddress, $0.count) }
                close(comm)
            }
            body()
        }
    }
}
