#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a polled token request waits for: a person approving a device code (RFC 8628 §3.4–3.5) or
/// a CIBA request (OpenID Connect CIBA Core 1.0 §7.3, §10.1, §11).
///
/// The token endpoint runs one loop for both (``TokenEndpoint``'s poll: wait, check the expiry,
/// post, read the refusal); what differs between the grants is decided here.
enum PolledAuthorization: Sendable {
    case device(DeviceCode)
    case backchannel(BackchannelAuthentication)

    var providerID: String {
        switch self {
        case .device(let code): code.providerID
        case .backchannel(let authentication): authentication.providerID
        }
    }

    /// When the person's time is up: no poll is sent after it.
    var expiresAt: Date {
        switch self {
        case .device(let code): code.expiresAt
        case .backchannel(let authentication): authentication.expiresAt
        }
    }

    /// The seconds between polls; `slow_down` raises it for the rest of the flow.
    var interval: Int {
        get {
            switch self {
            case .device(let code): code.interval
            case .backchannel(let authentication): authentication.interval
            }
        }
        set {
            switch self {
            case .device(var code):
                code.interval = newValue
                self = .device(code)
            case .backchannel(var authentication):
                authentication.interval = newValue
                self = .backchannel(authentication)
            }
        }
    }

    /// What each poll sends.
    var fields: [(String, String)] {
        switch self {
        case .device(let code): DeviceAuthorizationGrant.fields(polling: code)
        case .backchannel(let authentication): BackchannelAuthenticationGrant.fields(polling: authentication)
        }
    }

    /// The error when the time is up before an answer.
    var expired: OAuthError {
        switch self {
        case .device(let code): DeviceAuthorizationGrant.expired(code)
        case .backchannel(let authentication): BackchannelAuthenticationGrant.expired(authentication)
        }
    }

    /// The error when the polling task is cancelled.
    var cancelled: OAuthError {
        switch self {
        case .device(let code): DeviceAuthorizationGrant.cancelled(code)
        case .backchannel(let authentication): BackchannelAuthenticationGrant.cancelled(authentication)
        }
    }

    /// The CIBA request whose ping may cut a wait short (ping mode); nil otherwise.
    var awaitingPings: BackchannelAuthentication? {
        guard case .backchannel(let authentication) = self, authentication.deliveryMode == .ping else { return nil }
        return authentication
    }

    /// How a log line names the poll.
    var name: String {
        switch self {
        case .device: "device poll"
        case .backchannel: "CIBA poll"
        }
    }
}

/// What a poll tells the flow's runner as it goes, for its states.
enum PollEvent: Sendable {
    /// `slow_down` raised the interval (the authorization carries the new one).
    case slowedDown(PolledAuthorization)
    /// The token endpoint answered with tokens: the person approved; the checks and the store follow.
    case answered(PolledAuthorization)
}

/// Where polling stands: the authorization, whose interval each `slow_down` raises for the rest
/// of the flow; the wait before the next request; the transport failures in a row.
///
/// The token endpoint sleeps ``wait(at:)``, checks ``checkUnexpired(at:)``, posts
/// ``PolledAuthorization/fields``, and hands each refusal to ``read(_:log:)``, until an answer comes.
/// Both grants read refusals alike: RFC 8628 §3.5 and CIBA Core §11 define the same
/// `authorization_pending`, `slow_down` (+5 s), `access_denied` and `expired_token`.
struct Poll {
    /// What `slow_down` adds, for this and every later request (RFC 8628 §3.5, CIBA Core §11).
    static let slowDownIncrement = 5
    /// Transport failures in a row after which polling gives up.
    static let maximumConsecutiveTransportFailures = 5
    /// The polling interval when the answer that starts a poll has none (RFC 8628 §3.2, CIBA Core §7.3).
    static let defaultInterval = 5
    /// The longest lifetime and interval either grant accepts, and the longest `slow_down` can raise
    /// the interval to: about 68 years; larger numbers are an error, never a trap.
    static let maximumSeconds = Int(Int32.max)

    /// `expires_in` (required, 1 s to ``maximumSeconds``) and `interval` (``defaultInterval`` when
    /// absent; 0 raised to 1 s so polling never spins) of the answer that starts a poll: the device
    /// authorization response (RFC 8628 §3.2) or the CIBA acknowledgement (CIBA Core §7.3).
    static func timing(_ object: JSONObject) throws(OAuthError) -> (expiresIn: Int, interval: Int) {
        guard let expiresIn = try object.integer("expires_in", in: 1...maximumSeconds, acceptsString: true) else {
            throw object.fail("expires_in is missing")
        }
        let interval = max(try object.integer("interval", in: 0...maximumSeconds, acceptsString: true) ?? defaultInterval, 1)
        return (expiresIn, interval)
    }

    private(set) var pending: PolledAuthorization
    private var wait: Int
    private var transportFailures = 0

    init(_ pending: PolledAuthorization) {
        self.pending = pending
        self.wait = pending.interval
    }

    /// Seconds to sleep before the next request at `now`: the wait, or the time left before
    /// `expires_in` when that is shorter. Never past the expiry: `interval: 100000` with
    /// `expires_in: 3` ends after 3 s, and repeated `slow_down` cannot overshoot `expires_in`.
    /// - Throws: ``OAuthError`` `.expired` when the time is up.
    func wait(at now: Date) throws(OAuthError) -> Double {
        let left = pending.expiresAt.timeIntervalSince(now)
        guard left > 0 else { throw pending.expired }
        return min(Double(wait), left)
    }

    /// - Throws: ``OAuthError`` `.expired` when the time is up at `now` (after a sleep).
    func checkUnexpired(at now: Date) throws(OAuthError) {
        guard now < pending.expiresAt else { throw pending.expired }
    }

    /// Reads the token endpoint's refusal of a poll: `authorization_pending` waits the interval
    /// again; `slow_down` adds 5 s to it (true: publish the authorization with its new interval);
    /// a transport failure backs off (the interval doubled for each in a row), up to
    /// ``maximumConsecutiveTransportFailures``.
    /// - Throws: `error` when it ends the polling (`access_denied`, `expired_token`, any other).
    mutating func read(_ error: OAuthError, log: Logger) throws(OAuthError) -> Bool {
        switch error.response?.code {
        case .authorizationPending?:
            transportFailures = 0
            wait = pending.interval
            return false
        case .slowDown?:
            transportFailures = 0
            // Bounded like the interval itself, so no number of slow_down answers can overflow it.
            pending.interval = min(pending.interval + Self.slowDownIncrement, Self.maximumSeconds)
            wait = pending.interval
            log.info(pending.providerID, "slow_down: polling interval raised to \(pending.interval) s")
            return true
        default:
            guard error.code == .transport, transportFailures < Self.maximumConsecutiveTransportFailures else { throw error }
            // RFC 8628 §3.5: back off on connection problems, then keep polling.
            transportFailures += 1
            wait = pending.interval << transportFailures
            log.warning(pending.providerID, "\(pending.name) failed to connect; retrying in \(wait) s")
            return false
        }
    }
}
