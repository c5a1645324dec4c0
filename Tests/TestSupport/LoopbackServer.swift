import Foundation
import Glibc
import Synchronization

/// A TCP server on 127.0.0.1 whose connections misbehave on purpose: it runs `handler` on a thread
/// per accepted connection (a server that trickles, never answers, or streams without end), or
/// accepts nothing at all (a full accept queue, for connect timeouts).
public final class LoopbackServer: Sendable {
    /// The port it listens on, on 127.0.0.1.
    public let port: UInt16
    private let listener: Int32
    private let stopped = Mutex(false)
    private let accepted = Mutex(0)
    private let handler: (@Sendable (Connection) -> Void)?

    /// One accepted connection, closed when the handler returns.
    public struct Connection: Sendable {
        /// The socket.
        public let fd: Int32
        let server: LoopbackServer

        /// True once ``LoopbackServer/stop()`` was called: handlers end their loops.
        public var isStopped: Bool { server.stopped.withLock { $0 } }

        /// Reads until the end of a request head (`\r\n\r\n`), at most 64 KiB and 5 s; returns the head.
        @discardableResult
        public func readHead() -> String {
            var limit = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            var data = [UInt8]()
            var byte = [UInt8](repeating: 0, count: 1)
            while data.count < 65536, recv(fd, &byte, 1, 0) == 1 {
                data.append(byte[0])
                if data.count >= 4, data.suffix(4).elementsEqual([13, 10, 13, 10]) { break }
            }
            return String(decoding: data, as: UTF8.self)
        }

        /// Writes `bytes`; false once the peer has gone.
        @discardableResult
        public func write(_ bytes: [UInt8]) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { return false }
                sent += count
            }
            return true
        }

        /// Writes `text` as UTF-8.
        @discardableResult
        public func write(_ text: String) -> Bool { write(Array(text.utf8)) }
    }

    /// Listens on 127.0.0.1 with `backlog`; with a `handler`, accepts and runs it per connection,
    /// without one, never accepts (so once the queue is full, connecting times out).
    public init(backlog: Int32 = 16, handler: (@Sendable (Connection) -> Void)?) throws {
        (listener, port) = try LoopbackSocket.bind(backlog: backlog)
        self.handler = handler
        if handler != nil {
            let thread = Thread { [self] in self.serve() }
            thread.name = "LoopbackServer"
            thread.start()
        }
    }

    deinit { close(listener) }

    /// `http://127.0.0.1:PORT`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// How many connections were accepted so far.
    public var connectionCount: Int { accepted.withLock { $0 } }

    /// Stops accepting; handlers see ``Connection/isStopped``.
    public func stop() { stopped.withLock { $0 = true } }

    /// Opens a connection to this server and keeps it for the life of the returned descriptor's owner:
    /// with `backlog: 0` and no handler, one such connection fills the accept queue.
    public func occupy() throws -> Int32 { try Self.connect(port: port) }

    /// A blocking TCP connection to 127.0.0.1:`port`; the caller closes the descriptor.
    public static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        return fd
    }

    private func serve() {
        guard let handler else { return }
        while !stopped.withLock({ $0 }) {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            accepted.withLock { $0 += 1 }
            let connection = Connection(fd: client, server: self)
            let thread = Thread {
                handler(connection)
                close(client)
            }
            thread.start()
        }
    }
}
