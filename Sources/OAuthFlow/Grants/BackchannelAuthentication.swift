#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// Whom a CIBA request names and what it shows them
/// ([OpenID Connect CIBA Core 1.0 §7.1](https://openid.net/specs/openid-client-initiated-backchannel-authentication-core-1_0.html#rfc.section.7.1)).
///
/// Pass it to ``AuthFlow/authorizeWithBackchannel(provider:_:)`` (or
/// ``AuthFlow/requestBackchannelAuthentication(provider:_:)``). Everything in it is checked before
/// anything is sent: exactly one hint, a binding message a person can read, a user code and an
/// expiry in range.
public struct BackchannelAuthenticationRequest: Sendable {
    /// How the request names the person: one hint (CIBA Core §7.1).
    public enum Hint: Sendable {
        /// `login_hint`: what the provider knows the person by, such as an e-mail address or a
        /// phone number (Glewlwyd wants a JSON object in the string, `{"username":"alice"}`).
        case loginHint(String)
        /// `id_token_hint`: an ID token the provider issued to this client before.
        case idTokenHint(Secret)
        /// `login_hint_token`: a token naming the person, in a form the provider defines.
        case loginHintToken(Secret)
    }

    /// The hint; nil sends the provider's ``Provider/Settings/cibaLoginHint`` as `login_hint`.
    public var hint: Hint?
    /// `binding_message`: a short text shown on the person's device and to the local user, so
    /// the person can tell this request from another; at most
    /// ``BackchannelAuthenticationRequest/maximumBindingMessageLength`` characters, no control character.
    public var bindingMessage: String?
    /// `user_code`: a secret the person set up with the provider, for providers that ask for one
    /// (discovery's `backchannel_user_code_parameter_supported`).
    public var userCode: Secret?
    /// `requested_expiry`: how long, in seconds, the request may wait for the person.
    public var requestedExpiry: Int?
    /// The scopes; nil for the provider's. `openid` is added when missing (CIBA Core §7.1 requires it).
    public var scopes: [String]?

    /// The longest binding message sent, in Unicode scalars: a person compares it at a glance.
    public static let maximumBindingMessageLength = 128

    /// A request; every part is optional (a provider with `cibaLoginHint` needs none).
    public init(hint: Hint? = nil, bindingMessage: String? = nil, userCode: Secret? = nil, requestedExpiry: Int? = nil, scopes: [String]? = nil) {
        self.hint = hint
        self.bindingMessage = bindingMessage
        self.userCode = userCode
        self.requestedExpiry = requestedExpiry
        self.scopes = scopes
    }
}

/// A CIBA request the provider acknowledged, while the person is asked
/// ([CIBA Core §7.3](https://openid.net/specs/openid-client-initiated-backchannel-authentication-core-1_0.html#rfc.section.7.3)).
///
/// Show ``bindingMessage`` and ``expiresAt`` to the local user, then await
/// ``AuthFlow/pollBackchannelAuthentication(_:)``; it is also the payload of
/// ``AuthFlow/State/authorizing(provider:grant:backchannel:)``. The `auth_req_id` and the
/// notification token stay inside and never print.
public struct BackchannelAuthentication: Sendable, Hashable, CustomStringConvertible {
    /// The provider.
    public var providerID: String
    /// The binding message sent, shown on the person's device too.
    public var bindingMessage: String?
    /// When the request stops waiting for the person (`expires_in` after receipt).
    public var expiresAt: Date
    /// The lifetime as sent, in seconds.
    public var expiresIn: Int
    /// The current polling interval in seconds (5 when absent; `slow_down` adds 5).
    public var interval: Int
    /// How the answer is learnt.
    public var deliveryMode: CIBADeliveryMode
    /// The scopes requested.
    public var scopes: [String]
    let authRequestID: Secret
    /// The `client_notification_token` a ping must carry as its bearer (ping mode only).
    let notificationToken: Secret?

    init(
        providerID: String, authRequestID: Secret, notificationToken: Secret?, bindingMessage: String?, expiresAt: Date, expiresIn: Int,
        interval: Int, deliveryMode: CIBADeliveryMode, scopes: [String]
    ) {
        self.providerID = providerID
        self.authRequestID = authRequestID
        self.notificationToken = notificationToken
        self.bindingMessage = bindingMessage
        self.expiresAt = expiresAt
        self.expiresIn = expiresIn
        self.interval = interval
        self.deliveryMode = deliveryMode
        self.scopes = scopes
    }

    /// Equal when everything visible and the `auth_req_id` agree.
    public static func == (lhs: BackchannelAuthentication, rhs: BackchannelAuthentication) -> Bool {
        lhs.providerID == rhs.providerID && lhs.bindingMessage == rhs.bindingMessage && lhs.expiresAt == rhs.expiresAt
            && lhs.expiresIn == rhs.expiresIn && lhs.interval == rhs.interval && lhs.deliveryMode == rhs.deliveryMode
            && lhs.scopes == rhs.scopes && lhs.authRequestID.constantTimeEquals(rhs.authRequestID)
    }

    /// Hashes the visible fields.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(providerID)
        hasher.combine(expiresAt)
        hasher.combine(interval)
    }

    /// The user-facing fields; the `auth_req_id` shows as `<redacted>`.
    public var description: String {
        "BackchannelAuthentication(provider: \(providerID), bindingMessage: \(bindingMessage.map { DisplayText.escape($0) } ?? "none"), "
            + "expiresIn: \(expiresIn), interval: \(interval), mode: \(deliveryMode.rawValue), authReqID: <redacted>)"
    }
}

/// Client-initiated backchannel authentication
/// ([OpenID Connect CIBA Core 1.0](https://openid.net/specs/openid-client-initiated-backchannel-authentication-core-1_0.html)):
/// the request that names the person (§7.1), its acknowledgement (§7.3), and the token request the
/// token endpoint polls with (§10.1), whose refusals (§11) the shared poll reads (Grants/Polling.swift).
enum BackchannelAuthenticationGrant {
    /// The longest `auth_req_id` accepted (real ones are 32 to 64 characters).
    static let maximumAuthRequestIDLength = 1024
    /// The longest hint or user code sent (a `login_hint_token` or `id_token_hint` is a JWT).
    static let maximumHintLength = 8192

    // MARK: The request (§7.1)

    /// Checks `request` for `provider` and returns the fields to send, before anything is sent:
    /// a confidential client, exactly one hint (the request's, else the provider's
    /// `cibaLoginHint`), a binding message and user code without control characters, an expiry
    /// in range; `scope` with `openid`; in ping mode a fresh `client_notification_token`.
    /// - Throws: ``OAuthError`` `.configuration` naming what is wrong.
    static func fields(
        _ request: BackchannelAuthenticationRequest, provider: Provider, notificationToken: Secret?
    ) throws(OAuthError) -> (fields: [(String, String)], scopes: [String]) {
        func fail(_ reason: String) -> OAuthError {
            OAuthError(.configuration, providerID: provider.id, endpoint: .backchannelAuthentication, message: reason)
        }
        guard provider.isConfidential else {
            throw fail("\"\(provider.id)\" is a public client; CIBA needs a client that authenticates (a secret, a private key "
                + "or a client certificate; CIBA Core §7.1)")
        }
        var scopes = request.scopes ?? provider.scopes
        if !scopes.contains("openid") { scopes.insert("openid", at: 0) }
        var fields: [(String, String)] = [("scope", scopes.joined(separator: " "))]
        if let token = notificationToken { fields.append(("client_notification_token", token.reveal())) }
        switch request.hint {
        case .loginHint(let hint)?:
            if let reason = hintProblem(hint) { throw fail("the login hint \(reason)") }
            fields.append(("login_hint", hint))
        case .idTokenHint(let token)?:
            if let reason = tokenProblem(token.reveal()) { throw fail("the ID token hint \(reason)") }
            fields.append(("id_token_hint", token.reveal()))
        case .loginHintToken(let token)?:
            if let reason = tokenProblem(token.reveal()) { throw fail("the login hint token \(reason)") }
            fields.append(("login_hint_token", token.reveal()))
        case nil:
            guard let hint = provider.cibaLoginHint else {
                throw fail("a CIBA request names the person: give a login hint, an ID token hint or a login hint token, "
                    + "or set cibaLoginHint in the catalog")
            }
            fields.append(("login_hint", hint))
        }
        if let message = request.bindingMessage {
            if let reason = bindingMessageProblem(message) { throw fail("the binding message \(reason)") }
            fields.append(("binding_message", message))
        }
        if let code = request.userCode {
            if let reason = hintProblem(code.reveal()) { throw fail("the user code \(reason)") }
            fields.append(("user_code", code.reveal()))
        }
        if let expiry = request.requestedExpiry {
            guard (1...Poll.maximumSeconds).contains(expiry) else { throw fail("requested_expiry must be from 1 to \(Poll.maximumSeconds) seconds") }
            fields.append(("requested_expiry", String(expiry)))
        }
        return (fields, scopes)
    }

    /// Why `message` may not be a binding message, or nil when it may: a person compares it on
    /// two screens, so it is short and holds no character ``DisplayText/isUnsafe(_:)`` flags (a
    /// control character, a line break or a bidi control could put other words on either screen;
    /// some servers pass them through unchecked).
    static func bindingMessageProblem(_ message: String) -> String? {
        if message.isEmpty { return "is empty" }
        if message.unicodeScalars.count > BackchannelAuthenticationRequest.maximumBindingMessageLength {
            return "is longer than \(BackchannelAuthenticationRequest.maximumBindingMessageLength) characters"
        }
        if message.unicodeScalars.contains(where: DisplayText.isUnsafe) { return "holds a control character, a line break or a bidi control" }
        return nil
    }

    /// Why `hint` may not be sent as a `login_hint` (or a `user_code`), or nil when it may:
    /// not empty, not huge, no control character.
    static func hintProblem(_ hint: String) -> String? {
        if hint.isEmpty { return "is empty" }
        if hint.utf8.count > maximumHintLength { return "is longer than \(maximumHintLength) bytes" }
        if hint.unicodeScalars.contains(where: DisplayText.isUnsafe) { return "holds a control character" }
        return nil
    }

    /// Why `token` may not be sent as an `id_token_hint` or `login_hint_token`, or nil when it
    /// may: printable ASCII without spaces, not huge.
    private static func tokenProblem(_ token: String) -> String? {
        if token.isEmpty { return "is empty" }
        if token.utf8.count > maximumHintLength { return "is longer than \(maximumHintLength) bytes" }
        if !TokenType.isPrintable(token) { return "is not printable ASCII" }
        return nil
    }

    /// Sends the checked request with the client's authentication and decodes the
    /// acknowledgement. Never retried: each request asks the person once more.
    /// - Throws: ``OAuthError`` `.configuration` (see ``fields(_:provider:notificationToken:)``);
    ///   `.serverRejected` for a §13 error (`unknown_user_id`, `invalid_binding_message`,
    ///   `missing_user_code`…), `.accessDenied`; `.invalidResponse` (see ``decode(_:provider:notificationToken:bindingMessage:scopes:now:)``);
    ///   `.transport`.
    static func start(
        _ request: BackchannelAuthenticationRequest, client: EndpointClient, url: URL, now: @Sendable () -> Date
    ) async throws(OAuthError) -> BackchannelAuthentication {
        let provider = client.provider
        // CIBA Core §7.1: 128 bits at least; 256 random bits in base64url are 43 characters of
        // [A-Za-z0-9_-], inside every server's alphabet.
        var token: Secret?
        if provider.cibaDeliveryMode == .ping { token = Secret(Base64URL.encode(try SecureRandom.bytes(32))) }
        let (fields, scopes) = try Self.fields(request, provider: provider, notificationToken: token)
        let object = try await client.post(fields, to: url, endpoint: .backchannelAuthentication)
        return try decode(object, provider: provider, notificationToken: token, bindingMessage: request.bindingMessage, scopes: scopes, now: now())
    }

    /// Decodes a §7.3 acknowledgement received at `now`: `auth_req_id` of 1 to
    /// ``maximumAuthRequestIDLength`` printable ASCII characters; `expires_in` and `interval` as
    /// ``Poll/timing(_:)`` reads them for both polled grants.
    /// - Throws: ``OAuthError`` `.invalidResponse` naming the member at fault, never its value.
    static func decode(
        _ object: JSONObject, provider: Provider, notificationToken: Secret?, bindingMessage: String?, scopes: [String], now: Date
    ) throws(OAuthError) -> BackchannelAuthentication {
        let id = try object.requiredString("auth_req_id")
        // It goes back in every poll's body; it is never shown, but a server that sends a control
        // character or a page of text in it is not trusted with the rest.
        guard id.utf8.count <= maximumAuthRequestIDLength else { throw object.fail("auth_req_id is longer than \(maximumAuthRequestIDLength) bytes") }
        guard TokenType.isPrintable(id) else {
            throw object.fail("auth_req_id holds a character other than printable ASCII")
        }
        let (expiresIn, interval) = try Poll.timing(object)
        return BackchannelAuthentication(
            providerID: provider.id, authRequestID: Secret(id), notificationToken: notificationToken, bindingMessage: bindingMessage,
            expiresAt: now.addingTimeInterval(TimeInterval(expiresIn)), expiresIn: expiresIn, interval: interval,
            deliveryMode: provider.cibaDeliveryMode, scopes: scopes)
    }

    // MARK: The token request (§10.1)

    /// The token request for `authentication`: the token endpoint polls with it (Grants/Polling.swift).
    static func request(polling authentication: BackchannelAuthentication) -> GrantRequest {
        GrantRequest(.poll(.backchannel(authentication)), grant: .ciba, requestedScopes: authentication.scopes)
    }

    /// What each poll sends (CIBA Core §10.1): the grant type and the `auth_req_id`.
    static func fields(polling authentication: BackchannelAuthentication) -> [(String, String)] {
        [("grant_type", GrantType.ciba.rawValue), ("auth_req_id", authentication.authRequestID.reveal())]
    }

    static func expired(_ authentication: BackchannelAuthentication) -> OAuthError {
        OAuthError(.expired, providerID: authentication.providerID, endpoint: .token,
                   message: "the backchannel authentication request expired before the person answered it (CIBA Core §11)")
    }

    static func cancelled(_ authentication: BackchannelAuthentication) -> OAuthError {
        OAuthError(.cancelled, providerID: authentication.providerID, endpoint: .token, message: "backchannel authentication polling was cancelled")
    }
}

// MARK: - Ping mode (§10.2)

/// The ping-mode requests of one provider being polled, each woken when its ping arrives
/// (CIBA Core §10.2: a POST to the client's notification endpoint, `Authorization: Bearer
/// <client_notification_token>`, body `{"auth_req_id": …}`).
///
/// ``AuthFlow/requestBackchannelAuthentication(provider:_:)`` registers a ping-mode request;
/// ``AuthFlow/receiveBackchannelNotification(authorization:body:)`` delivers what your
/// notification endpoint received; the token endpoint's poll waits on ``wait(_:)`` beside its
/// interval, and unregisters the request when it ends. A ping names a request by both its token and its `auth_req_id`, compared in constant
/// time; one that names none wakes nothing.
final class BackchannelPings: Sendable {
    private struct Waiting {
        let authRequestID: Secret
        let token: Secret
        let expiresAt: Date
        var pinged = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private struct Inner {
        var waiting: [UInt64: Waiting] = [:]
        var nextID: UInt64 = 0
    }
    private let inner = Mutex(Inner())

    /// Starts listening for the pings of `authentication` (from its acknowledgement on, so a ping
    /// that comes before the poll starts is kept), or finds its registration; nil when it has no
    /// notification token (poll mode). Registrations whose request expired before `now` go.
    func register(_ authentication: BackchannelAuthentication, now: Date) -> UInt64? {
        guard let token = authentication.notificationToken else { return nil }
        let expired = inner.withLock { inner -> [CheckedContinuation<Void, Never>] in
            let gone = inner.waiting.filter { $0.value.expiresAt <= now }
            for key in gone.keys { inner.waiting[key] = nil }
            return gone.values.compactMap(\.waiter)
        }
        for waiter in expired { waiter.resume() }
        return inner.withLock { inner in
            if let existing = inner.waiting.first(where: { $0.value.authRequestID.constantTimeEquals(authentication.authRequestID) }) {
                return existing.key
            }
            let id = inner.nextID
            inner.nextID += 1
            inner.waiting[id] = Waiting(authRequestID: authentication.authRequestID, token: token, expiresAt: authentication.expiresAt)
            return id
        }
    }

    /// Stops waiting for `id`'s pings.
    func unregister(_ id: UInt64) {
        let waiter = inner.withLock { $0.waiting.removeValue(forKey: id)?.waiter }
        waiter?.resume()
    }

    /// Returns when a ping for `id` arrived since the last return, or when the task is cancelled.
    func wait(_ id: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Under the lock: a cancellation either came before (seen here) or finds the waiter.
                let resumeNow = inner.withLock { inner -> Bool in
                    guard var entry = inner.waiting[id], !Task.isCancelled else { return true }
                    if entry.pinged {
                        entry.pinged = false
                        inner.waiting[id] = entry
                        return true
                    }
                    entry.waiter = continuation
                    inner.waiting[id] = entry
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = inner.withLock { inner -> CheckedContinuation<Void, Never>? in
                let waiter = inner.waiting[id]?.waiter
                inner.waiting[id]?.waiter = nil
                return waiter
            }
            waiter?.resume()
        }
    }

    /// Wakes the request that `token` and `authRequestID` name; false when none does.
    func deliver(token: String, authRequestID: String) -> Bool {
        let (found, waiter) = inner.withLock { inner -> (Bool, CheckedContinuation<Void, Never>?) in
            let token = Secret(token), id = Secret(authRequestID)
            guard let key = inner.waiting.first(where: { $0.value.token.constantTimeEquals(token) && $0.value.authRequestID.constantTimeEquals(id) })?.key,
                  var entry = inner.waiting[key] else { return (false, nil) }
            let waiter = entry.waiter
            entry.waiter = nil
            entry.pinged = waiter == nil
            inner.waiting[key] = entry
            return (true, waiter)
        }
        waiter?.resume()
        return found
    }

    /// The `auth_req_id` of a ping body (`{"auth_req_id": "…"}`, at most 4 KB); nil for anything else.
    static func authRequestID(inPing body: Data) -> String? {
        guard body.count <= 4096, let value = try? JSONValue.parse(body), case .object(let members) = value,
              case .string(let id)? = members["auth_req_id"], !id.isEmpty else { return nil }
        return id
    }

    /// The token of an `Authorization: Bearer <token>` header value (the scheme in any case); nil otherwise.
    static func bearer(_ authorization: String?) -> String? {
        guard let authorization, authorization.utf8.count <= 2048 else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = ASCIIText.trimmingBlanks(parts[1])
        return token.isEmpty ? nil : token
    }
}
