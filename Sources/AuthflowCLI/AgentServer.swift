import Glibc
import OAuthFlow
import Synchronization

/// The agent's socket server: one thread of its own runs one `poll` loop over the listening
/// socket and every connection, so no thread of the concurrency runtime ever blocks on a client.
///
/// A connection is read until its first newline (at most ``Limits/lineLimit`` bytes), answered
/// with one line, and closed. Reading the request and writing the answer each have
/// ``Limits/clientTimeout``: a client that says nothing, sends too much, or never reads is
/// dropped when it runs out, and none of them delays another. The answer is computed by
/// ``handler`` in a task; the loop hears it is ready through a pipe.
final class AgentServer: Sendable {
    /// What one client may take.
    struct Limits: Sendable {
        /// The longest request line, without its newline.
        var lineLimit = 64 * 1024
        /// How long a client may take to send its line, and to read the answer.
        var clientTimeout: Duration = .seconds(5)
        /// Connections served at once; more are closed as soon as they are accepted.
        var maximumConnections = 1024
    }

    /// Computes the answer line (with its newline) for one request line (without it).
    typealias Handler = @Sendable (_ line: [UInt8], _ peer: Peer) async -> String

    private let listener: SharedFileDescriptor
    private let wakeRead: SharedFileDescriptor
    private let wakeWrite: SharedFileDescriptor
    private let limits: Limits
    private let handler: Handler
    private let log: @Sendable (String) -> Void
    private let outbox = Mutex<[(id: UInt64, answer: [UInt8])]>([])
    private let stopping = Mutex(false)
    private let stopped = Mutex(false)

    /// Serves `listener` (a listening, non-blocking stream socket) once ``start()`` is called.
    init(listener: SharedFileDescriptor, limits: Limits, log: @escaping @Sendable (String) -> Void, handler: @escaping Handler) throws(SystemError) {
        self.listener = listener
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { throw SystemError(code: errno) }
        wakeRead = SharedFileDescriptor(try FileDescriptor(returnedBy: ends[0]))
        wakeWrite = SharedFileDescriptor(try FileDescriptor(returnedBy: ends[1]))
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        self.limits = limits
        self.log = log
        self.handler = handler
    }

    /// Starts the loop's thread; false when the system could not make one.
    func start() -> Bool {
        DetachedThread.start(name: "authflow-agent") { [self] in
            loop()
            stopped.withLock { $0 = true }
        }
    }

    /// Stops accepting and closes every connection (answers not yet written are dropped).
    func stop() {
        stopping.withLock { $0 = true }
        poke()
    }

    /// Waits (up to `timeout`) until the loop has closed its connections.
    func waitUntilStopped(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !stopped.withLock({ $0 }), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
    }

    private func poke() {
        var byte: UInt8 = 1
        _ = write(wakeWrite.raw, &byte, 1)   // a full pipe already wakes the loop
    }

    // MARK: The loop

    private enum Phase { case reading, waiting, writing }

    /// One client; lives on the loop's thread only.
    private final class Connection {
        let fd: FileDescriptor
        let peer: Peer
        var phase = Phase.reading
        var input: [UInt8] = []
        var output: [UInt8] = []
        var sent = 0
        var deadline: ContinuousClock.Instant

        init(fd: consuming FileDescriptor, peer: Peer, deadline: ContinuousClock.Instant) {
            self.fd = fd
            self.peer = peer
            self.deadline = deadline
        }
    }

    private func loop() {
        var connections: [UInt64: Connection] = [:]
        var nextID: UInt64 = 0
        var acceptPausedUntil: ContinuousClock.Instant?
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)

        func answer(_ connection: Connection, with text: String, now: ContinuousClock.Instant) {
            connection.phase = .writing
            connection.input = []
            connection.output = Array(text.utf8)
            connection.sent = 0
            connection.deadline = now + limits.clientTimeout
        }

        /// Writes what the socket takes; true when the connection is done (all written, or failed).
        func flush(_ connection: Connection) -> Bool {
            while connection.sent < connection.output.count {
                let count = connection.output.withUnsafeBytes {
                    send(connection.fd.raw, $0.baseAddress! + connection.sent, $0.count - connection.sent, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
                if count < 0, errno == EINTR { continue }
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return false }
                guard count > 0 else { return true }
                connection.sent += count
            }
            return true
        }

        /// Reads what is there; the line when complete, or whether to close.
        func receive(_ connection: Connection, id: UInt64, now: ContinuousClock.Instant) -> Bool {
            for _ in 0..<8 {   // at most 128 KiB per turn, so one client cannot hold the loop
                let count = chunk.withUnsafeMutableBytes { recv(connection.fd.raw, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
                if count < 0, errno == EINTR { continue }
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return true }
                guard count > 0 else { return false }   // closed (or failed) before a full line
                let start = connection.input.count
                connection.input += chunk[0..<count]
                if let newline = connection.input[start...].firstIndex(of: UInt8(ascii: "\n")), newline <= limits.lineLimit {
                    let line = Array(connection.input[..<newline])
                    connection.input = []
                    connection.phase = .waiting
                    let peer = connection.peer
                    let handler = handler
                    Task { [self] in
                        let text = await handler(line, peer)
                        outbox.withLock { $0.append((id, Array(text.utf8))) }
                        poke()
                    }
                    return true
                }
                if connection.input.count > limits.lineLimit {
                    log("dropped a client (\(connection.peer)): its request line is longer than \(limits.lineLimit) bytes")
                    answer(connection, with: AgentProtocol.failure("invalid_request", "the request line is longer than \(limits.lineLimit) bytes"), now: now)
                    return !flush(connection)
                }
            }
            return true
        }

        while !stopping.withLock({ $0 }) {
            let now = ContinuousClock.now
            var fds = [pollfd(fd: wakeRead.raw, events: Int16(POLLIN), revents: 0)]
            let accepting = connections.count < limits.maximumConnections && (acceptPausedUntil.map { now >= $0 } ?? true)
            if accepting { acceptPausedUntil = nil }
            fds.append(pollfd(fd: accepting ? listener.raw : -1, events: Int16(POLLIN), revents: 0))
            var order: [UInt64] = []
            var timeout = Duration.seconds(1)
            for (id, connection) in connections where connection.phase != .waiting {
                fds.append(pollfd(fd: connection.fd.raw, events: Int16(connection.phase == .reading ? POLLIN : POLLOUT), revents: 0))
                order.append(id)
                timeout = min(timeout, max(connection.deadline - now, .zero))
            }
            if let paused = acceptPausedUntil { timeout = min(timeout, max(paused - now, .zero)) }
            let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000) + 1
            let polled = poll(&fds, nfds_t(fds.count), milliseconds)
            if polled < 0, errno != EINTR { log("poll failed (errno \(errno)); the socket keeps being served") }
            let after = ContinuousClock.now

            if fds[0].revents != 0 {
                var sink = [UInt8](repeating: 0, count: 256)
                while read(wakeRead.raw, &sink, sink.count) > 0 {}
            }
            // Answers that are ready.
            let ready: [(id: UInt64, answer: [UInt8])] = outbox.withLock { outbox in
                defer { outbox = [] }
                return outbox
            }
            for item in ready {
                let id = item.id
                guard let connection = connections[id] else { continue }
                connection.phase = Phase.writing
                connection.output = item.answer
                connection.sent = 0
                connection.deadline = after + limits.clientTimeout
                if flush(connection) { connections[id] = nil }
            }
            // Connections with something to read or room to write.
            for (offset, id) in order.enumerated() {
                let events = fds[2 + offset].revents
                guard events != 0, let connection = connections[id] else { continue }
                switch connection.phase {
                case .reading: if !receive(connection, id: id, now: after) { connections[id] = nil }
                case .writing: if flush(connection) { connections[id] = nil }
                case .waiting: break
                }
            }
            // New connections.
            if accepting, fds[1].revents & Int16(POLLIN) != 0 {
                for _ in 0..<64 {
                    let raw = accept(listener.raw, nil, nil)
                    if raw < 0 {
                        if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                            log("cannot accept a connection (errno \(errno)): out of descriptors or memory; pausing 100 ms")
                            acceptPausedUntil = after + .milliseconds(100)
                        }
                        break
                    }
                    guard let fd = try? FileDescriptor(returnedBy: raw) else { break }
                    // accept4 is not visible without _GNU_SOURCE. Until FD_CLOEXEC is set, a notify command
                    // started at this instant could inherit this one connection; it never reads from it.
                    _ = fcntl(fd.raw, F_SETFD, FD_CLOEXEC)
                    _ = fcntl(fd.raw, F_SETFL, fcntl(fd.raw, F_GETFL) | O_NONBLOCK)
                    guard connections.count < limits.maximumConnections, let peer = Peer.of(fd.raw) else { continue }  // closed here
                    connections[nextID] = Connection(fd: fd, peer: peer, deadline: after + limits.clientTimeout)
                    nextID &+= 1
                }
            }
            // Deadlines: a silent client, or one that does not read its answer.
            for (id, connection) in connections where connection.phase != .waiting && connection.deadline <= after {
                if connection.phase == .reading {
                    log("dropped a client (\(connection.peer)): no request line within \(limits.clientTimeout)")
                } else {
                    log("dropped a client (\(connection.peer)): it did not read its answer within \(limits.clientTimeout)")
                }
                connections[id] = nil
            }
        }
        connections.removeAll()
    }
}
