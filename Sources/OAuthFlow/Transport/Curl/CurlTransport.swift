internal import CCurl
public import Foundation
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
        let transfer = try CurlTransfer(request, library: engine.library, settings: self)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
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
            engine = CurlEngine(library)
            return engine
        }
        guard let made else { throw OAuthError(.transport, message: "libcurl could not create a multi handle") }
        return made
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
    private let host: String
    private let scheme: String
    private let timeout: TimeInterval
    private let connectTimeout: TimeInterval
    var continuation: CheckedContinuation<Result<HTTPResponse, OAuthError>, Never>?
    let cancelled = Atomic<Bool>(false)

    private var headers: [String: String] = [:]
    private var headerBytes = 0
    private var body = Data()
    private var tooLarge = false
    private var malformed = false

    /// Response headers beyond this many bytes (all lines together) fail the request.
    static let headerLimit = 64 << 10

    init(_ request: HTTPRequest, library: CurlLibrary, settings: CurlTransport) throws(OAuthError) {
        guard let easy = CurlEasyHandle(library) else { throw OAuthError(.transport, message: "libcurl could not create a handle") }
        self.easy = easy
        self.headerList = CurlHeaderList(library)
        self.limit = settings.maximumBodySize
        self.host = request.url.host ?? "?"
        self.scheme = request.url.scheme?.lowercased() ?? ""
        self.timeout = settings.timeout
        self.connectTimeout = settings.connectTimeout

        easy.set(CURLOPT_URL, request.url.absoluteString)
        easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_FOLLOWLOCATION, 0)
        easy.set(CURLOPT_SSL_VERIFYPEER, 1)
        easy.set(CURLOPT_SSL_VERIFYHOST, 2)
        easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        easy.set(CURLOPT_NOSIGNAL, 1)
        easy.set(CURLOPT_TIMEOUT_MS, Self.milliseconds(settings.timeout))
        easy.set(CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(settings.connectTimeout))
        easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: Int64(settings.maximumBodySize))
        switch settings.proxy {
        case .environment: break
        case .none: easy.set(CURLOPT_PROXY, "")
        case .url(let url): easy.set(CURLOPT_PROXY, url.absoluteString)
        }
        if let caFile = settings.caFile { easy.set(CURLOPT_CAINFO, caFile.path) }

        try Self.setMethod(request, on: easy)

        for header in request.headers {
            // Bytes, not Characters: "\r\n" is a single Character and would slip past a Character test.
            guard Self.isToken(header.name), !header.value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                throw OAuthError(.configuration, message: "the request header \"\(Self.printable(header.name))\" is malformed")
            }
            // "Name;" is libcurl's spelling of an empty value ("Name:" would remove the header).
            let line = header.value.isEmpty ? "\(header.name);" : "\(header.name): \(header.value)"
            guard headerList.append(line) else { throw OAuthError(.transport, message: "libcurl could not allocate a header") }
        }
        if request.header("Expect") == nil {   // no 100-continue round trip for bodies over 1 KiB
            guard headerList.append("Expect:") else { throw OAuthError(.transport, message: "libcurl could not allocate a header") }
        }
        easy.set(CURLOPT_HTTPHEADER, pointer: UnsafeRawPointer(headerList.raw))

        let context = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        easy.set(CURLOPT_WRITEDATA, pointer: context)
        easy.set(CURLOPT_HEADERDATA, pointer: context)
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
        switch request.method {
        case "GET" where request.body == nil: easy.set(CURLOPT_HTTPGET, 1)
        case "HEAD" where request.body == nil: easy.set(CURLOPT_NOBODY, 1)
        default:
            if request.method != "POST" { easy.set(CURLOPT_CUSTOMREQUEST, request.method) }
            let body = request.body ?? Data()
            easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(body.count))
            // COPYPOSTFIELDS copies the bytes, so nothing here has to outlive this call.
            if body.isEmpty {
                easy.set(CURLOPT_COPYPOSTFIELDS, "")
            } else {
                body.withUnsafeBytes { _ = easy.set(CURLOPT_COPYPOSTFIELDS, pointer: $0.baseAddress) }
            }
        }
    }

    /// An RFC 9110 token: what a method or a header name may contain.
    private static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// At most `limit` printable ASCII characters of `text`, for an error message.
    private static func printable(_ text: String, limit: Int = 40) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f ? $0 : "?" }))
    }

    private static func milliseconds(_ seconds: TimeInterval) -> Int { max(1, Int((seconds * 1000).rounded())) }

    // MARK: Callbacks (engine thread)

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if cancelled.load(ordering: .relaxed) { return 0 }
        guard body.count <= limit, bytes.count <= limit - body.count else {
            tooLarge = true
            body = Data()
            return 0   // libcurl aborts the transfer (CURLE_WRITE_ERROR)
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    private func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        headerBytes += bytes.count
        guard headerBytes <= Self.headerLimit else {
            malformed = true
            return 0
        }
        var line = Substring(String(decoding: bytes, as: UTF8.self))
        while let last = line.last, last.isNewline { line.removeLast() }   // "\r\n" is one Character
        if line.hasPrefix("HTTP/") {
            headers = [:]   // a new response: an interim 1xx, or a proxy's answer to CONNECT, came before
            return bytes.count
        }
        guard let colon = line.firstIndex(of: ":") else { return bytes.count }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { return bytes.count }
        if name == "content-length", let declared = Int(value), declared > limit {
            tooLarge = true
            return 0
        }
        if let previous = headers[name] { headers[name] = previous + ", " + value } else { headers[name] = value }
        return bytes.count
    }

    // MARK: Completion (engine thread)

    /// Resumes the caller once, with the response or the error for `code`.
    func complete(_ code: CURLcode, library: CurlLibrary) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: result(code, library: library))
    }

    /// Resumes the caller with `.cancelled`.
    func completeCancelled() {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: .failure(OAuthError(.cancelled, message: "the request to \(host) was cancelled")))
    }

    private func result(_ code: CURLcode, library: CurlLibrary) -> Result<HTTPResponse, OAuthError> {
        let status = easy.info(CURLINFO_RESPONSE_CODE)
        if tooLarge || code == CURLE_FILESIZE_EXCEEDED {
            return .failure(OAuthError(.invalidResponse, httpStatus: status == 0 ? nil : status,
                                       message: "the response body from \(host) exceeds \(limit) bytes"))
        }
        if malformed {
            return .failure(OAuthError(.invalidResponse, httpStatus: status == 0 ? nil : status,
                                       message: "the response headers from \(host) exceed \(Self.headerLimit) bytes"))
        }
        if cancelled.load(ordering: .relaxed) {
            return .failure(OAuthError(.cancelled, message: "the request to \(host) was cancelled"))
        }
        guard code == CURLE_OK else {
            let underlying = CurlError(code: Int(code.rawValue), text: library.describe(code))
            return .failure(OAuthError(.transport, message: message(for: code, text: underlying.text), underlying: underlying))
        }
        var response = HTTPResponse(status: status, headers: headers, body: body)
        response.httpVersion = easy.negotiatedHTTPVersion
        return .success(response)
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
/// the thread (`curl_multi_wakeup`); everything else, the multi handle included, is used only on
/// the thread.
final class CurlEngine: @unchecked Sendable {   // safe: `multi` and `active` are used only on the engine thread; `commands` is a Mutex
    let library: CurlLibrary
    private let multi: CurlMultiHandle
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    private struct Commands {
        var added: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var stopping = false
    }
    private let commands = Mutex(Commands())

    init?(_ library: CurlLibrary) {
        guard let multi = CurlMultiHandle(library) else { return nil }
        self.library = library
        self.multi = multi
        // Keep idle connections to many hosts (and many parallel ones to one host over HTTP/1.1).
        multi.set(CURLMOPT_MAXCONNECTS, 64)
        let thread = Thread { [self] in self.run() }
        thread.name = "OAuthFlow.curl"
        thread.start()
    }

    func add(_ transfer: CurlTransfer) {
        commands.withLock { $0.added.append(transfer) }
        _ = library.api.pointee.multi_wakeup(multi.raw)
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelled.store(true, ordering: .relaxed)
        commands.withLock { $0.cancelled.append(transfer) }
        _ = library.api.pointee.multi_wakeup(multi.raw)
    }

    /// Ends the thread after it finished what it holds; called when the transport goes away.
    func stop() {
        commands.withLock { $0.stopping = true }
        _ = library.api.pointee.multi_wakeup(multi.raw)
    }

    private func run() {
        let api = library.api
        var running: Int32 = 0
        var left: Int32 = 0
        while true {
            let next = commands.withLock { commands -> Commands in
                defer { commands.added = []; commands.cancelled = [] }
                return commands
            }
            for transfer in next.added {
                if transfer.cancelled.load(ordering: .relaxed) {
                    transfer.completeCancelled()
                } else if api.pointee.multi_add_handle(multi.raw, transfer.easy.raw) != CURLM_OK {
                    transfer.complete(CURLE_FAILED_INIT, library: library)
                } else {
                    active[transfer.easy.raw] = transfer
                }
            }
            for transfer in next.cancelled {
                guard active.removeValue(forKey: transfer.easy.raw) != nil else { continue }
                _ = api.pointee.multi_remove_handle(multi.raw, transfer.easy.raw)
                transfer.completeCancelled()
            }
            if next.stopping && active.isEmpty { break }

            _ = api.pointee.multi_perform(multi.raw, &running)
            while let message = api.pointee.multi_info_read(multi.raw, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
                let code = c_oauthflow_curl_msg_result(message)
                _ = api.pointee.multi_remove_handle(multi.raw, handle)
                active.removeValue(forKey: handle)?.complete(code, library: library)
            }
            // Waits for socket activity, libcurl's next timeout, or a wake-up from add/cancel/stop.
            _ = api.pointee.multi_poll(multi.raw, nil, 0, 1000, nil)
        }
    }
}
