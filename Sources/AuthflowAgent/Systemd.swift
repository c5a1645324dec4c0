import Glibc
package import OAuthFlow

/// What the agent says to systemd and takes from it, without libsystemd: the `sd_notify`
/// datagrams (`READY=1`, `STATUS=…`, `RELOADING=1`, `STOPPING=1`, `WATCHDOG=1`), socket
/// activation (`LISTEN_FDS`) and the store key as a credential (`LoadCredential=`), as
/// systemd.exec(5), sd_notify(3) and sd_listen_fds(3) describe them.
package enum Systemd {
    /// The name of the systemd credential (`LoadCredential=authflow-store-key:/path`) that holds the store key.
    static let storeKeyCredential = "authflow-store-key"

    /// The store key from `$CREDENTIALS_DIRECTORY/authflow-store-key` when that file exists; nil
    /// otherwise. The caller asks only when no key file is named otherwise.
    /// - Throws: ``AgentError`` `.data` naming the file and the reason (never the key).
    package static func storeKeyCredential(environment: [String: String]) throws(AgentError) -> EntryEncryption? {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/"),
              access(directory + "/" + storeKeyCredential, F_OK) == 0
        else { return nil }
        do {
            return EntryEncryption(key: try StoreKey(systemdCredential: storeKeyCredential, environment: environment))
        } catch {
            throw .data(error.message ?? error.description)
        }
    }

    /// Sends `message` (lines of `NAME=value`) to `$NOTIFY_SOCKET`; false when it is not set or
    /// the datagram could not be sent. A path starting with `@` is an abstract socket.
    @discardableResult
    static func notify(_ message: String, environment: [String: String]) -> Bool {
        guard let path = environment["NOTIFY_SOCKET"], path.hasPrefix("/") || path.hasPrefix("@"),
              let fd = try? FileDescriptor(returnedBy: socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
        else { return false }
        let bytes = Array(message.utf8)
        let sent = UnixSocket.withAddress(path) { address, length in
            bytes.withUnsafeBytes { sendto(fd.raw, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
        }
        return sent == bytes.count
    }

    /// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, when it is set for this process
    /// (`WATCHDOG_PID` unset or this pid); nil otherwise.
    static func watchdogInterval(environment: [String: String]) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], Int32(pid) != getpid() { return nil }
        return .microseconds(microseconds / 2)
    }

    /// The listening socket systemd passed (the first of `LISTEN_FDS`, descriptor 3), when
    /// `LISTEN_PID` is this process; it is made non-blocking and close-on-exec, and the variables
    /// are removed so that no child takes them for its own.
    /// - Throws: a message when the descriptor passed is not a listening Unix stream socket.
    static func activatedListener(environment: [String: String]) throws(AgentError) -> FileDescriptor? {
        guard let pid = environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(),
              let count = environment["LISTEN_FDS"].flatMap({ Int($0) }), count >= 1
        else { return nil }
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }
        let fd: Int32 = 3   // SD_LISTEN_FDS_START
        var type: Int32 = 0
        var listening: Int32 = 0
        var domain: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_STREAM.rawValue),
              getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0, listening == 1,
              getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0, domain == AF_UNIX
        else {
            throw .data("LISTEN_FDS: descriptor 3 is not a listening Unix stream socket (use ListenStream=/path in the .socket unit)")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return try? FileDescriptor(returnedBy: fd)
    }
}
