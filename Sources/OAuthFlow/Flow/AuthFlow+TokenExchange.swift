#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension AuthFlow {
    /// Exchanges a subject token (and optionally an actor token) for a token of this provider:
    /// workload identity federation, delegation and impersonation (RFC 8693).
    ///
    /// Sends `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` with the tokens, each
    /// `audience`, each `resource` (RFC 8707), `scope` and `requested_token_type` given, through the
    /// provider's client authentication. The result is stored and published like any grant's; its
    /// ``Authorization/issuedTokenType`` says what was issued (``TokenType``). A response whose
    /// `token_type` is `N_A` is accepted only when the issued token is not an access token
    /// (§2.2.1). No person is needed: a provider whose catalog entry has `subjectTokenFile` is
    /// exchanged again by ``accessToken(for:)`` whenever its token is due. See
    /// [RFC 8693 §2](https://www.rfc-editor.org/rfc/rfc8693#section-2).
    /// - Parameters:
    ///   - subjectToken: the token that says who the request is for (a Kubernetes or CI JWT, or
    ///     another provider's access token). Never logged.
    ///   - subjectTokenType: defaults to the provider's ``Provider/TokenExchange/subjectTokenType``, else ``TokenType/jwt``.
    ///   - actorToken: the token of the party acting for the subject (delegation); needs `actorTokenType`.
    ///   - audience: defaults to the provider's ``Provider/TokenExchange/audience``.
    ///   - resources: defaults to the provider's ``Provider/resources``.
    ///   - scopes: defaults to the provider's scopes.
    ///   - requestedTokenType: defaults to the provider's ``Provider/TokenExchange/requestedTokenType`` (none: the server chooses).
    /// - Throws: ``OAuthError`` `.configuration` for a type that is not an absolute URI or an actor
    ///   token without its type; `.serverRejected` (`invalid_request`, `invalid_target` for an
    ///   audience or resource the server refuses, `invalid_client`); `.invalidResponse` for `N_A`
    ///   with an access token; `.transport`; `.reauthorizationRequired` when the provider was
    ///   logged out while the request was in flight.
    @discardableResult
    public func exchangeToken(
        provider id: String, subjectToken: Secret, subjectTokenType: String? = nil, actorToken: Secret? = nil,
        actorTokenType: String? = nil, audience: [String]? = nil, resources: [URL]? = nil, scopes: [String]? = nil,
        requestedTokenType: String? = nil
    ) async throws(OAuthError) -> Authorization {
        try await run(id) { provider throws(OAuthError) in
            let configured = provider.tokenExchange
            return try TokenExchangeGrant.request(
                TokenExchangeGrant.Parameters(
                    subjectToken: subjectToken, subjectTokenType: subjectTokenType ?? configured?.subjectTokenType ?? TokenType.jwt,
                    actorToken: actorToken, actorTokenType: actorTokenType, audience: audience ?? configured?.audience ?? [],
                    resources: resources ?? provider.resources, scopes: scopes ?? provider.scopes,
                    requestedTokenType: requestedTokenType ?? configured?.requestedTokenType),
                provider: provider)
        }.authorization
    }

    /// The grant ``accessToken(for:)`` runs by itself for `provider` now, with no person: its
    /// ``Provider/serviceGrant`` when nothing is stored or the stored set came from that grant;
    /// nil otherwise (then a refresh, or the client-credentials check by endpoints, decides).
    func onDemandGrant(_ provider: Provider, stored: TokenSet?) -> GrantType? {
        guard let grant = provider.serviceGrant else { return nil }
        guard let stored else { return grant }
        return stored.grant == grant ? grant : nil
    }

    /// The request of `grant` (one that needs no person) for `provider`, built now: a fresh
    /// JWT-bearer assertion, or the subject token read again from its file.
    /// - Throws: ``OAuthError`` `.configuration` (a missing or empty subject token file, named);
    ///   `.crypto` when signing fails.
    func onDemandRequest(_ grant: GrantType, _ provider: Provider, scopes: [String]) async throws(OAuthError) -> GrantRequest {
        switch grant {
        case .jwtBearer:
            return try await JWTBearerGrant.request(
                provider, tokenURL: try await requiredEndpoint(.token, of: provider), scopes: scopes,
                subject: provider.serviceAccountSubject, resources: provider.resources, now: options.now())
        case .tokenExchange:
            guard let settings = provider.tokenExchange else {
                throw OAuthError(.configuration, providerID: provider.id,
                                 message: "\"\(provider.id)\" has no subjectTokenFile to exchange; call exchangeToken(provider:subjectToken:…) instead")
            }
            let subjectToken = try SubjectTokenFile.read(settings.subjectTokenFile, providerID: provider.id)
            return try TokenExchangeGrant.request(
                TokenExchangeGrant.Parameters(
                    subjectToken: subjectToken, subjectTokenType: settings.subjectTokenType, actorToken: nil, actorTokenType: nil,
                    audience: settings.audience, resources: provider.resources, scopes: scopes,
                    requestedTokenType: settings.requestedTokenType),
                provider: provider)
        default:
            return try ClientCredentialsGrant.request(provider, scopes: scopes, resources: provider.resources)
        }
    }
}
