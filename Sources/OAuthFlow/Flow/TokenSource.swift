#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A valid access token for one provider, whenever a service asks: what an HTTP client plugs in.
///
/// Get one from ``AuthFlow/tokenSource(for:)`` and keep it (it is a small `Sendable` value; copies
/// share everything). ``token()`` answers from memory while the token is fresh and otherwise joins
/// the flow's single refresh, exactly as ``AuthFlow/accessToken(for:)`` does. Wrap your transport
/// in ``AuthorizingTransport`` to have every request authorized, or call
/// `URLRequest.authorize(with:)` from `OAuthFlowURLSession`.
///
/// ```swift
/// let billing = flow.tokenSource(for: "billing-api")
/// let api = AuthorizingTransport(base: transport, source: billing)  // any HTTPTransport
/// let answer = try await api.send(HTTPRequest(method: "GET", url: invoices))
/// ```
///
/// The source keeps its flow alive. See [RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750#section-2.1).
public struct TokenSource: Sendable {
    /// The provider the tokens come from.
    public let providerID: String
    /// The flow that stores and renews them.
    public let flow: AuthFlow
    /// The provider's cache slot (nil for a provider that is not configured: every call then
    /// goes to the flow, which says so).
    @usableFromInline let slot: TokenCache.Slot?
    @usableFromInline let now: @Sendable () -> Date
    /// ``AuthFlow/Options/readsSystemClock``: freshness is checked against the coarse system clock.
    @usableFromInline let readsSystemClock: Bool

    init(flow: AuthFlow, providerID: String) {
        self.flow = flow
        self.providerID = providerID
        self.slot = flow.tokens.slot(providerID)
        self.now = flow.options.now
        self.readsSystemClock = flow.options.readsSystemClock
    }

    /// A valid access token: from memory while fresh, else refreshed once for all callers.
    ///
    /// Put it in an `Authorization: Bearer` header (RFC 6750 §2.1), or let ``AuthorizingTransport`` do it.
    /// - Throws: ``OAuthError`` as ``AuthFlow/accessToken(for:)``: `.reauthorizationRequired`,
    ///   `.transport` (retry later), `.storage`, `.configuration` for a provider that is not configured.
    @inlinable
    nonisolated(nonsending) public func token() async throws(OAuthError) -> Secret {
        // One clock read; the slot's lock is held for one copy; no table lookup, no actor hop, and
        // (nonsending) no executor switch: a cached token is answered on the caller's executor.
        // Inlinable, so the caller's async frame holds it: no frame of its own either.
        let time = SystemClock.freshnessSeconds(readsSystemClock: readsSystemClock, now: now)
        if let token = slot?.freshToken(at: time) { return token }
        return try await flow.renewShared(providerID, force: false).accessToken
    }

    /// The whole valid token set (token type, scopes, expiry), refreshed when needed.
    /// - Throws: the same as ``token()``.
    nonisolated(nonsending) public func tokenSet() async throws(OAuthError) -> TokenSet {
        if let set = slot?.freshSet(at: SystemClock.freshnessSeconds(readsSystemClock: readsSystemClock, now: now)) { return set }
        return try await flow.renewShared(providerID, force: false)
    }

    /// Renews the tokens because a resource server refused `rejected` (RFC 6750 §3.1
    /// `invalid_token`) — unless the flow already holds a fresh token other than `rejected`, which
    /// it then returns: concurrent refusals of one token make a single refresh.
    /// - Throws: ``OAuthError`` as ``AuthFlow/refresh(provider:)``.
    public func renew(rejecting rejected: Secret) async throws(OAuthError) -> TokenSet {
        try await flow.renew(providerID, rejecting: rejected)
    }

    /// `Bearer <token>` for a set whose `token_type` is `Bearer` in any case (RFC 6750 §2.1;
    /// RFC 6749 §5.1 makes the type case-insensitive, so `bearer` is sent as `Bearer`).
    /// - Throws: ``OAuthError`` `.invalidResponse` for another token type (one that needs more
    ///   than a header, such as DPoP) or a token that cannot go in a header (a control character,
    ///   a space, anything outside visible ASCII).
    /// A DPoP-bound set gets `DPoP <token>` (RFC 9449 §7.1), which needs a proof beside it.
    static func authorizationValue(for set: TokenSet) throws(OAuthError) -> String {
        guard set.isBearer || set.isDPoPBound else {
            throw OAuthError(.invalidResponse, providerID: set.providerID, endpoint: .token,
                             message: "token_type \"\(set.tokenType.prefix(32))\" is not Bearer; only bearer tokens can be sent in a header")
        }
        let token = set.accessToken.reveal()
        guard !token.isEmpty, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw OAuthError(.invalidResponse, providerID: set.providerID, endpoint: .token,
                             message: "the access token holds characters an HTTP header cannot carry")
        }
        return (set.isDPoPBound ? "DPoP " : "Bearer ") + token
    }

    /// The `Authorization` header value for a valid token: `Bearer <token>`.
    ///
    /// For HTTP clients other than an ``HTTPTransport``; never log it. A failure is published as
    /// `.error` for the provider, like every failing call.
    /// - Throws: what ``tokenSet()`` throws; `.invalidResponse` for a token type other than Bearer
    ///   or a token an HTTP header cannot carry; `.configuration` for a DPoP-bound token, which
    ///   needs a proof per request (use ``authorizationHeaders(method:url:)``).
    public func authorizationHeaderValue() async throws(OAuthError) -> String {
        let set = try await tokenSet()  // its failures are published by the renewal
        guard !set.isDPoPBound else {
            throw await flow.fail(providerID, OAuthError(.configuration, providerID: providerID, message:
                "the token is DPoP-bound: it needs a proof for each request; use authorizationHeaders(method:url:)"))
        }
        do { return try Self.authorizationValue(for: set) } catch { throw await flow.fail(providerID, error) }
    }
}

extension TokenSource {
    /// The error a resource's refusal means when it asks for more than the token carries: a 401
    /// or 403 whose `WWW-Authenticate` challenge says `insufficient_scope` (RFC 6750 §3.1) or
    /// `insufficient_user_authentication` (RFC 9470 §3) gives ``OAuthError`` `.stepUpRequired`,
    /// with what it asked in ``OAuthError/Fields/challenge``; any other answer gives nil.
    ///
    /// For HTTP clients other than an ``HTTPTransport`` (``AuthorizingTransport`` throws it for
    /// you). Show the person what was asked and run ``AuthFlow/stepUpRequest(provider:challenge:)``;
    /// never log in without them. The error is published as `.error` for the provider.
    /// - Parameters:
    ///   - status: the answer's HTTP status.
    ///   - headers: its header fields (names in any case).
    /// - Throws: ``OAuthError`` `.invalidResponse` (endpoint `.resource`) for a 401 or 403 whose
    ///   challenge holds a control character or a value out of bounds (``ResourceChallenge/parse(status:headers:)``).
    public func stepUpError(status: Int, headers: [String: String]) async throws(OAuthError) -> OAuthError? {
        do {
            guard let error = try ResourceChallenge.stepUpError(status: status, headers: headers, provider: providerID) else { return nil }
            return await flow.fail(providerID, error)
        } catch {
            throw await flow.fail(providerID, error)
        }
    }

    /// Throws the step-up error of `response`, if it carries one (``stepUpError(status:headers:)``).
    func checkStepUp(_ response: HTTPResponse) async throws(OAuthError) {
        guard response.status == 401 || response.status == 403 else { return }
        if let error = try await stepUpError(status: response.status, headers: response.headers) { throw error }
    }
}

extension TokenSource: CustomStringConvertible, CustomReflectable {
    /// `TokenSource(<provider>)`: no token.
    public var description: String { "TokenSource(\(providerID))" }
    /// Only the provider id.
    public var customMirror: Mirror { Mirror(self, children: ["providerID": providerID], displayStyle: .struct) }
}

extension AuthFlow {
    /// A token source bound to `provider`, for the HTTP clients of a service.
    ///
    /// Cheap to make and to copy; make one per provider and share it. Every ``TokenSource/token()``
    /// is ``accessToken(for:)`` without the provider lookup. A provider that is not configured
    /// is reported by the first call (`.configuration`).
    public nonisolated func tokenSource(for provider: String) -> TokenSource {
        TokenSource(flow: self, providerID: provider)
    }

    /// Renews `provider` unless the cache already holds a fresh token other than `rejected`.
    func renew(_ provider: String, rejecting rejected: Secret) async throws(OAuthError) -> TokenSet {
        if let set = tokens[provider], !set.accessToken.constantTimeEquals(rejected), isFresh(set) { return set }
        return try await renewShared(provider, force: true)
    }
}
