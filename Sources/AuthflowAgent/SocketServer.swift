import CAgentIO
import Glibc
import OAuthFlow
import Synchronization

/// The agent's socket server: threads of its own (``Limits/loops``) each run an `epoll` loop over
/// the listening socket and the connections that loop accepted, so no thread of the concurrency
/// runtime ever blocks on a client. Documentation/Agent.md ("Design") says why there are two loops,
/// why they follow the affinity mask, and what each loop's ``Memo`` is for.
///
/// A connection is read until its first newline (at most ``Limits/lineLimit`` bytes), answered
/// with one line, and closed. A request ``Responder`` can answer at once (a cached token, an
/// error) is answered on the loop's thread as soon as its connection is accepted; only one that
/// must wait (a token to fetch) goes to ``Handler`` in a task, whose answer comes back through the
/// loop's eventfd.
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

    /// Computes the answer line (with its newline) of a request ``Responder`` could not answer.
    typealias Handler = @Sendable (_ line: [UInt8], _ peer: Peer) async -> [UInt8]

    /// An answer computed by a task, for the connection `fd` numbered `serial`.
    struct Ready: Sendable {
        var fd: Int32
        var serial: UInt32
        var answer: [UInt8]
    }

    /// What one socket loop shares with the tasks that compute its answers: its epoll set, the
    /// eventfd that wakes it, and the answers ready for it.
    final class Lane: Sendable {
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

    let listener: SharedFileDescriptor
    let lanes: [Lane]
    let limits: Limits
    let responder: Responder
    let handler: Handler
    let log: @Sendable (String) -> Void
    let stopping = Atomic<Bool>(false)
    /// How many loops accept new connections: one per CPU the agent may run on now, at most
    /// ``lanes``.count. The loops read the affinity mask again at most once a second while they
    /// are awake, so one pinned to fewer CPUs after it started (`taskset -a -p`, a cgroup's cpuset)
    /// stops taking turns with a loop it now shares a CPU with.
    let acceptingLoops: Atomic<Int>

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
    func readAffinity() {
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
}
