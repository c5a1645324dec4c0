#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An authorization server's metadata document (OpenID Connect Discovery 1.0 §3, RFC 8414 §2).
///
/// Get it with ``AuthFlow/metadata(for:)``; the flow fetches and caches it by itself when a
/// provider has an `issuer` and leaves an endpoint out. The typed members are the ones OAuthFlow
/// acts on; ``document`` holds every member as sent. Each endpoint is an `https://` URL (or
/// `http://` on a loopback host), and ``issuer`` is exactly the configured issuer: a document
/// breaking either rule is refused with ``OAuthError`` `.invalidResponse`.
public struct ProviderMetadata: Sendable, Hashable, CustomStringConvertible {
    /// `issuer`: equal, character for character, to the provider's configured issuer.
    public var issuer: String
    /// `authorization_endpoint` (RFC 6749 §3.1).
    public var authorizationEndpoint: URL?
    /// `token_endpoint` (RFC 6749 §3.2).
    public var tokenEndpoint: URL?
    /// `device_authorization_endpoint` (RFC 8628 §4).
    public var deviceAuthorizationEndpoint: URL?
    /// `userinfo_endpoint` (OpenID Connect Core §5.3).
    public var userinfoEndpoint: URL?
    /// `revocation_endpoint` (RFC 7009, RFC 8414 §2).
    public var revocationEndpoint: URL?
    /// `introspection_endpoint` (RFC 7662, RFC 8414 §2).
    public var introspectionEndpoint: URL?
    /// `end_session_endpoint` (OpenID Connect RP-Initiated Logout 1.0 §2.1).
    public var endSessionEndpoint: URL?
    /// `jwks_uri`: where the keys that sign ID tokens are published (RFC 7517).
    public var jwksURI: URL?
    /// `scopes_supported`.
    public var scopesSupported: [String]?
    /// `response_types_supported`.
    public var responseTypesSupported: [String]?
    /// `grant_types_supported`; informative only: a grant missing here is still attempted.
    public var grantTypesSupported: [String]?
    /// `id_token_signing_alg_values_supported`.
    public var idTokenSigningAlgorithmsSupported: [String]?
    /// `token_endpoint_auth_methods_supported`.
    public var tokenEndpointAuthMethodsSupported: [String]?
    /// `code_challenge_methods_supported` (RFC 8414 §2, RFC 7636).
    public var codeChallengeMethodsSupported: [String]?
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §3); false when absent. When
    /// true, every authorization response carrying a code must carry `iss`.
    public var authorizationResponseIssParameterSupported: Bool
    /// `pushed_authorization_request_endpoint` (RFC 9126 §5).
    public var pushedAuthorizationRequestEndpoint: URL?
    /// `require_pushed_authorization_requests` (RFC 9126 §5); false when absent. When true, the
    /// flow pushes every authorization request.
    public var requirePushedAuthorizationRequests: Bool
    /// `registration_endpoint` (RFC 7591 §3, RFC 8414 §2): where clients register dynamically.
    public var registrationEndpoint: URL?
    /// `backchannel_authentication_endpoint` (OpenID Connect CIBA Core 1.0 §4).
    public var backchannelAuthenticationEndpoint: URL?
    /// `backchannel_token_delivery_modes_supported` (CIBA Core §4): `poll`, `ping`, `push`.
    public var backchannelTokenDeliveryModesSupported: [String]?
    /// `backchannel_user_code_parameter_supported` (CIBA Core §4); false when absent. Without it,
    /// a CIBA request with a `user_code` is refused before it is sent.
    public var backchannelUserCodeParameterSupported: Bool
    /// Every member of the document as sent, including those without a typed property.
    public var document: [String: JSONValue]

    /// Decodes a metadata document.
    /// - Throws: ``OAuthError`` `.invalidResponse` naming the member at fault.
    init(_ json: JSONObject) throws(OAuthError) {
        issuer = try json.requiredString("issuer")
        func endpoint(_ key: String) throws(OAuthError) -> URL? {
            guard let url = try json.url(key) else { return nil }
            if let problem = Provider.endpointProblem(url) { throw json.fail("\(key) \(problem)") }
            return url
        }
        authorizationEndpoint = try endpoint("authorization_endpoint")
        tokenEndpoint = try endpoint("token_endpoint")
        deviceAuthorizationEndpoint = try endpoint("device_authorization_endpoint")
        userinfoEndpoint = try endpoint("userinfo_endpoint")
        revocationEndpoint = try endpoint("revocation_endpoint")
        introspectionEndpoint = try endpoint("introspection_endpoint")
        endSessionEndpoint = try endpoint("end_session_endpoint")
        jwksURI = try endpoint("jwks_uri")
        pushedAuthorizationRequestEndpoint = try endpoint("pushed_authorization_request_endpoint")
        requirePushedAuthorizationRequests = try json.bool("require_pushed_authorization_requests") ?? false
        registrationEndpoint = try endpoint("registration_endpoint")
        backchannelAuthenticationEndpoint = try endpoint("backchannel_authentication_endpoint")
        backchannelTokenDeliveryModesSupported = try json.strings("backchannel_token_delivery_modes_supported")
        backchannelUserCodeParameterSupported = try json.bool("backchannel_user_code_parameter_supported") ?? false
        scopesSupported = try json.strings("scopes_supported")
        responseTypesSupported = try json.strings("response_types_supported")
        grantTypesSupported = try json.strings("grant_types_supported")
        idTokenSigningAlgorithmsSupported = try json.strings("id_token_signing_alg_values_supported")
        tokenEndpointAuthMethodsSupported = try json.strings("token_endpoint_auth_methods_supported")
        codeChallengeMethodsSupported = try json.strings("code_challenge_methods_supported")
        authorizationResponseIssParameterSupported = try json.bool("authorization_response_iss_parameter_supported") ?? false
        document = json.members
    }

    /// The discovered URL of `endpoint`, or nil when the document has none.
    func url(for endpoint: OAuthError.Endpoint) -> URL? {
        switch endpoint {
        case .authorization: authorizationEndpoint
        case .token: tokenEndpoint
        case .deviceAuthorization: deviceAuthorizationEndpoint
        case .revocation: revocationEndpoint
        case .introspection: introspectionEndpoint
        case .userinfo: userinfoEndpoint
        case .endSession: endSessionEndpoint
        case .pushedAuthorization: pushedAuthorizationRequestEndpoint
        case .registration: registrationEndpoint
        case .backchannelAuthentication: backchannelAuthenticationEndpoint
        case .discovery, .resource: nil
        }
    }

    /// The member name of `endpoint` in a metadata document.
    static func memberName(of endpoint: OAuthError.Endpoint) -> String {
        switch endpoint {
        case .authorization: "authorization_endpoint"
        case .token: "token_endpoint"
        case .deviceAuthorization: "device_authorization_endpoint"
        case .revocation: "revocation_endpoint"
        case .introspection: "introspection_endpoint"
        case .userinfo: "userinfo_endpoint"
        case .endSession: "end_session_endpoint"
        case .pushedAuthorization: "pushed_authorization_request_endpoint"
        case .backchannelAuthentication: "backchannel_authentication_endpoint"
        case .discovery: "jwks_uri"
        case .registration: "registration_endpoint"
        case .resource: "authorization_servers"
        }
    }

    /// The endpoint's alias in `mtls_endpoint_aliases` (RFC 8705 §5), for clients that
    /// authenticate with mutual TLS; nil when there is none or it is not an `https` URL.
    func mutualTLSAlias(for endpoint: OAuthError.Endpoint) -> URL? {
        guard case .object(let aliases)? = document["mtls_endpoint_aliases"] else { return nil }
        switch endpoint {
        case .token, .revocation, .introspection, .deviceAuthorization, .userinfo, .pushedAuthorization, .backchannelAuthentication: break
        case .authorization, .endSession, .discovery: return nil   // reached by the browser, or fetched without the certificate
        case .registration, .resource: return nil   // registration is sent without client authentication (RFC 7591 §3)
        }
        guard let text = aliases[Self.memberName(of: endpoint)]?.stringValue, let url = URL(string: text, encodingInvalidCharacters: false),
              url.scheme?.lowercased() == "https", Provider.endpointProblem(url) == nil else { return nil }
        return url
    }

    /// The issuer and the endpoints present; the document's other members are counted, not shown.
    public var description: String {
        let endpoints: [(String, URL?)] = [
            ("authorization", authorizationEndpoint), ("token", tokenEndpoint), ("device", deviceAuthorizationEndpoint),
            ("userinfo", userinfoEndpoint), ("revocation", revocationEndpoint), ("introspection", introspectionEndpoint),
            ("endSession", endSessionEndpoint), ("jwks", jwksURI), ("pushedAuthorization", pushedAuthorizationRequestEndpoint),
            ("backchannelAuthentication", backchannelAuthenticationEndpoint),
        ]
        let shown = endpoints.compactMap { name, url in url.map { "\(name): \($0.absoluteString)" } }
        return "ProviderMetadata(issuer: \(issuer), \(shown.joined(separator: ", ")), members: \(document.count))"
    }
}
