#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Finding a protected resource's metadata from its URL alone (RFC 9728), and the authorization
/// server it names, whose own metadata must agree with it.
///
/// Static and stateless: the flow keeps the cache (``Discovery/resourceCache``) and hands in an
/// ``EndpointClient`` for the requests, as ``Discovery`` does for server metadata.
enum ResourceDiscovery {
    /// How many same-origin redirects a metadata fetch follows; a redirect to another origin is never followed.
    static let maximumRedirects = 3

    /// The resource's metadata, found as RFC 9728 §5 has a client find it: an unauthenticated
    /// `GET` of the resource whose `401` challenge names `resource_metadata` (§5.1), else the
    /// well-known URL made from the resource (§3.1). The document's `resource` must be the URL asked.
    /// - Returns: the metadata and how long it may be cached (its `Cache-Control`).
    /// - Throws: ``OAuthError`` `.configuration` for a URL that is not `https://` (or loopback
    ///   `http://`) or has a fragment; `.transport`; `.httpStatus` when no document is found;
    ///   `.invalidResponse` for a refused document or challenge, or a redirect to another origin.
    static func fetch(_ resource: URL, client: EndpointClient) async throws(OAuthError) -> (ProtectedResourceMetadata, TimeInterval) {
        if let problem = Provider.endpointProblem(resource) {
            throw OAuthError(.configuration, endpoint: .resource, message: "the resource URL \(resource.redactedForLog) \(problem) (RFC 9728 §1.2)")
        }
        // §5.1: the resource's own answer to a request without a token names its metadata.
        let probe = try await client.send(client.getRequest(url: resource), endpoint: .resource)
        var challengeScopes: [String] = []
        var fromChallenge: URL?
        if probe.status == 401, let challenge = try ResourceChallenge.parse(status: probe.status, headers: probe.headers) {
            challengeScopes = challenge.scope
            fromChallenge = challenge.resourceMetadata
        }
        let source: ProtectedResourceMetadata.Source = fromChallenge == nil ? .wellKnown : .challenge
        guard let url = fromChallenge ?? ProtectedResourceMetadata.wellKnownURL(for: resource) else {
            throw OAuthError(.configuration, endpoint: .resource, message: "no metadata URL can be made from \(resource.redactedForLog)")
        }
        let (object, response) = try await document(url, client: client)
        var metadata = try ProtectedResourceMetadata(object, expected: resource, metadataURL: url, source: source)
        metadata.challengeScopes = challengeScopes
        return (metadata, Discovery.lifetime(of: response))
    }

    /// GETs a JSON document, following at most ``maximumRedirects`` redirects that stay on the
    /// origin (scheme, host and port) of `url`.
    /// - Throws: ``OAuthError`` `.invalidResponse` for a redirect to another origin or too many;
    ///   `.httpStatus` for another non-2xx answer; `.invalidResponse` for a body that is not a JSON object.
    static func document(_ url: URL, client: EndpointClient) async throws(OAuthError) -> (JSONObject, HTTPResponse) {
        var current = url
        for _ in 0...maximumRedirects {
            let response = try await client.send(client.getRequest(url: current), endpoint: .resource)
            if (300..<400).contains(response.status), let location = response.headers["location"] {
                guard let next = URL(string: location, relativeTo: current)?.absoluteURL, origin(of: next) == origin(of: url) else {
                    throw OAuthError(.invalidResponse, endpoint: .resource, httpStatus: response.status,
                                     message: "\(current.redactedForLog) redirects to another origin; the redirect is refused")
                }
                current = next
                continue
            }
            guard (200..<300).contains(response.status) else {
                throw OAuthError(.httpStatus, endpoint: .resource, httpStatus: response.status,
                                 message: "HTTP \(response.status) with \(EndpointClient.describeBody(response)) for \(current.redactedForLog)")
            }
            let value = try EndpointClient.parseJSON(response.body, endpoint: .resource, provider: client.provider.id, status: response.status)
            let object = try JSONObject(value, what: "the resource metadata",
                                        failure: EndpointClient.invalid(.resource, provider: client.provider.id, status: response.status))
            return (object, response)
        }
        throw OAuthError(.invalidResponse, endpoint: .resource, message: "\(url.redactedForLog) redirects more than \(maximumRedirects) times")
    }

    /// `scheme://host:port`, lower-cased, with the scheme's default port filled in.
    static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// Which of the resource's servers to use: `issuer` when given (it must be listed), else the
    /// first listed (RFC 9728 §7.6: a server the resource does not list is never used for it).
    /// - Throws: ``OAuthError`` `.configuration` for an issuer the resource does not list.
    static func chooseServer(_ metadata: ProtectedResourceMetadata, issuer: String?) throws(OAuthError) -> String {
        guard let issuer else { return metadata.authorizationServers[0] }
        guard metadata.authorizationServers.contains(issuer) else {
            throw OAuthError(.configuration, endpoint: .resource, message: "the authorization server \"\(issuer)\" is not one the resource "
                + "\(metadata.resource.absoluteString) lists (\(metadata.authorizationServers.joined(separator: ", "))); it is not used (RFC 9728 §7.6)")
        }
        return issuer
    }
}
