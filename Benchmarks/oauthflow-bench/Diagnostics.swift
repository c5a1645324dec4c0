// Diagnostic modes of oauthflow-bench (not part of the harness contract; see Documentation/Performance.md).
//
// `diag-transports`: the same sequential token request through several transports, to compare the
// libcurl designs and to split one fetch's time into "HTTP client" and "OAuthFlow's own work":
//   - curl-multi: OAuthFlow's CurlTransport (one curl_multi and its thread, connections kept, pooled handles)
//   - curl-easy-fresh: a fresh easy handle per request, curl_easy_perform on a Dispatch thread
//     (a new connection per request: the handle owns its connection cache)
//   - curl-easy-pooled: the same with easy handles kept in a pool and reset (connections kept)
//   - rawsocket: a blocking HTTP/1.1 keep-alive socket (a floor for any transport in Swift)
//   - authflow+rawsocket / authflow+curl: AuthFlow.clientCredentials over either
// plus micro-timings of the pieces AuthFlow runs per fetch (JSON parse, store encode).
// `diag-authflow-raw`: only the authflow+rawsocket loop, for profiling.

internal import CCurl
internal import COpenSSL
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow
import OAuthFlowPostgres
import Synchronization

/// The token body nginx returns (what every fetch parses).
let benchTokenBody = Data(
    #"{"access_token":"bench-access-token-0123456789abcdef","token_type":"Bearer","expires_in":3600,"refresh_token":"bench-refresh-token-0123456789abcdef"}"#
        .utf8)

/// libcurl's easy interface: `curl_easy_perform` on a Dispatch worker per request, with a fresh
/// handle each time or one from a pool. The alternative to CurlTransport's multi design, kept here
/// to measure it (Documentation/PerformanceLog.md, "CurlTransport: multi against easy").
final class EasyPerformTransport: HTTPTransport, @unchecked Sendable {   // safe: the pool is a Mutex; the API table is immutable
    private let api: UnsafeMutablePointer<c_oauthflow_curl_api>
    private let pooled: Bool
    private let pool = Mutex<[EasyBox]>([])

    /// One easy handle, cleaned up in deinit.
    final class EasyBox: @unchecked Sendable {   // safe: used by one request at a time (taken from and returned to the pool)
        let raw: UnsafeMutableRawPointer
        let api: UnsafeMutablePointer<c_oauthflow_curl_api>
        init?(_ api: UnsafeMutablePointer<c_oauthflow_curl_api>) {
            guard let raw = api.pointee.easy_init() else { return nil }
            self.raw = raw
            self.api = api
        }
        deinit { api.pointee.easy_cleanup(raw) }
    }

    /// The response body as it arrives.
    final class Sink {
        var body = Data()
    }

    init?(pooled: Bool) {
        let api = UnsafeMutablePointer<c_oauthflow_curl_api>.allocate(capacity: 1)
        api.initialize(to: c_oauthflow_curl_api())
        guard c_oauthflow_curl_load(api) == 0 else { return nil }
        _ = api.pointee.global_init(Int(CURL_GLOBAL_DEFAULT))
        self.api = api
        self.pooled = pooled
    }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let result = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.perform(request)) }
        }
        return try result.get()
    }

    private func perform(_ request: HTTPRequest) -> Result<HTTPResponse, OAuthError> {
        let reused = pooled ? pool.withLock { $0.popLast() } : nil
        guard let easy = reused ?? EasyBox(api) else { return .failure(OAuthError(.transport, message: "easy_init failed")) }
        if reused != nil { api.pointee.easy_reset(easy.raw) }   // keeps the handle's connections
        let handle = easy.raw
        _ = request.url.absoluteString.withCString { c_oauthflow_curl_easy_setopt_pointer(api, handle, CURLOPT_URL, $0) }
        _ = c_oauthflow_curl_easy_setopt_long(api, handle, CURLOPT_NOSIGNAL, 1)
        let body = request.body ?? Data()
        _ = c_oauthflow_curl_easy_setopt_off(api, handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
        _ = body.withUnsafeBytes { c_oauthflow_curl_easy_setopt_pointer(api, handle, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in request.headers + [("Expect", "")] {
            list = "\(header.0): \(header.1)".withCString { api.pointee.slist_append(list, $0) }
        }
        defer { api.pointee.slist_free_all(list) }
        _ = c_oauthflow_curl_easy_setopt_pointer(api, handle, CURLOPT_HTTPHEADER, UnsafeRawPointer(list))
        let sink = Sink()
        _ = c_oauthflow_curl_easy_setopt_pointer(api, handle, CURLOPT_WRITEDATA, UnsafeRawPointer(Unmanaged.passUnretained(sink).toOpaque()))
        _ = c_oauthflow_curl_easy_setopt_write(api, handle, CURLOPT_WRITEFUNCTION) { buffer, size, count, context in
            guard let buffer, let context else { return 0 }
            Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue().body.append(
                contentsOf: UnsafeRawBufferPointer(start: buffer, count: size &* count))
            return size &* count
        }
        let code = withExtendedLifetime(sink) { api.pointee.easy_perform(handle) }
        var status = 0
        _ = c_oauthflow_curl_easy_getinfo_long(api, handle, CURLINFO_RESPONSE_CODE, &status)
        if pooled { pool.withLock { $0.append(easy) } }
        guard code == CURLE_OK else { return .failure(OAuthError(.transport, message: "curl_easy_perform failed: \(code.rawValue)")) }
        return .success(HTTPResponse(status: status, body: sink.body))
    }
}

/// A blocking HTTP/1.1 keep-alive client for plain http on loopback: one connection, requests in
/// series (a lock). Good enough to measure what OAuthFlow costs without URLSession.
final class RawSocketTransport: HTTPTransport {
    private let socket = Mutex<Int32>(-1)
    private let host: String
    private let port: UInt16

    init?(url: URL) {
        guard url.scheme == "http", let host = url.host else { return nil }
        self.host = host
        self.port = UInt16(url.port ?? 80)
    }

    private func connectSocket() -> Int32 {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        var head = "\(request.method) \(request.url.path) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
        for header in request.headers { head += "\(header.name): \(header.value)\r\n" }
        let body = request.body ?? Data()
        head += "Content-Length: \(body.count)\r\n\r\n"
        var wire = Array(head.utf8)
        wire.append(contentsOf: body)
        let result = socket.withLock { fd -> HTTPResponse? in
            if fd < 0 { fd = connectSocket() }
            guard fd >= 0 else { return nil }
            let response = exchange(fd, wire)
            if response == nil {
                close(fd)
                fd = -1
            }
            return response
        }
        guard let result else { throw OAuthError(.transport, message: "raw socket exchange failed") }
        return result
    }

    /// Writes the request; reads the header block and a Content-Length body.
    private func exchange(_ fd: Int32, _ wire: [UInt8]) -> HTTPResponse? {
        var written = 0
        while written < wire.count {
            let n = wire.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, wire.count - written) }
            guard n > 0 else { return nil }
            written += n
        }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var headerEnd = -1
        while headerEnd < 0 {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, 4096) }
            guard n > 0 else { return nil }
            buffer.append(contentsOf: chunk[0..<n])
            if buffer.count >= 4 {
                for i in max(0, buffer.count - n - 3)...(buffer.count - 4)
                where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                    headerEnd = i + 4
                    break
                }
            }
        }
        let lines = String(decoding: buffer[0..<headerEnd], as: UTF8.self).split(separator: "\r\n")
        guard let statusLine = lines.first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" })
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        while buffer.count - headerEnd < length {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, 4096) }
            guard n > 0 else { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
        return HTTPResponse(status: status, headers: headers, body: Data(buffer[headerEnd..<(headerEnd + length)]))
    }
}

/// Times `body` `count` times (after `warmup` untimed calls); prints count, errors, median, p99 and
/// the rate as `<label>_<rateMetric>`. `errorsSoFar` adds failures counted before (a caller's own warm-up).
func timeSequential(
    _ config: Config, _ label: String, count: Int, warmup: Int, errorsSoFar: Int = 0, rateMetric: String = "per_s",
    _ body: () async -> Bool
) async {
    var latencies: [Double] = []
    latencies.reserveCapacity(count)
    var errors = errorsSoFar
    for _ in 0..<warmup { _ = await body() }
    let start = monotonicNs()
    for _ in 0..<count {
        let t0 = monotonicNs()
        if t0 >= config.deadline { break }
        if await body() { latencies.append(Double(monotonicNs() - t0) / 1e3) } else { errors += 1 }
    }
    let elapsed = Double(monotonicNs() - start) / 1e9
    latencies.sort()
    config.result("\(label)_count", latencies.count)
    config.result("\(label)_errors", errors)
    config.result("\(label)_median_us", median(latencies))
    config.result("\(label)_p99_us", percentile(latencies, 99))
    config.result("\(label)_\(rateMetric)", Double(latencies.count) / elapsed)
}

/// Average ns of `body` over `count` calls.
func timeMicro(_ config: Config, _ label: String, count: Int, _ body: () -> Int) {
    var sink = 0
    for _ in 0..<min(count, 1000) { sink &+= body() }
    let start = monotonicNs()
    for _ in 0..<count { sink &+= body() }
    let elapsed = Double(monotonicNs() - start)
    if sink == 42 { warn("") }
    config.result("\(label)_ns_per_op", elapsed / Double(count))
}

/// Only AuthFlow.clientCredentials over the raw socket transport (for profiling AuthFlow's own work).
func runDiagAuthFlowRaw(_ config: Config) async -> Int32 {
    guard let url = URL(string: config.tokenURL), let raw = RawSocketTransport(url: url),
          let flow = await makeFlow(config, transport: raw) else { return 1 }
    await timeSequential(config, "authflow_rawsocket", count: config.m1N, warmup: config.warmup) { await fetch(flow) }
    return 0
}

/// Answers every request at once with the harness's token response: no socket, no thread.
struct InstantTransport: HTTPTransport {
    let response = HTTPResponse(
        status: 200, headers: ["Content-Type": "application/json", "Content-Length": String(benchTokenBody.count)], body: benchTokenBody)

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse { response }
}

/// AuthFlow.clientCredentials over ``InstantTransport``: the pipeline's own cost per fetch (request
/// building, the token response, the store's lock and save, the cache, the state publications),
/// without any I/O. Under callgrind, the difference of two counts gives its instructions per fetch.
func runDiagPipeline(_ config: Config) async -> Int32 {
    guard let flow = await makeFlow(config, transport: InstantTransport()) else { return 1 }
    await timeSequential(config, "pipeline", count: config.m1N, warmup: config.warmup) { await fetch(flow) }
    return 0
}

func runDiagTransports(_ config: Config) async -> Int32 {
    guard let url = URL(string: config.tokenURL), let raw = RawSocketTransport(url: url) else {
        warn("diag-transports needs an http:// BENCH_TOKEN_URL")
        return 1
    }
    let credentials = Data("\(config.clientID):\(config.clientSecret)".utf8).base64EncodedString()
    let request = HTTPRequest(
        method: "POST", url: url,
        headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                  ("User-Agent", "OAuthFlow/0.1"), ("Authorization", "Basic \(credentials)")],
        body: Data("grant_type=client_credentials".utf8))
    let n = config.m1N
    let warmup = config.warmup

    let multi = makeTransport(connections: config.m2Concurrency)
    await timeSequential(config, "curl_multi", count: n, warmup: warmup) {
        do { return try await multi.send(request).status == 200 } catch { return false }
    }
    if let fresh = EasyPerformTransport(pooled: false) {
        await timeSequential(config, "curl_easy_fresh", count: n, warmup: warmup) {
            do { return try await fresh.send(request).status == 200 } catch { return false }
        }
    }
    if let pooled = EasyPerformTransport(pooled: true) {
        await timeSequential(config, "curl_easy_pooled", count: n, warmup: warmup) {
            do { return try await pooled.send(request).status == 200 } catch { return false }
        }
    }
    await timeSequential(config, "curl_multi_again", count: n, warmup: warmup) {
        do { return try await multi.send(request).status == 200 } catch { return false }
    }
    await timeSequential(config, "rawsocket", count: n, warmup: warmup) {
        do { return try await raw.send(request).status == 200 } catch { return false }
    }
    if let flow = await makeFlow(config, transport: raw) {
        await timeSequential(config, "authflow_rawsocket", count: n, warmup: warmup) { await fetch(flow) }
    }
    if let flow = await makeFlow(config, transport: multi) {
        await timeSequential(config, "authflow_curl", count: n, warmup: warmup) { await fetch(flow) }
    }

    // Pieces of AuthFlow's per-fetch work, measured alone: the library's parser, and the old
    // entry encoding for comparison. (JSONSerialization, once compared here too, is not in
    // FoundationEssentials, which is all this executable links.)
    timeMicro(config, "json_parse_token_body", count: 20_000) {
        (try? JSONValue.parse(benchTokenBody))?.objectValue?.count ?? 0
    }
    let set = TokenSet(
        providerID: providerID, accessToken: Secret("bench-access-token-0123456789abcdef"),
        refreshToken: Secret("bench-refresh-token-0123456789abcdef"), issuedAt: Date(),
        expiresAt: Date().addingTimeInterval(3600), grant: .clientCredentials)
    timeMicro(config, "store_entry_jsonencoder", count: 20_000) {
        // What AuthFlow.save did per fetch before StoredEntry wrote its bytes directly: a fresh
        // JSONEncoder, sorted keys, seconds since 1970 (kept for comparison).
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(SeedEnvelope(tokens: set)))?.count ?? 0
    }
    return 0
}

// MARK: - diag-pkce: where PKCE()'s time goes

/// Base64url the way OAuthFlow's Base64URL.encode once did it (Foundation base64, then three
/// replacements), for comparison with a byte-level mapping.
func base64URLViaReplacing(_ bytes: [UInt8]) -> String {
    let base64 = Data(bytes).base64EncodedString()
    return ASCIIText.replacing(UInt8(ascii: "="), in: ASCIIText.replacing(UInt8(ascii: "/"), in: ASCIIText.replacing(UInt8(ascii: "+"), in: base64, with: "-"), with: "_"), with: "")
}

/// The same result by mapping the base64 bytes once.
func base64URLViaBytes(_ bytes: [UInt8]) -> String {
    let base64 = Data(bytes).base64EncodedData()
    var out = [UInt8]()
    out.reserveCapacity(base64.count)
    for byte in base64 {
        switch byte {
        case UInt8(ascii: "+"): out.append(UInt8(ascii: "-"))
        case UInt8(ascii: "/"): out.append(UInt8(ascii: "_"))
        case UInt8(ascii: "="): continue
        default: out.append(byte)
        }
    }
    return String(decoding: out, as: UTF8.self)
}

func runDiagPKCE(_ config: Config) -> Int32 {
    let n = min(config.pkceN, 50_000)
    timeMicro(config, "pkce_init", count: n) { ((try? PKCE())?.challenge.utf8.count) ?? 0 }
    // The random and digest choices PKCE() made, measured side by side (CPU time as well: a busy
    // machine disturbs it less).
    var random = [UInt8](repeating: 0, count: 64)
    timeCPU(config, "random32_getrandom", count: n) {
        random.withUnsafeMutableBytes { Int(c_oauthflow_getrandom($0.baseAddress, 32)) + 1 }
    }
    // libcrypto is opened with dlopen, not linked (see Sources/COpenSSL/shim.h): this table is the benchmark's own.
    var crypto = c_oauthflow_crypto_api()
    if c_oauthflow_crypto_load(&crypto) == 0 {
        timeCPU(config, "random32_RAND_bytes", count: n) {
            random.withUnsafeMutableBytes { Int(crypto.RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), 32)) }
        }
        let sha256 = crypto.EVP_MD_fetch(nil, "SHA256", nil)
        var length: UInt32 = 0
        timeCPU(config, "sha256_43_EVP_Digest_fetched", count: n) {
            random.withUnsafeMutableBytes { Int(crypto.EVP_Digest($0.baseAddress, 43, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, sha256, nil)) }
        }
        timeCPU(config, "sha256_43_SHA256_one_shot", count: n) {
            random.withUnsafeMutableBytes { buffer in
                var context = SHA256_CTX()
                let ok = crypto.SHA256_Init(&context) == 1 && crypto.SHA256_Update(&context, buffer.baseAddress, 43) == 1
                    && crypto.SHA256_Final(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &context) == 1
                return ok ? 1 : 0
            }
        }
        crypto.EVP_MD_free(sha256)
    } else {
        warn("libcrypto.so.3 could not be loaded; RAND_bytes and SHA-256 variants skipped")
    }
    let verifier = Secret("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
    timeMicro(config, "pkce_init_verifier", count: n) { ((try? PKCE(verifier: verifier))?.challenge.utf8.count) ?? 0 }
    let bytes = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 73 &+ 41) }  // mixed bytes, some "+" and "/"
    timeMicro(config, "base64url_replacing", count: n) { base64URLViaReplacing(bytes).utf8.count }
    timeMicro(config, "base64url_bytes", count: n) { base64URLViaBytes(bytes).utf8.count }
    if base64URLViaBytes(bytes) != base64URLViaReplacing(bytes) { warn("base64url variants disagree") }
    timeMicro(config, "allowed_set_build", count: n) {
        Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~").count
    }
    let raw = verifier.reveal()
    let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    timeMicro(config, "allowed_check_characters", count: n) { raw.allSatisfy(allowed.contains) ? 1 : 0 }
    return 0
}

// MARK: - diag-idtoken: ID token validation (OpenID Connect Core §3.1.3.7)

/// Validates a realistic ID token (Google-sized claims, `at_hash`, a nonce, a JWKS of three keys)
/// with a key generated at start-up, for RS256 (RSA-2048) and ES256 (P-256). Reports the whole
/// validation (`idtoken_<alg>_validate_ns_per_op`: JWS parse, key selection, signature, claims
/// JSON, every check) and its parts: the signature alone and the JWKS import of one set.
/// BENCH_IDTOKEN_N sets the number of validations per algorithm (default 5000). Each figure is
/// given as wall time and as this thread's CPU time (`_cpu_ns_per_op`), which a busy machine
/// disturbs much less.
func runDiagIDToken(_ config: Config) -> Int32 {
    let n = Config.envInt("BENCH_IDTOKEN_N", 5000)
    let now = Date()
    let issuer = "https://accounts.example.com"
    let clientID = "1234987819200.apps.example.com"
    let accessToken = Secret("ya29.a0AfH6SMC-bench-access-token-0123456789abcdefghijklmnopqrstuvwxyz")
    for (algorithm, label) in [(JWSAlgorithm.rs256, "rs256"), (.es256, "es256")] {
        do {
            let key = algorithm == .rs256 ? try SigningKey.rsa() : try SigningKey.ec(.p256)
            let other = try SigningKey.ec(.p384)
            let other2 = try SigningKey.ed25519()
            let jwks = Data(#"{"keys":[\#(try other.publicJWK(kid: "a")),\#(try key.publicJWK(kid: "b", algorithm: algorithm.rawValue)),\#(try other2.publicJWK(kid: "c"))]}"#.utf8)
            let keys = try JWKSet(json: jwks)
            let atHash = try IDTokenValidator.halfHash(accessToken, algorithm: algorithm)
            let seconds = Int(now.timeIntervalSince1970)
            let claims = #"{"iss":"\#(issuer)","azp":"\#(clientID)","aud":"\#(clientID)","sub":"110169484474386276334","#
                + #""at_hash":"\#(atHash)","hd":"example.com","email":"jane.doe@example.com","email_verified":true,"#
                + #""iat":\#(seconds - 10),"exp":\#(seconds + 3600),"nonce":"0394852-3190485-2490358","#
                + #""name":"Jane Doe","picture":"https://lh3.example.com/a/photo.jpg","given_name":"Jane","family_name":"Doe","locale":"en"}"#
            let token = try key.compact(header: #"{"alg":"\#(algorithm.rawValue)","kid":"b","typ":"JWT"}"#, payload: claims, algorithm: algorithm)
            let validator = IDTokenValidator(issuer: issuer, clientID: clientID, allowedAlgorithms: [.rs256, .es256])
            let expectations = IDTokenValidator.Expectations(nonce: Secret("0394852-3190485-2490358"), accessToken: accessToken)
            let secret = Secret(token)
            // One validation outside the loop: a failure here is a bug, not a number.
            _ = try validator.validate(secret, keys: keys, now: now, expecting: expectations)
            config.result("idtoken_\(label)_token_bytes", token.utf8.count)
            timeCPU(config, "idtoken_\(label)_validate", count: n) {
                ((try? validator.validate(secret, keys: keys, now: now, expecting: expectations))?.subject.utf8.count) ?? 0
            }
            let jws = try JWS(compact: token)
            timeCPU(config, "idtoken_\(label)_signature_only", count: n) {
                ((try? key.publicKey.verify(algorithm, signingInput: jws.signingInput, signature: jws.signature)) == true) ? 1 : 0
            }
            timeCPU(config, "idtoken_\(label)_jws_parse", count: n) { ((try? JWS(compact: token))?.payload.count) ?? 0 }
            let payload = Data(jws.payload)
            timeCPU(config, "idtoken_\(label)_claims_json", count: n) { ((try? JSONValue.parse(payload))?.objectValue?.count) ?? 0 }
            timeCPU(config, "idtoken_\(label)_jwks_import", count: max(1, n / 10)) {
                (try? JWKSet(json: jwks)) == nil ? 0 : 1
            }
        } catch {
            warn("diag-idtoken \(label): \(error)")
            return 1
        }
    }
    return 0
}

/// `diag-dpop`: one DPoP proof for a resource request (claims, `jti`, `ath`, ES256 or EdDSA
/// signature, encoding), as `TokenSource.authorizationHeaders(method:url:)` makes it for a cached
/// DPoP-bound token, against a bare `EVP_DigestSign` of the same signing input with a key of the
/// same algorithm (es256.pem, eddsa.pem of diag-assertion's key directory, through the benchmark's
/// own libcrypto table), in three alternating rounds of process CPU time; `dpop_<alg>_ratio` is
/// proof CPU time over bare CPU time (issue 18: at most 1.3).
func runDiagDPoP(_ config: Config) async -> Int32 {
    let n = Config.envInt("BENCH_DPOP_N", 5000)
    var api = c_oauthflow_crypto_api()
    guard c_oauthflow_crypto_load(&api) == 0 else {
        warn("diag-dpop: libcrypto.so.3 could not be loaded")
        return 1
    }
    guard let dir = assertionKeyDirectory() else { return 1 }
    let url = URL(string: "https://api.example.com/v1/invoices")!
    func processCPUNs() -> UInt64 { clockNs(CLOCK_PROCESS_CPUTIME_ID) }
    for (name, file, digestName) in [("ES256", "es256.pem", Optional("SHA256")), ("EdDSA", "eddsa.pem", nil)] {
        let label = "dpop_\(name.lowercased())"
        var provider = Provider(id: "dpop", tokenURL: URL(string: "https://bench.invalid/dpop-token")!, clientID: "bench-client",
                                clientSecret: Secret("bench-secret"))
        provider.dpop = .enabled
        provider.dpopAlgorithm = SigningAlgorithm(rawValue: name)
        let source: TokenSource
        let input: [UInt8]
        let bare: BareSigner
        do {
            let flow = try await AuthFlow(providers: [provider], store: MemorySecretStore(), transport: DPoPBenchTransport())
            guard try await flow.clientCredentials(provider: "dpop").isDPoPBound else {
                warn("diag-dpop \(name): the primed token is not DPoP-bound")
                return 1
            }
            source = flow.tokenSource(for: "dpop")
            guard let proof = try await source.authorizationHeaders(method: "GET", url: url).dpop?.reveal() else {
                warn("diag-dpop \(name): no DPoP proof")
                return 1
            }
            input = jwsSigningInput(proof)
            let pem = String(decoding: try Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(file)")), as: UTF8.self)
            guard let signer = withUnsafeMutablePointer(to: &api, { BareSigner(api: $0, pem: pem, digestName: digestName) }) else {
                warn("diag-dpop \(name): the benchmark's libcrypto cannot read \(dir)/\(file)")
                return 1
            }
            bare = signer
        } catch {
            warn("diag-dpop \(name): \(error)")
            return 1
        }
        var signature = [UInt8](repeating: 0, count: 1024)
        var sink = 0
        func proofLength() async -> Int { ((try? await source.authorizationHeaders(method: "GET", url: url))?.dpop?.reveal().utf8.count) ?? 0 }
        guard bare.sign(input, into: &signature) > 0, await proofLength() > 0 else {
            warn("diag-dpop \(name): signing failed")
            return 1
        }
        for _ in 0..<100 {
            sink &+= bare.sign(input, into: &signature)
            sink &+= await proofLength()
        }
        var bareCPU: UInt64 = 0
        var proofCPU: UInt64 = 0
        for _ in 0..<3 {
            var start = processCPUNs()
            for _ in 0..<n { sink &+= bare.sign(input, into: &signature) }
            bareCPU += processCPUNs() - start
            start = processCPUNs()
            for _ in 0..<n { sink &+= await proofLength() }
            proofCPU += processCPUNs() - start
        }
        if sink == 42 { warn("") }
        config.result("\(label)_bare_sign_cpu_ns_per_op", Double(bareCPU) / Double(3 * n))
        config.result("\(label)_proof_cpu_ns_per_op", Double(proofCPU) / Double(3 * n))
        config.result("\(label)_ratio", Double(proofCPU) / Double(max(bareCPU, 1)))
    }
    return 0
}

/// Like `timeMicro`, plus the calling thread's CPU time per call (`CLOCK_THREAD_CPUTIME_ID`).
func timeCPU(_ config: Config, _ label: String, count: Int, _ body: () -> Int) {
    func threadCPUNs() -> UInt64 { clockNs(CLOCK_THREAD_CPUTIME_ID) }
    var sink = 0
    for _ in 0..<min(count, 1000) { sink &+= body() }
    let start = monotonicNs()
    let cpuStart = threadCPUNs()
    for _ in 0..<count { sink &+= body() }
    let cpu = Double(threadCPUNs() - cpuStart)
    let elapsed = Double(monotonicNs() - start)
    if sink == 42 { warn("") }
    config.result("\(label)_ns_per_op", elapsed / Double(count))
    config.result("\(label)_cpu_ns_per_op", cpu / Double(count))
}

// MARK: - diag-fleet: what the PostgreSQL fleet store adds to a refresh

/// `diag-fleet`: `AuthFlow.refresh(provider:)` of a client-credentials provider (a re-fetch under the
/// store's lock) with a `MemorySecretStore` (the bare fetch) and with a `PostgresSecretStore`
/// (advisory lock + load + sealed save in one transaction), both over the raw socket transport;
/// then the store's part alone. `BENCH_PG` is the libpq connection string (table `oauthflow_bench`).
func runDiagFleet(_ config: Config) async -> Int32 {
    let conninfo = Config.env("BENCH_PG", "")
    guard !conninfo.isEmpty, let url = URL(string: config.tokenURL), let raw = RawSocketTransport(url: url),
          let provider = makeProvider(config) else {
        warn("diag-fleet needs BENCH_PG (a libpq connection string) and an http:// BENCH_TOKEN_URL")
        return 1
    }
    do {
        let store = try PostgresSecretStore(connection: conninfo, encryption: EntryEncryption(key: StoreKey.generate()),
                                            options: .init(table: "oauthflow_bench"))
        let bare = try await AuthFlow(providers: [provider], store: MemorySecretStore(), transport: raw)
        let fleet = try await AuthFlow(providers: [provider], store: store, transport: raw)
        try await bare.clientCredentials(provider: providerID)
        try await fleet.clientCredentials(provider: providerID)
        await timeSequential(config, "fleet_bare_refresh", count: config.m1N, warmup: config.warmup) {
            do { return try await bare.refresh(provider: providerID).grant == .clientCredentials } catch { reportFirstError(error); return false }
        }
        await timeSequential(config, "fleet_pg_refresh", count: config.m1N, warmup: config.warmup) {
            do { return try await fleet.refresh(provider: providerID).grant == .clientCredentials } catch { reportFirstError(error); return false }
        }
        await timeSequential(config, "fleet_pg_lock_load_save", count: config.m1N, warmup: config.warmup) {
            do {
                return try await store.withExclusiveAccess(to: providerID) { () async throws(OAuthError) -> Bool in
                    guard let data = try await store.load(providerID) else { return false }
                    try await store.save(data, for: providerID)
                    return true
                }
            } catch {
                reportFirstError(error)
                return false
            }
        }
        try await store.delete(providerID)
        return 0
    } catch {
        warn("diag-fleet failed: \(error)")
        return 1
    }
}

// MARK: - Hand-offs per fetch

/// Context switches of this process's threads so far, by thread name (`comm`), from
/// `/proc/self/task/*/status` (voluntary + involuntary); threads of the same name are added up.
func contextSwitchesByThread() -> [String: (voluntary: Int, involuntary: Int)] {
    var totals: [String: (voluntary: Int, involuntary: Int)] = [:]
    guard let directory = opendir("/proc/self/task") else { return totals }
    defer { closedir(directory) }
    while let entry = readdir(directory) {
        let id = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard id.first?.isNumber == true, let bytes = readFile("/proc/self/task/\(id)/status") else { continue }
        var name = "?"
        var voluntary = 0
        var involuntary = 0
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = parts[1].trimmingPrefix(while: { $0 == " " || $0 == "\t" })
            switch parts[0] {
            case "Name": name = String(value)
            case "voluntary_ctxt_switches": voluntary = Int(value) ?? 0
            case "nonvoluntary_ctxt_switches": involuntary = Int(value) ?? 0
            default: break
            }
        }
        let sum = totals[name] ?? (0, 0)
        totals[name] = (sum.voluntary + voluntary, sum.involuntary + involuntary)
    }
    return totals
}

/// Context switches per fetch, wall-clock-free: `count` sequential fetches through `CurlTransport`
/// alone and through `AuthFlow.clientCredentials` over it (the M1 path), each after `warmup` untimed
/// ones, reporting the process's voluntary and involuntary context switches per fetch
/// (`getrusage`) and the voluntary ones of each kind of thread (`/proc/self/task`): `engine`
/// (libcurl's, `OAuthFlow.curl`), `pool` (the cooperative pool's Dispatch workers), `other`. A
/// thread that sleeps until another wakes it (a hand-off) makes a voluntary switch. On a busy
/// machine some of these become involuntary ones (the CPU was taken before the thread slept), so
/// compare the sum, and builds in the same minutes; no wall clock is read.
func runDiagHandoffs(_ config: Config) async -> Int32 {
    guard let url = URL(string: config.tokenURL) else { return 1 }
    let transport = CurlTransport()
    guard let flow = await makeFlow(config, transport: transport) else { return 1 }
    let credentials = Data("\(config.clientID):\(config.clientSecret)".utf8).base64EncodedString()
    let request = HTTPRequest(
        method: "POST", url: url,
        headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                  ("Authorization", "Basic \(credentials)")],
        body: Data("grant_type=client_credentials".utf8))
    func measure(_ label: String, _ body: () async -> Bool) async {
        for _ in 0..<config.warmup { _ = await body() }
        var before = rusage()
        getrusage(RUSAGE_SELF.rawValue, &before)
        let threadsBefore = contextSwitchesByThread()
        var done = 0
        var errors = 0
        for _ in 0..<config.m1N where !config.pastDeadline {
            if await body() { done += 1 } else { errors += 1 }
        }
        var after = rusage()
        getrusage(RUSAGE_SELF.rawValue, &after)
        let threadsAfter = contextSwitchesByThread()
        let fetches = Double(max(1, done + errors))
        config.result("\(label)_count", done)
        config.result("\(label)_errors", errors)
        config.result("\(label)_voluntary_switches_per_fetch", Double(after.ru_nvcsw - before.ru_nvcsw) / fetches)
        config.result("\(label)_involuntary_switches_per_fetch", Double(after.ru_nivcsw - before.ru_nivcsw) / fetches)
        // The engine thread; Dispatch's workers (the cooperative pool: `comm` keeps the end of
        // "com.apple.root.default-qos"); everything else (the main thread, the overcommit queue).
        var kinds: [String: Int] = ["engine": 0, "pool": 0, "other": 0]
        for (name, counts) in threadsAfter {
            let kind = name == "OAuthFlow.curl" ? "engine" : name.hasSuffix("default-qos") ? "pool" : "other"
            kinds[kind, default: 0] += counts.voluntary - (threadsBefore[name]?.voluntary ?? 0)
        }
        for (kind, count) in kinds.sorted(by: { $0.key < $1.key }) {
            config.result("\(label)_voluntary_switches_per_fetch_\(kind)", Double(count) / fetches)
        }
    }
    await measure("transport") {
        do { return try await transport.send(request).status == 200 } catch { return false }
    }
    await measure("authflow") { await fetch(flow) }
    return 0
}
