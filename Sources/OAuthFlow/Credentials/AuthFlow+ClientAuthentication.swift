#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AuthFlow {
    /// Before a token request: when the provider signs client assertions and has an issuer whose
    /// metadata advertises `token_endpoint_auth_signing_alg_values_supported` (RFC 8414 §2), the
    /// algorithm must be one of them.
    ///
    /// The metadata is the cached discovery document (fetched now when the flow has none; a server
    /// that publishes none is not checked).
    /// `client` is the provider's endpoint client (``client(for:)``), which the caller holds already.
    /// - Throws: ``OAuthError`` `.configuration` (recovery: fix the configuration) before anything
    ///   is sent to the token endpoint.
    func checkClientAssertionAlgorithm(for provider: Provider, client: EndpointClient) async throws(OAuthError) {
        guard case .assertion(let authenticator) = client.authentication, provider.issuer != nil else { return }
        let metadata: ProviderMetadata
        do {
            metadata = try await discoveredMetadata(for: provider)
        } catch {
            return
        }
        try authenticator.checkAdvertised(in: metadata, providerID: provider.id)
    }
}

extension ProviderMetadata {
    /// The endpoint's alias in `mtls_endpoint_aliases` (RFC 8705 §5), for clients that
    /// authenticate with mutual TLS; nil when there is none or it is not an `https` URL.
    func mutualTLSAlias(for endpoint: OAuthError.Endpoint) -> URL? {
        guard case .object(let aliases)? = document["mtls_endpoint_aliases"] else { return nil }
        let member: String
        switch endpoint {
        case .token: member = "token_endpoint"
        case .revocation: member = "revocation_endpoint"
        case .introspection: member = "introspection_endpoint"
        case .deviceAuthorization: member = "device_authorization_endpoint"
        case .userinfo: member = "userinfo_endpoint"
        case .pushedAuthorization: member = "pushed_authorization_request_endpoint"
        default: return nil
        }
        guard let text = aliases[member]?.stringValue, let url = URL(string: text, encodingInvalidCharacters: false),
              url.scheme?.lowercased() == "https", Provider.endpointProblem(url) == nil else { return nil }
        return url
    }
}
