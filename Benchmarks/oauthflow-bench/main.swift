// oauthflow-bench: OAuthFlow's row in the peer benchmark (the harness in shared/bench; contract in
// its README). Usage: `oauthflow-bench <mode>`, mode in m1 m2 m3 m4 pkce m5, plus the diagnostic
// modes `diag-m2` (M2 through a transport wrapper that counts requests in flight), `diag-m2-easy`
// (the same through blocking curl_easy_perform on Dispatch workers), `diag-seq`, `diag-pipeline`
// (M1 split into transport-only and AuthFlow-overhead timings), `diag-transports` and
// `diag-authflow-raw`, `diag-fleet`, `diag-handoffs` (context switches per fetch), `diag-pkce`,
// `diag-idtoken`, `diag-dpop` (see Diagnostics.swift), `diag-dpop-m3` (DPoPTransport.swift). Exit 3 = unknown mode.
//
// Everything goes through OAuthFlow's public API: AuthFlow.clientCredentials(provider:) for a
// fresh fetch (a real HTTP request each, client_secret_basic), a TokenSource's token() for the cached
// lookup (M3, M4: the call an app or AuthorizingTransport makes before every request; see
// Documentation/Performance.md), PKCE() for the verifier/challenge pair, CurlTransport (the default) for HTTP.
//
// Output: `RESULT <name> <metric> <value>` lines on stdout; diagnostics on stderr.
// Each loop stops at BENCH_DEADLINE_S after the mode started and reports what it completed.
//
// The top level stays synchronous so that M5 (process start + read one JSON file) runs without
// first starting the concurrency runtime's async main; the other modes run in a detached task
// while the main thread waits on a semaphore.

import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow
import Synchronization

// MARK: - Configuration (the harness contract's environment)

struct Config: Sendable {
    let name: String
    let tokenURL: String
    let clientID: String
    let clientSecret: String
    let warmup: Int
    let m1N: Int
    let m2N: Int
    let m2Concurrency: Int
    let m3N: Int
    let m4Callers: Int
    let pkceN: Int
    let tokenFile: String
    let deadlineNs: UInt64
    /// Monotonic time the mode started; every loop stops at `start + deadline`.
    let start: UInt64

    static func env(_ key: String, _ fallback: String) -> String {
        guard let raw = getenv(key) else { return fallback }
        let value = String(cString: raw)
        return value.isEmpty ? fallback : value
    }

    static func envInt(_ key: String, _ fallback: Int) -> Int {
        guard let value = Int(env(key, "")), value > 0 else { return fallback }
        return value
    }

    static func load() -> Config {
        Config(
            name: env("BENCH_NAME", "oauthflow"),
            tokenURL: env("BENCH_TOKEN_URL", "http://127.0.0.1:18080/token"),
            clientID: env("BENCH_CLIENT_ID", "bench-client"),
            clientSecret: env("BENCH_CLIENT_SECRET", "bench-secret"),
            warmup: envInt("BENCH_WARMUP", 100),
            m1N: envInt("BENCH_M1_N", 2000),
            m2N: envInt("BENCH_M2_N", 10000),
            m2Concurrency: envInt("BENCH_M2_CONCURRENCY", 64),
            m3N: envInt("BENCH_M3_N", 1_000_000),
            m4Callers: envInt("BENCH_M4_CALLERS", 1000),
            pkceN: envInt("BENCH_PKCE_N", 200_000),
            tokenFile: env("BENCH_TOKEN_FILE", "/tmp/oauthbench-token.json"),
            deadlineNs: UInt64(envInt("BENCH_DEADLINE_S", 60)) * 1_000_000_000,
            start: monotonicNs()
        )
    }

    var deadline: UInt64 { start + deadlineNs }
    var pastDeadline: Bool { monotonicNs() >= deadline }

    func result(_ metric: String, _ value: Int) { print("RESULT \(name) \(metric) \(value)") }
    func result(_ metric: String, _ value: Double) {
        print("RESULT \(name) \(metric) \(value.isFinite ? fixed3(value) : "nan")")
    }
}

/// `value` with three decimals, as `%.3f` prints it (the library links no `String(format:)`).
func fixed3(_ value: Double) -> String {
    let thousandths = Int((abs(value) * 1000).rounded())
    let fraction = String(thousandths % 1000)
    return (value < 0 && thousandths > 0 ? "-" : "") + "\(thousandths / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
}

/// `clock`'s time in nanoseconds (CLOCK_MONOTONIC, or a CPU-time clock: CLOCK_THREAD_CPUTIME_ID,
/// CLOCK_PROCESS_CPUTIME_ID).
func clockNs(_ clock: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// CLOCK_MONOTONIC in nanoseconds.
func monotonicNs() -> UInt64 { clockNs(CLOCK_MONOTONIC) }

func warn(_ message: String) {
    var line = "oauthflow-bench: \(message)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Median (mean of the middle two for an even count) of a sorted array.
func median(_ sorted: [Double]) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let n = sorted.count
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
}

/// Nearest rank: sorted[ceil(p/100 * n) - 1].
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let rank = max(1, Int((p / 100 * Double(sorted.count)).rounded(.up)))
    return sorted[rank - 1]
}

// MARK: - M5: the CLI path (no network, no AuthFlow)

/// Reads BENCH_TOKEN_FILE through OAuthFlow's JSON parser (the one `authflow token` reads its
/// store entries with) and prints its access_token: what a CLI does for a valid cache. Plain file
/// reads, no Foundation file APIs, no concurrency runtime.
func runM5() -> Int32 {
    let path = Config.env("BENCH_TOKEN_FILE", "/tmp/oauthbench-token.json")
    guard let bytes = readFile(path) else {
        warn("cannot read \(path)")
        return 1
    }
    guard let token = (try? JSONValue.parse(Data(bytes)))?["access_token"]?.stringValue, !token.isEmpty else {
        warn("\(path) holds no access_token")
        return 1
    }
    print(token)
    return 0
}

/// The bytes of the file at `path` (at most 1 MiB), or nil.
func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while bytes.count <= 1 << 20 {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        guard n >= 0 else { return nil }
        if n == 0 { return bytes }
        bytes.append(contentsOf: chunk[0..<n])
    }
    return nil
}

/// This process's peak resident set size in KiB (`getrusage`, `ru_maxrss`).
func peakRSSKiB() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Int(usage.ru_maxrss)
}

// MARK: - The client under test

let providerID = "bench"

func makeProvider(_ config: Config) -> Provider? {
    guard let url = URL(string: config.tokenURL) else { return nil }
    // BENCH_CLIENT_AUTH=private_key_jwt: the same provider signing assertions (AssertionBench.swift).
    if let provider = assertionProvider(config, url: url) { return provider }
    // clientAuthentication defaults to client_secret_basic when a secret is given.
    return Provider(id: providerID, tokenURL: url, clientID: config.clientID, clientSecret: Secret(config.clientSecret))
}

/// The default transport: one `curl_multi` whose connection cache keeps up to 64 connections, which
/// covers the harness's BENCH_M2_CONCURRENCY; `connections` is kept for the call sites.
func makeTransport(connections: Int) -> CurlTransport {
    CurlTransport()
}

func makeFlow(
    _ config: Config, transport: any HTTPTransport, store: MemorySecretStore = MemorySecretStore()
) async -> AuthFlow? {
    guard let provider = makeProvider(config) else {
        warn("BENCH_TOKEN_URL is not a URL: \(config.tokenURL)")
        return nil
    }
    do {
        return try await AuthFlow(providers: [provider], store: store, transport: transport)
    } catch {
        warn("AuthFlow init failed: \(error)")
        return nil
    }
}

/// A fresh client-credentials fetch: always a real request (clientCredentials never answers from cache).
@inline(never)
func fetch(_ flow: AuthFlow) async -> Bool {
    do {
        let authorization = try await flow.clientCredentials(provider: providerID)
        return !authorization.tokenType.isEmpty
    } catch {
        reportFirstError(error)
        return false
    }
}

let firstErrorReported = Atomic<Bool>(false)

func reportFirstError(_ error: any Error) {
    if !firstErrorReported.exchange(true, ordering: .relaxed) { warn("first error: \(error)") }
}

/// Untimed sequential fetches; returns the number of errors.
func warmUp(_ flow: AuthFlow, _ config: Config) async -> Int {
    var errors = 0
    for _ in 0..<config.warmup where !config.pastDeadline {
        if await !fetch(flow) { errors += 1 }
    }
    return errors
}

// MARK: - M1: sequential fresh fetches

func runM1(_ config: Config) async -> Int32 {
    guard let flow = await makeFlow(config, transport: makeTransport(connections: config.m2Concurrency)) else { return 1 }
    // The harness's own warm-up: bounded by the deadline, and its failures count as M1 errors.
    let warmUpErrors = await warmUp(flow, config)
    await timeSequential(config, "m1", count: config.m1N, warmup: 0, errorsSoFar: warmUpErrors, rateMetric: "fetch_per_s") {
        await fetch(flow)
    }
    return 0
}

// MARK: - M2: concurrent fresh fetches over one shared AuthFlow and transport

final class Counters: Sendable {
    let next = Atomic<Int>(0)
    let done = Atomic<Int>(0)
    let errors = Atomic<Int>(0)
    let inFlight = Atomic<Int>(0)
    let maxInFlight = Atomic<Int>(0)
}

/// Wraps a transport to count requests in flight (diag-m2 only; M2 itself uses the bare transport).
struct CountingTransport: HTTPTransport {
    let base: any HTTPTransport
    let counters: Counters

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let now = counters.inFlight.wrappingAdd(1, ordering: .relaxed).newValue
        var seen = counters.maxInFlight.load(ordering: .relaxed)
        while now > seen {
            let (exchanged, original) = counters.maxInFlight.compareExchange(expected: seen, desired: now, ordering: .relaxed)
            if exchanged { break }
            seen = original
        }
        defer { counters.inFlight.wrappingSubtract(1, ordering: .relaxed) }
        return try await base.send(request)
    }
}

func runM2(_ config: Config, diagnostic: Bool, transport base: (any HTTPTransport)? = nil) async -> Int32 {
    let counters = Counters()
    let bare = base ?? makeTransport(connections: config.m2Concurrency)
    let transport: any HTTPTransport = diagnostic ? CountingTransport(base: bare, counters: counters) : bare
    guard let flow = await makeFlow(config, transport: transport) else { return 1 }
    counters.errors.store(await warmUp(flow, config), ordering: .relaxed)
    counters.maxInFlight.store(0, ordering: .relaxed)
    let total = config.m2N
    let start = monotonicNs()
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<config.m2Concurrency {
            group.addTask {
                while counters.next.wrappingAdd(1, ordering: .relaxed).newValue <= total {
                    if config.pastDeadline { return }
                    if await fetch(flow) {
                        counters.done.wrappingAdd(1, ordering: .relaxed)
                    } else {
                        counters.errors.wrappingAdd(1, ordering: .relaxed)
                    }
                }
            }
        }
    }
    let elapsed = Double(monotonicNs() - start) / 1e9
    let done = counters.done.load(ordering: .relaxed)
    config.result("m2_count", done)
    config.result("m2_errors", counters.errors.load(ordering: .relaxed))
    config.result("m2_fetch_per_s", Double(done) / elapsed)
    config.result("m2_peak_rss_kb", peakRSSKiB())
    if diagnostic { config.result("m2_max_in_flight", counters.maxInFlight.load(ordering: .relaxed)) }
    return 0
}

// MARK: - M3: cached lookups

func runM3(_ config: Config) async -> Int32 {
    guard let flow = await makeFlow(config, transport: makeTransport(connections: config.m2Concurrency)) else { return 1 }
    // Prime: one real fetch (clientCredentials(provider:) always sends a request).
    guard await fetch(flow) else {
        config.result("m3_errors", 1)
        return 0
    }
    // What a service keeps and calls before every request (AuthorizingTransport does the same).
    let source = flow.tokenSource(for: providerID)
    let useFlow = Config.env("BENCH_M3_API", "") == "accessToken"   // diagnostic: AuthFlow.accessToken(for:) instead
    var count = 0
    var errors = 0
    let start = monotonicNs()
    while count < config.m3N {
        if count & 4095 == 0, config.pastDeadline { break }
        do {
            let token = useFlow ? try await flow.accessToken(for: providerID) : try await source.token()
            if token.reveal().isEmpty { errors += 1 }
        } catch {
            reportFirstError(error)
            errors += 1
        }
        count += 1
    }
    let elapsed = Double(monotonicNs() - start)
    config.result("m3_count", count)
    config.result("m3_errors", errors)
    config.result("m3_ns_per_op", count > 0 ? elapsed / Double(count) : .nan)
    return 0
}

// MARK: - M4: many callers hit an expired token at once

/// Counts down to zero; one waiter, resumed at zero or when `expire()` is called.
final class Latch: Sendable {
    private struct State {
        var remaining: Int
        var waiter: CheckedContinuation<Bool, Never>?
        var finished = false
        var expired = false
    }
    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(remaining: count)) }

    func countDown() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            s.remaining -= 1
            guard s.remaining <= 0, !s.finished else { return nil }
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: true)
    }

    func expire() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            s.expired = true
            guard !s.finished, let waiter = s.waiter else { return nil }
            s.finished = true
            s.waiter = nil
            return waiter
        }
        waiter?.resume(returning: false)
    }

    /// True when the count reached zero; false when `expire()` came first.
    func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            let now = state.withLock { s -> Bool? in
                if s.remaining <= 0 { s.finished = true; return true }
                if s.expired { s.finished = true; return false }
                s.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// `wait()`, bounded by the monotonic time `deadline`.
    func wait(until deadline: UInt64) async -> Bool {
        let now = monotonicNs()
        let timer = Task.detached { [self] in
            if deadline > now { try? await Task.sleep(nanoseconds: deadline - now) }
            if !Task.isCancelled { self.expire() }
        }
        defer { timer.cancel() }
        return await wait()
    }
}

/// A barrier: callers park in `pass()` until `open()`; `arrived` counts the parked.
final class Gate: Sendable {
    private struct State {
        var open = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    let arrived: Latch

    init(parties: Int) { arrived = Latch(parties) }

    func pass() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let through = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiters.append(continuation)
                return false
            }
            arrived.countDown()
            if through { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// The store's entry format (version 1 envelope, dates in seconds since 1970), used to seed an
/// already-expired client-credentials token without a refresh token.
struct SeedEnvelope: Encodable {
    var version = 1
    var tokens: TokenSet
}

let expiredAccessToken = "bench-expired-access-token"

func runM4(_ config: Config) async -> Int32 {
    let now = Date()
    let expired = TokenSet(
        providerID: providerID, accessToken: Secret(expiredAccessToken), tokenType: "Bearer",
        issuedAt: now.addingTimeInterval(-7200), expiresAt: now.addingTimeInterval(-3600), grant: .clientCredentials)
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .secondsSince1970
    var seed: [String: Data] = [:]
    do { seed[providerID] = try encoder.encode(SeedEnvelope(tokens: expired)) } catch { warn("cannot encode the seed: \(error)") }
    guard let flow = await makeFlow(
        config, transport: makeTransport(connections: config.m2Concurrency), store: MemorySecretStore(seed)
    ) else { return 1 }
    // The flow must hold the expired token; otherwise it starts with no token (also allowed by the contract).
    let restored = await flow.authorization(for: providerID)
    let seeded = restored?.expiresAt.map { $0 < Date() } ?? false
    if !seeded { warn("the expired seed was not restored (store format changed?); M4 runs with no token") }
    config.result("m4_seeded", seeded ? 1 : 0)

    let callers = config.m4Callers
    let source = flow.tokenSource(for: providerID)   // the same API as M3
    let gate = Gate(parties: callers)
    let finished = Latch(callers)
    let errors = Counters()
    for _ in 0..<callers {
        Task.detached {
            await gate.pass()
            do {
                let token = try await source.token().reveal()
                if token.isEmpty || token == expiredAccessToken { errors.errors.wrappingAdd(1, ordering: .relaxed) }
            } catch {
                reportFirstError(error)
                errors.errors.wrappingAdd(1, ordering: .relaxed)
            }
            finished.countDown()
        }
    }
    guard await gate.arrived.wait(until: config.deadline) else {
        warn("m4: not every caller reached the barrier before the deadline")
        config.result("m4_callers", callers)
        config.result("m4_errors", callers)
        return 0
    }
    let t0 = monotonicNs()
    gate.open()
    let allReturned = await finished.wait(until: config.deadline)
    let wall = Double(monotonicNs() - t0) / 1e6
    if !allReturned { warn("m4: deadline reached before all callers returned") }
    config.result("m4_callers", callers)
    config.result("m4_errors", errors.errors.load(ordering: .relaxed) + (allReturned ? 0 : 1))
    config.result("m4_wall_ms", wall)
    return 0
}

// MARK: - PKCE

func runPKCE(_ config: Config) -> Int32 {
    var count = 0
    var errors = 0
    var sink = 0
    let start = monotonicNs()
    while count < config.pkceN {
        if count & 1023 == 0, config.pastDeadline { break }
        do {
            let pair = try PKCE()
            let verifier = pair.verifier.reveal()
            if verifier.utf8.count != 43 || pair.challenge.utf8.count != 43 { errors += 1 }
            sink &+= verifier.utf8.count &+ pair.challenge.utf8.count
        } catch {
            errors += 1
        }
        count += 1
    }
    let elapsed = Double(monotonicNs() - start)
    if sink == 0 { warn("no output") }
    config.result("pkce_count", count)
    config.result("pkce_errors", errors)
    config.result("pkce_ns_per_op", count > 0 ? elapsed / Double(count) : .nan)
    return 0
}

// MARK: - diag-seq: where the time of one sequential fetch goes

/// Times the same number of fetches through the bare transport (same request shape as the
/// library builds) and through AuthFlow, to separate the HTTP client's cost from AuthFlow's own.
func runDiagSequential(_ config: Config) async -> Int32 {
    let transport = makeTransport(connections: config.m2Concurrency)
    guard let flow = await makeFlow(config, transport: transport), let url = URL(string: config.tokenURL) else { return 1 }
    let credentials = Data("\(config.clientID):\(config.clientSecret)".utf8).base64EncodedString()
    let request = HTTPRequest(
        method: "POST", url: url,
        headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                  ("User-Agent", "OAuthFlow/0.1"), ("Authorization", "Basic \(credentials)")],
        body: Data("grant_type=client_credentials".utf8))
    await timeSequential(config, "transport", count: config.m1N, warmup: config.warmup) {
        do { return try await transport.send(request).status == 200 } catch { return false }
    }
    await timeSequential(config, "authflow", count: config.m1N, warmup: config.warmup) { await fetch(flow) }
    return 0
}

// MARK: - Entry

let arguments = CommandLine.arguments
let mode = arguments.count > 1 ? arguments[1] : ""
if mode == "m5" { exit(runM5()) }
if let code = assertionBenchMode(mode) { exit(code) }   // diag-assertion (AssertionBench.swift)

let asyncModes: Set<String> = ["m1", "m2", "m3", "m4", "diag-m2", "diag-m2-easy", "diag-seq", "diag-transports", "diag-authflow-raw", "diag-fleet", "diag-pipeline", "diag-handoffs", "diag-dpop-m3", "diag-dpop"]
if mode == "pkce" { exit(runPKCE(Config.load())) }
if mode == "diag-pkce" { exit(runDiagPKCE(Config.load())) }
if mode == "diag-idtoken" { exit(runDiagIDToken(Config.load())) }
guard asyncModes.contains(mode) else {
    warn("mode \"\(mode)\" is not supported (modes: m1 m2 m3 m4 pkce m5 diag-m2 diag-m2-easy diag-seq diag-transports diag-authflow-raw diag-fleet diag-pipeline diag-handoffs diag-pkce diag-idtoken diag-dpop diag-dpop-m3)")
    exit(3)
}

let config = Config.load()
let finished = DispatchSemaphore(value: 0)
let status = Atomic<Int32>(0)
Task.detached { [mode] in
    let code: Int32
    switch mode {
    case "m1": code = await runM1(config)
    case "m2": code = await runM2(config, diagnostic: false)
    case "diag-m2": code = await runM2(config, diagnostic: true)
    case "diag-m2-easy":
        // M2 through curl_easy_perform on Dispatch workers with pooled handles (Diagnostics.swift).
        guard let easy = EasyPerformTransport(pooled: true) else { code = 1; break }
        code = await runM2(config, diagnostic: true, transport: easy)
    case "m3": code = await runM3(config)
    case "m4": code = await runM4(config)
    case "diag-transports": code = await runDiagTransports(config)
    case "diag-authflow-raw": code = await runDiagAuthFlowRaw(config)
    case "diag-fleet": code = await runDiagFleet(config)
    case "diag-pipeline": code = await runDiagPipeline(config)
    case "diag-handoffs": code = await runDiagHandoffs(config)
    case "diag-dpop-m3": code = await runDiagDPoPM3(config)   // DPoPTransport.swift
    case "diag-dpop": code = await runDiagDPoP(config)   // Diagnostics.swift
    default: code = await runDiagSequential(config)
    }
    status.store(code, ordering: .relaxed)
    finished.signal()
}
finished.wait()
exit(status.load(ordering: .relaxed))
