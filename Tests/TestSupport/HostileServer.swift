import Foundation
import Glibc
import Synchronization
public import Testing

/// A hostile HTTP server on 127.0.0.1: each path answers with a scripted *behaviour* written as raw
/// bytes on the socket (trickling, never answering, endless or broken bodies, resets), for the
/// hostile-server suites (`HostileServerTests`, `HostileCLITests`).
///
/// Every connection gets a thread of its own and is closed after one request, so a behaviour that
/// holds a connection never blocks another request. Every loop is bounded in count and time, and
/// every behaviour ends within 100 ms of ``stop()`` (10 s for a write the client stopped reading):
/// holds and trickles wake every 50 ms, and a repeated write is at most 2^24 writes.
public final class HostileServer: Sendable {
    /// One thing done on the connection, in order.
    public enum Step: Sendable {
        /// Writes these bytes; the behaviour ends early when the client has gone.
        case write([UInt8])
        /// Writes these bytes one at a time, one every `every`.
        case trickle([UInt8], every: Duration)
        /// Writes `bytes` up to `times` times (an endless body: 16,384 × 64 KiB is 1 GiB).
        case repeatWrite([UInt8], times: Int)
        /// Waits without writing, at most this long, ending at once on ``HostileServer/stop()``.
        case hold(Duration)
        /// Closes with an RST (SO_LINGER 0) instead of a FIN; nothing after it runs.
        case reset
    }

    /// What a path answers: steps run after the request was read, then the connection is closed.
    public struct Behaviour: Sendable {
        /// The steps, in order.
        public var steps: [Step]

        /// A behaviour from its steps.
        public init(_ steps: [Step]) { self.steps = steps }

        /// A well-formed answer with `Content-Length` and `Connection: close`.
        public static func reply(
            _ status: Int = 200, _ body: String, contentType: String = "application/json", headers: [(String, String)] = []
        ) -> Behaviour {
            let bytes = Array(body.utf8)
            return Behaviour([.write(head(status, contentType: contentType, headers: [("Content-Length", "\(bytes.count)")] + headers) + bytes)])
        }

        /// Raw bytes, then a close.
        public static func raw(_ text: String) -> Behaviour { Behaviour([.write(Array(text.utf8))]) }
    }

    /// A request as received.
    public struct Request: Sendable {
        /// The method.
        public var method: String
        /// The path without the query.
        public var path: String
        /// Headers with lower-cased names (the last value wins).
        public var headers: [String: String]
        /// The body.
        public var body: String
    }

    private struct Inner {
        var scripts: [String: [Behaviour]] = [:]
        var last: [String: Behaviour] = [:]
        var requests: [Request] = []
        var open = 0
        var written = 0
    }
    private let inner = Mutex(Inner())
    private let listener: Int32
    private let stopped = Atomic<Bool>(false)
    /// The port it listens on, on 127.0.0.1.
    public let port: UInt16

    /// Binds 127.0.0.1 on an ephemeral port and starts accepting.
    public init() throws {
        (listener, port) = try LoopbackSocket.bind(backlog: 64)
        let thread = Thread { [self] in self.acceptLoop() }
        thread.name = "HostileServer"
        thread.start()
    }

    deinit { close(listener) }

    /// `http://127.0.0.1:PORT`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Appends behaviours for `path`, used in order; the last repeats. An unscripted path answers 404.
    public func script(_ path: String, _ behaviours: Behaviour...) {
        inner.withLock { $0.scripts[path, default: []] += behaviours }
    }

    /// The requests received (for `path`, when given), in arrival order.
    public func requests(_ path: String? = nil) -> [Request] {
        inner.withLock { $0.requests }.filter { path == nil || $0.path == path }
    }

    /// Bytes written to clients so far, all connections together.
    public var bytesWritten: Int { inner.withLock { $0.written } }

    /// Connections still being served.
    public var openConnections: Int { inner.withLock { $0.open } }

    /// Stops accepting and ends every behaviour in progress within about 100 ms.
    public func stop() { stopped.store(true, ordering: .relaxed) }

    private var isStopped: Bool { stopped.load(ordering: .relaxed) }

    private func acceptLoop() {
        while !isStopped {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            inner.withLock { $0.open += 1 }
            let thread = Thread { [self] in
                self.serve(client)
                self.inner.withLock { $0.open -= 1 }
            }
            thread.name = "HostileServer.connection"
            thread.start()
        }
    }

    private func next(for path: String) -> Behaviour {
        inner.withLock { inner -> Behaviour in
            if var queue = inner.scripts[path], !queue.isEmpty {
                let next = queue.removeFirst()
                inner.scripts[path] = queue
                inner.last[path] = next
                return next
            }
            return inner.last[path] ?? .reply(404, #"{"error":"not_found"}"#)
        }
    }

    private func serve(_ fd: Int32) {
        var limit = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var reset = false
        defer {
            if reset {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            }
            close(fd)
        }
        guard let request = readRequest(fd) else { return }
        inner.withLock { $0.requests.append(request) }
        let behaviour = next(for: request.path)
        for step in behaviour.steps {
            guard !isStopped else { return }
            switch step {
            case .write(let bytes):
                guard write(fd, bytes) else { return }
            case .trickle(let bytes, let every):
                for byte in bytes {
                    guard !isStopped, write(fd, [byte]) else { return }
                    pause(every)
                }
            case .repeatWrite(let bytes, let times):
                for _ in 0..<min(times, 1 << 24) {
                    guard !isStopped, write(fd, bytes) else { return }
                }
            case .hold(let duration):
                pause(duration)
            case .reset:
                reset = true
                return
            }
        }
    }

    /// Sleeps up to `duration` in steps of at most 50 ms, ending early on ``stop()``.
    private func pause(_ duration: Duration) {
        let end = ContinuousClock.now + duration
        while !isStopped, ContinuousClock.now < end {
            let left = end - ContinuousClock.now
            Thread.sleep(forTimeInterval: min(0.05, max(0, Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18)))
        }
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return false }
            sent += count
            inner.withLock { $0.written += count }
        }
        return true
    }

    /// Reads one request head and its `Content-Length` body: at most 1 MiB and 5 s.
    private func readRequest(_ fd: Int32) -> Request? {
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 8192)
        var headEnd: Int?
        var contentLength = 0
        while data.count < 1 << 20 {
            if let end = headEnd, data.count >= end + contentLength { break }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            data += buffer[0..<count]
            if headEnd == nil, let end = TestHTTPServer.find([13, 10, 13, 10], in: data) {
                headEnd = end
                for line in String(decoding: data[0..<end], as: UTF8.self).split(separator: "\r\n").dropFirst() {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    if parts.count == 2, parts[0].lowercased() == "content-length" {
                        contentLength = min(Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0, 1 << 20)
                    }
                }
            }
        }
        guard let end = headEnd else { return nil }
        let lines = String(decoding: data[0..<(end - 4)], as: UTF8.self).split(separator: "\r\n").map(String.init)
        let requestLine = lines.first?.split(separator: " ").map(String.init) ?? []
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        let target = requestLine.count > 1 ? requestLine[1] : "/"
        let path = String(target.split(separator: "?", maxSplits: 1).first ?? "/")
        return Request(method: requestLine.first ?? "", path: path, headers: headers,
                       body: String(decoding: data[end..<min(data.count, end + contentLength)], as: UTF8.self))
    }

    /// A status line and headers, ending in the empty line.
    public static func head(_ status: Int, contentType: String? = "application/json", headers: [(String, String)] = []) -> [UInt8] {
        var text = "HTTP/1.1 \(status) Hostile\r\nConnection: close\r\n"
        if let contentType { text += "Content-Type: \(contentType)\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        return Array((text + "\r\n").utf8)
    }
}

// MARK: The modes

extension HostileServer {
    /// The transport-level misbehaviours, each built around the well-formed body the endpoint
    /// would send (`good`), so that only the framing or the timing is hostile.
    ///
    /// The raw value is the case's name in test output.
    public enum Mode: String, CaseIterable, Sendable {
        /// Headers, then the body one byte every 200 ms: only a total deadline ends it.
        case trickleBody
        /// The status line and headers one byte every 200 ms.
        case trickleHeaders
        /// Reads the request and never answers (for 30 s, unless stopped).
        case silent
        /// A close-delimited body without end (up to 1 GiB).
        case endlessBody
        /// A chunked body without end (up to 1 GiB).
        case endlessChunked
        /// `Content-Length: 1000000000000`, then a little of the body.
        case hugeDeclaredLength
        /// `Content-Length` of the full body, half of it, then a close.
        case truncatedBody
        /// Headers and half the body, then an RST.
        case resetMidBody
        /// The request is read, then an RST without a byte of answer.
        case resetBeforeAnswer
        /// The request is read, then a clean close without a byte of answer.
        case closeWithoutAnswer
        /// A chunk size that is not hexadecimal.
        case chunkedBadSize
        /// A chunk size of 20 hexadecimal digits (past 2^64).
        case chunkedOverflowSize
        /// Chunk data longer than its size says, with no CRLF where one must be.
        case chunkedBadFraming
        /// A chunked body closed before the last chunk.
        case chunkedTruncated
        /// A status line that is not HTTP.
        case garbageStatusLine
        /// Not HTTP at all (an SSH banner).
        case notHTTP
        /// Header lines without end (up to 1 GiB).
        case headerFlood
        /// `100 Continue` without end.
        case interimForever
        /// Two different `Content-Length` values.
        case conflictingContentLength
        /// `Content-Encoding: gzip` (never asked for) over bytes that are not gzip.
        case bogusGzip
        /// A 302 to another host (`localhost` on another port), which must never be followed.
        case redirectElsewhere
        /// A 307 to another host (the method and body would be kept by a follower).
        case redirect307Elsewhere
        /// A 308 to another host.
        case redirect308Elsewhere
    }

    /// The behaviour of `mode` for an endpoint whose well-formed answer is `good`; a redirect goes to
    /// `elsewhere`; an endless body or header ends after `endless` bytes (1 GiB by default).
    public static func behaviour(_ mode: Mode, good: String, elsewhere: String = "http://localhost:9/", endless: Int = 1 << 30) -> Behaviour {
        let body = Array(good.utf8)
        let half = Array(body.prefix(max(1, body.count / 2)))
        let json = head(200, headers: [("Content-Length", "\(body.count)")])
        let endlessChunk = [UInt8](repeating: UInt8(ascii: "a"), count: 64 << 10)
        let times = max(1, endless / endlessChunk.count)
        switch mode {
        case .trickleBody:
            return Behaviour([.write(json), .trickle(body, every: .milliseconds(200))])
        case .trickleHeaders:
            return Behaviour([.trickle(json, every: .milliseconds(200)), .write(body)])
        case .silent:
            return Behaviour([.hold(.seconds(30))])
        case .endlessBody:
            return Behaviour([.write(head(200) + Array(#"{"access_token":""#.utf8)), .repeatWrite(endlessChunk, times: times)])
        case .endlessChunked:
            let chunk = Array("10000\r\n".utf8) + endlessChunk + [13, 10]
            return Behaviour([.write(head(200, headers: [("Transfer-Encoding", "chunked")])), .repeatWrite(chunk, times: times)])
        case .hugeDeclaredLength:
            return Behaviour([.write(head(200, headers: [("Content-Length", "1000000000000")]) + body), .hold(.seconds(30))])
        case .truncatedBody:
            return Behaviour([.write(json + half)])
        case .resetMidBody:
            return Behaviour([.write(json + half), .hold(.milliseconds(50)), .reset])
        case .resetBeforeAnswer:
            return Behaviour([.reset])
        case .closeWithoutAnswer:
            return Behaviour([])
        case .chunkedBadSize:
            return Behaviour([.write(head(200, headers: [("Transfer-Encoding", "chunked")]) + Array("zz\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8))])
        case .chunkedOverflowSize:
            return Behaviour([.write(head(200, headers: [("Transfer-Encoding", "chunked")]) + Array("FFFFFFFFFFFFFFFFFFFF\r\n".utf8) + body)])
        case .chunkedBadFraming:
            let size = String(max(1, body.count / 2), radix: 16)
            return Behaviour([.write(head(200, headers: [("Transfer-Encoding", "chunked")]) + Array("\(size)\r\n".utf8) + body
                + Array("XX0\r\n\r\n".utf8))])
        case .chunkedTruncated:
            let size = String(body.count, radix: 16)
            return Behaviour([.write(head(200, headers: [("Transfer-Encoding", "chunked")]) + Array("\(size)\r\n".utf8) + body + [13, 10])])
        case .garbageStatusLine:
            return Behaviour([.write(Array("HTTP/1.1 abc Hostile\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)])
        case .notHTTP:
            return Behaviour([.write(Array("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n".utf8)), .hold(.milliseconds(200))])
        case .headerFlood:
            let line = Array("X-Hostile: \(String(repeating: "h", count: 1000))\r\n".utf8)
            return Behaviour([.write(Array("HTTP/1.1 200 OK\r\n".utf8)), .repeatWrite(line, times: max(1, endless / line.count))])
        case .interimForever:
            let interim = Array("HTTP/1.1 100 Continue\r\nX-Pad: \(String(repeating: "p", count: 200))\r\n\r\n".utf8)
            return Behaviour([.repeatWrite(interim, times: max(1, endless / interim.count))])
        case .conflictingContentLength:
            return Behaviour([.write(head(200, headers: [("Content-Length", "\(body.count)"), ("Content-Length", "\(body.count + 7)")]) + body)])
        case .bogusGzip:
            let junk: [UInt8] = [0x1F, 0x8B, 0x08, 0x00] + Array(repeating: 0xA5, count: 64)   // the gzip magic, then junk
            return Behaviour([.write(head(200, headers: [("Content-Encoding", "gzip"), ("Content-Length", "\(junk.count)")]) + junk)])
        case .redirectElsewhere:
            return .reply(302, "", headers: [("Location", elsewhere)])
        case .redirect307Elsewhere:
            return .reply(307, "", headers: [("Location", elsewhere)])
        case .redirect308Elsewhere:
            return .reply(308, "", headers: [("Location", elsewhere)])
        }
    }
}

/// A counting semaphore for tasks: the hostile suites pass every flow through ``HostileServer/flows``,
/// so that hundreds of cases never run at once and starve the other suites of a small machine.
public actor HostileGate {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// A gate letting `width` tasks through at a time.
    public init(width: Int) { free = max(1, width) }

    /// Waits for a place.
    public func enter() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Gives the place to the next waiter.
    public func leave() {
        if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
    }
}

extension HostileServer {
    /// The one gate of every hostile suite in the test process (library and CLI suites alike).
    public static let flows = HostileGate(width: 12)
}

extension HostileServer {
    /// The two servers of a transport-level case: `server` answers each of `paths` with `mode`'s
    /// behaviour around the good answer `good(server)`, and `elsewhere` serves that good answer at
    /// `/stolen`, where ``Mode/redirectElsewhere`` sends the client (by the name `localhost`: another
    /// origin). An endless body is 64 MiB: endless to a 1 MiB limit, and light enough for hundreds of
    /// parallel cases. Stop both when done.
    public static func transportCase(
        _ mode: Mode, paths: [String], good: (HostileServer) -> String
    ) throws -> (server: HostileServer, elsewhere: HostileServer) {
        let server = try HostileServer()
        let elsewhere: HostileServer
        do { elsewhere = try HostileServer() } catch {
            server.stop()
            throw error
        }
        elsewhere.script("/stolen", .reply(200, good(server)))
        let answer = Self.behaviour(mode, good: good(server), elsewhere: "http://localhost:\(elsewhere.port)/stolen", endless: 64 << 20)
        for path in paths { server.script(path, answer) }
        return (server, elsewhere)
    }

    /// `HOSTILE_FILTER=text` runs only the cases whose description contains `text` (for debugging one);
    /// unset or empty, every case.
    public static func selected<Case: CustomTestStringConvertible>(_ cases: [Case]) -> [Case] {
        guard let filter = ProcessInfo.processInfo.environment["HOSTILE_FILTER"], !filter.isEmpty else { return cases }
        return cases.filter { $0.testDescription.contains(filter) }
    }
}
