public import Foundation
import Glibc
import OAuthFlow
import Synchronization

/// A scripted authorization server on 127.0.0.1 over real sockets: for tests that run the built
/// `authflow` binary, which cannot reach an in-process `MockProvider`, and for transport tests
/// that need real HTTP (redirects, oversized bodies). Serves each connection on a thread of its own,
/// all at the same time (at most ``maximumConnections``): one request per connection, or with
/// `keepAlive` every request until the client closes it or the server stops; each path answers its
/// scripted replies in order, then repeats the last.
public final class TestHTTPServer: Sendable {
    /// One scripted answer.
    public struct Reply: Sendable {
        /// The status.
        public var status: Int
        /// The body.
        public var body: String
        /// Extra headers, such as `Location`.
        public var headers: [String: String] = [:]
        /// Sends no `Content-Length` and ends the body by closing the connection.
        public var closeDelimited = false
        /// Waits this long before answering (other connections are served meanwhile; ``stop()`` ends the wait).
        public var delay: Duration = .zero
        /// Answers as a kept-alive connection would (`Connection: keep-alive`, `Content-Length`),
        /// then closes the connection anyway: a server dropping an idle connection.
        public var closesAfter = false

        /// A reply with any status, body and headers.
        public init(status: Int, body: String, headers: [String: String] = [:], closeDelimited: Bool = false) {
            self.status = status
            self.body = body
            self.headers = headers
            self.closeDelimited = closeDelimited
        }

        /// The same reply, after which the server closes the kept-alive connection (see ``closesAfter``).
        public func closingAfter() -> Reply {
            var copy = self
            copy.closesAfter = true
            return copy
        }

        /// The same reply, sent after `delay`.
        public func delayed(_ delay: Duration) -> Reply {
            var copy = self
            copy.delay = delay
            return copy
        }

        /// A JSON body.
        public static func json(_ body: String, status: Int = 200) -> Reply { Reply(status: status, body: body) }
        /// An RFC 6749 §5.2 error body.
        public static func oauthError(_ code: String, status: Int = 400) -> Reply { Reply(status: status, body: #"{"error":"\#(code)"}"#) }
        /// A token response.
        public static func token(_ access: String, expiresIn: Int = 3600, refresh: String? = nil, scope: String = "read") -> Reply {
            let refreshPart = refresh.map { #","refresh_token":"\#($0)""# } ?? ""
            return Reply(status: 200, body: #"{"access_token":"\#(access)","token_type":"Bearer","expires_in":\#(expiresIn),"scope":"\#(scope)"\#(refreshPart)}"#)
        }
        /// A device authorization response.
        public static func deviceCode(user: String = "ABCD-EFGH", interval: Int = 1, expiresIn: Int = 600, uri: String = "https://example.com/device") -> Reply {
            Reply(status: 200, body: #"{"device_code":"test-device-code","user_code":"\#(user)","verification_uri":"\#(uri)","verification_uri_complete":"\#(uri)?user_code=\#(user)","expires_in":\#(expiresIn),"interval":\#(interval)}"#)
        }
    }

    /// A request as received.
    public struct Request: Sendable {
        /// The method.
        public var method: String
        /// The path without the query.
        public var path: String
        /// Headers with lower-cased names.
        public var headers: [String: String]
        /// The body.
        public var body: String
        /// The query (after `?`), when the target has one.
        public var query: String? = nil

        /// The form body (first value wins).
        public var form: [String: String] {
            var fields: [String: String] = [:]
            for pair in body.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                    String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
                }
                if fields[parts[0]] == nil { fields[parts[0]] = parts.count > 1 ? parts[1] : "" }
            }
            return fields
        }
    }

    private struct Inner {
        var scripts: [String: [Reply]] = [:]
        var last: [String: Reply] = [:]
        var requests: [Request] = []
    }
    private let inner = Mutex(Inner())

    /// The connections being served, shared by the accepting thread, the connection threads and ``stop()``.
    private struct Connections {
        var stopped = false
        /// Open connections by serial number: their sockets, which ``stop()`` shuts down.
        var open: [Int: Int32] = [:]
        /// Connection threads that have ended and wait to be joined by the accepting thread.
        var ended: [Int] = []
        var accepted = 0
        var closed = 0
    }
    private let connections = Mutex(Connections())
    /// The accepting thread, until ``stop()`` joins it.
    private let acceptor = Mutex<JoinableThread?>(nil)
    private let listener: Int32
    /// Written once by ``stop()`` and never read: readable from then on, it wakes every `poll`.
    private let stopSignal: (read: Int32, write: Int32)
    /// Written by a connection thread as it ends, so the accepting thread joins it (and accepts
    /// again, when it was at ``maximumConnections``); drained by the accepting thread.
    private let endSignal: (read: Int32, write: Int32)
    private let keepAlive: Bool
    /// The port it listens on, on 127.0.0.1.
    public let port: UInt16
    /// Connections served at the same time; a further client waits in the listen queue until one closes.
    public static let maximumConnections = 64

    /// Binds 127.0.0.1 on an ephemeral port and starts serving.
    /// - Parameter keepAlive: serve requests on a connection until the client closes it (or the
    ///   server stops) instead of answering `Connection: close`.
    /// - Throws: `POSIXError` when the socket, the pipes or the accepting thread cannot be made.
    public init(keepAlive: Bool = false) throws {
        self.keepAlive = keepAlive
        (listener, port) = try LoopbackSocket.bind(backlog: 64, reuseAddress: true)
        var stopPipe: [Int32] = [-1, -1]
        var endPipe: [Int32] = [-1, -1]
        guard pipe(&stopPipe) == 0 else {
            close(listener)
            throw POSIXError(.EMFILE)
        }
        guard pipe(&endPipe) == 0 else {
            for fd in [listener] + stopPipe { close(fd) }
            throw POSIXError(.EMFILE)
        }
        let pipes = stopPipe + endPipe
        for fd in pipes { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        for fd in endPipe { _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
        stopSignal = (stopPipe[0], stopPipe[1])
        endSignal = (endPipe[0], endPipe[1])
        guard let thread = JoinableThread(name: "TestHTTPServer", { [self] in self.serve() }) else {
            for fd in [listener] + pipes { close(fd) }
            throw POSIXError(.EAGAIN)
        }
        acceptor.withLock { $0 = thread }
    }

    deinit {
        // The accepting thread holds the server until it ends, so this runs after stop() (which
        // closed the listener) or never.
        for fd in [stopSignal.read, stopSignal.write, endSignal.read, endSignal.write] { close(fd) }
    }

    /// `http://127.0.0.1:PORT`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Appends replies for `path`, served in order; the last repeats.
    public func script(_ path: String, _ replies: [Reply]) {
        inner.withLock { $0.scripts[path, default: []] += replies }
    }

    /// The requests received (for `path`, when given).
    public func requests(_ path: String? = nil) -> [Request] {
        inner.withLock { $0.requests }.filter { path == nil || $0.path == path }
    }

    /// How many connections were accepted so far.
    public var connectionCount: Int { connections.withLock { $0.accepted } }

    /// How many connections the server has closed so far.
    public var closedCount: Int { connections.withLock { $0.closed } }

    /// Stops the server and returns once every thread of it has ended: the listener and every
    /// connection are closed (a kept-alive one too, and a delayed reply is not sent). Calling it
    /// again does nothing.
    public func stop() {
        connections.withLock { $0.stopped = true }
        var one: UInt8 = 1
        _ = write(stopSignal.write, &one, 1)
        acceptor.withLock { $0.take() }?.join()
    }

    /// The accepting thread: accepts while fewer than ``maximumConnections`` are open, starts a
    /// thread per connection, joins the ones that ended; on ``stop()``, shuts every connection
    /// down, joins their threads and closes the listener.
    private func serve() {
        var threads: [Int: JoinableThread] = [:]
        var serial = 0
        while true {
            let (stopped, ended, full) = connections.withLock { state in
                defer { state.ended.removeAll() }
                return (state.stopped, state.ended, state.open.count >= Self.maximumConnections)
            }
            for number in ended { threads.removeValue(forKey: number)?.join() }
            if stopped { break }
            var ready = [pollfd(fd: stopSignal.read, events: Int16(POLLIN), revents: 0),
                         pollfd(fd: endSignal.read, events: Int16(POLLIN), revents: 0),
                         pollfd(fd: full ? -1 : listener, events: Int16(POLLIN), revents: 0)]
            guard poll(&ready, 3, -1) > 0 else { continue }
            if ready[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                while read(endSignal.read, &drain, drain.count) > 0 {}
            }
            guard ready[2].revents != 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            serial += 1
            let number = serial
            let admitted = connections.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.open[number] = client
                state.accepted += 1
                return true
            }
            guard admitted else {
                close(client)
                break
            }
            if let thread = JoinableThread(name: "TestHTTPServer", { [self] in self.serveConnection(client, number: number) }) {
                threads[number] = thread
            } else {
                connections.withLock { state in
                    state.open[number] = nil
                    state.closed += 1
                }
                close(client)
            }
        }
        // Wakes connection threads blocked in send (the stop signal wakes those that poll).
        connections.withLock { state in
            for fd in state.open.values { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        for thread in threads.values { thread.join() }
        close(listener)
    }

    /// One connection's thread: its requests until it must close, then the socket closed and the
    /// accepting thread told.
    private func serveConnection(_ fd: Int32, number: Int) {
        var served = 0
        while handle(fd), keepAlive, served < 1000 { served += 1 }
        connections.withLock { state in
            // Out of `open` before it closes, so stop() never shuts down a number reused by another file.
            state.open[number] = nil
            state.closed += 1
            state.ended.append(number)
        }
        close(fd)
        var one: UInt8 = 1
        _ = write(endSignal.write, &one, 1)
    }

    /// Waits until `fd` is readable (or closed); false once the server is stopping.
    private func waitReadable(_ fd: Int32) -> Bool {
        var ready = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                     pollfd(fd: stopSignal.read, events: Int16(POLLIN), revents: 0)]
        while true {
            let count = poll(&ready, 2, -1)
            if count < 0 && errno == EINTR { continue }
            return count > 0 && ready[1].revents == 0
        }
    }

    /// Waits `delay`, or less when the server stops; false when it stopped.
    private func pause(_ delay: Duration) -> Bool {
        let milliseconds = delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000
        var ready = pollfd(fd: stopSignal.read, events: Int16(POLLIN), revents: 0)
        return poll(&ready, 1, Int32(clamping: milliseconds)) == 0
    }

    /// Serves one request; false when the connection must close.
    private func handle(_ fd: Int32) -> Bool {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var headEnd: Int?
        var contentLength = 0
        while data.count < 1 << 20 {
            if let end = headEnd, data.count >= end + contentLength { break }
            guard waitReadable(fd) else { return false }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return false }
            data += buffer[0..<count]
            if headEnd == nil, let range = Self.find([13, 10, 13, 10], in: data) {
                headEnd = range
                let head = String(decoding: data[0..<range], as: UTF8.self)
                for line in head.split(separator: "\r\n").dropFirst() {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    if parts.count == 2, parts[0].lowercased() == "content-length" {
                        contentLength = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
                    }
                }
            }
        }
        guard let end = headEnd else { return false }
        let head = String(decoding: data[0..<(end - 4)], as: UTF8.self)
        let lines = head.split(separator: "\r\n").map(String.init)
        let requestLine = lines.first?.split(separator: " ").map(String.init) ?? []
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        let target = requestLine.count > 1 ? requestLine[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).map(String.init) : ["/"]
        let path = target[0]
        let request = Request(method: requestLine.first ?? "", path: path, headers: headers,
                              body: String(decoding: data[end..<min(data.count, end + contentLength)], as: UTF8.self),
                              query: target.count > 1 ? target[1] : nil)
        let reply = inner.withLock { inner -> Reply in
            inner.requests.append(request)
            if var queue = inner.scripts[path], !queue.isEmpty {
                let next = queue.removeFirst()
                inner.scripts[path] = queue
                inner.last[path] = next
                return next
            }
            return inner.last[path] ?? Reply(status: 404, body: #"{"error":"not_found"}"#)
        }
        if reply.delay > .zero, !pause(reply.delay) { return false }
        let body = Array(reply.body.utf8)
        let persistent = keepAlive && !reply.closeDelimited
        var response = "HTTP/1.1 \(reply.status) X\r\nContent-Type: application/json\r\nConnection: \(persistent ? "keep-alive" : "close")\r\n"
        if !reply.closeDelimited { response += "Content-Length: \(body.count)\r\n" }
        for (name, value) in reply.headers.sorted(by: { $0.key < $1.key }) { response += "\(name): \(value)\r\n" }
        response += "\r\n"
        let bytes = Array(response.utf8) + body
        var sent = 0
        while sent < bytes.count {   // large bodies go out in several writes; stop when the client hangs up
            let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return false }
            sent += count
        }
        return persistent && !reply.closesAfter
    }

    static func find(_ needle: [UInt8], in data: [UInt8]) -> Int? {
        guard data.count >= needle.count else { return nil }
        for index in 0...(data.count - needle.count) where Array(data[index..<(index + needle.count)]) == needle {
            return index + needle.count
        }
        return nil
    }
}

/// A raw HTTP/1.1 GET to a loopback URL (no URLSession: no proxy settings, no connection reuse).
public func rawGET(_ url: URL, timeout: Int = 30) throws -> (status: Int, body: String) {
    guard let port = url.port, let host = url.host else { throw POSIXError(.EINVAL) }
    let target = url.path + (url.query.map { "?\($0)" } ?? "")
    let request = "GET \(target.isEmpty ? "/" : target) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n\r\n"
    let text = try rawExchange(host: host == "localhost" ? "127.0.0.1" : host, port: UInt16(port), Array(request.utf8), timeout: timeout)
    let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
    let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, body)
}

/// Sends `request` as it is (whole, partial or garbage) to an IPv4 `host` and `port`, then reads
/// until the peer closes or `timeout` seconds pass without a byte; returns what was read.
public func rawExchange(host: String = "127.0.0.1", port: UInt16, _ request: [UInt8], timeout: Int = 30) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    var limit = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr(host)
    let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var data = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { break }
        data += buffer[0..<count]
    }
    return String(decoding: data, as: UTF8.self)
}

/// ``rawGET(_:timeout:)`` on a thread of its own, so a blocking socket never holds one of the few
/// threads that run tasks (on a 2-core machine that would starve the receiver under test).
public func httpGET(_ url: URL, timeout: Int = 30) async throws -> (status: Int, body: String) {
    try await onOwnThread { try rawGET(url, timeout: timeout) }
}
