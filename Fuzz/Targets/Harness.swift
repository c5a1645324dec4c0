// The libFuzzer entry points and what every target shares.
//
// Fuzz/run.sh compiles these files together with Sources/OAuthFlow/**/*.swift into one module named
// OAuthFlow, so the targets reach the internal decoders directly; SwiftPM never sees this directory,
// so `swift build` and `swift test` are untouched. One binary holds every target: run.sh picks one
// with OAUTHFLOW_FUZZ_TARGET.
import Foundation
import Glibc

/// Every target, by the name `Fuzz/run.sh TARGET` takes.
let fuzzTargets: [String: @Sendable ([UInt8]) -> Void] = [
    "json": JSONTarget.run,
    "token": TokenTarget.run,
    "callback": CallbackTarget.run,
    "catalog": CatalogTarget.run,
    "jws": JWSTarget.run,
    "jwk": JWKTarget.run,
    "entry": EntryTarget.run,
]

/// The target named by OAUTHFLOW_FUZZ_TARGET (initialized once, on first use).
let selectedTarget: @Sendable ([UInt8]) -> Void = {
    let name = ProcessInfo.processInfo.environment["OAUTHFLOW_FUZZ_TARGET"] ?? ""
    guard let target = fuzzTargets[name] else {
        FileHandle.standardError.write(Data(
            "OAUTHFLOW_FUZZ_TARGET must be one of \(fuzzTargets.keys.sorted().joined(separator: ", ")); got \"\(name)\"\n".utf8))
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    InlineExecutor.takeOverGlobalExecutor()
    _ = selectedTarget
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    selectedTarget(bytes)
    return 0
}

// MARK: - Shared helpers

/// Traps (a finding) when an invariant of the library does not hold for this input.
func invariant(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    if !condition { fatalError("fuzz invariant violated: \(message())", file: file, line: line) }
}

/// The checks every error a server, a file or a URL can cause must pass: its `description` (what
/// the CLI prints) shows no control character, and describing it in any way does not trap.
func checkShown(_ error: OAuthError) {
    let text = error.description
    invariant(!text.unicodeScalars.contains(where: DisplayText.isUnsafe), "OAuthError.description shows a control character: \(text.debugDescription)")
    _ = String(reflecting: error)
    _ = error.recovery
    _ = error.errorDescription
    if let response = error.response {
        for field in [response.code.rawValue, response.errorDescription ?? "", response.errorURI ?? ""] {
            invariant(field.unicodeScalars.allSatisfy { (0x20...0x7E).contains($0.value) }, "ErrorResponse keeps a non-printable character")
        }
    }
}

/// A fixed "now" in whole seconds (2026-01-01T00:00:00Z), so stored times round-trip exactly.
let fuzzNow = Date(timeIntervalSince1970: 1_767_225_600)

/// Runs `body` to its end on this (libFuzzer's) thread and returns.
///
/// Its jobs, those of every actor it calls (SE-0417: default actors run on the task's preferred
/// executor) and those of the unstructured tasks the library starts (the global executor's, see
/// ``InlineExecutor/takeOverGlobalExecutor()``) all run here, one at a time. So an input costs no
/// thread switch, runs the same way each time, and has freed everything it will free when this
/// returns — which libFuzzer's per-input leak check relies on. A hang is caught by -timeout.
func blocking(_ body: @escaping @Sendable () async -> Void) {
    Task(executorPreference: InlineExecutor.shared) {
        await body()
        InlineExecutor.shared.finish()
    }
    InlineExecutor.shared.drain()
}

/// A task executor whose jobs run on the thread that calls ``drain()``.
final class InlineExecutor: TaskExecutor, @unchecked Sendable {   // state guarded by `condition`
    static let shared = InlineExecutor()
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    func enqueue(_ job: consuming ExecutorJob) {
        append(UnownedJob(job))
    }

    private func append(_ job: UnownedJob) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Marks the running body as ended; ``drain()`` returns once no job is left.
    func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    /// Runs jobs (waiting for those other threads enqueue) until the body finished and none is left.
    func drain() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                finished = false
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// The C signature of the runtime's `swift_task_enqueueGlobal_hook` (a `SWIFT_CC(swift)`
    /// pointer taking the job and the original function; on x86-64 and arm64 the Swift calling
    /// convention passes two pointers as C does).
    private typealias GlobalEnqueueHook = @convention(c) (UnsafeMutableRawPointer, UnsafeMutableRawPointer) -> Void

    /// Routes the global concurrent executor's jobs (`Task {}` outside any actor, such as the
    /// document cache's fetch) into this executor, through the concurrency runtime's enqueue hook.
    /// Called once, before the first input.
    static func takeOverGlobalExecutor() {
        guard let symbol = dlsym(nil, "swift_task_enqueueGlobal_hook") else {
            fatalError("swift_task_enqueueGlobal_hook is missing from the concurrency runtime")
        }
        let hook: GlobalEnqueueHook = { job, _ in InlineExecutor.shared.append(unsafeBitCast(job, to: UnownedJob.self)) }
        symbol.assumingMemoryBound(to: GlobalEnqueueHook?.self).pointee = hook
    }
}

/// A transport that answers every request from a function of the request and records what it was sent.
final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var sent: [HTTPRequest] = []
    private let answer: @Sendable (HTTPRequest) -> HTTPResponse

    init(_ answer: @escaping @Sendable (HTTPRequest) -> HTTPResponse) { self.answer = answer }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        lock.withLock { sent.append(request) }
        return answer(request)
    }

    var requests: [HTTPRequest] { lock.withLock { sent } }
}

/// The first line of `bytes` (without its LF) and the rest; nil line when there is no LF.
func splitFirstLine(_ bytes: [UInt8]) -> (line: String?, rest: [UInt8]) {
    guard let newline = bytes.firstIndex(of: 0x0A) else { return (nil, bytes) }
    return (String(decoding: bytes[..<newline], as: UTF8.self), Array(bytes[(newline + 1)...]))
}

/// `AuthFlow.Options` for the targets: the fixed clock, no retries, nothing restored at start.
func fuzzOptions() -> AuthFlow.Options {
    AuthFlow.Options(now: { fuzzNow }, restoresAtStart: false, retry: .none, jitter: { 0 })
}

/// A clock whose sleeps end at once (retry waits), with the continuous clock's time.
struct InstantClock: Clock {
    var now: ContinuousClock.Instant { ContinuousClock.now }
    var minimumResolution: Duration { .zero }
    func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {}
}
