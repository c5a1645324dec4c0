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

    /// The accept-and-read loop (``HTTPIntake``); runs on its own thread until a callback, the deadline, or a wake-up.
    private func serve(until deadline: ContinuousClock.Instant, timeout: Duration) -> Result<Accepted, OAuthError> {
        let limits = HTTPIntake.Limits(connectionTimeout: Self.connectionTimeout, maximumConnections: Self.maximumConnections,
                                       maximumRequestSize: Self.maximumRequestSize)
        let ending = HTTPIntake.serve(listeners: listeners.withLock { $0 }, wake: wake.read.raw, until: deadline, limits: limits) { received -> HTTPIntake.Step<URL> in
            switch classify(received) {
            case .incomplete: return .incomplete
            case .reject(let status, let text):
                return .reply(Self.reply(status: status, page: Self.page(title: status, text: text)))
            case .callback(let url): return .finish(url)
            }
        }
        switch ending {
        case .finished(let url, let connection):
            return .success(Accepted(connection: connection, url: url))
        case .timedOut:
            return .failure(OAuthError(
                .timedOut, endpoint: .authorization,
                message: "no authorization callback arrived at \(redirectURI.absoluteString) within \(Self.seconds(timeout)) s"))
        case .woken:
            return .failure(OAuthError(.cancelled, endpoint: .authorization, message: "waiting for the authorization callback was cancelled"))
        case .failed(let code):
            return .failure(OAuthError(.transport, endpoint: .authorization, message: "poll failed: \(Self.errorText(code))"))
        }
    }

    // MARK: Sockets

    private static func listen(address: HTTPIntake.Address, port: UInt16, host: String) throws(OAuthError) -> FileDescriptor {
        do throws(HTTPIntake.ListenFailure) {
            return try HTTPIntake.listen(address, port: port)
        } catch {
            switch error {
            case .notAnAddress(let text):
                throw OAuthError(.configuration, endpoint: .authorization, message: "\"\(text)\" is not an IP address")
            case .system(let call, let code):
                let place = "\(host):\(port == 0 ? "<ephemeral>" : String(port))"
                throw OAuthError(.configuration, endpoint: .authorization,
                                 message: "cannot listen on \(place) for the callback: \(call): \(errorText(code))")
            }
        }
    }

    private static func localPort(_ fd: borrowing FileDescriptor) throws(OAuthError) -> UInt16 {
        do throws(SystemError) {
            return try HTTPIntake.localPort(fd)
        } catch {
            throw OAuthError(.configuration, endpoint: .authorization, message: "getsockname failed: \(errorText(error.code))")
        }
    }

    private static func seconds(_ duration: Duration) -> Int64 {
        duration.components.seconds
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
