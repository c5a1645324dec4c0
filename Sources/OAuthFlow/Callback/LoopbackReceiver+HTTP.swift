#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

// The receiver's HTTP: reading a request head and answering it.
extension LoopbackReceiver {
    /// What a request head asks for.
    enum Verdict {
        case incomplete
        case reject(status: String, text: String)
        case callback(URL)
    }

    /// Decides what a (possibly partial) request head is.
    func classify(_ head: [UInt8]) -> Verdict {
        guard let end = Self.endOfHead(head) else {
            if head.count > Self.maximumRequestSize {
                return .reject(status: "431 Request Header Fields Too Large", text: "The request is too large.")
            }
            return .incomplete
        }
        guard end <= Self.maximumRequestSize else {
            return .reject(status: "431 Request Header Fields Too Large", text: "The request is too large.")
        }
        let lineEnd = head.firstIndex(of: UInt8(ascii: "\n")) ?? end
        let line = ASCIIText.trimmingBlanksAndNewlines(String(decoding: head[..<lineEnd], as: UTF8.self))
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") else {
            return .reject(status: "400 Bad Request", text: "This is not a request this page understands.")
        }
        let target = parts[1]
        let targetPath = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard parts[0] == "GET", targetPath == path else {
            return .reject(status: "404 Not Found", text: "Nothing here. The sign-in continues in your other window.")
        }
        guard let queryStart = target.firstIndex(of: "?"), target.index(after: queryStart) < target.endIndex,
              let url = URL(string: String(redirectURI.absoluteString.prefix { $0 != "?" }) + target[queryStart...])
        else {
            return .reject(status: "400 Bad Request", text: "The callback carries no parameters.")
        }
        return .callback(url)
    }

    /// The length of the head through its blank line, or nil when the blank line has not arrived.
    static func endOfHead(_ bytes: [UInt8]) -> Int? {
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


    /// Sends a complete response and shuts the write side; never raises SIGPIPE.
    static func respond(_ socket: borrowing FileDescriptor, status: String, page: String) {
        let body = Array(page.utf8)
        let head = "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(body.count)\r\n"
            + "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nX-Content-Type-Options: nosniff\r\n"
            + "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + body
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(socket.raw, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN {
                var ready = pollfd(fd: socket.raw, events: Int16(POLLOUT), revents: 0)
                guard poll(&ready, 1, 1000) > 0 else { return }
                continue
            }
            guard count > 0 else { return }
            sent += count
        }
        shutdown(socket.raw, Int32(SHUT_WR))
    }
}
