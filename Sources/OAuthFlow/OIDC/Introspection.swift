#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Which of the held tokens to send: the value of `token_type_hint`
/// ([RFC 7009 §2.1](https://www.rfc-editor.org/rfc/rfc7009#section-2.1), [RFC 7662 §2.1](https://www.rfc-editor.org/rfc/rfc7662#section-2.1)).
///
/// Pass it to ``AuthFlow/introspect(provider:token:)``; ``RevocationResult`` uses it to say which
/// revocation failed.
public enum TokenKind: String, Sendable, Hashable, CaseIterable {
    /// The access token (`token_type_hint=access_token`).
    case accessToken = "access_token"
    /// The refresh token (`token_type_hint=refresh_token`).
    case refreshToken = "refresh_token"
}

/// What the introspection endpoint says about a token ([RFC 7662 §2.2](https://www.rfc-editor.org/rfc/rfc7662#section-2.2)).
///
/// Get one from ``AuthFlow/introspect(provider:token:)``. Check ``active`` first: when it is
/// false the server says nothing more (RFC 7662 §2.2), so the other typed fields are nil and
/// ``claims`` holds what it sent anyway. Times are range-checked `NumericDate`s (RFC 7519 §2).
/// `description` and `dump` show `active`, `client_id`, the scopes, `exp` and `sub`; ``claims``
/// (which may hold personal data such as `username`) only by count.
public struct TokenIntrospection: Sendable, Hashable {
    /// `active`: true when the token is currently usable at this server.
    public var active: Bool
    /// `scope`, split on spaces; empty when absent.
    public var scopes: [String]
    /// `client_id`: the client the token was issued to.
    public var clientID: String?
    /// `username`: a human-readable name of the resource owner.
    public var username: String?
    /// `token_type`, such as `Bearer`.
    public var tokenType: String?
    /// `sub`: the resource owner (or the client, for client credentials).
    public var subject: String?
    /// `aud`: the intended audiences (a string or an array on the wire).
    public var audience: [String]
    /// `iss`: the issuer of the token.
    public var issuer: String?
    /// `exp`: when the token expires.
    public var expiresAt: Date?
    /// `iat`: when the token was issued.
    public var issuedAt: Date?
    /// `nbf`: the token is not to be used before this.
    public var notBefore: Date?
    /// Every member of the response, `active` included.
    public var claims: [String: JSONValue]
    /// `cnf` `x5t#S256`: the thumbprint of the certificate the token is bound to (RFC 8705 §3.2);
    /// nil when absent or malformed.
    public var certificateThumbprint: String? {
        if case .thumbprint(let value) = CertificateBinding.confirmation(in: claims) { return value }
        return nil
    }

    /// Creates an introspection result.
    public init(
        active: Bool, scopes: [String] = [], clientID: String? = nil, username: String? = nil, tokenType: String? = nil,
        subject: String? = nil, audience: [String] = [], issuer: String? = nil, expiresAt: Date? = nil, issuedAt: Date? = nil,
        notBefore: Date? = nil, claims: [String: JSONValue] = [:]
    ) {
        self.active = active
        self.scopes = scopes
        self.clientID = clientID
        self.username = username
        self.tokenType = tokenType
        self.subject = subject
        self.audience = audience
        self.issuer = issuer
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.notBefore = notBefore
        self.claims = claims
    }

    /// Reads an RFC 7662 §2.2 answer: `active` must be a boolean; the other members are read only
    /// when it is true, each with its type and range checked.
    /// - Throws: ``OAuthError`` `.invalidResponse` through `object`'s failure.
    init(_ object: JSONObject) throws(OAuthError) {
        guard object.members["active"] != nil else { throw object.fail("active is missing (RFC 7662 §2.2)") }
        guard let active = try object.bool("active") else { throw object.fail("active must be true or false, found null") }
        self.init(active: active, claims: object.members)
        guard active else { return }
        if case .array = object.value("scope") {
            scopes = try object.strings("scope") ?? []
        } else {
            scopes = (try object.string("scope") ?? "").split(separator: " ").map(String.init)
        }
        clientID = try object.string("client_id")
        username = try object.string("username")
        tokenType = try object.string("token_type")
        subject = try object.string("sub")
        audience = try object.stringOrStrings("aud") ?? []
        issuer = try object.string("iss")
        expiresAt = try object.date("exp")
        issuedAt = try object.date("iat")
        notBefore = try object.date("nbf")
    }
}

extension TokenIntrospection: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `active`, `client_id`, the scopes, `exp` and `sub`; the other claims only by count.
    public var description: String {
        var parts = ["active: \(active)"]
        if let clientID { parts.append("clientID: \(clientID)") }
        if !scopes.isEmpty { parts.append("scopes: \(scopes.joined(separator: " "))") }
        if let expiresAt { parts.append("expiresAt: \(expiresAt)") }
        if let subject { parts.append("sub: \(subject)") }
        parts.append("\(claims.count) claims")
        return "TokenIntrospection(\(parts.joined(separator: ", ")))"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// The fields of ``description``, so `dump` shows no other claim.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "active": active, "clientID": clientID as Any, "scopes": scopes, "expiresAt": expiresAt as Any,
            "subject": subject as Any, "claimCount": claims.count,
        ], displayStyle: .struct)
    }
}

/// The introspection request (RFC 7662 §2.1); no state.
enum Introspection {
    /// POSTs `token` with its hint and the client's authentication, and reads the answer.
    /// - Throws: ``OAuthError`` `.serverRejected` (§5.2 body, such as `invalid_client`),
    ///   `.httpStatus` (DOT answers 403 to an unauthenticated client), `.invalidResponse`, `.transport`.
    static func introspect(_ token: Secret, kind: TokenKind, url: URL, client: EndpointClient) async throws(OAuthError) -> TokenIntrospection {
        let fields = [("token", token.reveal()), ("token_type_hint", kind.rawValue)]
        return try TokenIntrospection(await client.post(fields, to: url, endpoint: .introspection))
    }
}
