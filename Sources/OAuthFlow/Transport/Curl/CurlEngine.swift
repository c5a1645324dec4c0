internal import CCurl
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Synchronization

/// One `curl_multi` handle (a ``CurlMulti``) and the thread that drives it through libcurl's socket interface.
///
/// The thread waits in `epoll_wait` on the sockets libcurl asks it to watch
/// (`CURLMOPT_SOCKETFUNCTION`), on an eventfd and on an alarm (a timerfd), for at most libcurl's next
/// timeout (`CURLMOPT_TIMERFUNCTION`); a ready socket goes to `curl_multi_socket_action` with its
/// readiness, a passed timeout as `CURL_SOCKET_TIMEOUT`.
///
/// Every multi call, and so every libcurl callback, is made under the driving lock. The engine
/// thread holds it while it works and lets go of it while it waits. Callers hand transfers over with
/// ``add(_:)`` and ``cancel(_:)``, which queue a command and write the eventfd only when the thread
/// sleeps in `epoll_wait` (or is about to), with one exception that saves the hand-over and the
/// engine's wake-up: a caller that finds the lock free and no transfer in flight starts its own
/// transfer (``startDirectly(_:)``): it adds the handle and runs libcurl's first step, which never
/// blocks (on a kept-alive connection: writing the request), then leaves the rest to the sleeping
/// engine, whose `epoll_wait` sees the socket it watches now, and whose alarm it sets when libcurl's
/// timeout comes before the engine's wait ends. The engine resumes the caller when the response is in.
/// Easy handles are kept for reuse (their transport-wide options stay set), and so is the header
/// list of the last request shape.
final class CurlEngine: @unchecked Sendable {   // safe: `multi` (but its `signal()` and `wait`), `activeCount` and `CurlTransfer.isActive` are used only under `driving`; the rest is a Mutex, an atomic or immutable
    let library: CurlLibrary
    let settings: CurlSettings
    /// The multi handle, its epoll set, eventfd and alarm: freed when the engine goes, after the thread ended.
    private let multi: CurlMulti

    /// The right to make multi calls (and to read or change ``activeCount``).
    private let driving = Mutex(())
    private var activeCount = 0 {
        didSet { hasActive.store(activeCount > 0, ordering: .relaxed) }
    }
    /// ``activeCount`` above 0, readable without the lock: while transfers are in flight (many
    /// callers at once), ``startDirectly(_:)`` does not even try the lock the engine thread needs.
    private let hasActive = Atomic<Bool>(false)
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

    /// The URL of the last request as libcurl parsed it, reused while requests go to it (a
    /// transfer holds the one it was given until it ends).
    private let cachedURL = Mutex<(text: String, parsed: CurlParsedURL)?>(nil)

    /// A multi handle, its epoll set and eventfd, and the thread; nil when any cannot be made.
    init?(_ library: CurlLibrary, settings: CurlSettings) {
        guard let multi = CurlMulti(library) else { return nil }
        self.library = library
        self.settings = settings
        self.multi = multi
        // The thread holds the engine (the closure's reference) until its loop ends.
        guard DetachedThread.start(name: "OAuthFlow.curl", { [self] in self.run() }) else { return nil }   // `multi` frees itself
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
            multi.trackSockets(of: made)
            easy = made
        }
        return try CurlTransfer(request, easy: easy, headerList: list, parsedURL: parsedURL(request.url.absoluteString), settings: settings)
    }

    /// `text` parsed by libcurl: the last request's when it is the same, else parsed now (and kept
    /// in its place); nil when libcurl has no URL API or rejects `text`.
    private func parsedURL(_ text: String) -> CurlParsedURL? {
        if let cached = cachedURL.withLock({ $0?.text == text ? $0?.parsed : nil }) { return cached }
        guard let parsed = CurlParsedURL(library, text) else { return nil }
        cachedURL.withLock { $0 = (text, parsed) }
        return parsed
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
            guard ASCIIText.isToken(header.name), !header.value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
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

    /// Hands `transfer` to the engine, or starts it on this thread when nothing is in flight and
    /// the engine is not working (``startDirectly(_:)``); its caller is resumed once it ends.
    func add(_ transfer: CurlTransfer) {
        if startDirectly(transfer) { return }
        commands.withLock { $0.added.append(transfer) }
        wake()
    }

    /// Starts `transfer` on the calling thread when the driving lock is free (the engine waits, or
    /// is between two rounds) and no transfer is in flight: adds its handle, runs libcurl's first
    /// step (non-blocking: a kept-alive connection's request is written, a new connection's connect
    /// or resolve begun), and makes sure the engine wakes by libcurl's next timeout. False when it
    /// did not start it (the caller queues it). A transfer that ends in that first step (refused at
    /// once) is resumed here.
    private func startDirectly(_ transfer: CurlTransfer) -> Bool {
        guard !hasActive.load(ordering: .relaxed) else { return false }
        var done: [(CurlTransfer, Result<HTTPResponse, OAuthError>)] = []
        let started = driving.withLockIfAvailable { _ -> Bool in
            guard activeCount == 0 else { return false }
            begin(transfer)
            var running: Int32 = 0
            // libcurl asks for its timeout at once after an add; a few rounds, then the engine's turn.
            for _ in 0..<4 where multi.runTimerIfDue(&running) { readCompleted(into: &done) }
            if !multi.coverTimeout() { wake() }
            return true
        } ?? false
        resume(done)
        return started
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
            multi.signal()
        }
    }

    // MARK: Engine thread

    /// What the engine thread does after a round under the driving lock.
    private enum Next {
        case again
        case wait(milliseconds: Int32)
        case stop
    }

    private func run() {
        var running: Int32 = 0
        var events = [c_oauthflow_event](repeating: c_oauthflow_event(), count: 64)
        var next = Commands()
        var stopRequested = false
        var done: [(CurlTransfer, Result<HTTPResponse, OAuthError>)] = []
        while true {
            let step = driving.withLock { _ -> Next in
                commands.withLock { swap(&$0, &next) }
                for transfer in next.added { begin(transfer) }
                for transfer in next.cancelled where transfer.isActive {
                    _ = library.api.pointee.multi_remove_handle(multi.raw, transfer.easy.raw)
                    transfer.isActive = false
                    activeCount -= 1
                    done.append((transfer, .failure(transfer.cancellation)))
                    Unmanaged.passUnretained(transfer).release()
                }
                if next.stopping { stopRequested = true }
                next.added.removeAll(keepingCapacity: true)
                next.cancelled.removeAll(keepingCapacity: true)
                next.stopping = false
                if stopRequested && activeCount == 0 { return .stop }

                // libcurl's timeout: a transfer just added (libcurl sets 0), a deadline, a retry.
                if multi.runTimerIfDue(&running) {
                    readCompleted(into: &done)
                    return .again
                }
                // About to wait: a command queued from now on writes the eventfd.
                sleeping.store(true, ordering: .sequentiallyConsistent)
                if !commands.withLock({ $0.isEmpty }) {
                    sleeping.store(false, ordering: .relaxed)
                    return .again
                }
                return .wait(milliseconds: multi.prepareWait())
            }
            // Callers are resumed outside the lock, so one that runs at once finds it free.
            resume(done)
            done.removeAll(keepingCapacity: true)
            let timeout: Int32
            switch step {
            case .stop: return
            case .again: continue
            case .wait(let milliseconds): timeout = milliseconds
            }

            // Waits for a watched socket, libcurl's next timeout, the alarm, or a wake-up from add/cancel/stop.
            let count = multi.wait(&events, timeout: timeout)
            sleeping.store(false, ordering: .relaxed)
            guard count > 0 else { continue }   // a timeout (handled above next time round) or EINTR
            driving.withLock { _ in
                multi.dispatch(events, count: count, running: &running)
                readCompleted(into: &done)
            }
            resume(done)
            done.removeAll(keepingCapacity: true)
        }
        // The multi handle (and the connections it caches) is freed with the engine: the thread's
        // closure holds the last reference once the transport has gone.
    }

    /// Puts a handed-over transfer into the multi, unless it was cancelled first (then it ends
    /// here); under the driving lock.
    private func begin(_ transfer: CurlTransfer) {
        if transfer.cancelled.load(ordering: .relaxed) {
            transfer.finish(.failure(transfer.cancellation))
        } else if library.api.pointee.multi_add_handle(multi.raw, transfer.easy.raw) != CURLM_OK {
            transfer.finish(transfer.result(CURLE_FAILED_INIT, library: library))
        } else {
            // Retained while in the multi; released in `completed` or by a cancellation.
            _ = Unmanaged.passRetained(transfer)
            transfer.isActive = true
            activeCount += 1
        }
    }

    /// Every transfer libcurl reports done, with its result, appended to `done` for resumption
    /// once the lock is let go (see ``resume(_:)``); under the driving lock.
    private func readCompleted(into done: inout [(CurlTransfer, Result<HTTPResponse, OAuthError>)]) {
        var left: Int32 = 0
        while let message = library.api.pointee.multi_info_read(multi.raw, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            if let finished = completed(handle, code: c_oauthflow_curl_msg_result(message)) { done.append(finished) }
        }
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
        _ = library.api.pointee.multi_remove_handle(multi.raw, handle)
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
