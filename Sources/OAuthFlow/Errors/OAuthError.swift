#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The one error OAuthFlow throws: what happened, where, and what to do next.
///
/// Switch on ``Fields/code`` to decide; read ``recovery`` for the next step (retry later,
/// reauthorize, fix the configuration). A server's RFC 6749 §5.2 error body is parsed into
/// ``Fields/response``. `description` never contains a secret, a response body, or a URL query.
@dynamicMemberLookup
public struct OAuthError: Error, Sendable, Equatable {
    /// What kind of failure this is; an open set, so new codes break no `switch`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case configuration, transport, httpStatus, serverRejected, accessDenied, expired,
                 invalidResponse, stateMismatch, invalidCallback, idTokenRejected, storage,
                 crypto, cancelled, reauthorizationRequired, timedOut, stepUpRequired
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The provider or call was configured wrongly; fix it, retrying will not help.
        public static let configuration = Code(.configuration)
        /// The request did not reach the server or the connection failed; retry later.
        public static let transport = Code(.transport)
        /// The server answered with an unexpected HTTP status and no §5.2 body; see ``OAuthError/Fields/httpStatus``.
        public static let httpStatus = Code(.httpStatus)
        /// The server sent an RFC 6749 §5.2 error; see ``OAuthError/Fields/response``.
        public static let serverRejected = Code(.serverRejected)
        /// The user or the server denied the request (`access_denied`, RFC 6749 §4.1.2.1, RFC 8628 §3.5).
        public static let accessDenied = Code(.accessDenied)
        /// A device code or pending authorization expired (`expired_token`, RFC 8628 §3.5); start again.
        public static let expired = Code(.expired)
        /// A 2xx response that is not a valid token or device-code response.
        public static let invalidResponse = Code(.invalidResponse)
        /// The callback's `state` matched no pending request, was reused, or expired (RFC 6749 §10.12).
        public static let stateMismatch = Code(.stateMismatch)
        /// The callback URL is malformed, lacks `code`, or carries a wrong `iss` (RFC 9207).
        public static let invalidCallback = Code(.invalidCallback)
        /// The ID token failed validation (OpenID Connect Core §3.1.3.7, §12.2): its signature, `iss`, `aud`,
        /// `azp`, `exp`/`iat`/`nbf`, `nonce`, `at_hash`/`c_hash` or `auth_time`. The message names the failed
        /// check, never the token; nothing was stored. Log in again (``Recovery/reauthorize``).
        public static let idTokenRejected = Code(.idTokenRejected)
        /// The secret store could not read or write; see the message and ``OAuthError/Fields/underlying``.
        public static let storage = Code(.storage)
        /// A cryptographic primitive failed.
        public static let crypto = Code(.crypto)
        /// The task was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The stored authorization can no longer be refreshed; run an interactive grant again.
        public static let reauthorizationRequired = Code(.reauthorizationRequired)
        /// A wait ran out (a lock, a callback, a poll deadline).
        public static let timedOut = Code(.timedOut)
        /// A protected resource asked for more than the token carries: a scope
        /// (`insufficient_scope`, RFC 6750 §3.1) or a stronger or more recent authentication
        /// (`insufficient_user_authentication`, RFC 9470 §3). ``OAuthError/Fields/challenge`` says what it
        /// asked; a person logs in again with it (``AuthFlow/stepUpRequest(provider:challenge:)``).
        public static let stepUpRequired = Code(.stepUpRequired)

        /// The code's name, such as `serverRejected`.
        public var description: String { base.rawValue }
    }

    /// The endpoint a failed request went to.
    public enum Endpoint: String, Sendable, Hashable {
        /// The authorization endpoint or its redirect (RFC 6749 §3.1).
        case authorization
        /// The token endpoint (RFC 6749 §3.2).
        case token
        /// The device authorization endpoint (RFC 8628 §3.1).
        case deviceAuthorization
        /// The revocation endpoint (RFC 7009).
        case revocation
        /// The introspection endpoint (RFC 7662).
        case introspection
        /// The userinfo endpoint (OpenID Connect Core §5.3).
        case userinfo
        /// The end-session endpoint (OpenID Connect RP-Initiated Logout 1.0 §2).
        case endSession
        /// Discovery or JWKS documents.
        case discovery
        /// The pushed authorization request endpoint (RFC 9126 §2).
        case pushedAuthorization
        /// The client registration endpoint (RFC 7591 §3) or a client configuration endpoint (RFC 7592 §2).
        case registration
        /// A protected resource or its metadata (RFC 9728, RFC 6750 §3).
        case resource
        /// The backchannel authentication endpoint (OpenID Connect CIBA Core 1.0 §7).
        case backchannelAuthentication
    }

    /// The next step that can help.
    public enum Recovery: String, Sendable, Hashable, CaseIterable {
        /// Try the same call again later; the failure is temporary.
        case retryLater
        /// Run an interactive grant again (browser or device login): a person can help.
        case reauthorize
        /// Fix the provider configuration, credentials, or the call's arguments.
        case fixConfiguration
        /// Nothing to do: the user cancelled or denied.
        case none
    }

    /// What an error says. Read and set each field on the error itself (`error.code`, `error.message`).
    public struct Fields: Sendable {
        /// What kind of failure.
        public var code: Code

        /// The provider involved, when known.
        public var providerID: String?

        /// The endpoint the request went to, when one did.
        public var endpoint: Endpoint?

        /// The HTTP status of the response, when one arrived.
        public var httpStatus: Int?

        /// The parsed RFC 6749 §5.2 error body, when the server sent one.
        public var response: ErrorResponse?

        /// A human sentence of context; never holds a secret.
        public var message: String?

        /// The lower-level error, such as a `URLError` or a POSIX error.
        public var underlying: (any Error)?

        /// What a protected resource asked for (``Code/stepUpRequired``), read from its
        /// `WWW-Authenticate` challenge (RFC 6750 §3, RFC 9470 §3); nil for other errors.
        public var challenge: ResourceChallenge? = nil
        /// The grant whose token request failed (`.refreshToken` for a refresh), when the token
        /// endpoint's exchange did; it decides whether a refused grant is a person's to redo
        /// (``Recovery/reauthorize``) or a credential's to fix (``Recovery/fixConfiguration``).
        public var grant: GrantType? = nil
    }

    /// The fields behind one reference (``CopyOnWrite``).
    @usableFromInline var storage: CopyOnWrite<Fields>

    /// A field of ``Fields``, read and written on the error: `error.code`, `error.providerID = id`.
    @inlinable
    public subscript<Value>(dynamicMember field: WritableKeyPath<Fields, Value>) -> Value {
        _read { yield storage[field] }
        _modify { yield &storage[field] }
    }

    /// Creates an error; library code fills in what it knows.
    public init(
        _ code: Code, providerID: String? = nil, endpoint: Endpoint? = nil, httpStatus: Int? = nil,
        response: ErrorResponse? = nil, message: String? = nil, underlying: (any Error)? = nil
    ) {
        storage = CopyOnWrite(Fields(
            code: code, providerID: providerID, endpoint: endpoint, httpStatus: httpStatus, response: response, message: message,
            underlying: underlying))
    }

    /// What the caller should do next.
    ///
    /// A refused grant (`invalid_grant`, `invalid_token`) is ``Recovery/reauthorize`` when a person
    /// can redo it (a code, a device login, a refresh: see ``GrantType/needsPerson``), and
    /// ``Recovery/fixConfiguration`` for a grant no person logs in to (client credentials, a
    /// JWT-bearer assertion, a token exchange): there the key, the secret or the subject token was
    /// refused, and only a fixed credential helps.
    public var recovery: Recovery {
        switch self.code {
        case .transport, .timedOut: return .retryLater
        case .httpStatus:
            guard let status = self.httpStatus else { return .retryLater }
            return status == 429 || status >= 500 ? .retryLater : .fixConfiguration
        case .serverRejected:
            switch self.response?.code {
            case .invalidGrant?, .invalidToken?: return self.grant?.needsPerson == false ? .fixConfiguration : .reauthorize
            case .temporarilyUnavailable?, .serverError?, .slowDown?, .authorizationPending?: return .retryLater
            default: return .fixConfiguration
            }
        case .reauthorizationRequired, .expired, .stateMismatch, .invalidCallback, .idTokenRejected, .stepUpRequired: return .reauthorize
        case .accessDenied, .cancelled: return .none
        case .invalidResponse: return (self.httpStatus ?? 200) >= 500 ? .retryLater : .fixConfiguration
        case .storage, .crypto, .configuration: return .fixConfiguration
        default: return .fixConfiguration
        }
    }

    /// True when retrying the same call later can succeed.
    public var isRetryable: Bool { recovery == .retryLater }

    /// Equal when code, provider, endpoint, status, §5.2 body, message and grant agree (the underlying error is ignored).
    public static func == (lhs: OAuthError, rhs: OAuthError) -> Bool {
        lhs.code == rhs.code && lhs.providerID == rhs.providerID && lhs.endpoint == rhs.endpoint
            && lhs.httpStatus == rhs.httpStatus && lhs.response == rhs.response && lhs.message == rhs.message
            && lhs.challenge == rhs.challenge
            && lhs.grant == rhs.grant
    }
}

extension OAuthError: CustomStringConvertible, LocalizedError {
    /// One line: code, provider, endpoint, status, the §5.2 `error` and its description, the
    /// message, and the underlying error's type. Never a body, header, URL query, or secret;
    /// control characters are shown escaped (``DisplayText/escape(_:)``).
    public var description: String {
        var parts = ["OAuthError.\(self.code)"]
        if let providerID = self.providerID { parts.append("provider=\(DisplayText.escape(providerID))") }
        if let endpoint = self.endpoint { parts.append("endpoint=\(endpoint.rawValue)") }
        if let httpStatus = self.httpStatus { parts.append("status=\(httpStatus)") }
        if let response = self.response {
            parts.append("error=\(response.code.rawValue)")
            if let text = response.errorDescription { parts.append("description=\"\(text)\"") }
        }
        if let message = self.message { parts.append("— \(DisplayText.escape(message))") }
        if let underlying = self.underlying { parts.append("(underlying: \(type(of: underlying)))") }
        parts.append("[next: \(recovery.rawValue)]")
        return parts.joined(separator: " ")
    }

    /// Same as ``description``.
    public var errorDescription: String? { description }
}

extension OAuthError: CustomDebugStringConvertible, CustomReflectable {
    /// Same as ``description``: `String(reflecting:)` shows no more than `print` does.
    public var debugDescription: String { description }

    /// What `dump` and debuggers show: the same fields as ``description``, with the underlying
    /// error as its type only. The underlying error itself is not reflected, because a `URLError`'s
    /// `userInfo` holds the failing URL, query and all, and other errors may hold worse; nor is the
    /// server's `error_uri` (read it from ``Fields/response``).
    public var customMirror: Mirror {
        var children: [(label: String?, value: Any)] = [("code", self.code.description)]
        if let providerID = self.providerID { children.append(("providerID", DisplayText.escape(providerID))) }
        if let endpoint = self.endpoint { children.append(("endpoint", endpoint.rawValue)) }
        if let httpStatus = self.httpStatus { children.append(("httpStatus", httpStatus)) }
        if let response = self.response {
            children.append(("error", response.code.rawValue))
            if let text = response.errorDescription { children.append(("errorDescription", text)) }
        }
        if let message = self.message { children.append(("message", DisplayText.escape(message))) }
        if let challenge = self.challenge, !challenge.asked.isEmpty { children.append(("asked", challenge.asked)) }
        if let underlying = self.underlying { children.append(("underlying", String(describing: type(of: underlying)))) }
        children.append(("recovery", recovery.rawValue))
        return Mirror(self, children: children, displayStyle: .struct)
    }
}

/// An authorization server's error body ([RFC 6749 §5.2](https://www.rfc-editor.org/rfc/rfc6749#section-5.2)).
///
/// Read ``code`` to decide; ``errorDescription`` is for people. Sanitized on parse: printable
/// ASCII, which §5.2 requires of these fields, is kept, every other character is written as a
/// visible escape such as `\u{1B}`, and lengths are bounded.
public struct ErrorResponse: Sendable, Hashable, Codable {
    /// An `error` value; an open set, since extensions define more (RFC 8628 §3.5 among them).
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The wire value, such as `invalid_grant`.
        public var rawValue: String
        /// Wraps a wire value.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The wire value.
        public var description: String { rawValue }

        /// `invalid_request` (RFC 6749 §5.2).
        public static let invalidRequest = Code(rawValue: "invalid_request")
        /// `invalid_client` (RFC 6749 §5.2): client authentication failed; fix the credentials.
        public static let invalidClient = Code(rawValue: "invalid_client")
        /// `invalid_grant` (RFC 6749 §5.2): the code or refresh token is invalid, expired or revoked.
        public static let invalidGrant = Code(rawValue: "invalid_grant")
        /// `unauthorized_client` (RFC 6749 §5.2).
        public static let unauthorizedClient = Code(rawValue: "unauthorized_client")
        /// `unsupported_grant_type` (RFC 6749 §5.2).
        public static let unsupportedGrantType = Code(rawValue: "unsupported_grant_type")
        /// `invalid_scope` (RFC 6749 §5.2).
        public static let invalidScope = Code(rawValue: "invalid_scope")
        /// `access_denied` (RFC 6749 §4.1.2.1, RFC 8628 §3.5).
        public static let accessDenied = Code(rawValue: "access_denied")
        /// `server_error` (RFC 6749 §4.1.2.1).
        public static let serverError = Code(rawValue: "server_error")
        /// `temporarily_unavailable` (RFC 6749 §4.1.2.1).
        public static let temporarilyUnavailable = Code(rawValue: "temporarily_unavailable")
        /// `authorization_pending` (RFC 8628 §3.5).
        public static let authorizationPending = Code(rawValue: "authorization_pending")
        /// `slow_down` (RFC 8628 §3.5).
        public static let slowDown = Code(rawValue: "slow_down")
        /// `expired_token` (RFC 8628 §3.5).
        public static let expiredToken = Code(rawValue: "expired_token")
        /// `invalid_token` (RFC 6750 §3.1): a protected resource rejected the access token (expired,
        /// revoked, malformed); refresh it or authorize again.
        public static let invalidToken = Code(rawValue: "invalid_token")
        /// `insufficient_scope` (RFC 6750 §3.1): the access token lacks a scope the resource needs.
        public static let insufficientScope = Code(rawValue: "insufficient_scope")
        /// `insufficient_user_authentication` (RFC 9470 §3): the resource wants a stronger or more
        /// recent authentication (`acr_values`, `max_age`).
        public static let insufficientUserAuthentication = Code(rawValue: "insufficient_user_authentication")
        /// `invalid_redirect_uri` (RFC 7591 §3.2.2): a redirect URI was refused at registration.
        public static let invalidRedirectURI = Code(rawValue: "invalid_redirect_uri")
        /// `invalid_client_metadata` (RFC 7591 §3.2.2): a client metadata value was refused at registration.
        public static let invalidClientMetadata = Code(rawValue: "invalid_client_metadata")
    }

    /// The `error` value.
    public var code: Code
    /// The optional `error_description`.
    public var errorDescription: String?
    /// The optional `error_uri`.
    public var errorURI: String?

    /// Creates an error body, sanitizing each field.
    public init(code: Code, errorDescription: String? = nil, errorURI: String? = nil) {
        self.code = Code(rawValue: Self.sanitize(code.rawValue, limit: 128) ?? "")
        self.errorDescription = errorDescription.flatMap { Self.sanitize($0, limit: 512) }
        self.errorURI = errorURI.flatMap { Self.sanitize($0, limit: 512) }
    }

    enum CodingKeys: String, CodingKey {
        case code = "error", errorDescription = "error_description", errorURI = "error_uri"
    }

    /// Decodes `error`, `error_description`, `error_uri`; other keys are ignored.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            code: try container.decode(Code.self, forKey: .code),
            errorDescription: try? container.decodeIfPresent(String.self, forKey: .errorDescription),
            errorURI: try? container.decodeIfPresent(String.self, forKey: .errorURI)
        )
    }

    /// Keeps the printable ASCII that RFC 6749 §5.2 allows and writes every other character as a
    /// visible escape (`\u{1B}`, `\u{E9}`), bounded to `limit` characters; a value made only of
    /// control characters therefore stays visible instead of printing as nothing.
    static func sanitize(_ text: String, limit: Int) -> String? {
        var kept = ""
        for scalar in text.unicodeScalars {
            let piece = (0x20...0x7E).contains(scalar.value)
                ? String(scalar) : "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            guard kept.utf8.count + piece.utf8.count <= limit else { break }
            kept += piece
        }
        return kept.isEmpty ? nil : kept
    }
}
