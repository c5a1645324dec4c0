import Foundation
import Glibc
import TestSupport
import Testing

/// The scripted server the transport tests count connections on: it serves connections at the same
/// time and keeps an idle kept-alive connection open until the client closes it or the server stops,
/// so that what a test counts is what the client did, however busy the machine is (issue 21).
@Suite("TestHTTPServer: concurrent connections, kept-alive until the client or stop() ends them", .timeLimit(.minutes(1)))
struct TestHTTPServerTests {
    /// Sends one GET on `fd` and reads its whole answer (the server sends `Content-Length`); the body.
    /// A receive limit of 30 s guards against a hang; the suite's time limit bounds the test.
    private func exchange(_ fd: Int32, path: String, close: Bool = false) -> String? {
        var limit = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: \(close ? "close" : "keep-alive")\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: data, as: UTF8.self)
            if let headEnd = text.range(of: "\r\n\r\n"),
               let lengthLine = text[..<headEnd.lowerBound].split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-length:") }),
               let length = Int(lengthLine.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)),
               text.utf8.count - text.utf8.distance(from: text.startIndex, to: headEnd.upperBound) >= length {
                return String(text[headEnd.upperBound...])
            }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            data += buffer[0..<count]
        }
    }

    @Test("an idle kept-alive connection stays open while another connection is served, then serves its next request")
    func idleConnectionDoesNotBlockAnother() throws {
        let server = try TestHTTPServer(keepAlive: true)
        defer { server.stop() }
        server.script("/a", [.json(#"{"n":"a"}"#)])
        server.script("/b", [.json(#"{"n":"b"}"#)])
        let kept = try LoopbackServer.connect(port: server.port)
        defer { close(kept) }
        let other = try LoopbackServer.connect(port: server.port)
        defer { close(other) }

        let first = exchange(kept, path: "/a")
        // Served while the first connection is open and idle (one at a time, this waited for it to close).
        let meanwhile = exchange(other, path: "/b", close: true)
        let second = exchange(kept, path: "/a")

        #expect(first == #"{"n":"a"}"#)
        #expect(meanwhile == #"{"n":"b"}"#)
        #expect(second == #"{"n":"a"}"#, "the idle connection was still open")
        #expect(server.requests().map(\.path) == ["/a", "/b", "/a"])
        #expect(server.connectionCount == 2)
    }

    @Test("stop() closes an idle kept-alive connection and returns once the server's threads have ended")
    func stopClosesAndJoins() throws {
        let server = try TestHTTPServer(keepAlive: true)
        server.script("/a", [.json("{}")])
        let kept = try LoopbackServer.connect(port: server.port)
        defer { close(kept) }
        #expect(exchange(kept, path: "/a") == "{}")
        #expect(server.closedCount == 0)

        server.stop()

        // Counted by the connection's thread just before it closes the socket: stop() waited for it.
        #expect(server.closedCount == 1)
        var byte: UInt8 = 0
        #expect(recv(kept, &byte, 1, 0) == 0, "the server closed the kept-alive connection")
        server.stop()   // a second stop does nothing
    }

    @Test("stop() ends a delayed reply's wait: the reply is not sent")
    func stopEndsDelay() throws {
        let server = try TestHTTPServer(keepAlive: true)
        server.script("/slow", [TestHTTPServer.Reply.json("{}").delayed(.seconds(600))])
        let client = try LoopbackServer.connect(port: server.port)
        defer { close(client) }
        let request = Array("GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // Bounded by the suite's time limit; the request is recorded before the reply's wait begins.
        for _ in 0..<6000 where server.requests("/slow").isEmpty { usleep(10_000) }
        #expect(server.requests("/slow").count == 1)

        server.stop()

        var byte: UInt8 = 0
        #expect(recv(client, &byte, 1, 0) == 0, "closed without an answer")
        #expect(server.closedCount == 1)
    }
}
