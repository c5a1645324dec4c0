#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// Authenticates the client with a fresh signed assertion on every request: `private_key_jwt`
/// and `client_secret_jwt` (RFC 7523 §2.2, RFC 7521 §4.2, OpenID Connect Core §9).
///
/// Built once per provider from its configuration (the key is already loaded and checked); each
/// call of ``fields(endpoint:now:)`` signs a new assertion for that endpoint. Nothing is kept
/// between calls.
package struct AssertionAuthenticator: Sendable {
    let clientID: String
    let signer: any ClientAssertionSigner
    let algorithm: SigningAlgorithm
    let keyID: String?
    let certificateThumbprint: String?
    let audience: ClientAssertionAudience
    let issuer: String?

    /// The authenticator for `provider`, or nil when its method is not an assertion method.
    /// - Throws: ``OAuthError`` `.configuration` when the provider lacks what its method needs
    ///   (``Provider/validate()`` refuses the same providers first).
    package init?(provider: Provider) throws(OAuthError) {
        switch provider.clientAuthentication {
        case .privateKeyJWT:
            guard let signer = provider.clientKey, let algorithm = provider.effectiveClientAssertionAlgorithm else {
                throw OAuthError(.configuration, providerID: provider.id, message: "private_key_jwt needs a client key and an algorithm")
            }
            self.signer = signer
            self.algorithm = algorithm
            certificateThumbprint = provider.clientCertificate?.thumbprint
        case .clientSecretJWT:
            guard let secret = provider.clientSecret else {
                throw OAuthError(.configuration, providerID: provider.id, message: "client_secret_jwt needs a client secret")
            }
            let algorithm = provider.clientAssertionAlgorithm ?? .hs256
            signer = try ClientSecretSigner(secret: secret, algorithm: algorithm)
            self.algorithm = algorithm
            certificateThumbprint = nil
        default:
            return nil
        }
        clientID = provider.clientID
        keyID = provider.clientKeyID
        audience = provider.clientAssertionAudience
        issuer = provider.issuer
    }

    /// `client_id`, `client_assertion_type` and a fresh `client_assertion` for a request to `endpoint`.
    /// - Throws: ``OAuthError`` as the signer throws; `.configuration` for an `issuer` audience
    ///   without an issuer.
    package func fields(endpoint: URL, now: Date) async throws(OAuthError) -> [(String, String)] {
        let parameters = ClientAssertion.Parameters(
            clientID: clientID, audience: try audience.value(endpoint: endpoint, issuer: issuer), algorithm: algorithm, keyID: keyID,
            certificateThumbprint: certificateThumbprint)
        return ClientAssertion.formFields(clientID: clientID, assertion: try await ClientAssertion.make(parameters, signer: signer, now: now))
    }

    /// Refuses an algorithm the server does not advertise in
    /// `token_endpoint_auth_signing_alg_values_supported` (RFC 8414 §2), before any request.
    /// A server that advertises nothing accepts what it accepts; nothing is checked then.
    /// - Throws: ``OAuthError`` `.configuration` (recovery: fix the configuration) naming the
    ///   algorithm and the advertised ones.
    func checkAdvertised(in metadata: ProviderMetadata, providerID: String) throws(OAuthError) {
        try Self.checkAdvertised(algorithm, in: metadata, providerID: providerID)
    }

    /// ``checkAdvertised(in:providerID:)`` for any algorithm.
    static func checkAdvertised(_ algorithm: SigningAlgorithm, in metadata: ProviderMetadata, providerID: String) throws(OAuthError) {
        guard case .array(let values)? = metadata.document["token_endpoint_auth_signing_alg_values_supported"] else { return }
        let advertised = values.compactMap(\.stringValue)
        guard !advertised.contains(algorithm.rawValue) else { return }
        let shown = advertised.prefix(16).map(DisplayText.escape).joined(separator: ", ")
        throw OAuthError(
            .configuration, providerID: providerID,
            message: "the client assertion algorithm \(algorithm.rawValue) is not in the provider's "
                + "token_endpoint_auth_signing_alg_values_supported (\(shown)); set clientAssertionAlgorithm to one of them "
                + "(with a key that fits it)")
    }
}
