#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The tokens a token endpoint issued, with when they were issued and when they expire.
///
/// Held by ``AuthFlow`` and written to the ``SecretStore``; every token is a ``Secret``.
/// Get the access token through ``AuthFlow/accessToken(for:)``, which refreshes when needed.
/// See [RFC 6749 §5.1](https://www.rfc-editor.org/rfc/rfc6749#section-5.1).
@dynamicMemberLookup
public struct TokenSet: Sendable, Codable {
    /// What a token set holds. Read and set each field on the set itself (`set.expiresAt`);
    /// the `Codable` form of a ``TokenSet`` is this struct's, member for member.
    public struct Fields: Sendable, Codable {
        /// The provider that issued these tokens.
        public var providerID: String

        /// The `access_token`.
        public var accessToken: Secret

        /// The `token_type` as sent (compare case-insensitively; see ``isBearer``).
        public var tokenType: String

        /// The `refresh_token`, when one was issued (or kept from before, RFC 6749 §6).
        public var refreshToken: Secret?

        /// The OpenID Connect `id_token` as sent, once validated (the `id_token_hint` of
        /// ``AuthFlow/endSessionURL(provider:postLogoutRedirectURI:state:)``); nil when none was
        /// issued or it could not be validated (a provider without `issuer`: it is discarded).
        public var idToken: Secret?

        /// The claims of ``idToken`` once validated (OpenID Connect Core §3.1.3.7); nil when there is no
        /// validated ID token.
        public var validatedIDToken: IDToken?

        /// The granted scopes (the response's `scope`, or the requested ones when it is absent, RFC 6749 §5.1).
        public var scopes: [String]

        /// When the token response arrived.
        public var issuedAt: Date

        /// `issuedAt + expires_in`, or nil when the server gave no lifetime.
        public var expiresAt: Date?

        /// The grant that produced the first token of this authorization.
        public var grant: GrantType

        /// True once a refresh failed with `invalid_grant`: only an interactive grant can help.
        public var needsReauthorization: Bool

        /// The `issued_token_type` of a token exchange (RFC 8693 §2.2.1), such as
        /// ``TokenType/accessToken``; nil for the other grants. ``accessToken`` holds the issued token.
        public var issuedTokenType: String?

        /// The DPoP key the flow made for the provider, kept with the tokens (never shown).
        var dpopKey: DPoPKey? = nil
    }

    /// The fields behind one reference (``CopyOnWrite``).
    @usableFromInline var storage: CopyOnWrite<Fields>

    /// A field of ``Fields``, read and written on the set: `set.accessToken`, `set.scopes = []`.
    @inlinable
    public subscript<Value>(dynamicMember field: WritableKeyPath<Fields, Value>) -> Value {
        _read { yield storage[field] }
        _modify { yield &storage[field] }
    }

    /// Decodes the members `encode(to:)` writes (the property names).
    /// - Throws: `DecodingError` for a missing member or a wrong type.
    public init(from decoder: any Decoder) throws {
        storage = CopyOnWrite(try Fields(from: decoder))
    }

    /// Encodes every property under its name, tokens included: only for a store of your own.
    /// - Throws: what the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        try storage.fields.encode(to: encoder)
    }

    /// Creates a token set.
    public init(
        providerID: String, accessToken: Secret, tokenType: String = "Bearer", refreshToken: Secret? = nil,
        idToken: Secret? = nil, validatedIDToken: IDToken? = nil, scopes: [String] = [], issuedAt: Date,
        expiresAt: Date? = nil, grant: GrantType, needsReauthorization: Bool = false, issuedTokenType: String? = nil
    ) {
        storage = CopyOnWrite(Fields(
            providerID: providerID, accessToken: accessToken, tokenType: tokenType, refreshToken: refreshToken, idToken: idToken,
            validatedIDToken: validatedIDToken, scopes: scopes, issuedAt: issuedAt, expiresAt: expiresAt, grant: grant,
            needsReauthorization: needsReauthorization, issuedTokenType: issuedTokenType))
    }

    /// True when `token_type` is `Bearer` in any case (RFC 6749 §5.1 says it is case-insensitive).
    public var isBearer: Bool { self.tokenType.lowercased() == "bearer" }

    /// True when `token_type` is `DPoP` (RFC 9449 §5): the token is bound to the provider's DPoP
    /// key and is sent with a proof (``AuthorizingTransport``, ``TokenSource/authorizationHeaders(method:url:)``).
    public var isDPoPBound: Bool { TokenSyntax.isDPoP(self.tokenType) }

    /// True when the access token expires within `margin` of `now` (never, without an expiry).
    public func isExpired(at now: Date, margin: TimeInterval = 0) -> Bool {
        guard let expiresAt = self.expiresAt else { return false }
        return expiresAt.timeIntervalSince(now) <= margin
    }

    /// What may be shown about these tokens: no secret in it.
    public var authorization: Authorization {
        Authorization(
            providerID: self.providerID, tokenType: self.tokenType, scopes: self.scopes, issuedAt: self.issuedAt, expiresAt: self.expiresAt,
            grant: self.grant, isRefreshable: self.refreshToken != nil, hasIDToken: self.idToken != nil,
            needsReauthorization: self.needsReauthorization, idToken: self.validatedIDToken, issuedTokenType: self.issuedTokenType
        )
    }
}

/// What a state or a status line may show about a stored authorization; it holds no secret.
///
/// Published in ``AuthFlow/State/authorized(provider:_:)``. Call ``AuthFlow/accessToken(for:)``
/// for the token itself.
public struct Authorization: Sendable, Hashable, Codable {
    /// The provider.
    public var providerID: String
    /// The `token_type`.
    public var tokenType: String
    /// The granted scopes.
    public var scopes: [String]
    /// When the token was issued.
    public var issuedAt: Date
    /// When the access token expires, if known.
    public var expiresAt: Date?
    /// The grant that produced it.
    public var grant: GrantType
    /// True when a refresh token is held.
    public var isRefreshable: Bool
    /// True when a validated ID token is held.
    public var hasIDToken: Bool
    /// True when a refresh failed with `invalid_grant` and an interactive grant is needed.
    public var needsReauthorization: Bool
    /// The validated ID token's claims (`sub`, `iss`, …), when the provider issued one and it passed
    /// every check of OpenID Connect Core §3.1.3.7; nil otherwise (see `Documentation/OIDC.md`).
    public var idToken: IDToken?
    /// The `issued_token_type` of a token exchange (RFC 8693 §2.2.1); nil for the other grants.
    public var issuedTokenType: String? = nil

    /// True when the access token is DPoP-bound (`token_type` `DPoP`, RFC 9449 §5); the key is never shown.
    public var isDPoPBound: Bool { TokenSyntax.isDPoP(tokenType) }
}

/// The OAuth grants OAuthFlow runs.
public enum GrantType: String, Sendable, Hashable, Codable, CaseIterable {
    /// Authorization code with PKCE (RFC 6749 §4.1, RFC 7636).
    case authorizationCode = "authorization_code"
    /// Device authorization (RFC 8628).
    case deviceCode = "urn:ietf:params:oauth:grant-type:device_code"
    /// Client credentials (RFC 6749 §4.4).
    case clientCredentials = "client_credentials"
    /// Refresh (RFC 6749 §6).
    case refreshToken = "refresh_token"
    /// The JWT-bearer grant with a service-account key (RFC 7523 §2.1).
    case jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Token exchange (RFC 8693 §2.1): a subject token, such as a workload's JWT, for a token of this provider.
    case tokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
    /// Client-initiated backchannel authentication (OpenID Connect CIBA Core 1.0 §10.1): the
    /// person approves on their own device, found by a hint.
    case ciba = "urn:openid:params:grant-type:ciba"
}

extension GrantType {
    /// True for the grants a person takes part in (authorization code, device authorization, CIBA)
    /// and for refresh, which renews a person's login; false for the grants a program runs alone with
    /// its own credential (client credentials, JWT bearer, token exchange), whose refusal a login
    /// cannot fix (``OAuthError/recovery``).
    public var needsPerson: Bool {
        switch self {
        case .authorizationCode, .deviceCode, .ciba, .refreshToken: return true
        case .clientCredentials, .jwtBearer, .tokenExchange: return false
        }
    }
}

/// The device authorization response a person acts on ([RFC 8628 §3.2](https://www.rfc-editor.org/rfc/rfc8628#section-3.2)).
///
/// Show ``verificationURI`` (or ``verificationURIComplete``) and ``userCode``, then await
/// ``AuthFlow/pollDeviceAuthorization(_:)``. The `device_code` itself stays inside and never prints.
public struct DeviceCode: Sendable, Hashable, CustomStringConvertible {
    /// The provider.
    public var providerID: String
    /// The `user_code` the person types in.
    public var userCode: String
    /// The `verification_uri` (Google sends `verification_url`).
    public var verificationURI: URL
    /// The `verification_uri_complete`, with the user code embedded, when sent.
    public var verificationURIComplete: URL?
    /// When the codes stop working (`expires_in` after receipt).
    public var expiresAt: Date
    /// The lifetime as sent, in seconds.
    public var expiresIn: Int
    /// The current polling interval in seconds (5 when absent; `slow_down` adds 5).
    public var interval: Int
    /// The scopes requested.
    public var scopes: [String]
    let deviceCode: Secret

    init(
        providerID: String, deviceCode: Secret, userCode: String, verificationURI: URL, verificationURIComplete: URL?,
        expiresAt: Date, expiresIn: Int, interval: Int, scopes: [String]
    ) {
        self.providerID = providerID
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresAt = expiresAt
        self.expiresIn = expiresIn
        self.interval = interval
        self.scopes = scopes
    }

    /// Equal when everything visible and the device code agree.
    public static func == (lhs: DeviceCode, rhs: DeviceCode) -> Bool {
        lhs.providerID == rhs.providerID && lhs.userCode == rhs.userCode && lhs.verificationURI == rhs.verificationURI
            && lhs.verificationURIComplete == rhs.verificationURIComplete && lhs.expiresAt == rhs.expiresAt
            && lhs.expiresIn == rhs.expiresIn && lhs.interval == rhs.interval && lhs.scopes == rhs.scopes
            && lhs.deviceCode.constantTimeEquals(rhs.deviceCode)
    }

    /// Hashes the visible fields.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(providerID)
        hasher.combine(userCode)
        hasher.combine(expiresAt)
        hasher.combine(interval)
    }

    /// The user-facing fields; the device code shows as `<redacted>`.
    public var description: String {
        "DeviceCode(provider: \(providerID), userCode: \(userCode), verificationURI: \(verificationURI.absoluteString), "
            + "expiresIn: \(expiresIn), interval: \(interval), deviceCode: <redacted>)"
    }
}

extension TokenSet {
    /// A token set from a §5.1 response received at `now`.
    init(_ response: TokenResponse, providerID: String, requestedScopes: [String], grant: GrantType, now: Date) {
        let scopes = response.scope.map { $0.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init) } ?? requestedScopes
        self.init(
            providerID: providerID, accessToken: response.accessToken, tokenType: response.tokenType,
            refreshToken: response.refreshToken, idToken: response.idToken, scopes: scopes, issuedAt: now,
            expiresAt: response.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) }, grant: grant,
            issuedTokenType: response.issuedTokenType)
    }
}
