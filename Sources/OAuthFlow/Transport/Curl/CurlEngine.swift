internal import CCurl
import Glibc
import Synchronization

/// One `curl_multi` handle and the thread that drives it through libcurl's socket interface.
///
/// The thread waits in `epoll_wait` on the sockets libcurl asks it to watch
/// (`CURLMOPT_SOCKETFUNCTION`) and on an eventfd, for at most libcurl's next timeout
/// (`CURLMOPT_TIMERFUNCTION`); a ready socket goes to `curl_multi_socket_action` with its readiness,
/// a passed timeout as `CURL_SOCKET_TIMEOUT`. Every multi call, and so every libcurl callback, is
/// made on this thread. Callers hand transfers over with ``add(_:)`` and ``cancel(_:)``, which queue
/// a command and write the eventfd only when the thread sleeps in `epoll_wait` (or is about to).
/// Easy handles are kept for reuse (their transport-wide options stay set), and so is the header
/// list of the last request shape.
final class CurlEngine: @unchecked Sendable {   // safe: `multi`, `activeCount`, `timerDeadline` and `watches` are used only on the engine thread; the rest is a Mutex, an atomic or immutable
    let library: CurlLibrary
    let settings: CurlSettings
    private let multi: UnsafeMutableRawPointer
    /// The epoll set the thread waits on.
    private let poller: Int32
    /// The eventfd that wakes the thread: registered edge-triggered and never read, so a wake-up
    /// is one `write` (see `c_oauthflow_eventfd_signal`).
    private let wakeup: Int32

    private var activeCount = 0
    /// When libcurl wants `CURL_SOCKET_TIMEOUT` (CLOCK_MONOTONIC nanoseconds; 0 for at once), nil for never.
    private var timerDeadline: UInt64?
    /// What libcurl asked to watch on each descriptor and what the epoll set holds for it, by descriptor.
    private var watches: [Watch] = []

    private struct Watch {
        /// The epoll events libcurl wants for the descriptor; 0 when it watches nothing there.
        var wanted: UInt32 = 0
        /// The events registered in the epoll set; 0 when it is not registered.
        var registered: UInt32 = 0
        /// A socket libcurl opened and will close through the engine's callbacks
        /// (`CURLOPT_OPENSOCKETFUNCTION`, `CURLOPT_CLOSESOCKETFUNCTION`), so ``registered`` is exact
        /// even while libcurl does not watch it.
        var owned = false
    }

    private struct Commands {
        var added: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var stopping = false
        var isEmpty: Bool { added.isEmpty && cancelled.isEmpty && !stopping }
    }
    private let commands = Mutex(Commands())
    /// True while the thread is in (or about to enter) `epoll_wait`: only then does a command wake it.
    private let sleeping = Atomic<Bool>(false)

    /// Idle easy handles, at most ``maximumIdleHandles``.
    private let idleHandles = Mutex<[CurlEasyHandle]>([])
    static let maximumIdleHandles = 64

    /// The header list built for the last request headers, reused while they repeat.
    private struct CachedHeaders {
        var headers: [(name: String, value: String)]
        var sendsBody: Bool
        var list: CurlHeaderList
    }
    private let cachedHeaders = Mutex<CachedHeaders?>(nil)

    /// A multi handle, its epoll set and eventfd, and the thread; nil when any cannot be made.
    init?(_ library: CurlLibrary, settings: CurlSettings) {
        let api = library.api
        guard let multi = api.pointee.multi_init() else { return nil }
        let poller = c_oauthflow_epoll_create()
        let wakeup = c_oauthflow_eventfd()
        guard poller >= 0, wakeup >= 0,
              c_oauthflow_epoll_ctl(poller, c_oauthflow_epoll_add, wakeup, c_oauthflow_epollin | c_oauthflow_epollet) == 0
        else {
            if poller >= 0 { close(poller) }
            if wakeup >= 0 { close(wakeup) }
            _ = api.pointee.multi_cleanup(multi)
            return nil
        }
        self.library = library
        self.settings = settings
        self.multi = multi
        self.poller = poller
        self.wakeup = wakeup
        // Keep idle connections to many hosts (and many parallel ones to one host over HTTP/1.1).
        _ = c_oauthflow_curl_multi_setopt_long(api, multi, CURLMOPT_MAXCONNECTS, 64)
        let context = Unmanaged.passUnretained(self).toOpaque()   // the thread holds the engine while libcurl can call back
        _ = c_oauthflow_curl_multi_setopt_pointer(api, multi, CURLMOPT_SOCKETDATA, context)
        _ = c_oauthflow_curl_multi_setopt_socket_function(api, multi) { _, socket, what, context, _ in
            guard let context else { return -1 }
            return Unmanaged<CurlEngine>.fromOpaque(context).takeUnretainedValue().watch(socket, what)
        }
        _ = c_oauthflow_curl_multi_setopt_pointer(api, multi, CURLMOPT_TIMERDATA, context)
        _ = c_oauthflow_curl_multi_setopt_timer_function(api, multi) { _, milliseconds, context in
            guard let context else { return -1 }
            Unmanaged<CurlEngine>.fromOpaque(context).takeUnretainedValue().setTimer(milliseconds)
            return 0
        }
        // The thread holds the engine (the closure's reference) until its loop ends.
        guard DetachedThread.start(name: "OAuthFlow.curl", { [self] in self.run() }) else {
            close(poller)
            close(wakeup)
            _ = api.pointee.multi_cleanup(multi)
            return nil
        }
    }

    // MARK: Caller side

    /// A transfer for `request` on an idle handle (or a new one) with the header list it needs.
    /// - Throws: ``OAuthError`` `.configuration` for a malformed method or header; `.transport` when libcurl cannot allocate.
    func transfer(for request: HTTPRequest) throws(OAuthError) -> CurlTransfer {
        let sendsBody = !(request.body == nil && (request.method == "GET" || request.method == "HEAD"))
        let list = try headerList(for: request.headers, sendsBody: sendsBody)
        let easy: CurlEasyHandle
        if let idle = idleHandles.withLock({ $0.popLast() }) {
            easy = idle
        } else {
            guard let made = CurlEasyHandle(library) else { throw OAuthError(.transport, message: "libcurl could not create a handle") }
            CurlTransfer.configure(made, settings)
            trackSockets(of: made)
            easy = made
        }
        return try CurlTransfer(request, easy: easy, headerList: list, settings: settings)
    }

    /// The `curl_slist` for `headers` plus `Expect:` (no 100-continue round trip), reused when the
    /// headers (and whether a body is sent) are those of the previous request.
    ///
    /// With a body, `Content-Type: application/x-www-form-urlencoded` is left to libcurl, which
    /// sends exactly that line for a POST without a `Content-Type` of its own (and copies it
    /// without formatting each byte, as it does a custom header line).
    private func headerList(for headers: [(name: String, value: String)], sendsBody: Bool) throws(OAuthError) -> CurlHeaderList {
        if let cached = cachedHeaders.withLock({ cached -> CurlHeaderList? in
            guard let cached, cached.sendsBody == sendsBody, Self.same(cached.headers, headers) else { return nil }
            return cached.list
        }) {
            return cached
        }
        let list = CurlHeaderList(library)
        var hasExpect = false
        for header in headers {
            // Bytes, not Characters: "\r\n" is a single Character and would slip past a Character test.
            guard CurlTransfer.isToken(header.name), !header.value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                throw OAuthError(.configuration, message: "the request header \"\(CurlTransfer.printable(header.name))\" is malformed")
            }
            if ASCIIText.equalsIgnoringCase(header.name, "expect") { hasExpect = true }
            if sendsBody, ASCIIText.equalsIgnoringCase(header.name, "content-type"), header.value == "application/x-www-form-urlencoded" {
                continue
            }
            // "Name;" is libcurl's spelling of an empty value ("Name:" would remove the header).
            let line = header.value.isEmpty ? header.name + ";" : header.name + ": " + header.value
            guard list.append(line) else { throw OAuthError(.transport, message: "libcurl could not allocate a header") }
        }
        if !hasExpect {
            guard list.append("Expect:") else { throw OAuthError(.transport, message: "libcurl could not allocate a header") }
        }
        cachedHeaders.withLock { $0 = CachedHeaders(headers: headers, sendsBody: sendsBody, list: list) }
        return list
    }

    private static func same(_ a: [(name: String, value: String)], _ b: [(name: String, value: String)]) -> Bool {
        guard a.count == b.count else { return false }
        for index in a.indices where a[index].name != b[index].name || a[index].value != b[index].value { return false }
        return true
    }

    /// Has libcurl open and close the sockets of `easy` through the engine, which then knows when a
    /// descriptor it keeps registered is closed (see ``watch(_:_:)``). The socket is made exactly
    /// as libcurl makes it without the callback: `socket(family, type, protocol)`.
    private func trackSockets(of easy: CurlEasyHandle) {
        let context = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        easy.set(CURLOPT_OPENSOCKETDATA, pointer: context)
        easy.set(opensocket: { context, _, address in
            guard let context, let address else { return CURL_SOCKET_BAD }
            let socket = Glibc.socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
            if socket >= 0 { Unmanaged<CurlEngine>.fromOpaque(context).takeUnretainedValue().opened(socket) }
            return socket
        })
        easy.set(CURLOPT_CLOSESOCKETDATA, pointer: context)
        easy.set(closesocket: { context, socket in
            if let context { Unmanaged<CurlEngine>.fromOpaque(context).takeUnretainedValue().closing(socket) }
            return close(socket)
        })
    }

    func add(_ transfer: CurlTransfer) {
        commands.withLock { $0.added.append(transfer) }
        wake()
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelled.store(true, ordering: .relaxed)
        commands.withLock { $0.cancelled.append(transfer) }
        wake()
    }

    /// Ends the thread after it finished what it holds; called when the transport goes away.
    func stop() {
        commands.withLock { $0.stopping = true }
        wake()
    }

    /// Wakes the thread if it sleeps (or is about to): the command was queued before, so either the
    /// thread sees it when it checks the queue after raising `sleeping`, or this sees `sleeping`.
    private func wake() {
        if sleeping.exchange(false, ordering: .sequentiallyConsistent) {
            _ = c_oauthflow_eventfd_signal(wakeup)
        }
    }

    // MARK: Engine thread

    private func run() {
        let api = library.api
        var running: Int32 = 0
        var events = [c_oauthflow_event](repeating: c_oauthflow_event(), count: 64)
        var next = Commands()
        var stopRequested = false
        while true {
            commands.withLock { swap(&$0, &next) }
            for transfer in next.added {
                if transfer.cancelled.load(ordering: .relaxed) {
                    transfer.finish(.failure(transfer.cancellation))
                } else if api.pointee.multi_add_handle(multi, transfer.easy.raw) != CURLM_OK {
                    transfer.finish(transfer.result(CURLE_FAILED_INIT, library: library))
                } else {
                    // Retained while in the multi; released in `completed` or by the cancellation below.
                    _ = Unmanaged.passRetained(transfer)
                    transfer.isActive = true
                    activeCount += 1
                }
            }
            for transfer in next.cancelled where transfer.isActive {
                _ = api.pointee.multi_remove_handle(multi, transfer.easy.raw)
                transfer.isActive = false
                activeCount -= 1
                transfer.finish(.failure(transfer.cancellation))
                Unmanaged.passUnretained(transfer).release()
            }
            if next.stopping { stopRequested = true }
            next.added.removeAll(keepingCapacity: true)
            next.cancelled.removeAll(keepingCapacity: true)
            next.stopping = false
            if stopRequested && activeCount == 0 { break }

            // libcurl's timeout: a transfer just added (libcurl sets 0), a deadline, a retry.
            if let deadline = timerDeadline, deadline == 0 || deadline <= Self.now() {
                timerDeadline = nil
                _ = api.pointee.multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
                readCompleted()
                continue
            }

            // Waits for a watched socket, libcurl's next timeout, or a wake-up from add/cancel/stop.
            sleeping.store(true, ordering: .sequentiallyConsistent)
            if !commands.withLock({ $0.isEmpty }) {
                sleeping.store(false, ordering: .relaxed)
                continue
            }
            let count = events.withUnsafeMutableBufferPointer { buffer in
                c_oauthflow_epoll_wait(poller, buffer.baseAddress, Int32(buffer.count), waitMilliseconds())
            }
            sleeping.store(false, ordering: .relaxed)
            guard count > 0 else { continue }   // a timeout (handled above next time round) or EINTR
            for index in 0..<Int(count) where events[index].fd != wakeup {
                ready(events[index].fd, events: events[index].events, running: &running)
            }
            readCompleted()
        }
        // Closes the cached connections (libcurl calls back here while doing so).
        _ = api.pointee.multi_cleanup(multi)
        close(poller)
        close(wakeup)
    }

    /// `epoll_wait`'s timeout: until libcurl's timer (rounded up to a whole millisecond), or none.
    private func waitMilliseconds() -> Int32 {
        guard let deadline = timerDeadline else { return -1 }
        let now = Self.now()
        guard deadline > now else { return 0 }
        return Int32(clamping: (deadline - now + 999_999) / 1_000_000)
    }

    /// A ready descriptor: its readiness to libcurl, or, for a connection no transfer watches
    /// (see ``watch(_:_:)``), out of the epoll set.
    private func ready(_ socket: Int32, events: UInt32, running: inout Int32) {
        let index = Int(socket)
        guard index >= 0, index < watches.count, watches[index].registered != 0 else { return }
        guard watches[index].wanted != 0 else {
            // An idle connection that became readable (closed by the server, or sent something
            // unasked): stop watching it; libcurl checks a connection before it reuses it.
            _ = c_oauthflow_epoll_ctl(poller, c_oauthflow_epoll_del, socket, 0)
            watches[index].registered = 0
            return
        }
        var bits: Int32 = 0
        if events & (c_oauthflow_epollin | c_oauthflow_epollhup | c_oauthflow_epollrdhup) != 0 { bits |= CURL_CSELECT_IN }
        if events & c_oauthflow_epollout != 0 { bits |= CURL_CSELECT_OUT }
        if events & c_oauthflow_epollerr != 0 { bits |= CURL_CSELECT_ERR }
        _ = library.api.pointee.multi_socket_action(multi, socket, bits, &running)
    }

    /// `CURLMOPT_SOCKETFUNCTION`: libcurl wants `socket` watched for `what` (`CURL_POLL_*`), or no more.
    ///
    /// A socket libcurl stops watching while it waited for input stays registered for input: a
    /// kept-alive connection does so between two requests, and the next request on it then costs no
    /// `epoll_ctl` at all instead of a `DEL` and an `ADD`. That is exact for the sockets the engine
    /// saw libcurl open (``opened(_:)``), whose closing it sees too (``closing(_:)``). Any other
    /// descriptor (the threaded resolver's socket pair) may be closed without a word, after which
    /// the kernel has dropped its registration and the number may come back as another file: its
    /// kept registration is renewed with `EPOLL_CTL_MOD`, followed by `ADD` when the kernel no longer
    /// holds it. A kept socket that turns readable is dropped (``ready(_:events:running:)``).
    private func watch(_ socket: Int32, _ what: Int32) -> Int32 {
        let index = Int(socket)
        guard index >= 0 else { return -1 }
        if index >= watches.count { watches.append(contentsOf: repeatElement(Watch(), count: index + 1 - watches.count)) }
        var watch = watches[index]
        defer { watches[index] = watch }
        if what == CURL_POLL_REMOVE {
            watch.wanted = 0
            if watch.registered != 0 && watch.registered != c_oauthflow_epollin {
                _ = c_oauthflow_epoll_ctl(poller, c_oauthflow_epoll_del, socket, 0)
                watch.registered = 0
            }
            return 0
        }
        var events: UInt32 = 0
        if what & CURL_POLL_IN != 0 { events |= c_oauthflow_epollin }
        if what & CURL_POLL_OUT != 0 { events |= c_oauthflow_epollout }
        var failure: Int32 = 0
        if watch.registered == 0 {
            failure = c_oauthflow_epoll_ctl(poller, c_oauthflow_epoll_add, socket, events)
            if failure == EEXIST { failure = c_oauthflow_epoll_ctl(poller, c_oauthflow_epoll_mod, socket, events) }
        } else if watch.registered != events || (watch.wanted == 0 && !watch.owned) {
            failure = c_oauthflow_epoll_ctl(poller, c_oauthflow_epoll_mod, socket, events)
            if failure == ENOENT { failure = c_oauthflow_epoll_ctl(poller, c_oauthflow_epoll_add, socket, events) }
        }
        guard failure == 0 else {
            // Not watched: the transfer ends at its deadline. -1 tells libcurl the callback failed.
            watch.wanted = 0
            watch.registered = 0
            return -1
        }
        watch.wanted = events
        watch.registered = events
        return 0
    }

    /// `CURLOPT_OPENSOCKETFUNCTION` made `socket`: whatever the number was before, it is a new file,
    /// registered nowhere.
    private func opened(_ socket: Int32) {
        let index = Int(socket)
        if index >= watches.count { watches.append(contentsOf: repeatElement(Watch(), count: index + 1 - watches.count)) }
        watches[index] = Watch(owned: true)
    }

    /// `CURLOPT_CLOSESOCKETFUNCTION` is about to close `socket`, which drops its registration.
    private func closing(_ socket: Int32) {
        let index = Int(socket)
        if index >= 0, index < watches.count { watches[index] = Watch() }
    }

    /// `CURLMOPT_TIMERFUNCTION`: call `CURL_SOCKET_TIMEOUT` in `milliseconds` (0: at once; -1: no timer).
    private func setTimer(_ milliseconds: Int) {
        if milliseconds < 0 {
            timerDeadline = nil
        } else if milliseconds == 0 {
            timerDeadline = 0
        } else {
            timerDeadline = Self.now() &+ UInt64(milliseconds) &* 1_000_000
        }
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    /// Every transfer libcurl reports done, then their callers resumed (see ``resume(_:)``).
    private func readCompleted() {
        var left: Int32 = 0
        var done: [(CurlTransfer, Result<HTTPResponse, OAuthError>)] = []
        while let message = library.api.pointee.multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            if let finished = completed(handle, code: c_oauthflow_curl_msg_result(message)) { done.append(finished) }
        }
        resume(done)
    }

    /// Resumes the caller of the first transfer; it resumes the others as soon as it runs
    /// (``CurlTransfer/resumeFollowers()``, in ``CurlTransport/send(_:)``).
    ///
    /// Each resumption from this thread makes Dispatch wake a parked worker of the cooperative pool
    /// when none runs, and on a busy CPU the woken worker takes the CPU at once: resuming ten callers
    /// from here could cost ten wake-ups and twenty context switches. Resumed from the first caller's
    /// worker, the others are queued behind it without a wake-up.
    private func resume(_ done: [(CurlTransfer, Result<HTTPResponse, OAuthError>)]) {
        guard let (first, result) = done.first else { return }
        if done.count > 1 { first.followers = Array(done.dropFirst()) }
        first.finish(result)
    }

    /// A transfer libcurl finished: out of the multi, the result read, the handle back in the pool
    /// (after a clean transfer only); the transfer and its result, for its caller.
    private func completed(_ handle: UnsafeMutableRawPointer, code: CURLcode) -> (CurlTransfer, Result<HTTPResponse, OAuthError>)? {
        var context: UnsafeMutableRawPointer?
        _ = c_oauthflow_curl_easy_getinfo_pointer(library.api, handle, CURLINFO_PRIVATE, &context)
        _ = library.api.pointee.multi_remove_handle(multi, handle)
        guard let context else { return nil }
        // Every handle in the multi belongs to an active transfer retained by `run`.
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeRetainedValue()
        transfer.isActive = false
        activeCount -= 1
        let result = transfer.result(code, library: library)
        if code == CURLE_OK {
            let easy = transfer.easy
            idleHandles.withLock { idle in
                if idle.count < Self.maximumIdleHandles { idle.append(easy) }
            }
        }
        return (transfer, result)
    }
}
