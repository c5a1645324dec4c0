#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The claims of a validated OpenID Connect ID token (OpenID Connect Core 1.0 §2).
///
/// You get one only after every check of §3.1.3.7 passed (signature, `iss`, `aud`, `azp`,
/// `exp`, `iat`, `nbf`, `nonce`, `at_hash`, `c_hash`, `auth_time`); read ``subject`` for the
/// user's identity at ``issuer`` and ``claims`` for anything else the provider sent.
/// `description`, `debugDescription` and `dump` show only `sub` and `iss`: never the raw token,
/// the nonce or any other claim.
public struct IDToken: Sendable, Hashable {
    /// `iss`: the provider that issued the token.
    public let issuer: String
    /// `sub`: the user's identifier, unique and stable at ``issuer``.
    public let subject: String
    /// `aud`: the clients the token is for (one of them is yours).
    public let audience: [String]
    /// `exp`: when the token stops being acceptable.
    public let expiresAt: Date
    /// `iat`: when the token was issued.
    public let issuedAt: Date
    /// `auth_time`: when the user last authenticated, when the provider said so.
    public let authTime: Date?
    /// `nonce`: the value the authorization request sent, echoed back.
    public let nonce: String?
    /// `azp`: the client the token was issued to, when present.
    public let authorizedParty: String?
    /// Every claim of the token, as typed JSON.
    public let claims: [String: JSONValue]

    /// Reads the standard claims out of a claims set; it checks types and ranges, not values.
    /// - Throws: ``OAuthError`` `.idTokenRejected` (``TokenRejection/invalidClaim``) when `iss`,
    ///   `sub`, `aud`, `exp` or `iat` is missing, or any standard claim has the wrong type or an
    ///   out-of-range time (a string `exp`, `1e300`, a negative time).
    init(claims: [String: JSONValue]) throws(OAuthError) {
        let object = JSONObject(members: claims) { TokenRejection.invalidClaim.error("ID token claim \($0)") }
        issuer = try object.requiredString("iss")
        subject = try object.requiredString("sub")
        guard let audience = try object.stringOrStrings("aud"), !audience.isEmpty else {
            throw TokenRejection.invalidClaim.error("ID token claim aud is missing")
        }
        self.audience = audience
        guard let expiresAt = try object.date("exp") else { throw TokenRejection.invalidClaim.error("ID token claim exp is missing") }
        guard let issuedAt = try object.date("iat") else { throw TokenRejection.invalidClaim.error("ID token claim iat is missing") }
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        authTime = try object.date("auth_time")
        nonce = try object.string("nonce")
        authorizedParty = try object.string("azp")
        self.claims = claims
    }
}

extension IDToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `IDToken(sub: …, iss: …)`: the identity, nothing else.
    public var description: String { "IDToken(sub: \(subject), iss: \(issuer))" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror with only `subject` and `issuer`, so `dump` shows nothing more.
    public var customMirror: Mirror { Mirror(self, children: ["subject": subject, "issuer": issuer]) }
}

extension IDToken: Codable {
    /// Decodes the claims written by ``encode(to:)``: one string holding the claims' JSON.
    /// - Throws: `DecodingError.dataCorrupted` when it is not a claims set with the required claims.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            guard case .object(let claims) = try JSONValue.parse(Data(text.utf8)) else {
                throw OAuthError(.invalidResponse, message: "the ID token claims are not an object")
            }
            try self.init(claims: claims)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ID token claims set")
        }
    }

    /// Encodes the claims as one string of JSON (``JSONValue/jsonText``).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(JSONValue.object(claims).jsonText)
    }
}

extension IDToken {
    /// The claims of a stored ID token, read without verifying its signature again: it was verified
    /// before it was stored (see `StoredEntry`).
    /// - Throws: ``OAuthError`` `.idTokenRejected` when it is not a JWT with the required claims.
    init(storedToken token: Secret) throws(OAuthError) {
        let jws = try JWS(compact: token.reveal())
        let value: JSONValue
        do {
            value = try JSONValue.parse(jws.payload)
        } catch {
            throw TokenRejection.malformed.error("the stored ID token's claims are not JSON")
        }
        guard case .object(let claims) = value else { throw TokenRejection.malformed.error("the stored ID token's claims are not an object") }
        try self.init(claims: claims)
    }
}
