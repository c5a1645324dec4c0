#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How token requests are retried after a transient failure: a transport error, a 5xx, or a 429.
///
/// Set it as ``AuthFlow/Options/retry``. Each retry waits a random time between zero and an
/// exponentially growing bound ("full jitter", drawn from ``AuthFlow/Options/jitter``), or exactly
/// what a `Retry-After` header asks (RFC 9110 §10.2.3, seconds or an HTTP-date), on
/// ``AuthFlow/Options/clock``. An answer whose RFC 6749 §5.2 `error` is anything but
/// `server_error` or `temporarily_unavailable` (`invalid_grant`, `invalid_client`, …), any other
/// 4xx, and a 501 are final; so are a rejected certificate and a scheme other than http or https.
///
/// Which requests retry: a refresh and a client-credentials request on all of the above; an
/// authorization-code exchange only when the request cannot have reached the server (no name, no
/// connection, no TLS session), because a code is single use; device polling never here (RFC 8628
/// §3.5 has its own rules); nothing else (discovery, userinfo, revocation) is retried.
/// Documentation/TokenSource.md ("Retries") lists the tests behind each rule.
///
/// ```swift
/// let options = AuthFlow.Options(retry: RetryPolicy(maximumAttempts: 2, maximumTotalTime: .seconds(5)))
/// ```
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included (3 by default; 1 turns retries off).
    public var maximumAttempts: Int
    /// The bound of the first backoff; it doubles for each retry after.
    public var initialBackoff: Duration
    /// The largest backoff bound.
    public var maximumBackoff: Duration
    /// The longest `Retry-After` waited for; a server asking for longer gets its answer returned
    /// as the error instead (an `.httpStatus` 429 or 503 saying how long it asked for).
    public var maximumRetryAfter: Duration
    /// No retry starts when the time since the first attempt (by ``AuthFlow/Options/now``) plus the
    /// next wait would exceed this.
    public var maximumTotalTime: Duration

    /// 3 attempts; backoff bounds 0.5 s then 1 s (at most 4 s); `Retry-After` honoured up to
    /// 10 s; no retry starts after 15 s.
    public init(
        maximumAttempts: Int = 3, initialBackoff: Duration = .milliseconds(500), maximumBackoff: Duration = .seconds(4),
        maximumRetryAfter: Duration = .seconds(10), maximumTotalTime: Duration = .seconds(15)
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.maximumRetryAfter = maximumRetryAfter
        self.maximumTotalTime = maximumTotalTime
    }

    /// One attempt, no retries.
    public static let none = RetryPolicy(maximumAttempts: 1)

    /// The bound of the backoff before retry number `retry` (1 for the first retry).
    func backoffBound(beforeRetry retry: Int) -> Duration {
        var bound = initialBackoff
        for _ in 1..<max(retry, 1) {
            guard bound < maximumBackoff else { break }
            bound *= 2
        }
        return min(bound, maximumBackoff)
    }
}

/// What a token request may be retried on; each grant picks one (Documentation/TokenSource.md,
/// "Retries").
enum RetryScope: Sendable {
    /// Never (device polling, which has its own rules).
    case never
    /// Only when the request cannot have reached the server: the name did not resolve, the
    /// connection was refused, or the TLS handshake failed. Never after a response, a timeout or
    /// a dropped connection, since the server may have acted on the request: an authorization
    /// code is single use, and RFC 6749 §4.1.2 lets a server revoke every token issued for a code
    /// that is presented twice.
    case beforeResponse
    /// Transport errors (but those no retry can cure: a rejected certificate, a scheme other than
    /// http or https), a 5xx other than 501, and a 429.
    case transient
}

/// What a transport error says about the request, for ``Retrier``.
package enum TransportFailure: Sendable, Equatable {
    /// It never left: no name, no connection, no TLS session.
    case unsent
    /// It may have reached the server (a timeout, a reset, an empty answer), or the transport
    /// does not say (any error of a transport other than the two built in).
    case maybeSent
    /// Trying again cannot help: the certificate was rejected, or the URL cannot be sent.
    case permanent

    /// Reads the underlying error of `CurlTransport` (a libcurl code) or of another transport of
    /// this package (`URLSessionTransport`'s `URLError`, through ``TransportFailureClassifying``);
    /// anything else is ``maybeSent``.
    package static func classify(_ error: OAuthError) -> TransportFailure {
        if let curl = error.underlying as? CurlError {
            switch curl.code {
            case 5, 6, 7, 35: return .unsent   // resolve proxy, resolve host, connect, TLS handshake
            case 1, 3, 58, 60, 77: return .permanent   // protocol, URL, client cert, peer verification, CA file
            default: return .maybeSent
            }
        }
        if let classified = error.underlying as? any TransportFailureClassifying { return classified.transportFailure }
        return .maybeSent
    }
}

/// An underlying transport error that says whether its request left; `OAuthFlowURLSession`
/// conforms `URLError` (this module does not link the Foundation that declares it).
package protocol TransportFailureClassifying: Error {
    /// Whether the request may have reached the server.
    var transportFailure: TransportFailure { get }
}

/// The retry decisions of a ``RetryPolicy`` on the flow's clock and jitter source: whether a
/// request retries at all, how long to wait after an attempt, and the wait itself. The loop that
/// sends the attempts is the caller's (``EndpointClient``); nothing here sends or calls back.
struct Retrier: Sendable {
    let policy: RetryPolicy
    let clock: any Clock<Duration>
    let now: @Sendable () -> Date
    let jitter: @Sendable () -> Double

    /// No retries (for clients made outside a flow).
    static let none = Retrier(policy: .none, clock: ContinuousClock(), now: { Date() }, jitter: { 0 })

    /// True when a request sent with `scope` may be attempted more than once.
    func retries(_ scope: RetryScope) -> Bool {
        scope != .never && policy.maximumAttempts > 1
    }

    /// The wait before attempt number `attempt + 1`, after `outcome` of attempt number `attempt`
    /// of a request first sent at `started`; nil when `outcome` is final: a success or failure
    /// `scope` does not retry, the last attempt, or a wait that would end past the policy's total
    /// time (logged).
    func wait(
        after outcome: Result<HTTPResponse, OAuthError>, attempt: Int, startedAt started: Date, _ scope: RetryScope,
        provider: Provider, log: Logger
    ) -> Duration? {
        guard attempt < policy.maximumAttempts, let (wait, reason) = delay(after: outcome, scope, retry: attempt, provider: provider, log: log)
        else { return nil }
        let elapsed = Duration.seconds(max(now().timeIntervalSince(started), 0))
        guard elapsed + wait <= policy.maximumTotalTime else {
            log.info(provider.id, "token request: \(reason); not retried (the retry time of \(policy.maximumTotalTime) would be exceeded)")
            return nil
        }
        log.info(provider.id, "token request: \(reason); attempt \(attempt + 1) of \(policy.maximumAttempts) in \(wait)")
        return wait
    }

    /// Sleeps `wait` on the flow's clock.
    /// - Throws: ``OAuthError`` `.cancelled` when the task is cancelled meanwhile.
    func sleep(_ wait: Duration, provider: Provider) async throws(OAuthError) {
        do {
            try await clock.sleep(for: wait)
        } catch {
            throw OAuthError(.cancelled, providerID: provider.id, endpoint: .token, message: "cancelled while waiting to retry")
        }
    }

    /// How long to wait before retrying `outcome`, and why; nil when it is final.
    private func delay(
        after outcome: Result<HTTPResponse, OAuthError>, _ scope: RetryScope, retry: Int, provider: Provider, log: Logger
    ) -> (Duration, String)? {
        switch outcome {
        case .failure(let error):
            guard error.code == .transport || error.code == .timedOut else { return nil }
            switch (TransportFailure.classify(error), scope) {
            case (.permanent, _), (.maybeSent, .beforeResponse), (_, .never): return nil
            case (.unsent, _), (.maybeSent, .transient): return (backoff(beforeRetry: retry), "\(error.code), no response")
            }
        case .success(let response):
            guard scope == .transient, Self.isTransient(response) else { return nil }
            guard let value = response.headers["retry-after"], let asked = Self.retryAfter(value, now: now()) else {
                return (backoff(beforeRetry: retry), "HTTP \(response.status)")
            }
            guard asked <= policy.maximumRetryAfter else {
                log.info(provider.id, "token request: HTTP \(response.status) asks to retry after \(asked), more than \(policy.maximumRetryAfter); not retried")
                return nil
            }
            return (asked, "HTTP \(response.status) with Retry-After")
        }
    }

    /// A random wait between zero and the bound for this retry (full jitter).
    func backoff(beforeRetry retry: Int) -> Duration {
        let drawn = jitter()
        let fraction = drawn.isFinite ? min(max(drawn, 0), 1) : 0
        return policy.backoffBound(beforeRetry: retry) * fraction
    }

    /// True for a 429 or a 5xx other than 501, unless the body is a §5.2 error other than
    /// `server_error` or `temporarily_unavailable`: `invalid_grant` or `invalid_client` with a
    /// 5xx status is still final.
    static func isTransient(_ response: HTTPResponse) -> Bool {
        guard response.status == 429 || (500...599).contains(response.status) && response.status != 501 else { return false }
        // Only classifying: a body that does not parse is no §5.2 error, and the caller reports it.
        guard let object = try? EndpointClient.parseBody(response, endpoint: .token, provider: ""),
              let error = EndpointClient.errorResponse(in: object)
        else { return true }  // no §5.2 body (a gateway's page): the status decides
        return error.code == .serverError || error.code == .temporarilyUnavailable
    }

    /// A `Retry-After` value (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date from which `now`
    /// is subtracted (a past date is zero). Nil when it is neither. A number too large for `Int`
    /// is `.seconds(Int.max)`: far beyond any cap.
    static func retryAfter(_ value: String, now: Date) -> Duration? {
        let trimmed = ASCIIText.trimmingBlanks(value)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return .seconds(Int(trimmed) ?? Int.max)
        }
        guard let date = HTTPDate.parse(trimmed, now: now) else { return nil }
        let seconds = date.timeIntervalSince(now)
        guard seconds > 0 else { return .zero }
        return seconds < Double(Int32.max) ? .seconds(seconds) : .seconds(Int.max)
    }
}

/// HTTP-date parsing (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms
/// recipients must also accept. Strict: anything else is nil, never a trap.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func parse(_ text: String, now: Date) -> Date? {
        guard text.utf8.count <= 64 else { return nil }
        let parts = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
        if parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
           let day = number(parts[1], digits: 2), let month = month(parts[2]), let year = number(parts[3], digits: 4) {
            return date(year: year, month: month, day: day, time: parts[4])
        }
        // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
        if parts.count == 4, parts[0].hasSuffix(","), parts[3] == "GMT" {
            let fields = parts[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 3, let day = number(fields[0], digits: 2), let month = month(fields[1]),
                  let short = number(fields[2], digits: 2)
            else { return nil }
            // RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is in the past century.
            let thisYear = 1970 + Int((now.timeIntervalSince1970 / 31_556_952).rounded(.down))  // close enough for a century rule
            var year = thisYear - thisYear % 100 + short
            if year > thisYear + 50 { year -= 100 }
            return date(year: year, month: month, day: day, time: parts[2])
        }
        // asctime: "Sun Nov  6 08:49:37 1994"
        if parts.count == 5, let month = month(parts[1]), let day = number(parts[2], digits: 1...2),
           let year = number(parts[4], digits: 4) {
            return date(year: year, month: month, day: day, time: parts[3])
        }
        return nil
    }

    private static func month(_ name: String) -> Int? { months.firstIndex(of: name).map { $0 + 1 } }

    private static func number(_ text: String, digits: Int) -> Int? { number(text, digits: digits...digits) }

    private static func number(_ text: String, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text)
    }

    private static func date(year: Int, month: Int, day: Int, time: String) -> Date? {
        let clock = time.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard clock.count == 3, let hour = number(clock[0], digits: 2), let minute = number(clock[1], digits: 2),
              let second = number(clock[2], digits: 2), hour < 24, minute < 60, second <= 60,
              (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (the days-from-civil computation over 400-year eras).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
