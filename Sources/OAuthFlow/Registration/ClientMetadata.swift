#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What a client asks to be registered as ([RFC 7591 §2](https://www.rfc-editor.org/rfc/rfc7591#section-2)):
/// the body of a registration request, and of an update (RFC 7592 §2.2).
///
/// ``AuthFlow/registerClient(provider:initialAccessToken:)`` makes one from the provider; build
/// one yourself for ``AuthFlow/updateRegistration(provider:metadata:)``.
public struct ClientMetadata: Sendable, Hashable {
    /// `redirect_uris`: loopback `http://127.0.0.1:PORT/callback` for a native app (RFC 8252 §7.3).
    public var redirectURIs: [URL]
    /// `grant_types`.
    public var grantTypes: [String]
    /// `response_types`.
    public var responseTypes: [String]
    /// `token_endpoint_auth_method`.
    public var tokenEndpointAuthMethod: Provider.ClientAuthentication
    /// `client_name`, shown to people on consent pages.
    public var clientName: String?
    /// `scope`: the scopes the client may ask for.
    public var scope: [String]
    /// `software_id`.
    public var softwareID: String?
    /// `software_version`.
    public var softwareVersion: String?
    /// `jwks`: the public keys of a `private_key_jwt` client, as a JWK set (RFC 7517 §5).
    public var jwks: JSONValue?
    /// More members, sent as they are (a server ignores what it does not know, RFC 7591 §2).
    public var extra: [String: JSONValue]

    /// Creates client metadata.
    public init(
        redirectURIs: [URL], grantTypes: [String] = ["authorization_code", "refresh_token"], responseTypes: [String] = ["code"],
        tokenEndpointAuthMethod: Provider.ClientAuthentication, clientName: String? = nil, scope: [String] = [],
        softwareID: String? = nil, softwareVersion: String? = nil, jwks: JSONValue? = nil, extra: [String: JSONValue] = [:]
    ) {
        self.redirectURIs = redirectURIs
        self.grantTypes = grantTypes
        self.responseTypes = responseTypes
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.clientName = clientName
        self.scope = scope
        self.softwareID = softwareID
        self.softwareVersion = softwareVersion
        self.jwks = jwks
        self.extra = extra
    }

    /// The JSON members of the request, with `client_id` for an update (RFC 7592 §2.2).
    func members(clientID: String? = nil) -> [String: JSONValue] {
        var members = extra
        members["redirect_uris"] = .array(redirectURIs.map { .string($0.absoluteString) })
        members["grant_types"] = .array(grantTypes.map(JSONValue.string))
        members["response_types"] = .array(responseTypes.map(JSONValue.string))
        members["token_endpoint_auth_method"] = .string(tokenEndpointAuthMethod.rawValue)
        if let clientName { members["client_name"] = .string(clientName) }
        if !scope.isEmpty { members["scope"] = .string(scope.joined(separator: " ")) }
        if let softwareID { members["software_id"] = .string(softwareID) }
        if let softwareVersion { members["software_version"] = .string(softwareVersion) }
        if let jwks { members["jwks"] = jwks }
        if let clientID { members["client_id"] = .string(clientID) }
        return members
    }
}
