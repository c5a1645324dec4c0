import Foundation
import Glibc
@testable import AuthflowAgent
import OAuthFlow
import Synchronization
import TestSupport
import Testing

/// `--ciba-notification-listen`: the agent's CIBA notification endpoint (CIBA Core §10.2), its
/// answers to each request as a table, then over a socket with a scripted client.
@Suite("The agent's CIBA notification endpoint")
struct CIBANotificationsTests {
    static let body = #"{"auth_req_id":"req-1"}"#

    /// A ping whose bearer is `good` and whose body is ``body`` wakes a poll; nothing else does.
    static func deliver(_ authorization: String?, _ body: Data) -> Bool {
        authorization == "Bearer good" && body == Data(Self.body.utf8)
    }

    static func post(_ fields: String, body: String = body) -> String {
        "POST /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\n\(fields)\r\n\(body)"
    }

    static let json = "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"

    @Test("each request gets its status; only a whole, well-formed POST reaches the flow (CIBA Core §10.2)", arguments: [
        (post("Authorization: Bearer good\r\n" + json), "204 No Content", true as Bool?),
        (post("Authorization: bearer good\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 23\r\n"), "401 Unauthorized", false),
        (post("Authorization: Bearer wrong\r\n" + json), "401 Unauthorized", false),
        (post(json), "401 Unauthorized", false),
        ("GET /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "405 Method Not Allowed", nil),
        ("POST /ciba-notify HTTP/1.0\r\nHost: 127.0.0.1\r\n" + json + "\r\n" + body, "505 HTTP Version Not Supported", nil),
        (post("Authorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n", body: ""), "413 Content Too Large", nil),
        (post("Authorization: Bearer good\r\nContent-Type: application/json\r\n"), "411 Length Required", nil),
        (post("Authorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: -1\r\n"), "400 Bad Request", nil),
        (post("Authorization: Bearer good\r\n" + json + "Content-Length: 23\r\n"), "400 Bad Request", nil),
        (post("Authorization: Bearer good\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"), "400 Bad Request", nil),
        (post("Authorization: Bearer good\r\nAuthorization: Bearer good\r\n" + json), "400 Bad Request", nil),
        (post("Authorization: Bearer good\r\nContent-Type: text/plain\r\nContent-Length: 23\r\n"), "415 Unsupported Media Type", nil),
        ("POST /ciba-notify HTTP/1.1\r\n" + json + "\r\n" + body, "400 Bad Request", nil),
        ("\u{16}\u{03}\u{01}\u{02}\u{00}\r\n\r\n", "400 Bad Request", nil),
        ("POST /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n", "400 Bad Request", nil),
        ("POST /x HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n", "431 Request Header Fields Too Large", nil),
    ] as [(String, String, Bool?)])
    func answers(request: String, status: String, woke: Bool?) throws {
        let delivered = Mutex(0)
        let (step, handed) = CIBANotifications.answer(Array(request.utf8)) { authorization, body in
            delivered.withLock { $0 += 1 }
            return Self.deliver(authorization, body)
        }
        guard case .reply(let reply) = step else { Issue.record("no answer: \(step)"); return }
        #expect(reply.status == status)
        #expect(handed == woke)
        #expect(delivered.withLock { $0 } == (woke == nil ? 0 : 1))
        let wire = String(decoding: reply.bytes, as: UTF8.self)
        #expect(!wire.contains("good") && !wire.contains("req-1"), "neither the bearer nor the body is echoed")
        #expect(wire.contains("WWW-Authenticate: Bearer\r\n") == (status == "401 Unauthorized"))
        #expect(wire.contains("Allow: POST\r\n") == (status == "405 Method Not Allowed"))
    }

    @Test("a head or a body not whole yet is read on")
    func incomplete() {
        let whole = Array(Self.post("Authorization: Bearer good\r\n" + Self.json).utf8)
        for cut in [10, 40, whole.count - Self.body.utf8.count, whole.count - 1] {
            let (step, handed) = CIBANotifications.answer(Array(whole.prefix(cut))) { _, _ in Issue.record("handed a partial request"); return true }
            guard case .incomplete = step else { Issue.record("answered \(cut) bytes: \(step)"); continue }
            #expect(handed == nil)
        }
    }

    @Test("over a socket: wrong bearer 401, GET 405, a huge body 413, a slow head 408, garbage 400, and a ping after all that 204; nothing secret in the log")
    func socket() async throws {
        let lines = Mutex<[String]>([])
        let endpoint = try CIBANotifications(listen: AgentOptions.ListenAddress(host: "127.0.0.1", port: 0), deliver: Self.deliver) { line in
            lines.withLock { $0.append(line) }
        }
        #expect(endpoint.start())
        defer { endpoint.stop() }
        let port = try #require(UInt16(endpoint.address.split(separator: ":").last ?? ""))
        #expect(endpoint.address == "127.0.0.1:\(port)" && port != 0)

        func status(_ request: String) async throws -> String {
            let answer = try await onOwnThread { try rawExchange(port: port, Array(request.utf8)) }
            return answer.components(separatedBy: "\r\n")[0]
        }
        #expect(try await status(Self.post("Authorization: Bearer wrong\r\n" + Self.json)) == "HTTP/1.1 401 Unauthorized")
        #expect(try await status("GET /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") == "HTTP/1.1 405 Method Not Allowed")
        #expect(try await status(Self.post("Authorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n",
                                           body: String(repeating: "x", count: 1000))) == "HTTP/1.1 413 Content Too Large")
        // Slow: the head never ends; the endpoint answers 408 once its read timeout (5 s) is up.
        let started = ContinuousClock.now
        #expect(try await status("POST /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\n") == "HTTP/1.1 408 Request Timeout")
        #expect(ContinuousClock.now - started >= CIBANotifications.readTimeout - .milliseconds(100))
        #expect(try await status("\u{01}garbage\r\n\r\n") == "HTTP/1.1 400 Bad Request")
        #expect(try await status(Self.post("Authorization: Bearer good\r\n" + Self.json)) == "HTTP/1.1 204 No Content", "still serving")

        let log = lines.withLock { $0 }
        #expect(log == ["a CIBA notification named no login being polled (answered 401)", "a CIBA ping woke the poll of a login"])
    }

    @Test("at most 32 connections are read at once: one more is closed unanswered; once they go, a ping is answered again")
    func connectionLimit() async throws {
        // Silent connections that never time out during the test, however slowly a loaded machine accepts them.
        let endpoint = try CIBANotifications(listen: AgentOptions.ListenAddress(host: "127.0.0.1", port: 0), timeout: .seconds(600),
                                             deliver: Self.deliver) { _ in }
        #expect(endpoint.start())
        defer { endpoint.stop() }
        let port = try #require(UInt16(endpoint.address.split(separator: ":").last ?? ""))
        // Connected on a thread of their own: a connect beyond the listen backlog blocks until it is retried.
        var silent = try await onOwnThread { () -> [Int32] in
            (0..<CIBANotifications.maximumConnections).map { _ in
                let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var addr = sockaddr_in()
                addr.sin_family = sa_family_t(AF_INET)
                addr.sin_port = port.bigEndian
                addr.sin_addr.s_addr = inet_addr("127.0.0.1")
                _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
                return fd
            }
        }
        defer { for fd in silent { close(fd) } }
        let ping = Array(Self.post("Authorization: Bearer good\r\n" + Self.json).utf8)
        let over = try await onOwnThread { try rawExchange(port: port, ping) }
        #expect(over.isEmpty, "closed without an answer (read, it would have been answered 204)")
        for fd in silent { close(fd) }
        silent = []
        // The closed ones leave the table as the loop reads their end; a bounded retry covers that. On a
        // loaded machine one answer took 7 s in a full run: each try waits up to 30 s.
        var answer = ""
        let deadline = ContinuousClock.now + .seconds(120)
        for _ in 0..<600 where !answer.hasPrefix("HTTP/1.1 204") && ContinuousClock.now < deadline {
            answer = try await onOwnThread { try rawExchange(port: port, ping) }
            if !answer.hasPrefix("HTTP/1.1 204") { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(answer.hasPrefix("HTTP/1.1 204 No Content"))
    }

    @Test("--ciba-notification-listen on an address the system does not have is a data error naming it")
    func unbindable() {
        #expect { try CIBANotifications(listen: AgentOptions.ListenAddress(host: "192.0.2.1", port: 1), deliver: { _, _ in false }) { _ in } } throws: { error in
            guard case AgentError.data(let message) = error else { return false }
            return message.contains("192.0.2.1:1")
        }
    }
}
