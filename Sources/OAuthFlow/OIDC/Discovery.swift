#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a provider's endpoints are — the catalog's, else its discovered metadata's (OpenID Connect
/// Discovery 1.0, RFC 8414) — and that metadata itself, fetched once and cached for every provider
/// of a flow. Its signing keys (the JWKS) are in OIDC/JWKSCache.swift.
///
/// The flow makes one and shares it with each provider's ``TokenEndpoint``. A call names the
/// provider by its ``EndpointClient``, which fetches what is not cached; nothing here calls back
/// into the flow.
final class Discovery: Sendable {
    /// How long a document without `Cache-Control: max-age` stays cached: 24 hours.
    static let defaultLifetime: TimeInterval = 24 * 3600
    /// The longest lifetime honoured, whatever `max-age` says: 7 days.
    static let maximumLifetime: TimeInterval = 7 * 24 * 3600

    /// Metadata by issuer.
    let metadataCache = DocumentCache<ProviderMetadata>()
    /// JWKS by URL (OIDC/JWKSCache.swift).
    let keyCache = DocumentCache<JWKSet>()
    /// Protected-resource metadata by resource URL (RFC 9728; Registration/ResourceDiscovery.swift).
    let resourceCache = DocumentCache<ProtectedResourceMetadata>()
    /// The wall clock the documents' lifetimes run on (the flow's ``AuthFlow/Options/now``).
    let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    // MARK: Endpoints

    /// The URL of one of the provider's endpoints, or nil when it has none.
    ///
    /// The one place every caller asks. An endpoint written in the catalog wins; only when it is
    /// missing and the provider has an `issuer` is the metadata read (``metadata(_:)``, fetched
    /// once and cached) to fill the gap.
    /// - Throws: what ``metadata(_:)`` throws, when discovery was needed and failed.
    func endpointURL(_ endpoint: OAuthError.Endpoint, _ client: EndpointClient) async throws(OAuthError) -> URL? {
        let provider = client.provider
        if let configured = Self.configuredURL(endpoint, of: provider) { return configured }
        guard provider.issuer != nil, endpoint != .discovery else { return nil }
        let metadata = try await metadata(client)
        // RFC 8705 §5: a client using mutual TLS uses the server's aliases for the endpoints that have one.
        if provider.clientAuthentication.isMutualTLS, let alias = metadata.mutualTLSAlias(for: endpoint) { return alias }
        return metadata.url(for: endpoint)
    }

    /// The endpoint a call cannot go without.
    /// - Throws: ``OAuthError`` `.configuration` naming the catalog key and, for a provider with an
    ///   issuer, the discovery member, when neither gives it; what ``metadata(_:)`` throws.
    func requiredEndpoint(_ endpoint: OAuthError.Endpoint, _ client: EndpointClient) async throws(OAuthError) -> URL {
        if let url = try await endpointURL(endpoint, client) { return url }
        let provider = client.provider
        let key = Self.catalogKey(of: endpoint)
        let message = provider.issuer == nil
            ? "provider \"\(provider.id)\" has no \(key)"
            : "provider \"\(provider.id)\" has no \(key), and the discovery document of \(provider.issuer ?? "") has no "
                + ProviderMetadata.memberName(of: endpoint)
        throw OAuthError(.configuration, providerID: provider.id, endpoint: endpoint, message: message)
    }

    /// True for a provider only the client credentials grant can serve: confidential, and no
    /// authorization, device or backchannel authentication endpoint, written or discovered.
    func isServiceOnly(_ client: EndpointClient) async throws(OAuthError) -> Bool {
        guard client.provider.isConfidential else { return false }
        if try await endpointURL(.authorization, client) != nil { return false }
        if try await endpointURL(.deviceAuthorization, client) != nil { return false }
        return try await endpointURL(.backchannelAuthentication, client) == nil
    }

    /// The catalog's URL of `endpoint`, if written.
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
        case .backchannelAuthentication: provider.backchannelAuthenticationURL
        case .discovery, .registration, .resource: nil
        }
    }

    /// The catalog key that writes `endpoint`.
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
        case .backchannelAuthentication: "backchannelAuthenticationURL"
        case .discovery: "jwksURL"
        case .registration: "registration"
        case .resource: "resource"
        }
    }

    // MARK: Metadata

    /// The metadata of the provider's issuer, from the cache while fresh, else fetched
    /// (``fetch(issuer:client:)``); concurrent callers share one fetch, and a failed fetch is not
    /// cached, so the next call tries again.
    /// - Throws: ``OAuthError`` `.configuration` when the provider has no `issuer`; what
    ///   ``fetch(issuer:client:)`` throws.
    func metadata(_ client: EndpointClient) async throws(OAuthError) -> ProviderMetadata {
        guard let issuer = client.provider.issuer else {
            throw OAuthError(.configuration, providerID: client.provider.id, endpoint: .discovery,
                             message: "provider \"\(client.provider.id)\" has no issuer to discover metadata from")
        }
        return try await metadataCache.document(issuer, now: now) { () async throws(OAuthError) in
            try await Self.fetch(issuer: issuer, client: client)
        }.0
    }

    /// The metadata of `issuer` when it is cached and fresh; never fetches.
    func cachedMetadata(issuer: String) -> ProviderMetadata? {
        metadataCache.fresh(issuer, now: now())?.0
    }

    /// `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4): the suffix is
    /// appended to the issuer, after removing one trailing `/`.
    static func openIDConfigurationURL(issuer: String) -> URL? {
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        return URL(string: base + "/.well-known/openid-configuration")
    }

    /// RFC 8414 §3.1: `/.well-known/oauth-authorization-server` inserted between the host and the
    /// issuer's path (`https://a.example/tenant` → `https://a.example/.well-known/oauth-authorization-server/tenant`).
    static func authorizationServerMetadataURL(issuer: String) -> URL? {
        guard var components = URLComponents(string: issuer) else { return nil }
        var path = components.percentEncodedPath
        if path.hasSuffix("/") { path.removeLast() }
        components.percentEncodedPath = "/.well-known/oauth-authorization-server" + path
        return components.url
    }

    /// The lifetime `Cache-Control` grants a document: `max-age` seconds (capped at
    /// ``maximumLifetime``), zero for `no-store` or `no-cache`, ``defaultLifetime`` without either.
    static func lifetime(of response: HTTPResponse) -> TimeInterval {
        guard let header = response.headers["cache-control"] else { return defaultLifetime }
        var maxAge: TimeInterval?
        for directive in header.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { ASCIIText.trimmingBlanks($0).lowercased() }
            guard let name = parts.first else { continue }
            if name == "no-store" || name == "no-cache" { return 0 }
            if name == "max-age", parts.count == 2 {
                let digits = ASCIIText.trimming(parts[1], where: { $0 == UInt8(ascii: "\"") })
                guard !digits.isEmpty, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { continue }
                // Any digit string: too many digits for Int means "very long", which the cap handles.
                maxAge = Int(digits).map { min(TimeInterval($0), maximumLifetime) } ?? maximumLifetime
            }
        }
        return maxAge ?? defaultLifetime
    }

    /// Fetches and checks the metadata of `issuer`: the OpenID Connect document first; when that
    /// answers a 4xx status, the RFC 8414 one. The document's `issuer` must equal `issuer` exactly
    /// (Discovery §4.3, RFC 8414 §3.3).
    /// - Returns: the metadata and how long it stays fresh.
    /// - Throws: ``OAuthError`` `.transport`, `.httpStatus` (both documents missing), `.invalidResponse`.
    static func fetch(issuer: String, client: EndpointClient) async throws(OAuthError) -> (ProviderMetadata, TimeInterval) {
        guard let primary = openIDConfigurationURL(issuer: issuer), let fallback = authorizationServerMetadataURL(issuer: issuer) else {
            throw OAuthError(.configuration, providerID: client.provider.id, endpoint: .discovery,
                             message: "issuer \"\(issuer)\" cannot be turned into a discovery URL")
        }
        let object: JSONObject
        let response: HTTPResponse
        do {
            (object, response) = try await client.document(primary, endpoint: .discovery)
        } catch where error.code == .httpStatus && (400..<500).contains(error.httpStatus ?? 0) {
            let firstStatus = error.httpStatus ?? 0
            client.log.info(client.provider.id, "no OpenID Connect discovery document (HTTP \(firstStatus)); trying RFC 8414")
            do {
                (object, response) = try await client.document(fallback, endpoint: .discovery)
            } catch where error.code == .httpStatus {
                var error = error
                error.message = "no metadata: \(primary.absoluteString) answered HTTP \(firstStatus), "
                    + "\(fallback.absoluteString) HTTP \(error.httpStatus ?? 0)"
                throw error
            }
        }
        let metadata = try ProviderMetadata(object)
        guard metadata.issuer == issuer else {
            throw OAuthError(.invalidResponse, providerID: client.provider.id, endpoint: .discovery, httpStatus: response.status,
                             message: "the discovery document's issuer \"\(TokenRejection.printable(metadata.issuer))\" is not the configured issuer \"\(issuer)\" "
                                + "(OpenID Connect Discovery §4.3, RFC 8414 §3.3)")
        }
        return (metadata, lifetime(of: response))
    }
}
