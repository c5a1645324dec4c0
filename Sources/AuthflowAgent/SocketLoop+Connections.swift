import CAgentIO
import Glibc
import OAuthFlow
import Synchronization

// What a socket loop does with its connections: accept, read the line, answer (at once or once a
// task has it), write, close, and drop the ones whose time is up.
extension AgentServer.Loop {
    // MARK: Accepting

    func acceptBatch(now: ContinuousClock.Instant) {
        for _ in 0..<Self.acceptBatch {
            guard hasRoom else { break }
            let raw = c_authflow_agent_accept(server.listener.raw, Self.acceptFlags)
            if raw < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                    server.log("cannot accept a connection (errno \(code)): out of descriptors or memory; pausing 100 ms")
                    acceptPausedUntil = now + .milliseconds(100)
                }
                break
            }
            guard let fd = try? FileDescriptor(returnedBy: raw) else { break }
            guard let peer = Peer.of(raw) else { continue }   // closed here
            servedSinceTrim += 1
            serve(fd, peer, now: now)
        }
        updateListening(now: now)
    }

    /// A new connection: answered and closed at once when its line is there and the answer is
    /// ready; otherwise kept in the table until it is.
    func serve(_ fd: consuming FileDescriptor, _ peer: Peer, now: ContinuousClock.Instant) {
        let raw = fd.raw
        var count = 0
        repeat {
            count = chunk.withUnsafeMutableBytes { recv(raw, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
        } while count < 0 && errno == EINTR
        if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
            adopt(AgentServer.Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout), events: c_authflow_agent_epollin)
            return
        }
        guard count > 0 else { return }   // closed (or failed) before a line: closed here
        if let end = lineEnd(in: count) {
            if let answer = immediateAnswer(lineIn: end, peer) {
                let sent = Self.send(raw, answer, from: 0)
                guard let sent, sent < answer.count else { return }   // all written, or failed: closed here
                let connection = AgentServer.Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout)
                connection.phase = .writing
                connection.output = answer
                connection.sent = sent
                adopt(connection, events: c_authflow_agent_epollout)
            } else {
                let connection = AgentServer.Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout)
                connection.phase = .waiting
                adopt(connection, events: 0)
                fetch(Array(chunk[..<end]), for: connection)
            }
            return
        }
        let connection = AgentServer.Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout)
        guard adopt(connection, events: c_authflow_agent_epollin) else { return }
        connection.input = Array(chunk[..<count])
        if connection.input.count > limits.lineLimit { refuseLongLine(connection, now: now) }
    }

    /// The length of the request line (without its newline) when the `count` bytes just read
    /// into `chunk` hold all of it, at most ``Limits/lineLimit`` bytes.
    func lineEnd(in count: Int) -> Int? {
        let newline = chunk.withUnsafeBytes { bytes in
            memchr(bytes.baseAddress!, Int32(UInt8(ascii: "\n")), count).map { bytes.baseAddress!.distance(to: UnsafeRawPointer($0)) }
        }
        guard let newline, newline <= limits.lineLimit else { return nil }
        return newline
    }

    /// ``immediateAnswer(_:_:)`` of the request line in `chunk[..<end]`.
    func immediateAnswer(lineIn end: Int, _ peer: Peer) -> [UInt8]? {
        chunk.withUnsafeBytes { immediateAnswer(UnsafeRawBufferPointer(rebasing: $0[..<end]), peer) }
    }

    /// The answer of the request `line`, read from this loop's memo or made by the responder
    /// (and remembered when it says so); nil when it must be fetched.
    func immediateAnswer(_ line: UnsafeRawBufferPointer, _ peer: Peer) -> [UInt8]? {
        if let remembered = memo.answer(line, uid: peer.uid) { return remembered }
        let bytes = Array(line)
        guard let answer = server.responder(bytes, peer) else { return nil }
        if let reuse = answer.reuse { memo.keep(bytes, answer.line, reuse, uid: peer.uid) }
        return answer.line
    }

    func serial() -> UInt32 {
        defer { nextSerial &+= 1 }
        return nextSerial
    }

    /// Puts `connection` in the table and the epoll set; false (and closed) when epoll refuses it.
    @discardableResult
    func adopt(_ connection: AgentServer.Connection, events: UInt32) -> Bool {
        let fd = Int(connection.fd.raw)
        guard c_authflow_agent_epoll_ctl(lane.poller.raw, Self.add, connection.fd.raw, events, connection.tag) == 0 else {
            server.log("cannot watch a connection (errno \(errno)); closed it")
            return false
        }
        if connections.count <= fd { connections.append(contentsOf: repeatElement(nil, count: fd + 1 - connections.count)) }
        connections[fd] = connection
        live += 1
        if connection.phase != .waiting { nextSweep = min(nextSweep ?? connection.deadline, connection.deadline) }
        return true
    }

    func close(_ connection: AgentServer.Connection, now: ContinuousClock.Instant) {
        let fd = Int(connection.fd.raw)
        guard fd < connections.count, connections[fd] === connection else { return }
        connections[fd] = nil   // the descriptor closes with its owner, which leaves the epoll set
        live -= 1
        updateListening(now: now)
    }

    func watch(_ connection: AgentServer.Connection, events: UInt32) {
        _ = c_authflow_agent_epoll_ctl(lane.poller.raw, Self.modify, connection.fd.raw, events, connection.tag)
    }

    // MARK: Connections

    func ready(_ event: c_authflow_agent_event, now: ContinuousClock.Instant) {
        let fd = Int(UInt32(truncatingIfNeeded: event.data))
        guard fd < connections.count, let connection = connections[fd], connection.tag == event.data else { return }
        switch connection.phase {
        case .reading: receive(connection, now: now)
        case .writing: flush(connection, now: now)
        case .waiting:
            // Watched for nothing; the kernel still reports a hang-up. Its answer has nowhere to go.
            if event.events & (c_authflow_agent_epollhup | c_authflow_agent_epollerr) != 0 { close(connection, now: now) }
        }
    }

    /// Reads what is there (at most 128 KiB per turn, so one client cannot hold the loop).
    func receive(_ connection: AgentServer.Connection, now: ContinuousClock.Instant) {
        for _ in 0..<8 {
            let count = chunk.withUnsafeMutableBytes { recv(connection.fd.raw, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            guard count > 0 else { return close(connection, now: now) }   // closed (or failed) before a full line
            if connection.input.isEmpty, let end = lineEnd(in: count) {   // the usual case: the line in one read
                if let answer = immediateAnswer(lineIn: end, connection.peer) { return reply(connection, with: answer, now: now) }
                return wait(for: Array(chunk[..<end]), connection)
            }
            let start = connection.input.count
            connection.input += chunk[..<count]
            if let newline = connection.input[start...].firstIndex(of: UInt8(ascii: "\n")), newline <= limits.lineLimit {
                let line = Array(connection.input[..<newline])
                connection.input = []
                if let answer = line.withUnsafeBytes({ immediateAnswer($0, connection.peer) }) {
                    return reply(connection, with: answer, now: now)
                }
                return wait(for: line, connection)
            }
            if connection.input.count > limits.lineLimit { return refuseLongLine(connection, now: now) }
        }
    }

    /// Has a task compute the answer of a kept connection's request `line`.
    func wait(for line: [UInt8], _ connection: AgentServer.Connection) {
        connection.phase = .waiting
        watch(connection, events: 0)
        fetch(line, for: connection)
    }

    func refuseLongLine(_ connection: AgentServer.Connection, now: ContinuousClock.Instant) {
        server.log("dropped a client (\(connection.peer)): its request line is longer than \(limits.lineLimit) bytes")
        connection.input = []
        reply(connection, with: Array(AgentProtocol.failure("invalid_request", "the request line is longer than \(limits.lineLimit) bytes").utf8), now: now)
    }

    /// Starts writing `answer`; the connection is closed once it is written (or fails).
    func reply(_ connection: AgentServer.Connection, with answer: [UInt8], now: ContinuousClock.Instant) {
        let wasWriting = connection.phase == .writing
        connection.phase = .writing
        connection.output = answer
        connection.sent = 0
        connection.deadline = now + limits.clientTimeout
        guard let sent = Self.send(connection.fd.raw, answer, from: 0), sent < answer.count else { return close(connection, now: now) }
        connection.sent = sent
        nextSweep = min(nextSweep ?? connection.deadline, connection.deadline)
        if !wasWriting { watch(connection, events: c_authflow_agent_epollout) }
    }

    func flush(_ connection: AgentServer.Connection, now: ContinuousClock.Instant) {
        guard let sent = Self.send(connection.fd.raw, connection.output, from: connection.sent), sent < connection.output.count else {
            return close(connection, now: now)
        }
        connection.sent = sent
    }

    /// Writes `bytes` from `offset` on as far as the socket takes them: the new offset, or nil
    /// when the connection failed (the peer went away).
    static func send(_ fd: Int32, _ bytes: [UInt8], from offset: Int) -> Int? {
        var sent = offset
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return sent }
            guard count > 0 else { return nil }
            sent += count
        }
        return sent
    }

    // MARK: Answers that wait

    func fetch(_ line: [UInt8], for connection: AgentServer.Connection) {
        let (server, lane) = (server, lane)
        let (fd, serial, peer) = (connection.fd.raw, connection.serial, connection.peer)
        Task {
            let answer = await server.handler(line, peer)
            lane.outbox.withLock { $0.append(AgentServer.Ready(fd: fd, serial: serial, answer: answer)) }
            lane.poke()
        }
    }

    func deliver(now: ContinuousClock.Instant) {
        var counter: UInt64 = 0
        _ = read(lane.wakeup.raw, &counter, 8)
        let ready = lane.outbox.withLock { outbox in
            defer { outbox = [] }
            return outbox
        }
        for item in ready {
            let fd = Int(item.fd)
            guard fd < connections.count, let connection = connections[fd], connection.serial == item.serial,
                  connection.phase == .waiting else { continue }
            reply(connection, with: item.answer, now: now)
        }
    }

    // MARK: Deadlines

    /// Drops a silent client, or one that does not read its answer, once its time is up.
    func sweep(now: ContinuousClock.Instant) {
        var next: ContinuousClock.Instant?
        for case let connection? in connections where connection.phase != .waiting {
            if connection.deadline <= now {
                if connection.phase == .reading {
                    server.log("dropped a client (\(connection.peer)): no request line within \(limits.clientTimeout)")
                } else {
                    server.log("dropped a client (\(connection.peer)): it did not read its answer within \(limits.clientTimeout)")
                }
                close(connection, now: now)
            } else {
                next = min(next ?? connection.deadline, connection.deadline)
            }
        }
        nextSweep = next
    }
}
