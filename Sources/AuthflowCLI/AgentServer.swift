import CAgentIO
import Glibc
import OAuthFlow
import Synchronization

/// The agent's socket server: threads of its own (``Limits/loops``, one per CPU it may run on, at
/// most two) each run an `epoll` loop over the listening socket and the connections that loop
/// accepted, so no thread of the concurrency runtime ever blocks on a client. A new connection wakes one loop
/// (`EPOLLEXCLUSIVE`). With a single loop, a burst of requests is served by one CPU while the
/// other one idles: the kernel's wake-ups of a Unix socket's reader are synchronous, which moves
/// a waiting client onto the CPU of the loop that answered it. The loops read the agent's
/// affinity mask again at most once a second while they are awake: pinned to one CPU after it
/// started, the agent has only its first loop accept connections (two loops taking turns on one
/// CPU delay each other's clients), and both again once it may run on two.
///
/// A connection is read until its first newline (at most ``Limits/lineLimit`` bytes), answered
/// with one line, and closed. Most requests are answered on the loop's thread as soon as they are
/// accepted: the line is usually there already, ``Responder`` answers it from memory (a cached
/// token, an error), and the answer fits the socket's buffer, so such a connection is accepted,
/// read, answered and closed in one go, never registered with `epoll` and never allocated for.
/// Only a request that must wait (a token to fetch) goes to ``Handler`` in a task; the loop hears
/// its answer is ready through an eventfd.
///
/// Each loop remembers the token answers it gave the agent's own uid (``Memo``): the same request
/// line from that uid gets the same bytes again, without parsing or looking anything up, for as
/// long as ``Reuse/isCurrent`` holds (the flow holds the same fresh set, and no other catalog has
/// been loaded).
///
/// Reading the request and writing the answer each have ``Limits/clientTimeout``: a client that
/// says nothing, sends too much, or never reads is dropped when it runs out, and none of them
/// delays another.
final class AgentServer: Sendable {
    /// What one client may take.
    struct Limits: Sendable {
        /// The longest request line, without its newline.
        var lineLimit = 64 * 1024
        /// How long a client may take to send its line, and to read the answer.
        var clientTimeout: Duration = .seconds(5)
        /// Connections served at once; while that many wait, no more are accepted (the kernel's
        /// backlog holds them).
        var maximumConnections = 1024
        /// Socket loops, each a thread with its own epoll set, sharing the listening socket: one
        /// per CPU the agent may run on when it starts, at most two. While it may run on fewer
        /// CPUs than that, only as many loops accept connections (``AgentServer``). A connection
        /// stays with the loop that accepted it.
        var loops = Limits.defaultLoops

        /// One loop per CPU in the agent's affinity mask when it starts, at most two.
        static var defaultLoops: Int { min(max(Int(c_authflow_agent_usable_cpus()), 1), 2) }
    }

    /// Answers one request line (without its newline) on the loop's thread, without waiting: the
    /// answer line (with its newline), or nil when it needs ``Handler``.
    typealias Responder = @Sendable (_ line: [UInt8], _ peer: Peer) -> Answer?

    /// An answer line (with its newline) from ``Responder``, and whether the loop may give it again.
    struct Answer: Sendable {
        var line: [UInt8]
        /// When set, the same request line from the same peer uid gets `line` again while
        /// `reuse.isCurrent` holds, without asking the responder.
        var reuse: Reuse?
    }

    /// What keeps an answer right: the token set it was made from, and the catalog it was made under.
    struct Reuse: Sendable {
        var token: TokenStamp
        var catalog: UInt64
        let epoch: Epoch

        /// True while the flow holds the same fresh set and no other catalog has been loaded.
        var isCurrent: Bool { epoch.current == catalog && token.isCurrent }
    }

    /// A counter raised whenever the agent starts serving another catalog (SIGHUP): answers
    /// remembered under the previous one are not given again. Read it before the catalog, and
    /// raise it after the new catalog is in place.
    final class Epoch: Sendable {
        private let value = Atomic<UInt64>(0)
        var current: UInt64 { value.load(ordering: .acquiring) }
        func advance() { value.wrappingAdd(1, ordering: .releasing) }
    }

    /// A loop's remembered answers: at most ``capacity`` request lines, each with the uid it was
    /// answered for. They hold tokens, as the flow's own cache does; one that is no longer current
    /// is dropped when its line comes again, and all that are not current by ``dropStale()``
    /// (when the loop trims its memory after a burst).
    struct Memo {
        static let capacity = 16
        struct Entry {
            var uid: UInt32
            var line: [UInt8]
            var answer: [UInt8]
            var reuse: Reuse
        }
        private(set) var entries: [Entry] = []
        private var next = 0

        /// The remembered answer of the request line in `line` for `uid`, while it is current.
        mutating func answer(_ line: UnsafeRawBufferPointer, uid: UInt32) -> [UInt8]? {
            for index in entries.indices where entries[index].uid == uid && entries[index].line.count == line.count {
                let same = entries[index].line.withUnsafeBytes { memcmp($0.baseAddress!, line.baseAddress!, line.count) == 0 }
                guard same else { continue }
                if entries[index].reuse.isCurrent { return entries[index].answer }
                entries.remove(at: index)
                next = 0
                return nil
            }
            return nil
        }

        /// Remembers `answer` for `line` from `uid`, in place of that line's earlier answer,
        /// else in a free place, else in place of the oldest one kept.
        mutating func keep(_ line: [UInt8], _ answer: [UInt8], _ reuse: Reuse, uid: UInt32) {
            let entry = Entry(uid: uid, line: line, answer: answer, reuse: reuse)
            if let index = entries.firstIndex(where: { $0.uid == uid && $0.line == line }) {
                entries[index] = entry
            } else if entries.count < Self.capacity {
                entries.append(entry)
            } else {
                entries[next] = entry
                next = (next + 1) % Self.capacity
            }
        }

        /// Drops the answers that are no longer current.
        mutating func dropStale() {
            entries.removeAll { !$0.reuse.isCurrent }
            next = 0
        }
    }
    /// Computes the answer line (with its newline) of a request ``Responder`` could not answer.
    typealias Handler = @Sendable (_ line: [UInt8], _ peer: Peer) async -> [UInt8]

    /// An answer computed by a task, for the connection `fd` numbered `serial`.
    private struct Ready: Sendable {
        var fd: Int32
        var serial: UInt32
        var answer: [UInt8]
    }

    /// What one socket loop shares with the tasks that compute its answers: its epoll set, the
    /// eventfd that wakes it, and the answers ready for it.
    private final class Lane: Sendable {
        let poller: SharedFileDescriptor
        let wakeup: SharedFileDescriptor
        let outbox = Mutex<[Ready]>([])
        let stopped = Atomic<Bool>(false)
        /// The connections its loop holds (kept only with more than one loop): a loop taking the
        /// share of one that stands down counts them against ``Limits/maximumConnections``.
        let held = Atomic<Int>(0)

        /// - Throws: ``SystemError`` when the epoll set or the eventfd cannot be made.
        init() throws(SystemError) {
            poller = SharedFileDescriptor(try FileDescriptor(returnedBy: c_authflow_agent_epoll_create()))
            wakeup = SharedFileDescriptor(try FileDescriptor(returnedBy: c_authflow_agent_eventfd()))
            guard c_authflow_agent_epoll_ctl(poller.raw, Loop.add, wakeup.raw, c_authflow_agent_epollin, Loop.wakeupTag) == 0 else {
                throw SystemError(code: errno)
            }
        }

        func poke() {
            var one: UInt64 = 1
            _ = write(wakeup.raw, &one, 8)   // a counter that cannot take more is already readable
        }
    }

    private let listener: SharedFileDescriptor
    private let lanes: [Lane]
    private let limits: Limits
    private let responder: Responder
    private let handler: Handler
    private let log: @Sendable (String) -> Void
    private let stopping = Atomic<Bool>(false)
    /// How many loops accept new connections: one per CPU the agent may run on now, at most
    /// ``lanes``.count. The loops read the affinity mask again at most once a second while they
    /// are awake, so one pinned to fewer CPUs after it started (`taskset -a -p`, a cgroup's cpuset)
    /// stops taking turns with a loop it now shares a CPU with.
    private let acceptingLoops: Atomic<Int>

    /// Serves `listener` (a listening, non-blocking stream socket) once ``start()`` is called.
    /// - Throws: ``SystemError`` when an epoll set or an eventfd cannot be made.
    init(listener: SharedFileDescriptor, limits: Limits, log: @escaping @Sendable (String) -> Void,
         responder: @escaping Responder, handler: @escaping Handler) throws(SystemError) {
        self.listener = listener
        var lanes: [Lane] = []
        for _ in 0..<max(limits.loops, 1) { lanes.append(try Lane()) }
        self.lanes = lanes
        acceptingLoops = Atomic(lanes.count)
        self.limits = limits
        self.log = log
        self.responder = responder
        self.handler = handler
    }

    /// Starts the loops' threads; false when the system could not make one (the others are
    /// stopped then).
    func start() -> Bool {
        for (index, lane) in lanes.enumerated() {
            let started = DetachedThread.start(name: "authflow-agent") { [self] in
                Loop(self, lane, index: index).run()
                lane.stopped.store(true, ordering: .releasing)
            }
            guard started else {
                stop()
                return false
            }
        }
        return true
    }

    /// Stops accepting and closes every connection (answers not yet written are dropped).
    func stop() {
        stopping.store(true, ordering: .releasing)
        for lane in lanes { lane.poke() }
    }

    /// Reads how many CPUs the agent may run on now; when that changes how many loops accept
    /// connections, says so and wakes every loop to take its listening socket in or out.
    private func readAffinity() {
        let cpus = max(Int(c_authflow_agent_usable_cpus()), 1)
        let accepting = min(cpus, lanes.count)
        let before = acceptingLoops.exchange(accepting, ordering: .acquiringAndReleasing)
        guard before != accepting else { return }
        log("the agent may run on \(cpus) CPU(s) now: \(accepting) of its \(lanes.count) socket loops accept connections")
        for lane in lanes { lane.poke() }
    }

    /// Waits (up to `timeout`) until every loop has closed its connections.
    func waitUntilStopped(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !lanes.allSatisfy({ $0.stopped.load(ordering: .acquiring) }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: The loop

    private enum Phase { case reading, waiting, writing }

    /// One client the loop could not finish at once; lives on the loop's thread only.
    ///
    /// Its `var`s, like ``Loop``'s, are `@exclusivity(unchecked)`: only their loop's thread
    /// touches them, and the run-time access checks were a quarter of the loop's instructions per
    /// request (Performance.md, "2026-12-04"). The compiler still checks what it can see.
    private final class Connection {
        let fd: FileDescriptor
        let serial: UInt32
        let peer: Peer
        @exclusivity(unchecked) var phase = Phase.reading
        @exclusivity(unchecked) var input: [UInt8] = []
        @exclusivity(unchecked) var output: [UInt8] = []
        @exclusivity(unchecked) var sent = 0
        @exclusivity(unchecked) var deadline: ContinuousClock.Instant

        init(fd: consuming FileDescriptor, serial: UInt32, peer: Peer, deadline: ContinuousClock.Instant) {
            self.fd = fd
            self.serial = serial
            self.peer = peer
            self.deadline = deadline
        }

        /// What `epoll` carries for it: the serial above the descriptor, so an event or an answer
        /// meant for a closed connection is never applied to a new one that got the same number.
        var tag: UInt64 { UInt64(serial) << 32 | UInt64(UInt32(bitPattern: fd.raw)) }
    }

    /// The loop's state, on its thread only (so its `var`s skip the run-time exclusivity checks:
    /// see ``Connection``).
    private final class Loop {
        static let add: Int32 = 0
        static let modify: Int32 = 1
        static let delete: Int32 = 2
        /// Tags of the two descriptors that are not connections (no descriptor is 2^32 - 1 or - 2).
        static let listenerTag = UInt64(UInt32.max)
        static let wakeupTag = UInt64(UInt32.max - 1)
        /// Connections accepted per readiness of the listener before the others get a turn.
        static let acceptBatch = 256
        static let acceptFlags = Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        /// After at least this many requests, the loop returns freed memory to the system once it
        /// has been idle for ``trimDelay`` (see ``trim()``).
        static let trimAfter = 256
        static let trimDelay: Duration = .seconds(1)

        let server: AgentServer
        let lane: Lane
        /// Its place among the loops: the first ``acceptingLoops`` accept connections.
        let index: Int
        let limits: Limits
        /// How many loops accept connections, as this loop last read it.
        @exclusivity(unchecked) var accepting: Int
        /// When this loop next reads the affinity mask (``readAffinity()``), if it is awake then.
        @exclusivity(unchecked) var nextAffinityCheck: ContinuousClock.Instant
        /// What the listening socket is watched for: with more than one loop, a new connection
        /// wakes one of them (`EPOLLEXCLUSIVE`), not all.
        let listenerEvents: UInt32
        /// Connections by descriptor number.
        @exclusivity(unchecked) var connections: [Connection?] = []
        @exclusivity(unchecked) var live = 0 {
            didSet { if server.lanes.count > 1 { lane.held.store(live, ordering: .relaxed) } }
        }
        @exclusivity(unchecked) var nextSerial: UInt32 = 0
        /// Reused for every read: a request that arrives whole is never copied but for its line.
        @exclusivity(unchecked) var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        @exclusivity(unchecked) var listening = false
        @exclusivity(unchecked) var acceptPausedUntil: ContinuousClock.Instant?
        /// The earliest deadline of a connection (or earlier, when that one has closed since).
        @exclusivity(unchecked) var nextSweep: ContinuousClock.Instant?
        @exclusivity(unchecked) var servedSinceTrim = 0
        @exclusivity(unchecked) var memo = Memo()

        init(_ server: AgentServer, _ lane: Lane, index: Int) {
            self.server = server
            self.lane = lane
            self.index = index
            self.limits = server.limits
            accepting = server.lanes.count
            nextAffinityCheck = .now
            listenerEvents = c_authflow_agent_epollin | (server.lanes.count > 1 ? c_authflow_agent_epollexclusive : 0)
        }

        func run() {
            updateListening(now: .now)
            var events = [c_authflow_agent_event](repeating: c_authflow_agent_event(), count: 128)
            while !server.stopping.load(ordering: .acquiring) {
                let before = ContinuousClock.now
                let idleTrim = live == 0 && servedSinceTrim >= Self.trimAfter
                var wake = Self.earlier(nextSweep, acceptPausedUntil)
                if idleTrim { wake = Self.earlier(wake, before + Self.trimDelay) }
                let timeout = wake.map { Self.milliseconds(until: $0, from: before) } ?? -1
                let count = events.withUnsafeMutableBufferPointer {
                    c_authflow_agent_epoll_wait(lane.poller.raw, $0.baseAddress, Int32($0.count), timeout)
                }
                if count < 0, errno != EINTR { server.log("epoll_wait failed (errno \(errno)); the socket keeps being served") }
                let now = ContinuousClock.now
                for index in 0..<Int(max(count, 0)) {
                    let event = events[index]
                    switch event.data {
                    case Self.listenerTag: acceptBatch(now: now)
                    case Self.wakeupTag: deliver(now: now)
                    default: ready(event, now: now)
                    }
                }
                if let paused = acceptPausedUntil, paused <= now {
                    acceptPausedUntil = nil
                    updateListening(now: now)
                }
                if let sweep = nextSweep, sweep <= now { self.sweep(now: now) }
                if count == 0, idleTrim, live == 0 { trim() }
                if server.lanes.count > 1 { followAffinity(now: now) }
            }
            connections.removeAll()
        }

        /// The earlier of two optional instants (nil when both are).
        static func earlier(_ a: ContinuousClock.Instant?, _ b: ContinuousClock.Instant?) -> ContinuousClock.Instant? {
            guard let a else { return b }
            guard let b else { return a }
            return min(a, b)
        }

        static func milliseconds(until deadline: ContinuousClock.Instant, from now: ContinuousClock.Instant) -> Int32 {
            let left = max(deadline - now, .zero)
            return Int32(min(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 60_000))
        }

        /// Returns the memory freed after a burst to the system: glibc keeps freed pages of its
        /// arenas (one per thread that allocated) for reuse, so without this the agent's resident
        /// set would stay at its peak after every burst of requests.
        func trim() {
            servedSinceTrim = 0
            memo.dropStale()
            _ = c_authflow_agent_malloc_trim()
        }

        /// Reads the affinity mask when a second has passed since this loop last did, and takes the
        /// listening socket in or out when the number of accepting loops has changed.
        func followAffinity(now: ContinuousClock.Instant) {
            if now >= nextAffinityCheck {
                nextAffinityCheck = now + .seconds(1)
                server.readAffinity()
            }
            let current = server.acceptingLoops.load(ordering: .acquiring)
            guard current != accepting else { return }
            accepting = current
            updateListening(now: now)
        }

        /// Whether this loop may take one more connection: it is one of the accepting loops, it
        /// holds less than their share of ``Limits/maximumConnections``, and all the loops hold
        /// less than all of it (one that stopped accepting still finishes its own connections).
        var hasRoom: Bool {
            guard index < accepting, live < max(limits.maximumConnections / accepting, 1) else { return false }
            guard accepting < server.lanes.count else { return true }
            var held = live
            for (other, lane) in server.lanes.enumerated() where other != index { held += lane.held.load(ordering: .relaxed) }
            return held < limits.maximumConnections
        }

        /// Puts the listening socket in the epoll set while connections may be accepted, and takes
        /// it out while the table is full, accepting is paused (out of descriptors), or this loop
        /// is not one of the accepting loops.
        func updateListening(now: ContinuousClock.Instant) {
            let wanted = hasRoom && acceptPausedUntil == nil
            guard wanted != listening else { return }
            if c_authflow_agent_epoll_ctl(lane.poller.raw, wanted ? Self.add : Self.delete, server.listener.raw, listenerEvents, Self.listenerTag) == 0 {
                listening = wanted
            } else if wanted {
                server.log("cannot watch the listening socket (errno \(errno)); trying again in 100 ms")
                acceptPausedUntil = now + .milliseconds(100)
            }
        }

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
                adopt(Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout), events: c_authflow_agent_epollin)
                return
            }
            guard count > 0 else { return }   // closed (or failed) before a line: closed here
            if let end = lineEnd(in: count) {
                if let answer = immediateAnswer(lineIn: end, peer) {
                    let sent = Self.send(raw, answer, from: 0)
                    guard let sent, sent < answer.count else { return }   // all written, or failed: closed here
                    let connection = Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout)
                    connection.phase = .writing
                    connection.output = answer
                    connection.sent = sent
                    adopt(connection, events: c_authflow_agent_epollout)
                } else {
                    let connection = Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout)
                    connection.phase = .waiting
                    adopt(connection, events: 0)
                    fetch(Array(chunk[..<end]), for: connection)
                }
                return
            }
            let connection = Connection(fd: fd, serial: serial(), peer: peer, deadline: now + limits.clientTimeout)
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
        func adopt(_ connection: Connection, events: UInt32) -> Bool {
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

        func close(_ connection: Connection, now: ContinuousClock.Instant) {
            let fd = Int(connection.fd.raw)
            guard fd < connections.count, connections[fd] === connection else { return }
            connections[fd] = nil   // the descriptor closes with its owner, which leaves the epoll set
            live -= 1
            updateListening(now: now)
        }

        func watch(_ connection: Connection, events: UInt32) {
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
        func receive(_ connection: Connection, now: ContinuousClock.Instant) {
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
        func wait(for line: [UInt8], _ connection: Connection) {
            connection.phase = .waiting
            watch(connection, events: 0)
            fetch(line, for: connection)
        }

        func refuseLongLine(_ connection: Connection, now: ContinuousClock.Instant) {
            server.log("dropped a client (\(connection.peer)): its request line is longer than \(limits.lineLimit) bytes")
            connection.input = []
            reply(connection, with: Array(AgentProtocol.failure("invalid_request", "the request line is longer than \(limits.lineLimit) bytes").utf8), now: now)
        }

        /// Starts writing `answer`; the connection is closed once it is written (or fails).
        func reply(_ connection: Connection, with answer: [UInt8], now: ContinuousClock.Instant) {
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

        func flush(_ connection: Connection, now: ContinuousClock.Instant) {
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

        func fetch(_ line: [UInt8], for connection: Connection) {
            let (server, lane) = (server, lane)
            let (fd, serial, peer) = (connection.fd.raw, connection.serial, connection.peer)
            Task {
                let answer = await server.handler(line, peer)
                lane.outbox.withLock { $0.append(Ready(fd: fd, serial: serial, answer: answer)) }
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
}
