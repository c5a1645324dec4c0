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
        let request: HTTPIntake.RequestHead
        switch HTTPIntake.parseHead(head, limit: Self.maximumRequestSize) {
        case .incomplete: return .incomplete
        case .tooLarge: return .reject(status: "431 Request Header Fields Too Large", text: "The request is too large.")
        case .malformed: return .reject(status: "400 Bad Request", text: "This is not a request this page understands.")
        case .complete(let parsed): request = parsed
        }
        let target = request.target
        let targetPath = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard request.method == "GET", targetPath == path else {
            return .reject(status: "404 Not Found", text: "Nothing here. The sign-in continues in your other window.")
        }
        guard let queryStart = target.firstIndex(of: "?"), target.index(after: queryStart) < target.endIndex,
              let url = URL(string: String(redirectURI.absoluteString.prefix { $0 != "?" }) + target[queryStart...])
        else {
            return .reject(status: "400 Bad Request", text: "The callback carries no parameters.")
        }
        return .callback(url)
    }

    /// A complete HTML response.
    static func reply(status: String, page: String) -> HTTPIntake.Reply {
        HTTPIntake.Reply(status: status, fields: [
            ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"),
            ("X-Content-Type-Options", "nosniff"), ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"),
        ], body: Array(page.utf8))
    }

    /// Sends a complete response and shuts the write side; never raises SIGPIPE.
    static func respond(_ socket: borrowing FileDescriptor, status: String, page: String) {
        HTTPIntake.send(reply(status: status, page: page), to: socket.raw)
    }
}
