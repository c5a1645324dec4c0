#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
package import OAuthFlow

/// A blocking client of the agent's socket, for `authflow token` before the concurrency runtime starts.
package enum AgentClient {
    /// Sends `request` (one line) to the agent at `path` and reads one answer line.
    /// - Returns: the answer object; nil when nobody answers or the answer is not a JSON object.
    package static func ask(_ path: String, request: String, timeout: Int = 30) -> JSONValue? {
        guard let fd = try? UnixSocket.connect(path) else { return nil }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd.raw, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd.raw, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { send(fd.raw, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            sent += count
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while !answer.contains(UInt8(ascii: "\n")), answer.count < 1 << 20 {
            let count = chunk.withUnsafeMutableBytes { recv(fd.raw, $0.baseAddress!, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            answer += chunk[0..<count]
        }
        guard let newline = answer.firstIndex(of: UInt8(ascii: "\n")),
              let value = try? JSONValue.parse(Data(answer[..<newline])), value.objectValue != nil
        else { return nil }
        return value
    }
}
