internal import CCurl
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// The default ``HTTPTransport``: the system libcurl, driven by one thread per transport.
///
/// Every request of a transport goes through one `curl_multi` handle, so connections are kept
/// alive and reused per host, and HTTP/2 is used over TLS when the server offers it. libcurl is
/// opened on the first request; creating a transport costs nothing.
///
/// What it enforces, whatever the caller asks:
/// - TLS peer and host name verification against the system CA store (or the bundle in
///   ``caFile``, for a private CA);
/// - `http` and `https` only; redirects are returned as responses, never followed (RFC 9700 §4.11);
/// - a connect timeout and a total deadline per request, which a trickling server cannot extend;
/// - ``maximumBodySize``, checked against `Content-Length` and again while the body arrives: the
///   transfer stops as soon as the limit is passed, so an endless body is never buffered;
/// - cancelling the calling task aborts the transfer.
///
/// Proxies come from the environment as libcurl reads it (`https_proxy`/`HTTPS_PROXY`,
/// `http_proxy` (lower case only), `ALL_PROXY`, `NO_PROXY`) unless ``Proxy`` says otherwise.
///
/// ```swift
/// let flow = try await AuthFlow(providers: providers, transport: CurlTransport(timeout: 10))
/// ```
public final class CurlTransport: HTTPTransport {
    /// Where requests go through a proxy.
    public enum Proxy: Sendable, Hashable {
        /// libcurl's environment variables: `https_proxy`/`HTTPS_PROXY`, `http_proxy`, `ALL_PROXY`, `NO_PROXY`.
        case environment
        /// Never a proxy, whatever the environment says.
        case none
        /// Always this proxy, such as `http://proxy.internal:3128`; `NO_PROXY` still applies.
        case url(URL)
    }

    /// The largest body accepted by default: 1 MiB.
    public static let defaultMaximumBodySize = HTTPTransportDefaults.maximumBodySize

    /// The largest body accepted; a larger one fails with `.invalidResponse`.
    public let maximumBodySize: Int
    /// The total deadline of one request in seconds, from sending to the last byte of the body.
    public let timeout: TimeInterval
    /// How long to wait for the connection (TCP and TLS) in seconds, within ``timeout``.
    public let connectTimeout: TimeInterval
    /// The proxy setting.
    public let proxy: Proxy
    /// A PEM file of CA certificates that server certificates are verified against instead of
    /// libcurl's default bundle (`CURLOPT_CAINFO`), for servers with a private CA; nil for the
    /// default. Verification stays on either way. A CA directory libcurl was built with (Debian:
    /// `/etc/ssl/certs`) still applies; an unreadable file fails each HTTPS request with `.transport`.
    public let caFile: URL?

    private let engine = Mutex<CurlEngine?>(nil)

    /// Creates a transport; nothing is loaded or started until the first request.
    /// - Parameters:
    ///   - maximumBodySize: bodies beyond this many bytes fail with `.invalidResponse`.
    ///   - timeout: the total deadline of each request, in seconds (30 s, as `URLSessionTransport`).
    ///   - connectTimeout: the deadline for connecting, in seconds; at most `timeout`.
    ///   - proxy: ``Proxy/environment`` by default.
    ///   - caFile: a PEM bundle of the CAs to trust instead of libcurl's default bundle (see ``caFile``).
    public init(
        maximumBodySize: Int = CurlTransport.defaultMaximumBodySize, timeout: TimeInterval = 30,
        connectTimeout: TimeInterval = 10, proxy: Proxy = .environment, caFile: URL? = nil
    ) {
        self.maximumBodySize = max(0, maximumBodySize)
        let total = timeout.isFinite && timeout > 0 ? min(timeout, 86_400) : 30
        self.timeout = total
        self.connectTimeout = connectTimeout.isFinite && connectTimeout > 0 ? min(connectTimeout, total) : min(10, total)
        self.proxy = proxy
        self.caFile = caFile
    }

    deinit { engine.withLock { $0?.stop() } }

    /// Sends `request`; a 3xx comes back as a response, never followed.
    /// - Throws: ``OAuthError`` `.transport` when no complete response arrived (refused, TLS rejected, a
    ///   deadline passed: the message says which), `.cancelled` when the task was cancelled,
    ///   `.invalidResponse` for a body over ``maximumBodySize``, `.configuration` when libcurl cannot be loaded.
    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let engine = try runningEngine()
        let transfer = try engine.transfer(for: request)
        let result = await withTaskCancellationHandler {
            // Resumed exactly once, by the engine thread (`CurlTransfer.finish`).
            await withUnsafeContinuation { continuation in
                transfer.continuation = continuation
                engine.add(transfer)
            }
        } onCancel: {
            engine.cancel(transfer)
        }
        return try result.get()
    }

    private func runningEngine() throws(OAuthError) -> CurlEngine {
        let library = try CurlLibrary.shared.get()
        let made = engine.withLock { engine -> CurlEngine? in
            if let engine { return engine }
            engine = CurlEngine(library, settings: CurlSettings(self))
            return engine
        }
        guard let made else { throw OAuthError(.transport, message: "libcurl could not create a multi handle, or no thread could be started") }
        return made
    }
}

/// What a transport fixes for all its requests: set once on each easy handle it creates.
struct CurlSettings: Sendable {
    let maximumBodySize: Int
    let timeout: TimeInterval
    let connectTimeout: TimeInterval
    let proxy: CurlTransport.Proxy
    let caFile: URL?

    init(_ transport: CurlTransport) {
        maximumBodySize = transport.maximumBodySize
        timeout = transport.timeout
        connectTimeout = transport.connectTimeout
        proxy = transport.proxy
        caFile = transport.caFile
    }
}

/// One request: its easy handle, its header list, and the response as it arrives.
///
/// Built on the caller's thread; once handed to the engine it is touched only on the engine's thread
/// (callbacks and completion), except ``cancelled``.
final class CurlTransfer: @unchecked Sendable {   // safe: mutable state is used by one thread at a time (caller, then engine); `cancelled` is atomic
    let easy: CurlEasyHandle
    private let headerList: CurlHeaderList
    private let limit: Int
    private let url: URL
    private let timeout: TimeInterval
    private let connectTimeout: TimeInterval
    var continuation: UnsafeContinuation<Result<HTTPResponse, OAuthError>, Never>?
    let cancelled = Atomic<Bool>(false)
    /// True while the handle is in the multi (engine thread only).
    var isActive = false

    /// The response as it arrives; the callbacks change it through one `inout` access each.
    private var response = Response()

    struct Response {
        var headers: [String: String] = [:]
        var headerBytes = 0
        var body = Data()
        var tooLarge = false
        var malformed = false
    }

    /// Response headers beyond this many bytes (all lines together) fail the request.
    static let headerLimit = 64 << 10

    /// Points `easy` (fresh or reused, with the transport's settings already on it) at `request`.
    ///
    /// A reused handle keeps the options of its last request, so every option that can differ between
    /// requests is set here each time: URL, method and body, headers, and the callback context.
    init(_ request: HTTPRequest, easy: CurlEasyHandle, headerList: CurlHeaderList, settings: CurlSettings) throws(OAuthError) {
        self.easy = easy
        self.headerList = headerList
        self.limit = settings.maximumBodySize
        self.url = request.url
        self.timeout = settings.timeout
        self.connectTimeout = settings.connectTimeout

        easy.set(CURLOPT_URL, request.url.absoluteString)
        try Self.setMethod(request, on: easy)
        easy.set(CURLOPT_HTTPHEADER, pointer: UnsafeRawPointer(headerList.raw))
        let context = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        easy.set(CURLOPT_WRITEDATA, pointer: context)
        easy.set(CURLOPT_HEADERDATA, pointer: context)
        easy.set(CURLOPT_PRIVATE, pointer: context)
    }

    /// The options every request of a transport shares; set once when a handle is created.
    static func configure(_ easy: CurlEasyHandle, _ settings: CurlSettings) {
        easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_FOLLOWLOCATION, 0)
        easy.set(CURLOPT_SSL_VERIFYPEER, 1)
        easy.set(CURLOPT_SSL_VERIFYHOST, 2)
        easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        easy.set(CURLOPT_NOSIGNAL, 1)
        easy.set(CURLOPT_TCP_NODELAY, 1)
        easy.set(CURLOPT_TIMEOUT_MS, milliseconds(settings.timeout))
        easy.set(CURLOPT_CONNECTTIMEOUT_MS, milliseconds(settings.connectTimeout))
        easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: Int64(settings.maximumBodySize))
        switch settings.proxy {
        case .environment: break
        case .none: easy.set(CURLOPT_PROXY, "")
        case .url(let url): easy.set(CURLOPT_PROXY, url.absoluteString)
        }
        if let caFile = settings.caFile { easy.set(CURLOPT_CAINFO, caFile.path) }
        easy.set(CURLOPT_WRITEFUNCTION, callback: { buffer, size, count, context in
            guard let buffer, let context else { return 0 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size &* count))
        })
        easy.set(CURLOPT_HEADERFUNCTION, callback: { buffer, size, count, context in
            guard let buffer, let context else { return 0 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.receiveHeader(UnsafeRawBufferPointer(start: buffer, count: size &* count))
        })
    }

    private static func setMethod(_ request: HTTPRequest, on easy: CurlEasyHandle) throws(OAuthError) {
        guard isToken(request.method) else {
            throw OAuthError(.configuration, message: "the request method \"\(printable(request.method))\" is malformed")
        }
        // HTTPGET resets what an earlier request on this handle set: POST, NOBODY, upload.
        easy.set(CURLOPT_HTTPGET, 1)
        switch request.method {
        case "GET" where request.body == nil:
            easy.set(CURLOPT_CUSTOMREQUEST, pointer: nil)
        case "HEAD" where request.body == nil:
            easy.set(CURLOPT_CUSTOMREQUEST, pointer: nil)
            easy.set(CURLOPT_NOBODY, 1)
        default:
            let body = request.body ?? Data()
            easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(body.count))
            // COPYPOSTFIELDS copies the bytes (and makes the request a POST), so nothing here has to outlive this call.
            if body.isEmpty {
                easy.set(CURLOPT_COPYPOSTFIELDS, "")
            } else {
                body.withUnsafeBytes { _ = easy.set(CURLOPT_COPYPOSTFIELDS, pointer: $0.baseAddress) }
            }
            if request.method == "POST" {
                easy.set(CURLOPT_CUSTOMREQUEST, pointer: nil)
            } else {
                easy.set(CURLOPT_CUSTOMREQUEST, request.method)
            }
        }
    }

    /// An RFC 9110 token: what a method or a header name may contain.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// At most `limit` printable ASCII characters of `text`, for an error message.
    static func printable(_ text: String, limit: Int = 40) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f ? $0 : "?" }))
    }

    private static func milliseconds(_ seconds: TimeInterval) -> Int { max(1, Int((seconds * 1000).rounded())) }

    private var host: String { url.host ?? "?" }
    private var scheme: String { url.scheme?.lowercased() ?? "" }

    // MARK: Callbacks (engine thread)

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if cancelled.load(ordering: .relaxed) { return 0 }
        return Self.receiveBody(bytes, into: &response, limit: limit)
    }

    private static func receiveBody(_ bytes: UnsafeRawBufferPointer, into response: inout Response, limit: Int) -> Int {
        guard response.body.count <= limit, bytes.count <= limit - response.body.count else {
            response.tooLarge = true
            response.body = Data()
            return 0   // libcurl aborts the transfer (CURLE_WRITE_ERROR)
        }
        response.body.append(contentsOf: bytes)
        return bytes.count
    }

    private func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        Self.receiveHeader(bytes, into: &response, limit: limit)
    }

    /// One header line as libcurl hands it over (with its CR LF). Parsed on bytes: names are
    /// lower-cased ASCII, values trimmed of the spaces and tabs HTTP allows around them (RFC 9110 §5.5);
    /// a field that comes twice is joined with ", " (RFC 9110 §5.3).
    private static func receiveHeader(_ bytes: UnsafeRawBufferPointer, into response: inout Response, limit: Int) -> Int {
        response.headerBytes += bytes.count
        guard response.headerBytes <= headerLimit else {
            response.malformed = true
            return 0
        }
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
        if end >= 5, bytes[0] == UInt8(ascii: "H"), bytes[1] == UInt8(ascii: "T"), bytes[2] == UInt8(ascii: "T"),
           bytes[3] == UInt8(ascii: "P"), bytes[4] == UInt8(ascii: "/") {
            // A new response: an interim 1xx, or a proxy's answer to CONNECT, came before.
            response.headers = Dictionary(minimumCapacity: 12)
            return bytes.count
        }
        guard let colon = bytes[..<end].firstIndex(of: UInt8(ascii: ":")) else { return bytes.count }
        var nameStart = 0
        var nameEnd = colon
        while nameStart < nameEnd, isBlank(bytes[nameStart]) { nameStart += 1 }
        while nameEnd > nameStart, isBlank(bytes[nameEnd - 1]) { nameEnd -= 1 }
        guard nameStart < nameEnd else { return bytes.count }
        var valueStart = colon + 1
        var valueEnd = end
        while valueStart < valueEnd, isBlank(bytes[valueStart]) { valueStart += 1 }
        while valueEnd > valueStart, isBlank(bytes[valueEnd - 1]) { valueEnd -= 1 }
        let name = String(unsafeUninitializedCapacity: nameEnd - nameStart) { out in
            for index in nameStart..<nameEnd {
                let byte = bytes[index]
                out[index - nameStart] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            }
            return nameEnd - nameStart
        }
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[valueStart..<valueEnd]), as: UTF8.self)
        if name == "content-length", let declared = Int(value) {
            if declared > limit {
                response.tooLarge = true
                return 0
            }
            if response.body.isEmpty, declared > 0 { response.body.reserveCapacity(min(declared, 64 << 10)) }
        }
        if let previous = response.headers.updateValue(value, forKey: name) {
            response.headers[name] = previous + ", " + value
        }
        return bytes.count
    }

    @inline(__always)
    private static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    // MARK: Completion (engine thread)

    /// The result for libcurl's `code`; read before the handle goes back to the pool.
    func result(_ code: CURLcode, library: CurlLibrary) -> Result<HTTPResponse, OAuthError> {
        let status = easy.info(CURLINFO_RESPONSE_CODE)
        let response = self.response
        if response.tooLarge || code == CURLE_FILESIZE_EXCEEDED {
            return .failure(OAuthError(.invalidResponse, httpStatus: status == 0 ? nil : status,
                                       message: "the response body from \(host) exceeds \(limit) bytes"))
        }
        if response.malformed {
            return .failure(OAuthError(.invalidResponse, httpStatus: status == 0 ? nil : status,
                                       message: "the response headers from \(host) exceed \(Self.headerLimit) bytes"))
        }
        if cancelled.load(ordering: .relaxed) {
            return .failure(cancellation)
        }
        guard code == CURLE_OK else {
            let underlying = CurlError(code: Int(code.rawValue), text: library.describe(code))
            return .failure(OAuthError(.transport, message: message(for: code, text: underlying.text), underlying: underlying))
        }
        var http = HTTPResponse(status: status, lowercasedHeaders: response.headers, body: response.body)
        http.httpVersion = easy.negotiatedHTTPVersion
        return .success(http)
    }

    var cancellation: OAuthError { OAuthError(.cancelled, message: "the request to \(host) was cancelled") }

    /// Resumes the caller once.
    func finish(_ result: Result<HTTPResponse, OAuthError>) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: result)
    }

    private func message(for code: CURLcode, text: String) -> String {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            if easy.info(offset: CURLINFO_CONNECT_TIME_T) == 0 {
                return "no connection to \(host) within the connect timeout (\(Self.seconds(connectTimeout)))"
            }
            return "no complete response from \(host) within the total deadline (\(Self.seconds(timeout)))"
        case CURLE_COULDNT_CONNECT: return "could not connect to \(host) (refused or unreachable)"
        case CURLE_COULDNT_RESOLVE_HOST: return "could not resolve \(host)"
        case CURLE_COULDNT_RESOLVE_PROXY: return "could not resolve the proxy for \(host)"
        case CURLE_PEER_FAILED_VERIFICATION: return "the TLS certificate of \(host) was rejected"
        case CURLE_SSL_CONNECT_ERROR: return "the TLS handshake with \(host) failed"
        case CURLE_UNSUPPORTED_PROTOCOL:
            // libcurl also reports a reply that is not HTTP (no status line: HTTP/0.9) this way.
            guard scheme != "http" && scheme != "https" else { return "\(host) answered with something that is not HTTP" }
            return "only http and https are allowed (request to \(host))"
        case CURLE_GOT_NOTHING: return "\(host) closed the connection without answering"
        default: return "the request to \(host) failed: \(Self.printable(text, limit: 200))"
        }
    }

    private static func seconds(_ value: TimeInterval) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}

/// A libcurl result code and its standard text, as ``OAuthError/underlying``.
struct CurlError: Error, CustomStringConvertible {
    let code: Int
    let text: String
    var description: String { "curl error \(code): \(text)" }
}

/// One `curl_multi` handle and the thread that drives it with `curl_multi_poll`.
///
/// Callers hand transfers over with ``add(_:)`` and ``cancel(_:)``, which queue a command and wake
/// the thread (`curl_multi_wakeup`) only when it sleeps in `curl_multi_poll`; everything else, the
/// multi handle included, is used only on the thread. Easy handles are kept for reuse (their
/// transport-wide options stay set), and so is the header list of the last request shape.
final class CurlEngine: @unchecked Sendable {   // safe: `multi` and `activeCount` are used only on the engine thread; the rest is a Mutex or atomic
    let library: CurlLibrary
    let settings: CurlSettings
    private let multi: CurlMultiHandle
    private var activeCount = 0

    private struct Commands {
        var added: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var stopping = false
        var isEmpty: Bool { added.isEmpty && cancelled.isEmpty && !stopping }
    }
    private let commands = Mutex(Commands())
    /// True while the thread is in (or about to enter) `curl_multi_poll`: only then does a command wake it.
    private let sleeping = Atomic<Bool>(false)

    /// Idle easy handles, at most ``maximumIdleHandles``.
    private let idleHandles = Mutex<[CurlEasyHandle]>([])
    static let maximumIdleHandles = 64

    /// The header list built for the last request headers, reused while they repeat.
    private struct CachedHeaders {
        var headers: [(name: String, value: String)]
        var sendsBody: Bool
        var list: CurlHeaderList
    }
    private let cachedHeaders = Mutex<CachedHeaders?>(nil)

    init?(_ library: CurlLibrary, settings: CurlSettings) {
        guard let multi = CurlMultiHandle(library) else { return nil }
        self.library = library
        self.settings = settings
        self.multi = multi
        // Keep idle connections to many hosts (and many parallel ones to one host over HTTP/1.1).
        multi.set(CURLMOPT_MAXCONNECTS, 64)
        guard DetachedThread.start(name: "OAuthFlow.curl", { [self] in self.run() }) else { return nil }
    }

    // MARK: Caller side

    /// A transfer for `request` on an idle handle (or a new one) with the header list it needs.
    /// - Throws: ``OAuthError`` `.configuration` for a malformed method or header; `.transport` when libcurl cannot allocate.
    func transfer(for request: HTTPRequest) throws(OAuthError) -> CurlTransfer {
        let sendsBody = !(request.body == nil && (request.method == "GET" || request.method == "HEAD"))
        let list = try headerList(for: request.headers, sendsBody: sendsBody)
        let easy: CurlEasyHandle
        if let idle = idleHandles.withLock({ $0.popLast() }) {
            easy = idle
        } else {
            guard let made = CurlEasyHandle(library) else { throw OAuthError(.transport, message: "libcurl could not create a handle") }
            CurlTransfer.configure(made, settings)
            easy = made
        }
        return try CurlTransfer(request, easy: easy, headerList: list, settings: settings)
    }

    /// The `curl_slist` for `headers` plus `Expect:` (no 100-continue round trip), reused when the
    /// headers (and whether a body is sent) are those of the previous request.
    ///
    /// With a body, `Content-Type: application/x-www-form-urlencoded` is left to libcurl, which
    /// sends exactly that line for a POST without a `Content-Type` of its own (and copies it
    /// without formatting each byte, as it does a custom header line).
    private func headerList(for headers: [(name: String, value: String)], sendsBody: Bool) throws(OAuthError) -> CurlHeaderList {
        if let cached = cachedHeaders.withLock({ cached -> CurlHeaderList? in
            guard let cached, cached.sendsBody == sendsBody, Self.same(cached.headers, headers) else { return nil }
            return cached.list
        }) {
            return cached
        }
        let list = CurlHeaderList(library)
        var hasExpect = false
        for header in headers {
            // Bytes, not Characters: "\r\n" is a single Character and would slip past a Character test.
            guard CurlTransfer.isToken(header.name), !header.value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                throw OAuthError(.configuration, message: "the request header \"\(CurlTransfer.printable(header.name))\" is malformed")
            }
            if Self.equalsIgnoringCase(header.name, "expect") { hasExpect = true }
            if sendsBody, Self.equalsIgnoringCase(header.name, "content-type"), header.value == "application/x-www-form-urlencoded" {
                continue
            }
            // "Name;" is libcurl's spelling of an empty value ("Name:" would remove the header).
            let line = header.value.isEmpty ? header.name + ";" : header.name + ": " + header.value
            guard list.append(line) else { throw OAuthError(.transport, message: "libcurl could not allocate a header") }
        }
        if !hasExpect {
            guard list.append("Expect:") else { throw OAuthError(.transport, message: "libcurl could not allocate a header") }
        }
        cachedHeaders.withLock { $0 = CachedHeaders(headers: headers, sendsBody: sendsBody, list: list) }
        return list
    }

    private static func same(_ a: [(name: String, value: String)], _ b: [(name: String, value: String)]) -> Bool {
        guard a.count == b.count else { return false }
        for index in a.indices where a[index].name != b[index].name || a[index].value != b[index].value { return false }
        return true
    }

    /// ASCII case-insensitive equality with a lower-case `lowercased`.
    private static func equalsIgnoringCase(_ text: String, _ lowercased: StaticString) -> Bool {
        guard text.utf8.count == lowercased.utf8CodeUnitCount else { return false }
        return lowercased.withUTF8Buffer { expected in
            zip(text.utf8, expected).allSatisfy { byte, lower in
                (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == lower
            }
        }
    }

    func add(_ transfer: CurlTransfer) {
        commands.withLock { $0.added.append(transfer) }
        wake()
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelled.store(true, ordering: .relaxed)
        commands.withLock { $0.cancelled.append(transfer) }
        wake()
    }

    /// Ends the thread after it finished what it holds; called when the transport goes away.
    func stop() {
        commands.withLock { $0.stopping = true }
        wake()
    }

    /// Wakes the thread if it sleeps (or is about to): the command was queued before, so either the
    /// thread sees it when it checks the queue after raising `sleeping`, or this sees `sleeping`.
    private func wake() {
        if sleeping.exchange(false, ordering: .sequentiallyConsistent) {
            _ = library.api.pointee.multi_wakeup(multi.raw)
        }
    }

    // MARK: Engine thread

    private func run() {
        let api = library.api
        var running: Int32 = 0
        var left: Int32 = 0
        var next = Commands()
        var stopRequested = false
        while true {
            commands.withLock { swap(&$0, &next) }
            for transfer in next.added {
                if transfer.cancelled.load(ordering: .relaxed) {
                    transfer.finish(.failure(transfer.cancellation))
                } else if api.pointee.multi_add_handle(multi.raw, transfer.easy.raw) != CURLM_OK {
                    transfer.finish(transfer.result(CURLE_FAILED_INIT, library: library))
                } else {
                    // Retained while in the multi; released in `completed` or by the cancellation below.
                    _ = Unmanaged.passRetained(transfer)
                    transfer.isActive = true
                    activeCount += 1
                }
            }
            for transfer in next.cancelled where transfer.isActive {
                _ = api.pointee.multi_remove_handle(multi.raw, transfer.easy.raw)
                transfer.isActive = false
                activeCount -= 1
                transfer.finish(.failure(transfer.cancellation))
                Unmanaged.passUnretained(transfer).release()
            }
            if next.stopping { stopRequested = true }
            next.added.removeAll(keepingCapacity: true)
            next.cancelled.removeAll(keepingCapacity: true)
            next.stopping = false
            if stopRequested && activeCount == 0 { break }

            if activeCount > 0 {
                _ = api.pointee.multi_perform(multi.raw, &running)
                while let message = api.pointee.multi_info_read(multi.raw, &left) {
                    guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
                    completed(handle, code: c_oauthflow_curl_msg_result(message))
                }
            }
            // Waits for socket activity, libcurl's next timeout, or a wake-up from add/cancel/stop.
            sleeping.store(true, ordering: .sequentiallyConsistent)
            if !commands.withLock({ $0.isEmpty }) {
                sleeping.store(false, ordering: .relaxed)
                continue
            }
            _ = api.pointee.multi_poll(multi.raw, nil, 0, 1000, nil)
            sleeping.store(false, ordering: .relaxed)
        }
    }

    /// A transfer libcurl finished: out of the multi, the result read, the handle back in the pool
    /// (after a clean transfer only), then the caller resumed.
    private func completed(_ handle: UnsafeMutableRawPointer, code: CURLcode) {
        var context: UnsafeMutableRawPointer?
        _ = c_oauthflow_curl_easy_getinfo_pointer(library.api, handle, CURLINFO_PRIVATE, &context)
        _ = library.api.pointee.multi_remove_handle(multi.raw, handle)
        guard let context else { return }
        // Every handle in the multi belongs to an active transfer retained by `run`.
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeRetainedValue()
        transfer.isActive = false
        activeCount -= 1
        let result = transfer.result(code, library: library)
        if code == CURLE_OK {
            let easy = transfer.easy
            idleHandles.withLock { idle in
                if idle.count < Self.maximumIdleHandles { idle.append(easy) }
            }
        }
        transfer.finish(result)
    }
}
