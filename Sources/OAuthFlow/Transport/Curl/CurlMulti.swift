internal import CCurl
import Glibc

/// Owns one `curl_multi` handle and the epoll set, eventfd and timerfd that drive it through
/// libcurl's socket interface; frees all four in `deinit`, the handle first.
///
/// libcurl's multi callbacks (`CURLMOPT_SOCKETFUNCTION`, `CURLMOPT_TIMERFUNCTION`) and the socket
/// callbacks of the easy handles it drives (``trackSockets(of:)``) come back here: what libcurl
/// watches on each descriptor and when it wants its timeout. They run inside multi calls, all made
/// by the holder of the engine's driving lock (see ``CurlEngine``: the engine thread, or a caller
/// starting its transfer while the engine waits), or inside `deinit`, where `curl_multi_cleanup`
/// closes the cached connections; this object outlives both. Only ``signal()`` and ``wait(_:timeout:)``
/// are called without the lock.
final class CurlMulti {
    let library: CurlLibrary
    /// The `CURLM *`; multi calls on it are made under the engine's driving lock only.
    let raw: UnsafeMutableRawPointer
    /// The epoll set the engine thread waits on.
    private let poller: FileDescriptor
    /// The eventfd that wakes the engine thread: registered edge-triggered and never read, so a
    /// wake-up is one `write` (see `c_oauthflow_eventfd_signal`).
    private let wakeup: FileDescriptor
    /// A timerfd in the epoll set (level-triggered, read when it fires): armed by a caller that
    /// started a transfer while the engine waits, when libcurl's timeout comes before the engine's
    /// wait ends (see ``coverTimeout()``).
    private let alarm: FileDescriptor

    /// When libcurl wants `CURL_SOCKET_TIMEOUT` (CLOCK_MONOTONIC nanoseconds; 0 for at once), nil for never.
    private var timerDeadline: UInt64?
    /// When the engine's current (or last) `epoll_wait` ends by itself; `UInt64.max` for never.
    private var waitDeadline = UInt64.max
    /// When the alarm expires, until the engine sees it fire; nil while it is not armed.
    private var alarmDeadline: UInt64?
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

    /// A multi handle with its epoll set, eventfd and timerfd; nil when any cannot be made.
    init?(_ library: CurlLibrary) {
        let api = library.api
        // The descriptors first, the handle last: a descriptor made before a failure closes with
        // its owner, and no failure leaves a handle to clean up.
        let poller: FileDescriptor
        do throws(SystemError) { poller = try FileDescriptor(returnedBy: c_oauthflow_epoll_create()) } catch { return nil }
        let wakeup: FileDescriptor
        do throws(SystemError) { wakeup = try FileDescriptor(returnedBy: c_oauthflow_eventfd()) } catch { return nil }
        let alarm: FileDescriptor
        do throws(SystemError) { alarm = try FileDescriptor(returnedBy: c_oauthflow_timerfd()) } catch { return nil }
        guard c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_add, wakeup.raw, c_oauthflow_epollin | c_oauthflow_epollet) == 0,
              c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_add, alarm.raw, c_oauthflow_epollin) == 0,
              let raw = api.pointee.multi_init()
        else { return nil }
        self.library = library
        self.raw = raw
        self.poller = poller
        self.wakeup = wakeup
        self.alarm = alarm
        // Keep idle connections to many hosts (and many parallel ones to one host over HTTP/1.1).
        _ = c_oauthflow_curl_multi_setopt_long(api, raw, CURLMOPT_MAXCONNECTS, 64)
        let context = Unmanaged.passUnretained(self).toOpaque()   // libcurl calls back only while this object lives
        _ = c_oauthflow_curl_multi_setopt_pointer(api, raw, CURLMOPT_SOCKETDATA, context)
        _ = c_oauthflow_curl_multi_setopt_socket_function(api, raw) { _, socket, what, context, _ in
            guard let context else { return -1 }
            return Unmanaged<CurlMulti>.fromOpaque(context).takeUnretainedValue().watch(socket, what)
        }
        _ = c_oauthflow_curl_multi_setopt_pointer(api, raw, CURLMOPT_TIMERDATA, context)
        _ = c_oauthflow_curl_multi_setopt_timer_function(api, raw) { _, milliseconds, context in
            guard let context else { return -1 }
            Unmanaged<CurlMulti>.fromOpaque(context).takeUnretainedValue().setTimer(milliseconds)
            return 0
        }
    }

    /// Closes the cached connections (libcurl calls back here while doing so) and frees the handle;
    /// the epoll set, the eventfd and the timerfd close after it.
    deinit { _ = library.api.pointee.multi_cleanup(raw) }

    /// Has libcurl open and close the sockets of `easy` through this object, which then knows when a
    /// descriptor it keeps registered is closed (see ``watch(_:_:)``). The socket is made exactly
    /// as libcurl makes it without the callback: `socket(family, type, protocol)`, and closed with
    /// `close`: libcurl owns it from the open callback to the close callback.
    func trackSockets(of easy: CurlEasyHandle) {
        let context = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        easy.set(CURLOPT_OPENSOCKETDATA, pointer: context)
        easy.set(opensocket: { context, _, address in
            guard let context, let address else { return CURL_SOCKET_BAD }
            let socket = Glibc.socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
            if socket >= 0 { Unmanaged<CurlMulti>.fromOpaque(context).takeUnretainedValue().opened(socket) }
            return socket
        })
        easy.set(CURLOPT_CLOSESOCKETDATA, pointer: context)
        easy.set(closesocket: { context, socket in
            if let context { Unmanaged<CurlMulti>.fromOpaque(context).takeUnretainedValue().closing(socket) }
            return close(socket)
        })
    }

    // MARK: Any thread

    /// Wakes the engine thread from `epoll_wait` (one eventfd write).
    func signal() {
        _ = c_oauthflow_eventfd_signal(wakeup.raw)
    }

    // MARK: Holder of the driving lock

    /// Runs libcurl's timeout (`CURL_SOCKET_TIMEOUT`) when it is due; true when it ran.
    func runTimerIfDue(_ running: inout Int32) -> Bool {
        guard let deadline = timerDeadline, deadline == 0 || deadline <= Self.now() else { return false }
        timerDeadline = nil
        _ = library.api.pointee.multi_socket_action(raw, CURL_SOCKET_TIMEOUT, 0, &running)
        return true
    }

    /// `epoll_wait`'s timeout for the wait about to begin: until libcurl's timer (rounded up to a
    /// whole millisecond), or none; remembers when that wait ends.
    func prepareWait() -> Int32 {
        guard let deadline = timerDeadline else {
            waitDeadline = UInt64.max
            return -1
        }
        waitDeadline = deadline
        let now = Self.now()
        guard deadline > now else { return 0 }
        return Int32(clamping: (deadline - now + 999_999) / 1_000_000)
    }

    /// After a caller started a transfer while the engine waits (``CurlEngine``): makes sure the
    /// engine wakes by libcurl's timeout. When the engine's wait (or the armed alarm) ends by then
    /// already, nothing is done; otherwise the alarm is armed for it. False when the engine must be
    /// woken now instead (libcurl wants its timeout at once, or the alarm cannot be armed).
    func coverTimeout() -> Bool {
        guard let deadline = timerDeadline else { return true }
        guard deadline != 0 else { return false }
        if deadline >= min(waitDeadline, alarmDeadline ?? UInt64.max) { return true }
        guard c_oauthflow_timerfd_arm(alarm.raw, deadline) == 0 else { return false }
        alarmDeadline = deadline
        return true
    }

    /// Hands each ready descriptor among the first `count` `events` to libcurl, the eventfd aside;
    /// an alarm that fired is read (it has done its job: the engine is awake).
    func dispatch(_ events: [c_oauthflow_event], count: Int32, running: inout Int32) {
        for index in 0..<Int(count) where events[index].fd != wakeup.raw {
            if events[index].fd == alarm.raw {
                c_oauthflow_timerfd_clear(alarm.raw)
                alarmDeadline = nil
                continue
            }
            ready(events[index].fd, events: events[index].events, running: &running)
        }
    }

    // MARK: Engine thread, without the lock

    /// Waits in `epoll_wait` for a watched socket, `timeout` milliseconds (from ``prepareWait()``;
    /// -1 for none), the alarm, or a wake-up (``signal()``); the number of entries filled in
    /// `events`: 0 after a timeout, -1 when interrupted.
    func wait(_ events: inout [c_oauthflow_event], timeout: Int32) -> Int32 {
        events.withUnsafeMutableBufferPointer { buffer in
            c_oauthflow_epoll_wait(poller.raw, buffer.baseAddress, Int32(buffer.count), timeout)
        }
    }

    /// A ready descriptor: its readiness to libcurl, or, for a connection no transfer watches
    /// (see ``watch(_:_:)``), out of the epoll set.
    private func ready(_ socket: Int32, events: UInt32, running: inout Int32) {
        let index = Int(socket)
        guard index >= 0, index < watches.count, watches[index].registered != 0 else { return }
        guard watches[index].wanted != 0 else {
            // An idle connection that became readable (closed by the server, or sent something
            // unasked): stop watching it; libcurl checks a connection before it reuses it.
            _ = c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_del, socket, 0)
            watches[index].registered = 0
            return
        }
        var bits: Int32 = 0
        if events & (c_oauthflow_epollin | c_oauthflow_epollhup | c_oauthflow_epollrdhup) != 0 { bits |= CURL_CSELECT_IN }
        if events & c_oauthflow_epollout != 0 { bits |= CURL_CSELECT_OUT }
        if events & c_oauthflow_epollerr != 0 { bits |= CURL_CSELECT_ERR }
        _ = library.api.pointee.multi_socket_action(raw, socket, bits, &running)
    }

    /// `CURLMOPT_SOCKETFUNCTION`: libcurl wants `socket` watched for `what` (`CURL_POLL_*`), or no more.
    ///
    /// A socket libcurl stops watching while it waited for input stays registered for input: a
    /// kept-alive connection does so between two requests, and the next request on it then costs no
    /// `epoll_ctl` at all instead of a `DEL` and an `ADD`. That is exact for the sockets this object
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
                _ = c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_del, socket, 0)
                watch.registered = 0
            }
            return 0
        }
        var events: UInt32 = 0
        if what & CURL_POLL_IN != 0 { events |= c_oauthflow_epollin }
        if what & CURL_POLL_OUT != 0 { events |= c_oauthflow_epollout }
        var failure: Int32 = 0
        if watch.registered == 0 {
            failure = c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_add, socket, events)
            if failure == EEXIST { failure = c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_mod, socket, events) }
        } else if watch.registered != events || (watch.wanted == 0 && !watch.owned) {
            failure = c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_mod, socket, events)
            if failure == ENOENT { failure = c_oauthflow_epoll_ctl(poller.raw, c_oauthflow_epoll_add, socket, events) }
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
}
