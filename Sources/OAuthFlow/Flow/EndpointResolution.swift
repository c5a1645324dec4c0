#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AuthFlow {
    /// The URL of one of `provider`'s endpoints, or nil when it has none.
    ///
    /// The one place every caller asks. An endpoint written in the catalog wins; only when it is
    /// missing and the provider has an `issuer` is the metadata read (OpenID Connect Discovery 1.0 /
    /// RFC 8414, fetched once and cached, see ``metadata(for:)``) to fill the gap.
    /// - Throws: what ``metadata(for:)`` throws, when discovery was needed and failed.
    func endpointURL(_ endpoint: OAuthError.Endpoint, of provider: Provider) async throws(OAuthError) -> URL? {
        if let configured = Self.configuredURL(endpoint, of: provider) { return configured }
        guard provider.issuer != nil, endpoint != .discovery else { return nil }
        let metadata = try await discoveredMetadata(for: provider)
        // RFC 8705 §5: a client using mutual TLS uses the server's aliases for the endpoints that have one.
        if provider.clientAuthentication.isMutualTLS, let alias = metadata.mutualTLSAlias(for: endpoint) { return alias }
        return metadata.url(for: endpoint)
    }

    /// The endpoint a grant cannot run without.
    /// - Throws: ``OAuthError`` `.configuration` naming the catalog key and the discovery member
    ///   when neither gives it; what ``metadata(for:)`` throws.
    func requiredEndpoint(_ endpoint: OAuthError.Endpoint, of provider: Provider) async throws(OAuthError) -> URL {
        if let url = try await endpointURL(endpoint, of: provider) { return url }
        let key = Self.catalogKey(of: endpoint)
        let message = provider.issuer == nil
            ? "provider \"\(provider.id)\" has no \(key)"
            : "provider \"\(provider.id)\" has no \(key), and the discovery document of \(provider.issuer ?? "") has no "
                + ProviderMetadata.memberName(of: endpoint)
        throw OAuthError(.configuration, providerID: provider.id, endpoint: endpoint, message: message)
    }

    /// The JWKS URL: the catalog's `jwksURL`, else the discovered `jwks_uri`; nil when neither.
    func jwksEndpoint(of provider: Provider) async throws(OAuthError) -> URL? {
        if let configured = provider.jwksURL { return configured }
        guard provider.issuer != nil else { return nil }
        return try await discoveredMetadata(for: provider).jwksURI
    }

    /// True for a provider only the client credentials grant can serve: confidential, and neither
    /// an authorization nor a device endpoint, written or discovered.
    func isServiceOnly(_ provider: Provider) async throws(OAuthError) -> Bool {
        guard provider.isConfidential else { return false }
        if try await endpointURL(.authorization, of: provider) != nil { return false }
        return try await endpointURL(.deviceAuthorization, of: provider) == nil
    }

    static func configuredURL(_ endpoint: OAuthError.Endpoint, of provider: Provider) -> URL? {
        switch endpoint {
        case .authorization: provider.authorizationURL
        case .token: provider.tokenURL
        case .deviceAuthorization: provider.deviceAuthorizationURL
        case .revocation: provider.revocationURL
        case .introspection: provider.introspectionURL
        case .userinfo: provider.userinfoURL
        case .endSession: provider.endSessionURL
        case .pushedAuthorization: provider.pushedAuthorizationURL
        case .discovery: nil
        }
    }

    static func catalogKey(of endpoint: OAuthError.Endpoint) -> String {
        switch endpoint {
        case .authorization: "authorizationURL"
        case .token: "tokenURL"
        case .deviceAuthorization: "deviceAuthorizationURL"
        case .revocation: "revocationURL"
        case .introspection: "introspectionURL"
        case .userinfo: "userinfoURL"
        case .endSession: "endSessionURL"
        case .pushedAuthorization: "pushedAuthorizationURL"
        case .discovery: "jwksURL"
        }
    }
}
