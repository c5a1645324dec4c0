#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Fetching and caching the JWKS that verifies ID tokens (RFC 7517 §5), with key rotation.
enum JWKSFetching {
    /// The shortest time between two refetches caused by an unknown `kid`: one minute.
    static let refetchInterval: TimeInterval = 60

    /// GETs and parses the JWKS at `url`; its lifetime comes from `Cache-Control` as discovery's does.
    /// - Throws: ``OAuthError`` `.transport`, `.httpStatus`, `.invalidResponse` (endpoint `.discovery`).
    static func fetch(_ url: URL, client: EndpointClient) async throws(OAuthError) -> (JWKSet, TimeInterval) {
        let (object, response) = try await client.document(url, endpoint: .discovery)
        do {
            return (try JWKSet(.object(object.members)), Discovery.lifetime(of: response))
        } catch {
            var error = error
            error.providerID = client.provider.id
            error.httpStatus = response.status
            throw error
        }
    }
}

// The keys and algorithms that verify a provider's signatures (ID tokens, signed userinfo).
extension Discovery {
    /// The JWKS URL: the catalog's `jwksURL`, else the discovered `jwks_uri`; nil when neither.
    func jwksURL(_ client: EndpointClient) async throws(OAuthError) -> URL? {
        if let configured = client.provider.jwksURL { return configured }
        guard client.provider.issuer != nil else { return nil }
        return try await metadata(client).jwksURI
    }

    /// Runs `check` with the provider's signing keys; when it fails with an unknown `kid`, fetches the
    /// JWKS once more and runs it again, so a rotated key is picked up without a restart.
    ///
    /// The keys come from the cache while fresh (`Cache-Control: max-age`, else 24 hours); one fetch
    /// per JWKS URL runs at a time. A refetch for an unknown `kid` happens at most once a minute per
    /// JWKS URL (by ``AuthFlow/Options/now``); the first fetch and refetches on expiry do not count.
    /// Within that minute the unknown `kid` is refused without a request.
    /// - Throws: ``OAuthError`` `.configuration` when there is no JWKS URL, written or discovered;
    ///   what fetching throws; what `check` throws.
    func withSigningKeys<Value>(
        _ client: EndpointClient, _ check: (JWKSet) throws(OAuthError) -> Value
    ) async throws(OAuthError) -> Value {
        let provider = client.provider
        guard let url = try await jwksURL(client) else {
            throw OAuthError(.configuration, providerID: provider.id, endpoint: .discovery,
                             message: "provider \"\(provider.id)\" has no jwksURL and no issuer to discover jwks_uri from, "
                                + "so its ID tokens cannot be verified")
        }
        let fetch: @Sendable () async throws(OAuthError) -> (JWKSet, TimeInterval) = { () async throws(OAuthError) in
            try await JWKSFetching.fetch(url, client: client)
        }
        let key = url.absoluteString
        let (keys, generation) = try await keyCache.document(key, now: now, fetch: fetch)
        do {
            return try check(keys)
        } catch where error.tokenRejection == .unknownKey {
            guard let (fresh, _) = try await keyCache.refetch(
                key, after: generation, interval: JWKSFetching.refetchInterval, now: now, fetch: fetch)
            else {
                client.log.info(provider.id, "unknown kid; the JWKS was refetched less than a minute ago, so not again")
                throw error
            }
            client.log.info(provider.id, "unknown kid; refetched the JWKS")
            return try check(fresh)
        }
    }

    /// The JWS algorithms the provider's ID tokens (and signed userinfo answers) may use: the
    /// catalog's `idTokenSigningAlgorithms`; else, when the JWKS comes from discovery, the
    /// document's asymmetric `id_token_signing_alg_values_supported`; else `RS256`.
    func allowedAlgorithms(_ client: EndpointClient) async throws(OAuthError) -> Set<JWSAlgorithm> {
        let provider = client.provider
        if let names = provider.idTokenSigningAlgorithms { return Set(names.compactMap(JWSAlgorithm.init(rawValue:))) }
        if provider.jwksURL == nil, provider.issuer != nil {
            let advertised = try await metadata(client).idTokenSigningAlgorithmsSupported ?? []
            let asymmetric = advertised.compactMap(JWSAlgorithm.init(rawValue:)).filter(\.isAsymmetric)
            if !asymmetric.isEmpty { return Set(asymmetric) }
        }
        return [.rs256]
    }
}
