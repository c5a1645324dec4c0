// Diagnostic modes of oauthflow-bench (not part of the harness contract; see Documentation/Performance.md).
//
// `diag-transports`: the same sequential token request through several transports, to split
// one fetch's time into "URLSession on Linux" and "OAuthFlow's own work":
//   - urlsession-delegate: OAuthFlow's URLSessionTransport (delegate, streaming size cap)
//   - urlsession-delegate-nocookies: the same with httpCookieAcceptPolicy .never
//   - urlsession-completion: a bare URLSession data task with a completion handler (no delegate)
//   - rawsocket: a blocking HTTP/1.1 keep-alive socket (a floor for any transport in Swift)
//   - authflow+rawsocket: AuthFlow.clientCredentials over the raw socket transport, i.e. the
//     library's cost without URLSession
// plus micro-timings of the pieces AuthFlow runs per fetch (JSON parse, store encode).
// `diag-authflow-raw`: only the authflow+rawsocket loop, for profiling.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import OAuthFlow
import Synchronization

/// The token body nginx returns (what every fetch parses).
let benchTokenBody = Data(
    #"{"access_token":"bench-access-token-0123456789abcdef","token_type":"Bearer","expires_in":3600,"refresh_token":"bench-refresh-token-0123456789abcdef"}"#
        .utf8)

/// A bare URLSession with a completion handler: one delegate-queue hop per request instead of three.
final class CompletionHandlerTransport: HTTPTransport {
    private let session: URLSession

    init(connections: Int) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = connections
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        session = URLSession(configuration: configuration)
    }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 30)
        urlRequest.httpMethod = request.method
        for header in request.headers { urlRequest.addValue(header.value, forHTTPHeaderField: header.name) }
        urlRequest.httpBody = request.body
        do {
            return try await withCheckedThrowingContinuation { continuation in
                session.dataTask(with: urlRequest) { data, response, error in
                    if let error { return continuation.resume(throwing: error) }
                    guard let http = response as? HTTPURLResponse else {
                        return continuation.resume(throwing: URLError(.badServerResponse))
                    }
                    var headers: [String: String] = [:]
                    for (key, value) in http.allHeaderFields {
                        if let key = key as? String, let value = value as? String { headers[key] = value }
                    }
                    continuation.resume(returning: HTTPResponse(status: http.statusCode, headers: headers, body: data ?? Data()))
                }.resume()
            }
        } catch {
            throw OAuthError(.transport, message: "completion-handler transport failed", underlying: error)
        }
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

    let delegateTransport = makeTransport(connections: config.m2Concurrency)
    await timeSequential(config, "urlsession_delegate", count: n, warmup: warmup) {
        do { return try await delegateTransport.send(request).status == 200 } catch { return false }
    }
    // The same transport with cookie handling off: corelibs parses every header line for cookies
    // unless the accept policy is .never (a nil cookie storage alone does not stop it).
    let noCookies = URLSessionConfiguration.ephemeral
    noCookies.httpMaximumConnectionsPerHost = config.m2Concurrency
    noCookies.httpCookieAcceptPolicy = .never
    noCookies.httpShouldSetCookies = false
    let noCookieTransport = URLSessionTransport(configuration: noCookies)
    await timeSequential(config, "urlsession_delegate_nocookies", count: n, warmup: warmup) {
        do { return try await noCookieTransport.send(request).status == 200 } catch { return false }
    }
    await timeSequential(config, "urlsession_delegate_again", count: n, warmup: warmup) {
        do { return try await delegateTransport.send(request).status == 200 } catch { return false }
    }
    let completion = CompletionHandlerTransport(connections: config.m2Concurrency)
    await timeSequential(config, "urlsession_completion", count: n, warmup: warmup) {
        do { return try await completion.send(request).status == 200 } catch { return false }
    }
    await timeSequential(config, "rawsocket", count: n, warmup: warmup) {
        do { return try await raw.send(request).status == 200 } catch { return false }
    }
    if let flow = await makeFlow(config, transport: raw) {
        await timeSequential(config, "authflow_rawsocket", count: n, warmup: warmup) { await fetch(flow) }
    }
    if let flow = await makeFlow(config, transport: delegateTransport) {
        await timeSequential(config, "authflow_urlsession", count: n, warmup: warmup) { await fetch(flow) }
    }

    // Pieces of AuthFlow's per-fetch work, measured alone.
    timeMicro(config, "json_parse_token_body", count: 20_000) {
        ((try? JSONSerialization.jsonObject(with: benchTokenBody)) as? [String: Any])?.count ?? 0
    }
    let set = TokenSet(
        providerID: providerID, accessToken: Secret("bench-access-token-0123456789abcdef"),
        refreshToken: Secret("bench-refresh-token-0123456789abcdef"), issuedAt: Date(),
        expiresAt: Date().addingTimeInterval(3600), grant: .clientCredentials)
    timeMicro(config, "store_entry_encode", count: 20_000) {
        // What AuthFlow.save does per fetch: a fresh JSONEncoder, sorted keys, seconds since 1970.
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(SeedEnvelope(tokens: set)))?.count ?? 0
    }
    return 0
}

// MARK: - diag-pkce: where PKCE()'s time goes

/// Base64url the way OAuthFlow's Base64URL.encode does it (Foundation base64, then three
/// `replacingOccurrences`), for comparison with a byte-level mapping.
func base64URLViaReplacing(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
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

/// Like `timeMicro`, plus the calling thread's CPU time per call (`CLOCK_THREAD_CPUTIME_ID`).
func timeCPU(_ config: Config, _ label: String, count: Int, _ body: () -> Int) {
    func threadCPUNs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
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
