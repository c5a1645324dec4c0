import Glibc
import OAuthFlow

/// Unix stream socket addresses and the calls that take them.
enum UnixSocket {
    /// The longest path a `sockaddr_un` holds (with its terminating NUL).
    static let maximumPathLength = 107

    /// Runs `body` with a `sockaddr_un` for `path` (`@name` is an abstract address) and its length.
    static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T? {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength, !bytes.contains(0) else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let abstract = bytes[0] == UInt8(ascii: "@")
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
            if abstract { raw[0] = 0 }
        }
        let length = MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(length)) }
        }
    }

    /// A new, unconnected stream socket (close-on-exec; non-blocking when asked).
    static func stream(nonBlocking: Bool = false) throws(SystemError) -> FileDescriptor {
        try FileDescriptor(returnedBy: socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0), 0))
    }

    /// A socket connected to `path`.
    /// - Throws: ``SystemError`` (`ENOENT`: no socket there; `ECONNREFUSED`: nobody listens).
    static func connect(_ path: String) throws(SystemError) -> FileDescriptor {
        let fd = try stream()
        let result = withAddress(path) { Glibc.connect(fd.raw, $0, $1) } ?? { errno = ENAMETOOLONG; return -1 }()
        guard result == 0 else { throw SystemError(code: errno) }
        return fd
    }

    /// A non-blocking socket listening on `path`, created with `mode` (set while the file is made, so
    /// it is never more open than that) and, with `group`, that group.
    ///
    /// An existing socket file nobody answers on (a crashed agent's) is replaced; one that answers is not.
    /// - Throws: ``SystemError``: `EADDRINUSE` when another process answers on `path`.
    static func listen(_ path: String, mode: mode_t, group: gid_t?) throws(SystemError) -> FileDescriptor {
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else { throw SystemError(code: EEXIST) }
            if (try? connect(path)) != nil { throw SystemError(code: EADDRINUSE) }
            unlink(path)
        }
        let fd = try stream(nonBlocking: true)
        let previous = umask(0o177)   // the file appears as 0600 at most, then gets its mode
        let bound = withAddress(path) { bind(fd.raw, $0, $1) } ?? { errno = ENAMETOOLONG; return -1 }()
        let bindError = errno
        umask(previous)
        guard bound == 0 else { throw SystemError(code: bindError) }
        if let group, chown(path, UInt32.max, group) != 0 { throw SystemError(code: errno) }
        guard chmod(path, mode) == 0 else { throw SystemError(code: errno) }
        // A backlog as deep as the connections the server holds (AgentServer.Limits): a burst of clients
        // waits in the queue instead of sleeping in connect(2) until it has room.
        guard Glibc.listen(fd.raw, 1024) == 0 else { throw SystemError(code: errno) }
        return fd
    }
}
