public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import OAuthFlow
import Dispatch
import Synchronization

/// An `HTTPTransport` over `URLSession` that never follows redirects, caps body size, and ends
/// every request at a total deadline.
///
/// OAuthFlow's default is `CurlTransport`; use this one for a `URLProtocol` mock (see
/// `OAuthFlowTesting`) or to share a `URLSessionConfiguration`: pass it as `transport:` to `AuthFlow`.
///
/// What it enforces, whatever the configuration says:
/// - redirects are returned as responses, never followed (RFC 9700 §4.11);
/// - ``timeout`` is the total deadline of one request, from sending to the last body byte: a
///   Dispatch timer answers `.transport` and cancels the task when it passes, so a server that
///   trickles a byte at a time cannot extend it (URLSession's own `timeoutInterval` is an idle
///   timeout, which every received byte restarts);
/// - ``maximumBodySize``, checked against `Content-Length` and again on every chunk the delegate
///   receives: the caller gets `.invalidResponse` at once and the task is cancelled, and nothing
///   past the limit is kept. swift-corelibs-foundation queues received data to the delegate without
///   back-pressure, so a fast server may have sent (and URLSession queued) more than the limit by
///   then; `CurlTransport` stops reading at the limit;
/// - cancelling the calling task cancels the request and answers `.cancelled` at once, whenever it
///   comes (before the request started, or while it is in flight).
public final class URLSessionTransport: HTTPTransport {
    /// The largest body accepted: 1 MiB.
    public static let defaultMaximumBodySize = HTTPTransportDefaults.maximumBodySize
    /// The total deadline of a request unless one is given: 30 s, the same as `CurlTransport`.
    public static let defaultTimeout: TimeInterval = 30

    private let session: URLSession
    private let delegate: Delegate
    /// The largest body accepted; `EndpointClient` applies the same bound.
    public let maximumBodySize: Int
    /// The total deadline of one request in seconds, from sending to the last byte of the body.
    public let timeout: TimeInterval

    /// Creates a transport over a fresh session built from `configuration`.
    /// - Parameters:
    ///   - configuration: defaults to `.ephemeral` (no cookies, no cache); its cookie, cache and
    ///     timeout settings are replaced.
    ///   - maximumBodySize: bodies beyond this fail with `.invalidResponse`.
    ///   - timeout: the total deadline of each request, in seconds (30 s by default, at most one day;
    ///     a value that is not a positive number means 30 s). Sets the configuration's
    ///     `timeoutIntervalForRequest` and `timeoutIntervalForResource` too.
    public init(
        configuration: URLSessionConfiguration = .ephemeral, maximumBodySize: Int = URLSessionTransport.defaultMaximumBodySize,
        timeout: TimeInterval = URLSessionTransport.defaultTimeout
    ) {
        let total = timeout.isFinite && timeout > 0 ? min(timeout, 86_400) : Self.defaultTimeout
        configuration.httpCookieStorage = nil
        // With no storage cookies are already dropped, but swift-corelibs-foundation still parses every
        // response header line for Set-Cookie unless the policy is .never (~7-10% of a loopback fetch).
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        // Idle and resource limits as URLSession knows them (its default idle limit is 60 s); the
        // total deadline itself is the delegate's timer, which does not depend on either.
        configuration.timeoutIntervalForRequest = total
        configuration.timeoutIntervalForResource = total
        self.delegate = Delegate(limit: max(0, maximumBodySize), deadline: total)
        self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        self.maximumBodySize = max(0, maximumBodySize)
        self.timeout = total
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Sends `request`; a 3xx comes back as a response, never followed.
    /// - Throws: ``OAuthError`` `.transport` when no complete response arrived (refused, reset, the
    ///   total deadline passed: the message says which), `.cancelled`, or `.invalidResponse` for a body
    ///   over ``maximumBodySize``.
    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method
        for header in request.headers { urlRequest.addValue(header.value, forHTTPHeaderField: header.name) }
        urlRequest.httpBody = request.body
        urlRequest.httpShouldHandleCookies = false
        let host = request.url.host ?? "?"
        do {
            return try await delegate.run(session: session, request: urlRequest)
        } catch let error as OAuthError {
            throw error
        } catch is DeadlinePassed {
            throw OAuthError(.transport, message: "no complete response from \(host) within the total deadline (\(Self.seconds(timeout)))")
        } catch is CancellationError {
            throw OAuthError(.cancelled, message: "the request was cancelled")
        } catch let error as URLError where error.code == .cancelled {
            throw OAuthError(.cancelled, message: "the request was cancelled", underlying: Self.stripped(error))
        } catch let error as URLError where error.code == .timedOut {
            // URLSession's idle limit equals the total deadline, so when it fires the deadline has passed too.
            throw OAuthError(.transport, message: "no complete response from \(host) within the total deadline (\(Self.seconds(timeout)))",
                             underlying: Self.stripped(error))
        } catch let error as URLError {
            throw OAuthError(.transport, message: "no response from \(host) (\(Self.name(of: error.code)))", underlying: Self.stripped(error))
        } catch {
            throw OAuthError(.transport, message: "no response from \(host)", underlying: error)
        }
    }

    /// The same code without `userInfo`: swift-corelibs-foundation puts the failing URL there
    /// (query and all), and an `OAuthError`'s `underlying` must not carry a URL query or a secret.
    private static func stripped(_ error: URLError) -> URLError { URLError(error.code) }

    /// A `URLError` code's name for a message, such as `cannotConnectToHost`.
    private static func name(of code: URLError.Code) -> String {
        switch code {
        case .cannotConnectToHost: "cannotConnectToHost"
        case .networkConnectionLost: "networkConnectionLost"
        case .cannotFindHost: "cannotFindHost"
        case .badServerResponse: "badServerResponse"
        case .secureConnectionFailed: "secureConnectionFailed"
        case .serverCertificateUntrusted: "serverCertificateUntrusted"
        case .zeroByteResource: "zeroByteResource"
        case .cannotParseResponse: "cannotParseResponse"
        case .cannotDecodeContentData: "cannotDecodeContentData"
        case .unsupportedURL: "unsupportedURL"
        case .unknown: "unknown"
        default: "URLError \(code.rawValue)"
        }
    }

    private static func seconds(_ value: TimeInterval) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    /// The total deadline passed and the timer cancelled the task.
    private struct DeadlinePassed: Error {}

    /// One request's deadline timer.
    private final class DeadlineTimer: @unchecked Sendable {   // safe: immutable; DispatchWorkItem.cancel() is thread-safe
        let item: DispatchWorkItem
        init(_ item: DispatchWorkItem) { self.item = item }
        func cancel() { item.cancel() }
    }

    /// Collects each task's body, refuses redirects, and ends a task at the size limit or the deadline.
    ///
    /// The caller is answered the moment the limit or the deadline is passed, then the task is
    /// cancelled: swift-corelibs-foundation may deliver data it already read (and, under load, keep
    /// reading) for a while after `cancel()`, and none of that may delay the caller or be kept.
    private final class Delegate: NSObject, URLSessionDataDelegate, Sendable {
        private struct Pending {
            var continuation: CheckedContinuation<HTTPResponse, any Error>
            var response: HTTPURLResponse?
            var body = Data()
            var timer: DeadlineTimer?
        }
        private let limit: Int
        private let deadline: TimeInterval
        private let pending = Mutex<[Int: Pending]>([:])

        init(limit: Int, deadline: TimeInterval) {
            self.limit = limit
            self.deadline = deadline
        }

        func run(session: URLSession, request: URLRequest) async throws -> HTTPResponse {
            let task = session.dataTask(with: request)
            let id = task.taskIdentifier
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    // The total deadline: a timer that answers the caller and cancels the task, whatever
                    // the server still sends. On a Dispatch queue rather than a Task, so that it fires on
                    // time even when every thread of the Swift concurrency pool is busy.
                    // Weak captures: the queue keeps a cancelled item until its time comes.
                    let timer = DeadlineTimer(DispatchWorkItem { [weak self, weak task] in
                        if self?.fail(id, DeadlinePassed()) == true { task?.cancel() }
                    })
                    DispatchQueue.global().asyncAfter(deadline: .now() + deadline, execute: timer.item)
                    pending.withLock { $0[id] = Pending(continuation: continuation, timer: timer) }
                    // Cancelled before the request was registered (the handler below then found
                    // nothing to answer): answer now and never start it.
                    if Task.isCancelled {
                        if fail(id, CancellationError()) { task.cancel() }
                        return
                    }
                    task.resume()
                }
            } onCancel: {
                // Answer the caller now, as at the deadline, then cancel the task: swift-corelibs-foundation
                // does not always report a cancelled task (one cancelled before its protocol has started
                // never completes), which left the caller waiting for the whole total deadline.
                if fail(id, CancellationError()) { task.cancel() }
            }
        }

        /// Ends the request `id` with `error` now, unless it already ended; true when it did.
        private func fail(_ id: Int, _ error: any Error) -> Bool {
            guard let entry = pending.withLock({ $0.removeValue(forKey: id) }) else { return false }
            entry.timer?.cancel()
            entry.continuation.resume(throwing: error)
            return true
        }

        private func tooLarge(_ status: Int?) -> OAuthError {
            OAuthError(.invalidResponse, httpStatus: status, message: "the response body exceeds \(limit) bytes")
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
        ) {
            let http = response as? HTTPURLResponse
            guard (http?.expectedContentLength ?? -1) <= Int64(limit) else {
                _ = fail(dataTask.taskIdentifier, tooLarge(http?.statusCode))
                completionHandler(.cancel)
                return
            }
            pending.withLock { $0[dataTask.taskIdentifier]?.response = http }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let (over, status) = pending.withLock { all -> (Bool, Int?) in
                guard var entry = all[dataTask.taskIdentifier] else { return (false, nil) }
                guard data.count <= limit - entry.body.count else { return (true, entry.response?.statusCode) }
                entry.body.append(data)
                all[dataTask.taskIdentifier] = entry
                return (false, nil)
            }
            if over, fail(dataTask.taskIdentifier, tooLarge(status)) { dataTask.cancel() }
        }

        /// OAuthFlow authenticates in the request itself and never answers a server's challenge.
        ///
        /// swift-corelibs-foundation raises one after the whole body of a `401` with `WWW-Authenticate`
        /// (RFC 6749 §5.2 `invalid_client`) arrived, and waits forever for a credential when given none;
        /// answer with that 401 instead. Darwin asks before the response, so it keeps the default.
        func urlSession(
            _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            let entry = pending.withLock { all -> Pending? in
                guard all[task.taskIdentifier]?.response != nil else { return nil }
                return all.removeValue(forKey: task.taskIdentifier)
            }
            guard let entry else {
                completionHandler(.performDefaultHandling, nil)
                return
            }
            finish(entry, task: task, error: nil)
            completionHandler(.cancelAuthenticationChallenge, nil)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            guard let entry = pending.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
            finish(entry, task: task, error: error)
        }

        private func finish(_ entry: Pending, task: URLSessionTask, error: (any Error)?) {
            entry.timer?.cancel()
            if let error {
                entry.continuation.resume(throwing: error)
                return
            }
            guard let http = entry.response ?? (task.response as? HTTPURLResponse) else {
                entry.continuation.resume(throwing: URLError(.badServerResponse))
                return
            }
            var headers: [String: String] = [:]
            for (key, value) in http.allHeaderFields {
                if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
            }
            entry.continuation.resume(returning: HTTPResponse(status: http.statusCode, headers: headers, body: entry.body))
        }
    }
}

/// What a `URLError` from ``URLSessionTransport`` says about its request, for the flow's retries.
extension URLError: TransportFailureClassifying {
    package var transportFailure: TransportFailure {
        switch code.rawValue {
        case -1003, -1004, -1006, -1009, -1200: .unsent   // cannotFindHost, cannotConnectToHost, dnsLookupFailed, notConnectedToInternet, secureConnectionFailed
        case -1002, -1201, -1202, -1203, -1204, -1206: .permanent   // unsupportedURL, certificate errors
        default: .maybeSent
        }
    }
}
