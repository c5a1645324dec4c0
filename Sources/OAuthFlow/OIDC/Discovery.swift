#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where the metadata of an issuer is published, and how long a fetched document stays fresh.
enum Discovery {
    /// How long a document without `Cache-Control: max-age` stays cached: 24 hours.
    static let defaultLifetime: TimeInterval = 24 * 3600
    /// The longest lifetime honoured, whatever `max-age` says: 7 days.
    static let maximumLifetime: TimeInterval = 7 * 24 * 3600

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

extension AuthFlow {
    /// The metadata of `provider`'s issuer, from the cache while fresh, else fetched.
    ///
    /// Fetches `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4), and
    /// when that answers a 4xx status, `/.well-known/oauth-authorization-server` inserted before the
    /// issuer's path (RFC 8414 §3.1). The document's `issuer` must equal the configured one exactly.
    /// It is cached per issuer for its `Cache-Control: max-age` (24 hours without one; `no-store`
    /// or `no-cache`: not reused); concurrent callers share one fetch, and a failed fetch is not
    /// cached, so the next call tries again. The flow reads the same cache itself when a provider
    /// leaves out an endpoint it needs; call this to read what the server supports. A failure is
    /// published as `.error` for the provider, like every failing call.
    /// - Throws: ``OAuthError`` `.configuration` when the provider has no `issuer`; `.transport`;
    ///   `.httpStatus` when neither document exists; `.invalidResponse` for a malformed document or
    ///   one whose issuer differs (the message names both).
    public func metadata(for provider: Provider) async throws(OAuthError) -> ProviderMetadata {
        do { return try await discoveredMetadata(for: provider) } catch { throw fail(provider.id, error) }
    }

    /// ``metadata(for:)`` without publishing: for the flow's own steps, which publish their failure once.
    func discoveredMetadata(for provider: Provider) async throws(OAuthError) -> ProviderMetadata {
        guard let issuer = provider.issuer else {
            throw OAuthError(.configuration, providerID: provider.id, endpoint: .discovery,
                             message: "provider \"\(provider.id)\" has no issuer to discover metadata from")
        }
        let client = client(for: provider)
        return try await discoveryCache.document(issuer, now: options.now) { () async throws(OAuthError) in
            try await Discovery.fetch(issuer: issuer, client: client)
        }.0
    }
}
