import CAgentIO
import Glibc
import OAuthFlow
import Synchronization

extension AgentServer {
    enum Phase { case reading, waiting, writing }

    /// One client the loop could not finish at once; lives on the loop's thread only.
    ///
    /// Its `var`s, like ``Loop``'s, are `@exclusivity(unchecked)`: only their loop's thread
    /// touches them, so the run-time access checks would guard nothing (Documentation/Agent.md,
    /// "Design"). The compiler still checks what it can see.
    final class Connection {
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
    final class Loop {
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
    }
}
