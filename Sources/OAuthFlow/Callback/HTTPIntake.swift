#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// The server side of HTTP/1.1 that the package's small listeners share: the redirect receiver
/// (``LoopbackReceiver``) and `authflow agent`'s CIBA notification endpoint. One request per
/// connection, read under a deadline, answered, closed; the accept-and-read loop runs on the
/// caller's thread (a thread of its own), polling the listening sockets, a wake-up pipe and at
/// most ``Limits/maximumConnections`` connections.
package enum HTTPIntake {
    // MARK: The request head (RFC 9112 §2–§5)

    /// A request line and its header fields.
    package struct RequestHead: Sendable, Equatable {
        /// One header field, its name as sent and its value without the blanks around it.
        package struct Field: Sendable, Equatable {
            package var name: String
            package var value: String
        }

        /// The method, such as `GET` or `POST`.
        package var method: String
        /// The request target as sent (origin form: a path and an optional query).
        package var target: String
        /// `HTTP/1.0` or `HTTP/1.1`.
        package var version: String
        /// The header fields, in order.
        package var fields: [Field]
        /// The length of the head through its blank line, in bytes: where a body starts.
        package var length: Int

        /// The values of the fields named `name` (any case), in order.
        package func values(_ name: String) -> [String] {
            let wanted = name.lowercased()
            return fields.filter { $0.name.lowercased() == wanted }.map(\.value)
        }
    }

    /// What the bytes received so far hold.
    package enum Head: Equatable {
        /// The blank line that ends the head has not arrived (and the limit is not passed).
        case incomplete
        /// The head is longer than the limit.
        case tooLarge
        /// Not an HTTP/1.x request head: a bad request line, a field line without a name, a
        /// folded line, or a control character.
        case malformed
        /// A whole head.
        case complete(RequestHead)
    }

    /// Reads the request head at the start of `bytes`, at most `limit` bytes long. Lines end in
    /// CRLF or a bare LF (RFC 9112 §2.2).
    package static func parseHead(_ bytes: [UInt8], limit: Int) -> Head {
        guard let end = endOfHead(bytes) else { return bytes.count > limit ? .tooLarge : .incomplete }
        guard end <= limit else { return .tooLarge }
        var lines = bytes[..<end].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let first = lines.first else { return .malformed }
        let parts = first.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(ASCIIText.isTokenCharacter),
              parts[1].first == UInt8(ascii: "/"), parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
              parts[2].elementsEqual("HTTP/1.1".utf8) || parts[2].elementsEqual("HTTP/1.0".utf8)
        else { return .malformed }
        var fields: [RequestHead.Field] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[..<colon].allSatisfy(ASCIIText.isTokenCharacter),
                  line[line.index(after: colon)...].allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) })
            else { return .malformed }   // also a folded line (RFC 9112 §5.2), which starts with a blank
            let value = line[line.index(after: colon)...].drop { $0 == 0x20 || $0 == 0x09 }
            let trimmed = value.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
            fields.append(RequestHead.Field(name: String(decoding: line[..<colon], as: UTF8.self),
                                            value: String(decoding: trimmed, as: UTF8.self)))
        }
        return .complete(RequestHead(method: String(decoding: parts[0], as: UTF8.self), target: String(decoding: parts[1], as: UTF8.self),
                                     version: String(decoding: parts[2], as: UTF8.self), fields: fields, length: end))
    }


    /// The length of the head through its blank line, or nil when the blank line has not arrived.
    package static func endOfHead(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") {
                if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "\r"), bytes[index + 2] == UInt8(ascii: "\n") {
                    return index + 3
                }
            }
            index += 1
        }
        return nil
    }

    // MARK: Answers

    /// A whole response: the status line's code and reason, header fields, a body.
    package struct Reply: Sendable, Equatable {
        /// `204 No Content`, `401 Unauthorized`, …
        package var status: String
        /// Header fields besides `Content-Length` and `Connection: close`, which every reply has.
        package var fields: [RequestHead.Field]
        package var body: [UInt8]

        package init(status: String, fields: [(String, String)] = [], body: [UInt8] = []) {
            self.status = status
            self.fields = fields.map { RequestHead.Field(name: $0.0, value: $0.1) }
            self.body = body
        }

        /// The bytes on the wire.
        package var bytes: [UInt8] {
            var head = "HTTP/1.1 \(status)\r\n"
            for field in fields { head += "\(field.name): \(field.value)\r\n" }
            if !status.hasPrefix("204") && !status.hasPrefix("304") { head += "Content-Length: \(body.count)\r\n" }
            head += "Connection: close\r\n\r\n"
            return Array(head.utf8) + body
        }
    }

    /// Sends `reply` and shuts the write side; never raises SIGPIPE, and gives up on a peer that
    /// reads nothing for a second.
    package static func send(_ reply: Reply, to socket: Int32) {
        let bytes = reply.bytes
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN {
                var ready = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
                guard poll(&ready, 1, 1000) > 0 else { return }
                continue
            }
            guard count > 0 else { return }
            sent += count
        }
        shutdown(socket, Int32(SHUT_WR))
    }

    // MARK: The loop

    /// What one connection may take.
    package struct Limits: Sendable {
        /// How long a connection may take to send its request (head and body).
        package var connectionTimeout: Duration
        /// The most connections read at once; more are closed as soon as they are accepted.
        package var maximumConnections: Int
        /// The most bytes read from one connection; a step that still finds them incomplete
        /// closes it unanswered (each step's own limits answer first).
        package var maximumRequestSize: Int
        /// What a connection whose time ran out is told before it closes; nil: it closes unanswered.
        package var timeoutReply: Reply?

        package init(connectionTimeout: Duration, maximumConnections: Int, maximumRequestSize: Int, timeoutReply: Reply? = nil) {
            self.connectionTimeout = connectionTimeout
            self.maximumConnections = maximumConnections
            self.maximumRequestSize = maximumRequestSize
            self.timeoutReply = timeoutReply
        }
    }

    /// What the bytes a connection sent so far call for.
    package enum Step<Outcome> {
        /// Read on.
        case incomplete
        /// Answer, close, and serve on.
        case reply(Reply)
        /// Stop serving; the connection goes back to the caller, unanswered.
        case finish(Outcome)
    }

    /// Why ``serve(listeners:wake:until:limits:step:)`` returned.
    package enum Ending<Outcome> {
        /// A step finished, on this connection.
        case finished(Outcome, connection: SharedFileDescriptor)
        /// The deadline passed.
        case timedOut
        /// The wake-up descriptor became readable.
        case woken
        /// `poll` failed with this `errno`.
        case failed(Int32)
    }

    /// Accepts connections on `listeners` and reads each until `step` answers it, until a step
    /// finishes, `deadline` (nil: none) passes, or `wake` becomes readable. Blocks: call it on a
    /// thread of its own.
    package static func serve<Outcome>(
        listeners: [SharedFileDescriptor], wake: Int32, until deadline: ContinuousClock.Instant?, limits: Limits,
        step: ([UInt8]) -> Step<Outcome>
    ) -> Ending<Outcome> {
        // Dropped connections close with their owners, the rest when this returns.
        var connections: [Connection] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = ContinuousClock.now
            if let deadline, now >= deadline { return .timedOut }
            for connection in connections where connection.deadline <= now {
                if let reply = limits.timeoutReply { send(reply, to: connection.socket.raw) }
            }
            connections.removeAll { $0.deadline <= now }
            var fds = listeners.map { pollfd(fd: $0.raw, events: Int16(POLLIN), revents: 0) }
            fds.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0))
            fds += connections.map { pollfd(fd: $0.socket.raw, events: Int16(POLLIN), revents: 0) }
            let nextDeadline = connections.map(\.deadline).reduce(deadline) { earliest, next in earliest.map { min($0, next) } ?? next }
            let wait = nextDeadline.map { Int32(clamping: max(0, milliseconds(now.duration(to: $0))) + 1) } ?? -1
            let ready = poll(&fds, nfds_t(fds.count), wait)
            if ready < 0 {
                if errno == EINTR { continue }
                return .failed(errno)
            }
            if ready == 0 { continue }
            if fds[listeners.count].revents != 0 { return .woken }
            // Read from connections first (their indexes shift once new ones are appended).
            var index = connections.count - 1
            while index >= 0 {
                defer { index -= 1 }
                guard fds[listeners.count + 1 + index].revents != 0 else { continue }
                let socket = connections[index].socket
                let count = recv(socket.raw, &buffer, buffer.count, 0)
                if count < 0, errno == EAGAIN || errno == EINTR { continue }
                guard count > 0 else {
                    connections.remove(at: index)
                    continue
                }
                connections[index].received += buffer[0..<count]
                switch step(connections[index].received) {
                case .incomplete:
                    if connections[index].received.count > limits.maximumRequestSize { connections.remove(at: index) }
                case .reply(let reply):
                    send(reply, to: socket.raw)
                    connections.remove(at: index)
                case .finish(let outcome):
                    connections.remove(at: index)
                    makeBlocking(socket.descriptor)
                    return .finished(outcome, connection: socket)
                }
            }
            for (offset, listener) in listeners.enumerated() where fds[offset].revents != 0 {
                let connection: FileDescriptor
                do throws(SystemError) {
                    connection = try FileDescriptor(returnedBy: accept(listener.raw, nil, nil))
                } catch {
                    continue
                }
                setFlags(connection)
                // Over the limit, the connection closes with its owner at the end of this iteration.
                guard connections.count < limits.maximumConnections else { continue }
                connections.append(Connection(socket: SharedFileDescriptor(connection), deadline: ContinuousClock.now.advanced(by: limits.connectionTimeout)))
            }
        }
    }

    /// A connection being read by ``serve(listeners:wake:until:limits:step:)``.
    private struct Connection {
        var socket: SharedFileDescriptor
        var received: [UInt8] = []
        var deadline: ContinuousClock.Instant
    }

    // MARK: Sockets

    /// An IP address to listen on.
    package enum Address: Sendable, Equatable {
        case v4(String)
        case v6(String)
    }

    /// Why a socket could not listen.
    package enum ListenFailure: Error {
        /// The text is not an address of its family.
        case notAnAddress(String)
        /// A call failed: its name and `errno`.
        case system(call: String, code: Int32)
    }

    /// A listening, non-blocking, close-on-exec TCP socket on `address` and `port` (0: an ephemeral
    /// one); an IPv6 socket takes IPv6 only.
    package static func listen(_ address: Address, port: UInt16) throws(ListenFailure) -> FileDescriptor {
        let family: Int32
        switch address {
        case .v4: family = AF_INET
        case .v6: family = AF_INET6
        }
        // On a throw below, the socket closes with its owner.
        let fd: FileDescriptor
        do throws(SystemError) {
            fd = try FileDescriptor(returnedBy: socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0))
        } catch {
            throw .system(call: "socket", code: error.code)
        }
        let raw = fd.raw   // for the closures below, while `fd` owns it
        var one: Int32 = 1
        setsockopt(raw, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        /// `bind(2)` to a socket address of type `Address`.
        func bind<Address>(_ address: inout Address) -> Int32 {
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(raw, $0, socklen_t(MemoryLayout<Address>.size)) }
            }
        }
        let result: Int32
        switch address {
        case .v4(let text):
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = port.bigEndian
            guard inet_pton(AF_INET, text, &addr.sin_addr) == 1 else { throw .notAnAddress(text) }
            result = bind(&addr)
        case .v6(let text):
            setsockopt(raw, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, text, &addr.sin6_addr) == 1 else { throw .notAnAddress(text) }
            result = bind(&addr)
        }
        guard result == 0 else { throw .system(call: "bind", code: errno) }
        guard Glibc.listen(raw, 16) == 0 else { throw .system(call: "listen", code: errno) }
        return fd
    }

    /// The port a socket is bound to.
    package static func localPort(_ fd: borrowing FileDescriptor) throws(SystemError) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd.raw, $0, &length) }
        }
        guard result == 0 else { throw SystemError(code: errno) }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    /// Marks a descriptor close-on-exec and non-blocking.
    private static func setFlags(_ fd: borrowing FileDescriptor) {
        _ = fcntl(fd.raw, F_SETFD, FD_CLOEXEC)
        let flags = fcntl(fd.raw, F_GETFL)
        if flags >= 0 { _ = fcntl(fd.raw, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Switches an accepted socket to blocking with a short send timeout, for an answer written later.
    private static func makeBlocking(_ fd: borrowing FileDescriptor) {
        let flags = fcntl(fd.raw, F_GETFL)
        if flags >= 0 { _ = fcntl(fd.raw, F_SETFL, flags & ~O_NONBLOCK) }
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd.raw, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Whole milliseconds, saturating: a timeout of `Int.max` seconds (`--timeout` is not
    /// bounded) must not trap on the multiplication.
    package static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return seconds < 0 ? Int64.min / 2 : Int64.max / 2 }
        return scaled.addingReportingOverflow(attoseconds / 1_000_000_000_000_000).overflow
            ? Int64.max / 2 : scaled + attoseconds / 1_000_000_000_000_000
    }
}
