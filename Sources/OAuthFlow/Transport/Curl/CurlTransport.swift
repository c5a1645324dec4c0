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
    /// The client certificate and key presented to https servers that ask for one (mutual TLS,
    /// RFC 8705; `CURLOPT_SSLCERT`/`CURLOPT_SSLKEY`); nil for none.
    public let clientIdentity: ClientTLSIdentity?

    private let engine = Mutex<CurlEngine?>(nil)

    /// Creates a transport; nothing is loaded or started until the first request.
    /// - Parameters:
    ///   - maximumBodySize: bodies beyond this many bytes fail with `.invalidResponse`.
    ///   - timeout: the total deadline of each request, in seconds (30 s, as `URLSessionTransport`).
    ///   - connectTimeout: the deadline for connecting, in seconds; at most `timeout`.
    ///   - proxy: ``Proxy/environment`` by default.
    ///   - caFile: a PEM bundle of the CAs to trust instead of libcurl's default bundle (see ``caFile``).
    ///   - clientIdentity: a client certificate and key for mutual TLS (see ``clientIdentity``).
    public init(
        maximumBodySize: Int = CurlTransport.defaultMaximumBodySize, timeout: TimeInterval = 30,
        connectTimeout: TimeInterval = 10, proxy: Proxy = .environment, caFile: URL? = nil,
        clientIdentity: ClientTLSIdentity? = nil
    ) {
        self.maximumBodySize = max(0, maximumBodySize)
        let total = timeout.isFinite && timeout > 0 ? min(timeout, 86_400) : 30
        self.timeout = total
        self.connectTimeout = connectTimeout.isFinite && connectTimeout > 0 ? min(connectTimeout, total) : min(10, total)
        self.proxy = proxy
        self.caFile = caFile
        self.clientIdentity = clientIdentity
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
            // Resumed exactly once (`CurlTransfer.finish`): by the engine thread, by this caller when
            // the transfer it started itself ended at once (`CurlEngine.add`), or by the caller of a
            // transfer that finished at the same time (`resumeFollowers`).
            await withUnsafeContinuation { continuation in
                transfer.continuation = continuation
                engine.add(transfer)
            }
        } onCancel: {
            engine.cancel(transfer)
        }
        transfer.resumeFollowers()
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
    let clientIdentity: ClientTLSIdentity?

    init(_ transport: CurlTransport) {
        maximumBodySize = transport.maximumBodySize
        timeout = transport.timeout
        connectTimeout = transport.connectTimeout
        proxy = transport.proxy
        caFile = transport.caFile
        clientIdentity = transport.clientIdentity
    }
}

/// One request: its easy handle, its header list, and the response as it arrives.
///
/// Built on the caller's thread; once handed to the engine (or started by its caller, see
/// ``CurlEngine``) it is touched only under the engine's driving lock (callbacks and completion),
/// except ``cancelled``, until a caller is resumed: then the transfer (and its ``followers``) belong
/// to that caller's thread, which resumes the followers.
final class CurlTransfer: @unchecked Sendable {   // safe: mutable state is used by one thread at a time (caller, the holder of the engine's driving lock, then the resumed caller), each hand-over through a Mutex or a continuation; `cancelled` is atomic
    let easy: CurlEasyHandle
    private let headerList: CurlHeaderList
    /// The URL as libcurl parsed it, set on the handle with `CURLOPT_CURLU`; held until the transfer ends.
    private let parsedURL: CurlParsedURL?
    private let limit: Int
    private let url: URL
    private let timeout: TimeInterval
    private let connectTimeout: TimeInterval
    var continuation: UnsafeContinuation<Result<HTTPResponse, OAuthError>, Never>?
    let cancelled = Atomic<Bool>(false)
    /// True while the handle is in the multi (under the engine's driving lock only).
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
    /// The URL goes over parsed (`CURLOPT_CURLU`, which takes the place of `CURLOPT_URL`) when
    /// `parsedURL` is given, else as text, with `CURLOPT_CURLU` cleared.
    init(
        _ request: HTTPRequest, easy: CurlEasyHandle, headerList: CurlHeaderList, parsedURL: CurlParsedURL?, settings: CurlSettings
    ) throws(OAuthError) {
        self.easy = easy
        self.headerList = headerList
        self.parsedURL = parsedURL
        self.limit = settings.maximumBodySize
        self.url = request.url
        self.timeout = settings.timeout
        self.connectTimeout = settings.connectTimeout

        if let parsedURL {
            easy.set(CURLOPT_CURLU, pointer: UnsafeRawPointer(parsedURL.raw))
        } else {
            easy.set(CURLOPT_CURLU, pointer: nil)
            easy.set(CURLOPT_URL, request.url.absoluteString)
        }
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
        if let identity = settings.clientIdentity {
            easy.set(CURLOPT_SSLCERT, identity.certificateFile)
            easy.set(CURLOPT_SSLCERTTYPE, "PEM")
            easy.set(CURLOPT_SSLKEY, identity.keyFile)
            easy.set(CURLOPT_SSLKEYTYPE, "PEM")
        }
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
        guard ASCIIText.isToken(request.method) else {
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


    /// At most `limit` printable ASCII characters of `text`, for an error message.
    static func printable(_ text: String, limit: Int = 40) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f ? $0 : "?" }))
    }

    private static func milliseconds(_ seconds: TimeInterval) -> Int { max(1, Int((seconds * 1000).rounded())) }

    private var host: String { url.host ?? "?" }
    private var scheme: String { url.scheme?.lowercased() ?? "" }

    // MARK: Callbacks (under the engine's driving lock)

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
        var colon = 0
        while colon < end, bytes[colon] != UInt8(ascii: ":") { colon += 1 }
        guard colon < end else { return bytes.count }
        var nameStart = 0
        var nameEnd = colon
        while nameStart < nameEnd, ASCIIText.isBlank(bytes[nameStart]) { nameStart += 1 }
        while nameEnd > nameStart, ASCIIText.isBlank(bytes[nameEnd - 1]) { nameEnd -= 1 }
        guard nameStart < nameEnd else { return bytes.count }
        var valueStart = colon + 1
        var valueEnd = end
        while valueStart < valueEnd, ASCIIText.isBlank(bytes[valueStart]) { valueStart += 1 }
        while valueEnd > valueStart, ASCIIText.isBlank(bytes[valueEnd - 1]) { valueEnd -= 1 }
        let name = String(unsafeUninitializedCapacity: nameEnd - nameStart) { out in
            for index in nameStart..<nameEnd {
                let byte = bytes[index]
                out[index - nameStart] = ASCIIText.lowercase(byte)
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

    // MARK: Completion (under the engine's driving lock)

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

    /// Transfers that finished in the same round as this one, with their results: set by the engine
    /// before it resumes this transfer's caller, which resumes theirs (``resumeFollowers()``).
    var followers: [(CurlTransfer, Result<HTTPResponse, OAuthError>)] = []

    /// Resumes the callers of ``followers``; called by this transfer's caller once it runs again.
    func resumeFollowers() {
        guard !followers.isEmpty else { return }
        let followers = self.followers
        self.followers = []
        for (transfer, result) in followers { transfer.finish(result) }
    }

    /// Whether this transfer had a connection when it timed out: one it made (`CURLINFO_NUM_CONNECTS`
    /// counts only successful connects) or a kept-alive one it reused. A reused connection counts no
    /// connect and reports no connect time, but the transfer went past the connect phase, so its
    /// pre-transfer time is set; a connect that never completed leaves all three at zero.
    private var connected: Bool {
        easy.info(CURLINFO_NUM_CONNECTS) > 0 || easy.info(offset: CURLINFO_CONNECT_TIME_T) > 0
            || easy.info(offset: CURLINFO_PRETRANSFER_TIME_T) > 0
    }

    private func message(for code: CURLcode, text: String) -> String {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            if !connected {
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

/// A libcurl result code and its standard text, as ``OAuthError/Fields/underlying``.
struct CurlError: Error, CustomStringConvertible {
    let code: Int
    let text: String
    var description: String { "curl error \(code): \(text)" }
}
