internal import CLibPQ
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Synchronization

/// libpq, opened with `dlopen` on first use and kept open (see `Sources/CLibPQ/shim.h`).
///
/// Every call into libpq goes through ``call(_:)``, which counts the threads inside libpq (see
/// ``LibPQGate``), so a process that exits while a background thread is connecting does not tear
/// libpq's dependencies down under that thread.
final class LibPQ: @unchecked Sendable {  // safe: an immutable table of C function pointers, never freed
    let api: UnsafeMutablePointer<c_oauthflow_pq_api>

    private init(api: UnsafeMutablePointer<c_oauthflow_pq_api>) { self.api = api }

    /// The process's libpq, or why it cannot be used.
    static let shared: Result<LibPQ, PostgresStoreFailure> = load()

    /// Opens `name` (nil: `libpq.so.5`, then `libpq.so`). Tests pass a name that does not exist.
    static func load(_ name: String? = nil) -> Result<LibPQ, PostgresStoreFailure> {
        let api = UnsafeMutablePointer<c_oauthflow_pq_api>.allocate(capacity: 1)
        api.initialize(to: c_oauthflow_pq_api())
        let loaded = name.map { name in name.withCString { c_oauthflow_pq_load(api, $0) } } ?? c_oauthflow_pq_load(api, nil)
        guard loaded == 0 else {
            api.deallocate()
            return .failure(PostgresStoreFailure(kind: .libraryMissing, message: """
                \(name ?? "libpq.so.5") could not be loaded; install libpq (Debian and Ubuntu: apt-get install libpq5)
                """))
        }
        return .success(LibPQ(api: api))
    }

    /// Runs `body` with the function table, counted as a thread inside libpq.
    @inline(__always)
    func call<T>(_ body: (c_oauthflow_pq_api) -> T) -> T {
        LibPQGate.enter()
        defer { LibPQGate.leave() }
        return body(api.pointee)
    }

    /// Like ``call(_:)``, with the table itself (for the C helpers in the shim).
    @inline(__always)
    func withTable<T>(_ body: (UnsafePointer<c_oauthflow_pq_api>) -> T) -> T {
        LibPQGate.enter()
        defer { LibPQGate.leave() }
        return body(api)
    }

    var version: Int32 { call { $0.libVersion() } }
}

/// Keeps `exit` from tearing libpq's dependencies down under a thread that is inside libpq.
///
/// At `exit`, OpenSSL's `atexit` handler and the destructors of Kerberos and the other libraries
/// libpq loads free their locks; a store's background thread still inside `PQconnectdbParams`
/// (the `LISTEN` connection starting, a pool connection opening) then crashed on a freed lock
/// (`k5_mutex_lock: Assertion 'r == 0' failed`, or SIGSEGV in `pthread_rwlock_wrlock`). After
/// the first connection attempt an `atexit` handler is registered; handlers run in reverse order
/// of registration, so it runs before those. It closes the gate (a thread that would enter libpq
/// from then on waits for the process to end) and waits until no thread is inside libpq, at most
/// ``exitWait`` (a connection attempt ends within its `connect_timeout`).
enum LibPQGate {
    private static let inside = Atomic<Int>(0)
    private static let closed = Atomic<Bool>(false)
    private static let registered = Atomic<Bool>(false)
    /// The longest `exit` waits for threads inside libpq.
    static let exitWait: Duration = .seconds(30)

    @inline(__always)
    static func enter() {
        inside.add(1, ordering: .sequentiallyConsistent)
        if closed.load(ordering: .sequentiallyConsistent) {
            inside.subtract(1, ordering: .sequentiallyConsistent)
            while true { sleep(3600) }  // the process is exiting; never enter libpq again
        }
    }

    @inline(__always)
    static func leave() { inside.subtract(1, ordering: .sequentiallyConsistent) }

    /// Registers the `atexit` handler, once per process; call after a connection attempt, so
    /// that libpq's own dependencies registered theirs before.
    static func registerAtExit() {
        guard registered.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged else { return }
        atexit { LibPQGate.closeForExit() }
    }

    /// Closes the gate and waits (bounded) until no thread is inside libpq.
    static func closeForExit() {
        closed.store(true, ordering: .sequentiallyConsistent)
        let deadline = ContinuousClock.now + exitWait
        while inside.load(ordering: .sequentiallyConsistent) > 0, ContinuousClock.now < deadline { usleep(1000) }
    }

    /// The number of threads inside libpq now (for tests).
    static var threadsInside: Int { inside.load(ordering: .sequentiallyConsistent) }
}
