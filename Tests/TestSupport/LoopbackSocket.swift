import Foundation
import Glibc

/// A TCP socket bound to an ephemeral port on 127.0.0.1: the one place the test servers, and the
/// tests that need a free or a refused port, make their sockets.
public enum LoopbackSocket {
    /// Binds a new socket to 127.0.0.1 on a port the kernel picks and, with a `backlog`, listens.
    ///
    /// Returns the descriptor (the caller closes it) and the port. Throws `POSIXError` when the
    /// socket cannot be made, bound or put to listening; nothing is left open then.
    /// - Parameters:
    ///   - backlog: the listen queue; `nil` binds without listening (connecting is then refused).
    ///   - reuseAddress: set `SO_REUSEADDR` first.
    public static func bind(backlog: Int32?, reuseAddress: Bool = false) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        if reuseAddress {
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) } }
        guard bound == 0, backlog.map({ listen(fd, $0) == 0 }) ?? true else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, UInt16(bigEndian: addr.sin_port))
    }

    /// Starts `process` with its standard streams on `/dev/null` and waits (at most 10 s, polling
    /// every 100 ms) until it accepts connections on `port` of 127.0.0.1.
    ///
    /// Throws what `ChildProcess.run()` throws, or `POSIXError(.ETIMEDOUT)` when it exits or is not
    /// accepting by then; the caller stops it.
    public static func runServer(_ process: ChildProcess, port: UInt16) throws {
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<100 {
            if let probe = try? LoopbackServer.connect(port: port) {
                close(probe)
                return
            }
            guard process.isRunning else { break }
            usleep(100_000)
        }
        throw POSIXError(.ETIMEDOUT)
    }

    /// A port on 127.0.0.1 that was free a moment ago (bound, read, closed): connecting to it is
    /// refused until something else binds it. Throws `POSIXError` as ``bind(backlog:reuseAddress:)``.
    public static func closedPort() throws -> UInt16 {
        let (fd, port) = try bind(backlog: nil)
        close(fd)
        return port
    }
}
