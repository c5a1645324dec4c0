import Foundation
import Glibc
import Synchronization

/// An HTTP proxy on 127.0.0.1 that serves `CONNECT` only (RFC 9110 §9.3.6), the way clients
/// reach an `https://` origin through `HTTPS_PROXY`: it records each request line, opens a TCP
/// connection to the target, answers `200`, and relays bytes both ways without looking at them
/// (so TLS runs end to end, client to origin). Targets other than the loopback host are refused
/// with `403` and nothing is connected; any other method gets `405`. Each tunnel ends when either
/// side closes, when the proxy stops, or after 30 s.
public final class ConnectProxy: Sendable {
    private let server: LoopbackServer
    private let log: Log

    private final class Log: Sendable {
        let heads = Mutex<[String]>([])
    }

    /// Starts listening.
    public init() throws {
        let log = Log()
        self.log = log
        server = try LoopbackServer { connection in Self.serve(connection, log: log) }
    }

    /// The port it listens on, on 127.0.0.1.
    public var port: UInt16 { server.port }
    /// `http://127.0.0.1:PORT`: the value for `HTTPS_PROXY`.
    public var url: String { server.baseURL }
    /// Every request line received, such as `CONNECT localhost:8443 HTTP/1.1`, in order.
    public var requestLines: [String] {
        log.heads.withLock { $0 }.map { $0.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? "" }
    }
    /// Every request head received (request line and header fields), in order: all a proxy sees
    /// of a tunnelled request.
    public var requestHeads: [String] { log.heads.withLock { $0 } }
    /// How many client connections were accepted.
    public var connectionCount: Int { server.connectionCount }

    /// Stops accepting and ends the tunnels.
    public func stop() { server.stop() }

    private static func serve(_ connection: LoopbackServer.Connection, log: Log) {
        let head = connection.readHead()
        let requestLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        log.heads.withLock { $0.append(head) }
        let parts = requestLine.split(separator: " ").map(String.init)
        guard parts.count == 3, parts[0] == "CONNECT" else {
            connection.write("HTTP/1.1 405 Method Not Allowed\r\nAllow: CONNECT\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        guard let colon = parts[1].lastIndex(of: ":"), let port = UInt16(parts[1][parts[1].index(after: colon)...]),
              ["localhost", "127.0.0.1", "[::1]"].contains(parts[1][..<colon].lowercased())
        else {
            connection.write("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        guard let upstream = try? LoopbackServer.connect(port: port) else {
            connection.write("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        defer { close(upstream) }
        guard connection.write("HTTP/1.1 200 Connection established\r\n\r\n") else { return }
        relay(connection, upstream)
    }

    /// Copies bytes between the client and `upstream` until one closes, the proxy stops, or 30 s pass.
    private static func relay(_ connection: LoopbackServer.Connection, _ upstream: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !connection.isStopped {
            var fds = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: upstream, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, 100)
            guard ready >= 0 else { return }
            if ready == 0 { continue }
            for (from, to) in [(0, upstream), (1, connection.fd)] where fds[from].revents != 0 {
                let count = recv(fds[from].fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count == 0 { return }   // orderly close by one side
                if count < 0 {
                    if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                    return
                }
                var sent = 0
                while sent < count {
                    let written = buffer.withUnsafeBytes { send(to, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL)) }
                    guard written > 0 else { return }
                    sent += written
                }
            }
        }
    }
}
