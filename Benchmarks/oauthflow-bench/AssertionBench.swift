// Client assertions in oauthflow-bench (issue 17; Documentation/Performance.md, "Client assertions";
// its runs in Documentation/PerformanceLog.md):
//
// `diag-assertion`: one whole client assertion for a token request (header and claims, a fresh
// `jti`, the signature, base64url, the form fields: AssertionProbe.fields(), which runs
// AssertionAuthenticator.fields, the code every private_key_jwt request runs) against a bare
// EVP_MD_CTX_new + EVP_DigestSignInit + EVP_DigestSign + EVP_MD_CTX_free of the same signing input
// with the same key, through the benchmark's own libcrypto table. ES256, RS256 (RSA-2048) and EdDSA;
// BENCH_ASSERTION_ROUNDS (default 5) rounds, each the bare loop then the whole loop of
// BENCH_ASSERTION_N (default 2000; RS256 a quarter of it) calls. Reported per algorithm: the bare
// and whole CPU time per call (the process's CPU time: nothing else runs in it), the wall time per
// call, the ratio over all rounds and the median of the rounds' ratios. Issue 17's limit: 1.3.
//
// The keys: BENCH_CLIENT_KEY_DIR/{es256,rs256,eddsa}.pem when set, else made with `openssl genpkey`
// in a temporary directory.
//
// M1/M2 with private_key_jwt: with BENCH_CLIENT_AUTH=private_key_jwt and BENCH_CLIENT_KEY_FILE (a
// PEM key), makeProvider gives the bench provider that key instead of the secret, so `m1` and `m2`
// sign an assertion (the key's default algorithm; ES256 for a P-256 key) for every fetch.

internal import COpenSSL
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow
import Synchronization

/// The private_key_jwt provider of M1/M2 when BENCH_CLIENT_AUTH asks for one; nil for the secret.
func assertionProvider(_ config: Config, url: URL) -> Provider? {
    guard Config.env("BENCH_CLIENT_AUTH", "") == "private_key_jwt" else { return nil }
    let path = Config.env("BENCH_CLIENT_KEY_FILE", "")
    do {
        let key = try ClientKey(contentsOfFile: path)
        return Provider(id: providerID, tokenURL: url, clientID: config.clientID, clientAuthentication: .privateKeyJWT, clientKey: key)
    } catch {
        warn("BENCH_CLIENT_AUTH=private_key_jwt needs BENCH_CLIENT_KEY_FILE, a PEM key: \(error)")
        exit(1)
    }
}

/// Runs `diag-assertion` and returns its exit code, or nil for another mode.
func assertionBenchMode(_ mode: String) -> Int32? {
    guard mode == "diag-assertion" else { return nil }
    let config = Config.load()
    let finished = DispatchSemaphore(value: 0)
    let status = Atomic<Int32>(0)
    Task.detached {
        status.store(await runDiagAssertion(config), ordering: .relaxed)
        finished.signal()
    }
    finished.wait()
    return status.load(ordering: .relaxed)
}

/// The per-request path of an assertion method (`AssertionAuthenticator.fields(endpoint:now:)`,
/// what every token request with `private_key_jwt` runs), and the signing input of one assertion
/// for the bare-signature baseline.
struct AssertionProbe: Sendable {
    private let authenticator: AssertionAuthenticator
    private let endpoint: URL

    /// The authenticator `provider` gets, for requests to its token endpoint.
    /// - Throws: ``OAuthError`` `.configuration` when the provider does not sign assertions.
    init(provider: Provider) throws(OAuthError) {
        guard let authenticator = try AssertionAuthenticator(provider: provider), let endpoint = provider.tokenURL else {
            throw OAuthError(.configuration, message: "the provider signs no client assertions, or has no token endpoint")
        }
        self.authenticator = authenticator
        self.endpoint = endpoint
    }

    /// One fresh assertion and its form fields, as a token request makes them; the fields' total length.
    func fields() async throws(OAuthError) -> Int {
        try await authenticator.fields(endpoint: endpoint, now: Date()).reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count }
    }

    /// The signing input of one assertion (its header and claims, with their own `jti`): the
    /// `client_assertion` a request carries, without its signature.
    func signingInput() async throws(OAuthError) -> [UInt8] {
        let fields = try await authenticator.fields(endpoint: endpoint, now: Date())
        guard let assertion = fields.first(where: { $0.0 == "client_assertion" })?.1 else {
            throw OAuthError(.configuration, message: "no client_assertion among the fields")
        }
        return jwsSigningInput(assertion)
    }
}

/// `header.payload` of a compact JWS: what its signature signs.
func jwsSigningInput(_ compact: String) -> [UInt8] {
    Array(compact.utf8.prefix { $0 != UInt8(ascii: ".") }) + Array(".".utf8) + Array(compact.split(separator: ".")[1].utf8)
}

/// The process's CPU time (every thread), ns.
private func processCPUNs() -> UInt64 { clockNs(CLOCK_PROCESS_CPUTIME_ID) }

/// A key for the bare baseline: decoded by the benchmark's own libcrypto table from the PEM's DER.
final class BareSigner {
    let api: UnsafeMutablePointer<c_oauthflow_crypto_api>
    let key: OpaquePointer
    let digest: OpaquePointer?

    init?(api: UnsafeMutablePointer<c_oauthflow_crypto_api>, pem: String, digestName: String?) {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Data(base64Encoded: body) else { return nil }
        let bytes = [UInt8](der)
        let decoded: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return api.pointee.d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let decoded else { return nil }
        self.api = api
        key = decoded
        digest = digestName.flatMap { api.pointee.EVP_MD_fetch(nil, $0, nil) }
    }

    deinit {
        api.pointee.EVP_PKEY_free(key)
        if let digest { api.pointee.EVP_MD_free(digest) }
    }

    /// EVP_DigestSign of `input` with a context made and freed for it; the signature's length.
    func sign(_ input: [UInt8], into signature: inout [UInt8]) -> Int {
        guard let context = api.pointee.EVP_MD_CTX_new() else { return 0 }
        defer { api.pointee.EVP_MD_CTX_free(context) }
        guard api.pointee.EVP_DigestSignInit(context, nil, digest, nil, key) == 1 else { return 0 }
        var length = 0
        guard api.pointee.EVP_DigestSign(context, nil, &length, input, input.count) == 1, length <= signature.count else { return 0 }
        guard api.pointee.EVP_DigestSign(context, &signature, &length, input, input.count) == 1 else { return 0 }
        return length
    }
}

/// The directory holding es256.pem, rs256.pem and eddsa.pem: BENCH_CLIENT_KEY_DIR, or one made now.
func assertionKeyDirectory() -> String? {
    let given = Config.env("BENCH_CLIENT_KEY_DIR", "")
    if !given.isEmpty { return given }
    var template = Array("/tmp/oauthflow-bench-keys-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { return nil }
    let dir = String(cString: made)
    let commands = [
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \(dir)/es256.pem",
        "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out \(dir)/rs256.pem",
        "openssl genpkey -algorithm ED25519 -out \(dir)/eddsa.pem",
    ]
    for command in commands where system(command + " 2>/dev/null") != 0 {
        warn("diag-assertion: `\(command)` failed")
        return nil
    }
    warn("diag-assertion: keys made in \(dir)")
    return dir
}

func runDiagAssertion(_ config: Config) async -> Int32 {
    let n = Config.envInt("BENCH_ASSERTION_N", 2000)
    let rounds = Config.envInt("BENCH_ASSERTION_ROUNDS", 5)
    var api = c_oauthflow_crypto_api()
    guard c_oauthflow_crypto_load(&api) == 0 else {
        warn("diag-assertion: libcrypto.so.3 could not be loaded")
        return 1
    }
    guard let dir = assertionKeyDirectory() else { return 1 }
    let url = URL(string: "https://login.example.com/oauth2/v2.0/token")!
    for (label, file, digestName, count) in [("es256", "es256.pem", "SHA256", n), ("rs256", "rs256.pem", "SHA256", max(1, n / 4)),
                                             ("eddsa", "eddsa.pem", nil, n)] {
        let whole: AssertionProbe
        let bare: BareSigner
        do {
            let path = "\(dir)/\(file)"
            let key = try ClientKey(contentsOfFile: path)
            let provider = Provider(
                id: providerID, tokenURL: url, clientID: "0b6f8e2c-4a1d-4f57-9a3e-bench-client", clientAuthentication: .privateKeyJWT,
                clientKey: key, clientKeyID: "bench-key-2026-12")
            whole = try AssertionProbe(provider: provider)
            let pem = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
            guard let signer = withUnsafeMutablePointer(to: &api, { BareSigner(api: $0, pem: pem, digestName: digestName) }) else {
                warn("diag-assertion \(label): the benchmark's libcrypto cannot read \(path)")
                return 1
            }
            bare = signer
        } catch {
            warn("diag-assertion \(label): \(error)")
            return 1
        }
        // The baseline signs what the whole path signs: one assertion's signing input (its own jti).
        let input: [UInt8]
        do { input = try await whole.signingInput() } catch {
            warn("diag-assertion \(label): \(error)")
            return 1
        }
        var signature = [UInt8](repeating: 0, count: 1024)
        // A failure here is a bug, not a number.
        guard bare.sign(input, into: &signature) > 0, ((try? await whole.fields()) ?? 0) > 0 else {
            warn("diag-assertion \(label): signing failed")
            return 1
        }
        var sink = 0
        for _ in 0..<min(count, 200) {
            sink &+= bare.sign(input, into: &signature)
            sink &+= (try? await whole.fields()) ?? 0
        }
        var bareCPU: UInt64 = 0, wholeCPU: UInt64 = 0, bareWall: UInt64 = 0, wholeWall: UInt64 = 0
        var ratios: [Double] = []
        var errors = 0
        for _ in 0..<rounds {
            if config.pastDeadline { break }
            var wall = monotonicNs(), cpu = processCPUNs()
            for _ in 0..<count { sink &+= bare.sign(input, into: &signature) }
            let roundBareCPU = processCPUNs() - cpu
            bareCPU += roundBareCPU
            bareWall += monotonicNs() - wall
            wall = monotonicNs()
            cpu = processCPUNs()
            for _ in 0..<count {
                do { sink &+= try await whole.fields() } catch { errors += 1 }
            }
            let roundWholeCPU = processCPUNs() - cpu
            wholeCPU += roundWholeCPU
            wholeWall += monotonicNs() - wall
            ratios.append(Double(roundWholeCPU) / Double(max(roundBareCPU, 1)))
        }
        if sink == 42 { warn("") }
        let calls = Double(count * max(ratios.count, 1))
        let sorted = ratios.sorted()
        config.result("assertion_\(label)_rounds", ratios.count)
        config.result("assertion_\(label)_calls_per_round", count)
        config.result("assertion_\(label)_errors", errors)
        config.result("assertion_\(label)_signing_input_bytes", input.count)
        config.result("assertion_\(label)_bare_sign_cpu_ns_per_op", Double(bareCPU) / calls)
        config.result("assertion_\(label)_whole_cpu_ns_per_op", Double(wholeCPU) / calls)
        config.result("assertion_\(label)_bare_sign_ns_per_op", Double(bareWall) / calls)
        config.result("assertion_\(label)_whole_ns_per_op", Double(wholeWall) / calls)
        config.result("assertion_\(label)_ratio", Double(wholeCPU) / Double(max(bareCPU, 1)))
        config.result("assertion_\(label)_ratio_median_round", sorted.isEmpty ? .nan : sorted[sorted.count / 2])
        config.result("assertion_\(label)_ratio_max_round", sorted.last ?? .nan)
    }
    return 0
}
