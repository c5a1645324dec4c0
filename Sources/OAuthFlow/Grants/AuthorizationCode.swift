#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A started authorization code request: the URL to open and what the callback is checked against.
///
/// Made by ``AuthFlow/authorizationRequest(provider:scopes:parameters:usePKCE:resources:)``. Send the user to ``url``;
/// finish with ``AuthFlow/completeAuthorization(callbackURL:)``. A web back end that runs several
/// instances can keep this value in its session (it is `Codable`; the secrets in it are only
/// `state`, the PKCE verifier and the nonce) and finish with
/// ``AuthFlow/completeAuthorization(callbackURL:request:)``.
/// See [RFC 6749 §4.1.1](https://www.rfc-editor.org/rfc/rfc6749#section-4.1.1) and RFC 7636.
public struct AuthorizationRequest: Sendable, Codable, CustomStringConvertible {
    /// The provider.
    public let providerID: String
    /// The authorization URL to open in a browser; its query holds no secret but the one-time `state`.
    public let url: URL
    /// The `state` value (at least 128 bits), compared in constant time on return.
    public let state: Secret
    /// The PKCE verifier, sent with the code exchange (nil only for a confidential client that opted out).
    public let codeVerifier: Secret?
    /// The OpenID Connect `nonce`, sent when `openid` is among the scopes.
    public let nonce: Secret?
    /// The `redirect_uri` sent, and sent again with the exchange (RFC 6749 §4.1.3).
    public let redirectURI: URL
    /// The scopes requested.
    public let scopes: [String]
    /// After this the callback is refused with `.stateMismatch`.
    public let expiresAt: Date
    /// The `max_age` sent (OpenID Connect Core §3.1.2.1), in seconds; nil when none was. With it,
    /// the ID token's `auth_time` is required and must be within it of ``requestedAt``.
    public let maxAge: TimeInterval?
    /// When the request was made: the reference time for ``maxAge``. Nil only for a request
    /// encoded by a version that did not keep it; the flow that finishes it then takes
    /// ``expiresAt`` minus its ``AuthFlow/Options/pendingAuthorizationLifetime``, as that version did.
    public let requestedAt: Date?
    /// For a pushed request (RFC 9126), when its `request_uri` expires (the server's
    /// `expires_in`); ``expiresAt`` is no later. A callback after it is refused with `.expired`.
    /// Nil for a request that was not pushed.
    public let requestURIExpiresAt: Date?
    /// The `resource` indicators the request named (RFC 8707 §2.1), sent again with the code
    /// exchange (§2.2). A pushed or signed request carries them off the URL, so they are kept here.
    public let resources: [String]

    /// Provider, redirect URI, scopes and expiry; never the state, verifier or nonce.
    public var description: String {
        "AuthorizationRequest(provider: \(providerID), redirectURI: \(redirectURI.absoluteString), "
            + "scopes: \(scopes.joined(separator: " ")), expiresAt: \(expiresAt), state: <redacted>, codeVerifier: <redacted>)"
    }
}

extension AuthorizationRequest: CustomDebugStringConvertible, CustomReflectable {
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// The fields without ``url``, whose query carries `state` and `nonce`; the secrets show as `<redacted>`.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "providerID": providerID, "state": state, "codeVerifier": codeVerifier as Any, "nonce": nonce as Any,
            "redirectURI": redirectURI, "scopes": scopes, "expiresAt": expiresAt, "maxAge": maxAge as Any,
            "requestedAt": requestedAt as Any, "requestURIExpiresAt": requestURIExpiresAt as Any,
            "resources": resources,
        ], displayStyle: .struct)
    }
}

extension AuthorizationRequest {
    private enum CodingKeys: String, CodingKey {
        case providerID, url, state, codeVerifier, nonce, redirectURI, scopes, expiresAt, maxAge, requestedAt, requestURIExpiresAt, resources
    }

    /// Decodes a request encoded by ``encode(to:)``; one encoded before ``maxAge`` and
    /// ``requestedAt`` were kept still decodes: `max_age` is read back from ``url``, and
    /// ``requestedAt`` is nil; one without ``resources`` reads them back from ``url``.
    /// - Throws: `DecodingError` when a member is missing or has the wrong type.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        providerID = try container.decode(String.self, forKey: .providerID)
        url = try container.decode(URL.self, forKey: .url)
        state = try container.decode(Secret.self, forKey: .state)
        codeVerifier = try container.decodeIfPresent(Secret.self, forKey: .codeVerifier)
        nonce = try container.decodeIfPresent(Secret.self, forKey: .nonce)
        redirectURI = try container.decode(URL.self, forKey: .redirectURI)
        scopes = try container.decode([String].self, forKey: .scopes)
        expiresAt = try container.decode(Date.self, forKey: .expiresAt)
        requestedAt = try container.decodeIfPresent(Date.self, forKey: .requestedAt)
        requestURIExpiresAt = try container.decodeIfPresent(Date.self, forKey: .requestURIExpiresAt)
        resources = try container.decodeIfPresent([String].self, forKey: .resources) ?? Self.resources(in: url)
        if container.contains(.maxAge) {
            maxAge = try container.decodeIfPresent(TimeInterval.self, forKey: .maxAge)
        } else {
            maxAge = Self.maxAge(in: url)
        }
    }

    /// Encodes every member (the secrets as they are: keep the encoding as you keep the session).
    /// - Throws: what the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(providerID, forKey: .providerID)
        try container.encode(url, forKey: .url)
        try container.encode(state, forKey: .state)
        try container.encodeIfPresent(codeVerifier, forKey: .codeVerifier)
        try container.encodeIfPresent(nonce, forKey: .nonce)
        try container.encode(redirectURI, forKey: .redirectURI)
        try container.encode(scopes, forKey: .scopes)
        try container.encode(expiresAt, forKey: .expiresAt)
        try container.encode(maxAge, forKey: .maxAge)
        try container.encodeIfPresent(requestedAt, forKey: .requestedAt)
        try container.encodeIfPresent(requestURIExpiresAt, forKey: .requestURIExpiresAt)
        try container.encode(resources, forKey: .resources)
    }

    /// Every `resource` (RFC 8707) in `url`'s query, in order.
    static func resources(in url: URL) -> [String] {
        (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).filter { $0.name == "resource" }.compactMap(\.value)
    }

    /// The first `max_age` in `url`'s query, in seconds (a negative one counts as 0); nil when
    /// there is none or it is not an integer.
    static func maxAge(in url: URL) -> TimeInterval? {
        (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "max_age" }?.value)
            .flatMap { Int($0) }.map { TimeInterval(max($0, 0)) }
    }
}

/// The authorization code grant with PKCE (RFC 6749 §4.1, RFC 7636).
enum AuthorizationCodeGrant {
    /// An authorization request's parameters before they are sent anywhere: the query a plain
    /// request puts in the browser's URL, and what a pushed or signed request carries instead
    /// (Grants/PushedAuthorization.swift, Grants/RequestObject.swift).
    struct Parameters: Sendable {
        /// The endpoint the browser is sent to.
        let authorizationURL: URL
        /// Every parameter, in order: `response_type`, `client_id`, `redirect_uri`, `scope`,
        /// `state`, the PKCE challenge, `nonce`, then the extra ones sorted by name.
        let query: [(String, String)]
        let state: Secret
        let pkce: PKCE?
        let nonce: Secret?
        let redirectURI: URL
        let scopes: [String]
        /// The `resource` indicators among the parameters (RFC 8707).
        let resources: [String]
        /// The `max_age` among the parameters, in seconds.
        var maxAge: TimeInterval? {
            query.first { $0.0 == "max_age" }.flatMap { Int($0.1) }.map { TimeInterval(max($0, 0)) }
        }
    }

    /// The parameters of a new request: fresh `state`, PKCE verifier and `nonce` (for `openid`).
    /// - Throws: ``OAuthError`` `.configuration` without an authorization URL or redirect URI, for
    ///   a public client without PKCE, or an extra parameter the flow sets itself; `.crypto`
    ///   without random bytes.
    static func parameters(
        provider: Provider, authorizationURL: URL?, scopes: [String], parameters: [String: String], usePKCE: Bool,
        resources: [URL] = []
    ) throws(OAuthError) -> Parameters {
        guard let authorizationURL else {
            throw OAuthError(.configuration, providerID: provider.id, message: "provider \"\(provider.id)\" has no authorizationURL")
        }
        guard let redirectURI = provider.redirectURI else {
            throw OAuthError(.configuration, providerID: provider.id, message: "provider \"\(provider.id)\" has no redirectURI")
        }
        guard usePKCE || provider.isConfidential else {
            throw OAuthError(.configuration, providerID: provider.id,
                             message: "a public client must use PKCE (RFC 9700 §2.1.1)")
        }
        for name in parameters.keys where Provider.reservedAuthorizationParameters.contains(name) {
            throw OAuthError(.configuration, providerID: provider.id,
                             message: "authorization parameter \"\(name)\" is set by the flow and cannot be overridden")
        }
        let state = Secret(try SecureRandom.token(byteCount: 32))
        let pkce = usePKCE ? try PKCE() : nil
        let nonce = scopes.contains("openid") ? Secret(try SecureRandom.token(byteCount: 32)) : nil

        var query: [(String, String)] = [
            ("response_type", "code"), ("client_id", provider.clientID), ("redirect_uri", redirectURI.absoluteString),
        ]
        if !scopes.isEmpty { query.append(("scope", scopes.joined(separator: " "))) }
        query.append(("state", state.reveal()))
        if let pkce { query += [("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method)] }
        if let nonce { query.append(("nonce", nonce.reveal())) }
        try ResourceIndicators.append(resources, to: &query, provider: provider)   // RFC 8707 §2: one per resource
        let extra = provider.authorizationParameters.merging(parameters) { _, call in call }
        query += extra.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        return Parameters(authorizationURL: authorizationURL, query: query, state: state, pkce: pkce, nonce: nonce,
                          redirectURI: redirectURI, scopes: scopes,
                          resources: query.filter { $0.0 == "resource" }.map(\.1))
    }

    /// The request whose browser URL is the authorization endpoint with `browserQuery` appended:
    /// every parameter for a plain request, `client_id` and `request_uri` for a pushed one,
    /// `client_id`, `response_type`, `scope` and `request` for a signed one. `requestURIExpiresAt` (a pushed request's)
    /// bounds ``AuthorizationRequest/expiresAt`` too.
    /// - Throws: ``OAuthError`` `.configuration` when the URL cannot be built.
    static func request(
        _ parameters: Parameters, providerID: String, browserQuery: [(String, String)], now: Date, lifetime: TimeInterval,
        requestURIExpiresAt: Date? = nil
    ) throws(OAuthError) -> AuthorizationRequest {
        guard var components = URLComponents(url: parameters.authorizationURL, resolvingAgainstBaseURL: false) else {
            throw OAuthError(.configuration, providerID: providerID, message: "authorizationURL cannot be parsed")
        }
        // Keep any query the endpoint URL already has (RFC 6749 §3.1), then append ours.
        let existing = components.percentEncodedQuery.map { $0 + "&" } ?? ""
        components.percentEncodedQuery = existing + FormEncoding.encodeQuery(browserQuery)
        guard let url = components.url else {
            throw OAuthError(.configuration, providerID: providerID, message: "could not build the authorization URL")
        }
        let expiresAt = min(now.addingTimeInterval(lifetime), requestURIExpiresAt ?? .distantFuture)
        return AuthorizationRequest(
            providerID: providerID, url: url, state: parameters.state, codeVerifier: parameters.pkce?.verifier, nonce: parameters.nonce,
            redirectURI: parameters.redirectURI, scopes: parameters.scopes, expiresAt: expiresAt,
            maxAge: AuthorizationRequest.maxAge(in: url) ?? parameters.maxAge, requestedAt: now, requestURIExpiresAt: requestURIExpiresAt,
            resources: parameters.resources)
    }

    /// The code exchange for a callback's `code` (RFC 6749 §4.1.3, RFC 7636 §4.5), with what the
    /// ID token is checked against: the request's nonce, `max_age` and time (`requestedAt`: the
    /// request's own, or for a request encoded without it, what the flow derives).
    static func exchange(code: Secret, request: AuthorizationRequest, requestedAt: Date) -> GrantRequest {
        var fields: [(String, String)] = [
            ("grant_type", GrantType.authorizationCode.rawValue), ("code", code.reveal()),
            ("redirect_uri", request.redirectURI.absoluteString),
        ]
        if let verifier = request.codeVerifier { fields.append(("code_verifier", verifier.reveal())) }
        // RFC 8707 §2.2: the resources the authorization request named (kept on the request: a
        // pushed or signed request's URL does not carry them).
        fields += request.resources.map { ("resource", $0) }
        // A code is single use (RFC 6749 §4.1.2): once any answer arrived it is spent, so only a
        // request that got no response is sent again.
        return GrantRequest(.post(fields, retrying: .beforeResponse), grant: .authorizationCode, requestedScopes: request.scopes,
                            nonce: request.nonce, code: code, maxAge: request.maxAge, requestedAt: requestedAt)
    }
}
