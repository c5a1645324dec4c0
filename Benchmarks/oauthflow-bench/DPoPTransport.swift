// diag-dpop-m3: M3 through the authorizing transport, a cached DPoP-bound token against a cached
// Bearer token (issue 18), in the same process, interleaved. No network: see Performance.md.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow

/// Answers token requests with a Bearer or a DPoP-typed token (by the path), and every other
/// request with an empty 200: the authorizing transport's base, so only the header work is timed.
struct DPoPBenchTransport: HTTPTransport {
    static let bearerBody = Data(#"{"access_token":"bench-access-token-0123456789abcdef","token_type":"Bearer","expires_in":3600}"#.utf8)
    static let dpopBody = Data(#"{"access_token":"bench-access-token-0123456789abcdef","token_type":"DPoP","expires_in":3600}"#.utf8)
    static let empty = HTTPResponse(status: 200, headers: ["Content-Length": "0"], body: Data())

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        switch request.url.path {
        case "/bearer-token": HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Self.bearerBody)
        case "/dpop-token": HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Self.dpopBody)
        default: Self.empty
        }
    }
}

/// `diag-dpop-m3`: one client-credentials fetch primes each provider's cache (`bearer`, and `dpop`
/// with `dpop` on and `BENCH_DPOP_ALG`, ES256 by default), then rounds of `BENCH_DPOP_M3_N` (20 000)
/// `AuthorizingTransport.send` of a GET each, Bearer then DPoP, `BENCH_DPOP_M3_ROUNDS` (5) rounds.
/// Per request: wall time (`CLOCK_MONOTONIC`) and process CPU time (`CLOCK_PROCESS_CPUTIME_ID`);
/// `dpop_m3_ratio` is DPoP CPU time over Bearer CPU time, and `dpop_m3_added_cpu_ns_per_op` the
/// difference (a proof per request: key, claims, `ath`, signature).
func runDiagDPoPM3(_ config: Config) async -> Int32 {
    let n = Config.envInt("BENCH_DPOP_M3_N", 20_000)
    let rounds = Config.envInt("BENCH_DPOP_M3_ROUNDS", 5)
    let algorithmName = Config.env("BENCH_DPOP_ALG", "ES256")
    guard let algorithm = SigningAlgorithm(rawValue: algorithmName) else {
        warn("diag-dpop-m3: BENCH_DPOP_ALG \(algorithmName) is not an algorithm")
        return 1
    }
    let bearer = Provider(id: "bearer", tokenURL: URL(string: "https://bench.invalid/bearer-token")!, clientID: "bench-client",
                          clientSecret: Secret("bench-secret"))
    var dpop = Provider(id: "dpop", tokenURL: URL(string: "https://bench.invalid/dpop-token")!, clientID: "bench-client",
                        clientSecret: Secret("bench-secret"))
    dpop.dpop = .enabled
    dpop.dpopAlgorithm = algorithm
    let base = DPoPBenchTransport()
    let flow: AuthFlow
    do {
        flow = try await AuthFlow(providers: [bearer, dpop], store: MemorySecretStore(), transport: base)
        let primedBearer = try await flow.clientCredentials(provider: "bearer")
        let primedDPoP = try await flow.clientCredentials(provider: "dpop")
        guard !primedBearer.isDPoPBound, primedDPoP.isDPoPBound else {
            warn("diag-dpop-m3: the primed tokens are not Bearer and DPoP-bound")
            return 1
        }
    } catch {
        warn("diag-dpop-m3: priming failed: \(error)")
        return 1
    }
    let bearerTransport = AuthorizingTransport(base: base, source: flow.tokenSource(for: "bearer"))
    let dpopTransport = AuthorizingTransport(base: base, source: flow.tokenSource(for: "dpop"))
    let request = HTTPRequest(method: "GET", url: URL(string: "https://api.bench.invalid/v1/items?page=2")!, headers: [("Accept", "application/json")])

    func processCPUNs() -> UInt64 { clockNs(CLOCK_PROCESS_CPUTIME_ID) }
    /// (wall ns, CPU ns, errors) for `count` sends through `transport`, after 200 warm-up sends.
    func measure(_ transport: AuthorizingTransport, count: Int) async -> (wall: UInt64, cpu: UInt64, errors: Int) {
        var errors = 0
        for _ in 0..<200 { if (try? await transport.send(request))?.status != 200 { errors += 1 } }
        let start = monotonicNs()
        let cpuStart = processCPUNs()
        for _ in 0..<count {
            do {
                if try await transport.send(request).status != 200 { errors += 1 }
            } catch {
                reportFirstError(error)
                errors += 1
            }
        }
        return (monotonicNs() - start, processCPUNs() - cpuStart, errors)
    }

    // What goes on the wire, checked once: Bearer without a proof, DPoP with one.
    do {
        let plain = try await flow.tokenSource(for: "bearer").authorizationHeaders(method: request.method, url: request.url)
        let bound = try await flow.tokenSource(for: "dpop").authorizationHeaders(method: request.method, url: request.url)
        guard plain.authorization.reveal().hasPrefix("Bearer "), plain.dpop == nil,
              bound.authorization.reveal().hasPrefix("DPoP "), bound.dpop != nil else {
            warn("diag-dpop-m3: the headers are not Bearer and DPoP")
            return 1
        }
    } catch {
        warn("diag-dpop-m3: \(error)")
        return 1
    }

    var totals = (bearerWall: UInt64(0), bearerCPU: UInt64(0), dpopWall: UInt64(0), dpopCPU: UInt64(0), errors: 0)
    for round in 0..<rounds {
        let b = await measure(bearerTransport, count: n)
        let d = await measure(dpopTransport, count: n)
        totals.bearerWall += b.wall; totals.bearerCPU += b.cpu; totals.dpopWall += d.wall; totals.dpopCPU += d.cpu
        totals.errors += b.errors + d.errors
        config.result("dpop_m3_round\(round)_bearer_cpu_ns_per_op", Double(b.cpu) / Double(n))
        config.result("dpop_m3_round\(round)_dpop_cpu_ns_per_op", Double(d.cpu) / Double(n))
        config.result("dpop_m3_round\(round)_ratio", Double(d.cpu) / Double(max(b.cpu, 1)))
    }
    let calls = Double(rounds * n)
    config.result("dpop_m3_alg_" + algorithm.rawValue.lowercased(), 1)
    config.result("dpop_m3_errors", totals.errors)
    config.result("dpop_m3_bearer_ns_per_op", Double(totals.bearerWall) / calls)
    config.result("dpop_m3_bearer_cpu_ns_per_op", Double(totals.bearerCPU) / calls)
    config.result("dpop_m3_dpop_ns_per_op", Double(totals.dpopWall) / calls)
    config.result("dpop_m3_dpop_cpu_ns_per_op", Double(totals.dpopCPU) / calls)
    config.result("dpop_m3_added_cpu_ns_per_op", (Double(totals.dpopCPU) - Double(totals.bearerCPU)) / calls)
    config.result("dpop_m3_ratio", Double(totals.dpopCPU) / Double(max(totals.bearerCPU, 1)))
    return 0
}
