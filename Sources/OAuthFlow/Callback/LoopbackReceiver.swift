#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Glibc
import Synchronization

/// Receives one authorization redirect on a loopback address, as native apps do
/// ([RFC 8252 §7.3](https://www.rfc-editor.org/rfc/rfc8252#section-7.3)).
///
/// A minimal HTTP/1.1 server that listens on loopback only. Create it first, send
/// ``redirectURI`` (which carries the port actually bound) in the authorization request, then
/// hand the callback to ``AuthFlow`` from ``receive(timeout:_:)``:
///
/// ```swift
/// let receiver = try LoopbackReceiver(redirectURI: provider.redirectURI)
/// var provider = provider
/// provider.redirectURI = receiver.redirectURI       // the port actually bound
/// let flow = try await AuthFlow(providers: [provider], store: store)
/// let request = try await flow.authorizationRequest(provider: provider.id)
/// // open request.url in a browser, then:
/// let authorization = try await receiver.receive { callbackURL in
///     try await flow.completeAuthorization(callbackURL: callbackURL)
/// }
/// ```
///
/// The first `GET` of the redirect URI's exact path that carries a query ends the wait: the
/// receiver passes the full callback URL to the handler and answers the browser with a small
/// HTML page saying whether the handler succeeded. Any other request (another path, another
/// method, a request without a query, one larger than ``maximumRequestSize``) gets an error
/// status and the wait goes on. Connections that send nothing are dropped after a few seconds.
/// The receiver is single use: after ``receive(timeout:_:)`` returns or throws, it has stopped
/// listening.
///
/// Waiting happens on a thread of its own, so no task thread is blocked; cancelling the waiting
/// task ends the wait promptly with `.cancelled`.
public final class LoopbackReceiver: Sendable {
    /// The path used when the redirect URI is not a loopback `http://` URI.
    public static let defaultPath = "/callback"
    /// The largest request head (request line and headers) read, in bytes.
    public static let maximumRequestSize = 16 * 1024
    /// How long a connection may take to send its request head.
    static let connectionTimeout: Duration = .seconds(5)
    /// The most connections served at once; more are closed at once.
    static let maximumConnections = 16

    /// The redirect URI to send in the authorization request: the loopback host, the port
    /// actually bound, and the path the receiver answers on.
    public let redirectURI: URL

    /// The percent-encoded path the receiver answers on.
    let path: String
    /// The listening sockets (one, or two for `localhost`), closed when the receiver stops listening.
    private let listeners: Mutex<[SharedFileDescriptor]>
    /// A pipe whose write end wakes the waiting thread (``close()``, cancellation).
    private let wake: FileDescriptor.Pipe
    private let phase = Mutex(Phase.ready)

    private enum Phase { case ready, receiving, closed }

    /// Listens where a loopback redirect URI says, or on `127.0.0.1` at an ephemeral port.
    ///
    /// When `redirectURI` is an `http://` URI on a loopback host (`127.0.0.1` and the rest of
    /// `127.0.0.0/8`, `[::1]`, `localhost`, `*.localhost`), the receiver listens on exactly that
    /// host, port and path; without a port it takes an ephemeral one (RFC 8252 §7.3 requires
    /// servers to accept any port for loopback redirects). `localhost` listens on both `127.0.0.1`
    /// and `::1` when IPv6 is available. Any other redirect URI, or none, gives
    /// `http://127.0.0.1:<ephemeral port>/callback`.
    /// - Throws: ``OAuthError`` `.configuration` when the socket cannot be bound (such as a port
    ///   another program holds).
    public convenience init(redirectURI: URL?) throws(OAuthError) {
        if let redirectURI, let components = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false),
           components.scheme?.lowercased() == "http", let host = components.host, Provider.isLoopback(host: host) {
            let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            try self.init(host: host, port: components.port.map { UInt16(clamping: $0) } ?? 0, path: path)
        } else {
            try self.init(host: "127.0.0.1", port: 0, path: Self.defaultPath)
        }
    }

    /// Listens on a loopback `host` and `port` (0 for an ephemeral port), answering on `path`.
    /// - Parameters:
    ///   - host: `127.0.0.1` (or another `127.0.0.0/8` address), `::1` or `[::1]`, `localhost` or `*.localhost`.
    ///   - port: the port; 0 lets the system choose one.
    ///   - path: the percent-encoded path of the redirect URI, starting with `/`.
    /// - Throws: ``OAuthError`` `.configuration` for a host that is not loopback, a path that does not
    ///   start with `/`, or a socket that cannot be bound.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, path: String = LoopbackReceiver.defaultPath) throws(OAuthError) {
        guard Provider.isLoopback(host: host) else {
            throw OAuthError(.configuration, endpoint: .authorization,
                             message: "the loopback receiver listens only on loopback hosts, not \"\(host)\" (RFC 8252 §8.3)")
        }
        guard path.hasPrefix("/"), !path.contains("?"), !path.contains("#") else {
            throw OAuthError(.configuration, endpoint: .authorization, message: "the callback path must start with \"/\"")
        }
        let bare = ASCIIText.trimming(host, where: { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") }).lowercased()
        let isName = bare == "localhost" || bare.hasSuffix(".localhost")
        // On a throw, whatever was opened closes with its owner.
        var descriptors: [SharedFileDescriptor] = []
        var boundPort = port
        if isName {
            // Browsers resolve localhost to either family; listen on both (IPv6 when available).
            descriptors.append(SharedFileDescriptor(try Self.listen(address: .v4("127.0.0.1"), port: boundPort, host: host)))
            boundPort = try Self.localPort(descriptors[0].descriptor)
            do {
                descriptors.append(SharedFileDescriptor(try Self.listen(address: .v6("::1"), port: boundPort, host: host)))
            } catch {}
        } else {
            descriptors.append(SharedFileDescriptor(try Self.listen(address: bare.contains(":") ? .v6(bare) : .v4(bare), port: boundPort, host: host)))
            boundPort = try Self.localPort(descriptors[0].descriptor)
        }
        let wake: FileDescriptor.Pipe
        do throws(SystemError) {
            wake = try FileDescriptor.pipe(O_NONBLOCK)
        } catch {
            throw OAuthError(.configuration, endpoint: .authorization, message: "cannot create a pipe: \(Self.errorText(error.code))")
        }
        let authority = bare.contains(":") ? "[\(bare)]" : host
        guard let uri = URL(string: "http://\(authority):\(boundPort)\(path)") else {
            throw OAuthError(.configuration, endpoint: .authorization, message: "cannot form the redirect URI for path \"\(path)\"")
        }
        self.redirectURI = uri
        self.path = path
        self.listeners = Mutex(descriptors)
        self.wake = wake
    }

    /// Stops listening; a ``receive(timeout:_:)`` in progress ends with `.cancelled`.
    public func close() {
        let wasReceiving = phase.withLock { phase -> Bool in
            defer { if phase == .ready { phase = .closed } }
            return phase == .receiving
        }
        if wasReceiving { wakeUp() } else { closeListeners() }
    }

    /// Waits for the callback, passes its full URL to `handle`, and answers the browser.
    ///
    /// The browser gets a success page when `handle` returns and an error page naming the error
    /// when it throws; either way the receiver then stops listening.
    /// - Parameters:
    ///   - timeout: how long to wait for the callback (5 minutes by default).
    ///   - handle: completes the login, typically with ``AuthFlow/completeAuthorization(callbackURL:)``.
    /// - Returns: what `handle` returns.
    /// - Throws: ``OAuthError`` `.timedOut` when no callback came in time, `.cancelled` when the task
    ///   was cancelled or ``close()`` was called, `.configuration` when the receiver was already used,
    ///   or what `handle` throws.
    public func receive<T: Sendable>(
        timeout: Duration = .seconds(300), _ handle: @Sendable (URL) async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        let started = phase.withLock { phase -> Bool in
            guard phase == .ready else { return false }
            phase = .receiving
            return true
        }
        guard started else {
            throw OAuthError(.configuration, endpoint: .authorization, message: "the loopback receiver was already used or closed")
        }
        let accepted: Accepted
        do {
            accepted = try await waitForRequest(timeout: timeout)
        } catch {
            finish()
            throw error
        }
        defer { finish() }   // the connection closes with `accepted`
        do {
            let value = try await handle(accepted.url)
            let page = Self.page(title: "Signed in", text: "You are signed in. You can close this window and return to the terminal.")
            Self.respond(accepted.connection.descriptor, status: "200 OK", page: page)
            return value
        } catch {
            Self.respond(accepted.connection.descriptor, status: "400 Bad Request", page: Self.page(title: "Sign-in failed", text: Self.explain(error)))
            throw error
        }
    }

    /// Waits for the callback and returns its URL, answering the browser with a neutral page.
    ///
    /// Prefer ``receive(timeout:_:)``, which tells the browser whether the login worked.
    /// - Throws: ``OAuthError`` `.timedOut`, `.cancelled`, or `.configuration` when already used.
    public func waitForCallback(timeout: Duration = .seconds(300)) async throws(OAuthError) -> URL {
        try await receive(timeout: timeout) { url in url }
    }

    // MARK: Waiting

    private struct Accepted: Sendable {
        var connection: SharedFileDescriptor
        var url: URL
    }

    private func finish() {
        phase.withLock { $0 = .closed }
        closeListeners()
    }

    /// Drops the listening sockets; they close now, or when ``serve(until:timeout:)`` lets go of them.
    private func closeListeners() {
        listeners.withLock { $0.removeAll() }
    }

    private func wakeUp() {
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write.raw, &byte, 1)
    }

    private func waitForRequest(timeout: Duration) async throws(OAuthError) -> Accepted {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        let result: Result<Accepted, OAuthError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Accepted, OAuthError>, Never>) in
                let started = DetachedThread.start(name: "LoopbackReceiver") { [self] in
                    continuation.resume(returning: self.serve(until: deadline, timeout: timeout))
                }
                if !started {
                    continuation.resume(returning: .failure(OAuthError(
                        .configuration, endpoint: .authorization, message: "could not start a thread for the loopback redirect receiver")))
                }
            }
        } onCancel: {
            wakeUp()
        }
        return try result.get()
    }

    private struct Connection {
        var socket: SharedFileDescriptor
        var head: [UInt8] = []
        var deadline: ContinuousClock.Instant
    }

    /// The accept-and-read loop; runs on its own thread until a callback, the deadline, or a wake-up.
    private func serve(until deadline: ContinuousClock.Instant, timeout: Duration) -> Result<Accepted, OAuthError> {
        // Dropped connections close with their owners, the rest when this returns.
        var connections: [Connection] = []
        let listeners = self.listeners.withLock { $0 }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = ContinuousClock.now
            guard now < deadline else {
                return .failure(OAuthError(
                    .timedOut, endpoint: .authorization,
                    message: "no authorization callback arrived at \(redirectURI.absoluteString) within \(Self.seconds(timeout)) s"))
            }
            connections.removeAll { $0.deadline <= now }
            var fds = listeners.map { pollfd(fd: $0.raw, events: Int16(POLLIN), revents: 0) }
            fds.append(pollfd(fd: wake.read.raw, events: Int16(POLLIN), revents: 0))
            fds += connections.map { pollfd(fd: $0.socket.raw, events: Int16(POLLIN), revents: 0) }
            let nextDeadline = connections.map(\.deadline).reduce(deadline) { min($0, $1) }
            let wait = max(0, Self.milliseconds(now.duration(to: nextDeadline)))
            let ready = poll(&fds, nfds_t(fds.count), Int32(clamping: wait + 1))
            if ready < 0 {
                if errno == EINTR { continue }
                return .failure(OAuthError(.transport, endpoint: .authorization, message: "poll failed: \(Self.errorText(errno))"))
            }
            if ready == 0 { continue }
            if fds[listeners.count].revents != 0 {
                return .failure(OAuthError(.cancelled, endpoint: .authorization,
                                           message: "waiting for the authorization callback was cancelled"))
            }
            // Read from connections first (their indexes shift once new ones are appended).
            var index = connections.count - 1
            while index >= 0 {
                defer { index -= 1 }
                let events = fds[listeners.count + 1 + index].revents
                guard events != 0 else { continue }
                let socket = connections[index].socket
                let count = recv(socket.raw, &buffer, buffer.count, 0)
                if count < 0, errno == EAGAIN || errno == EINTR { continue }
                guard count > 0 else {
                    connections.remove(at: index)
                    continue
                }
                connections[index].head += buffer[0..<count]
                switch classify(connections[index].head) {
                case .incomplete:
                    continue
                case .reject(let status, let text):
                    Self.respond(socket.descriptor, status: status, page: Self.page(title: status, text: text))
                    connections.remove(at: index)
                case .callback(let url):
                    connections.remove(at: index)
                    Self.makeBlocking(socket.descriptor)
                    return .success(Accepted(connection: socket, url: url))
                }
            }
            for (offset, listener) in listeners.enumerated() where fds[offset].revents != 0 {
                let connection: FileDescriptor
                do throws(SystemError) {
                    connection = try FileDescriptor(returnedBy: accept(listener.raw, nil, nil))
                } catch {
                    continue
                }
                Self.setFlags(connection)
                // Over the limit, the connection closes with its owner at the end of this iteration.
                guard connections.count < Self.maximumConnections else { continue }
                connections.append(Connection(socket: SharedFileDescriptor(connection), deadline: ContinuousClock.now.advanced(by: Self.connectionTimeout)))
            }
        }
    }

    // MARK: Sockets

    private enum Address {
        case v4(String)
        case v6(String)
    }

    private static func listen(address: Address, port: UInt16, host: String) throws(OAuthError) -> FileDescriptor {
        func failure(_ what: String, _ code: Int32) -> OAuthError {
            let place = "\(host):\(port == 0 ? "<ephemeral>" : String(port))"
            return OAuthError(.configuration, endpoint: .authorization,
                              message: "cannot listen on \(place) for the callback: \(what): \(errorText(code))")
        }
        let family: Int32
        switch address {
        case .v4: family = AF_INET
        case .v6: family = AF_INET6
        }
        // On a throw below, the socket closes with its owner.
        let fd: FileDescriptor
        do throws(SystemError) {
            fd = try FileDescriptor(returnedBy: socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0))
        } catch {
            throw failure("socket", error.code)
        }
        let raw = fd.raw   // for the closures below, while `fd` owns it
        var one: Int32 = 1
        setsockopt(raw, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let result: Int32
        switch address {
        case .v4(let text):
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = port.bigEndian
            guard inet_pton(AF_INET, text, &addr.sin_addr) == 1 else {
                throw OAuthError(.configuration, endpoint: .authorization, message: "\"\(text)\" is not an IPv4 address")
            }
            result = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(raw, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        case .v6(let text):
            setsockopt(raw, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, text, &addr.sin6_addr) == 1 else {
                throw OAuthError(.configuration, endpoint: .authorization, message: "\"\(text)\" is not an IPv6 address")
            }
            result = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(raw, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        guard result == 0 else { throw failure("bind", errno) }
        guard Glibc.listen(raw, 16) == 0 else { throw failure("listen", errno) }
        return fd
    }

    private static func localPort(_ fd: borrowing FileDescriptor) throws(OAuthError) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd.raw, $0, &length) }
        }
        guard result == 0 else {
            throw OAuthError(.configuration, endpoint: .authorization, message: "getsockname failed: \(errorText(errno))")
        }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    /// Marks a descriptor close-on-exec and non-blocking.
    private static func setFlags(_ fd: borrowing FileDescriptor) {
        _ = fcntl(fd.raw, F_SETFD, FD_CLOEXEC)
        let flags = fcntl(fd.raw, F_GETFL)
        if flags >= 0 { _ = fcntl(fd.raw, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Switches an accepted socket to blocking with a short send timeout, for the answer.
    private static func makeBlocking(_ fd: borrowing FileDescriptor) {
        let flags = fcntl(fd.raw, F_GETFL)
        if flags >= 0 { _ = fcntl(fd.raw, F_SETFL, flags & ~O_NONBLOCK) }
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd.raw, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Whole milliseconds, saturating: a timeout of `Int.max` seconds (`--timeout` is not
    /// bounded) must not trap on the multiplication.
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return seconds < 0 ? Int64.min / 2 : Int64.max / 2 }
        return scaled.addingReportingOverflow(attoseconds / 1_000_000_000_000_000).overflow
            ? Int64.max / 2 : scaled + attoseconds / 1_000_000_000_000_000
    }

    private static func seconds(_ duration: Duration) -> Int64 {
        duration.components.seconds
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
