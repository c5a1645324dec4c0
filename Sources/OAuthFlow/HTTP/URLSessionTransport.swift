public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Synchronization

/// The default ``HTTPTransport``: a `URLSession` that never follows redirects and caps body size.
///
/// Pass a `URLSessionConfiguration` whose `protocolClasses` hold a mock (see `OAuthFlowTesting`)
/// to test without a network.
public final class URLSessionTransport: HTTPTransport {
    /// The largest body accepted: 1 MiB.
    public static let defaultMaximumBodySize = HTTPTransportDefaults.maximumBodySize

    private let session: URLSession
    private let delegate: Delegate
    /// Bodies beyond this many bytes fail with `.invalidResponse`.
    public let maximumBodySize: Int
    private let timeout: TimeInterval

    /// Creates a transport over a fresh session built from `configuration`.
    /// - Parameters:
    ///   - configuration: defaults to `.ephemeral` (no cookies, no cache).
    ///   - maximumBodySize: bodies beyond this fail with `.invalidResponse`.
    ///   - timeout: per-request timeout in seconds.
    public init(
        configuration: URLSessionConfiguration = .ephemeral, maximumBodySize: Int = URLSessionTransport.defaultMaximumBodySize,
        timeout: TimeInterval = 30
    ) {
        configuration.httpCookieStorage = nil
        // With no storage cookies are already dropped, but swift-corelibs-foundation still parses every
        // response header line for Set-Cookie unless the policy is .never (~7-10% of a loopback fetch).
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.delegate = Delegate(limit: maximumBodySize)
        self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        self.maximumBodySize = maximumBodySize
        self.timeout = timeout
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Sends `request`; a 3xx comes back as a response, never followed.
    /// - Throws: ``OAuthError`` `.transport`, `.cancelled`, or `.invalidResponse` for an oversized body.
    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method
        for header in request.headers { urlRequest.addValue(header.value, forHTTPHeaderField: header.name) }
        urlRequest.httpBody = request.body
        urlRequest.httpShouldHandleCookies = false
        do {
            return try await delegate.run(session: session, request: urlRequest)
        } catch let error as OAuthError {
            throw error
        } catch is CancellationError {
            throw OAuthError(.cancelled, message: "the request was cancelled")
        } catch let error as URLError where error.code == .cancelled {
            throw OAuthError(.cancelled, message: "the request was cancelled", underlying: error)
        } catch let error as URLError where error.code == .timedOut {
            throw OAuthError(.transport, message: "the request to \(request.url.host ?? "?") timed out", underlying: error)
        } catch {
            throw OAuthError(.transport, message: "no response from \(request.url.host ?? "?")", underlying: error)
        }
    }

    /// Collects each task's body, refuses redirects, and cancels a task past the size limit.
    private final class Delegate: NSObject, URLSessionDataDelegate, Sendable {
        private struct Pending {
            var continuation: CheckedContinuation<HTTPResponse, any Error>
            var response: HTTPURLResponse?
            var body = Data()
            var tooLarge = false
        }
        private let limit: Int
        private let pending = Mutex<[Int: Pending]>([:])

        init(limit: Int) { self.limit = limit }

        func run(session: URLSession, request: URLRequest) async throws -> HTTPResponse {
            let task = session.dataTask(with: request)
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    pending.withLock { $0[task.taskIdentifier] = Pending(continuation: continuation) }
                    if Task.isCancelled { task.cancel() }
                    task.resume()
                }
            } onCancel: {
                task.cancel()
            }
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
            let declared = http?.expectedContentLength ?? -1
            let tooLarge = declared > Int64(limit)
            pending.withLock {
                $0[dataTask.taskIdentifier]?.response = http
                if tooLarge { $0[dataTask.taskIdentifier]?.tooLarge = true }
            }
            completionHandler(tooLarge ? .cancel : .allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let exceeded = pending.withLock { all -> Bool in
                guard var entry = all[dataTask.taskIdentifier] else { return false }
                entry.body.append(data)
                if entry.body.count > limit {
                    entry.tooLarge = true
                    entry.body = Data()
                }
                all[dataTask.taskIdentifier] = entry
                return entry.tooLarge
            }
            if exceeded { dataTask.cancel() }
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
            if entry.tooLarge {
                entry.continuation.resume(throwing: OAuthError(
                    .invalidResponse, httpStatus: entry.response?.statusCode,
                    message: "the response body exceeds \(limit) bytes"))
                return
            }
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
