#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// Starting from a resource's URL: its metadata (RFC 9728), the authorization server it names,
// the client's dynamic registration and its management (RFC 7591, RFC 7592), and the login again
// that a resource's step-up challenge asks for (RFC 6750 §3, RFC 9470). The requests are built and
// read in Registration/; the flow keeps the caches and the stored records.
extension AuthFlow {
    // MARK: Protected resources (RFC 9728)

    /// The metadata of the protected resource at `resource`, found from its URL alone.
    ///
    /// An unauthenticated `GET` of `resource` whose `401` challenge names `resource_metadata`
    /// gives the document's URL (RFC 9728 §5.1); without one, the well-known URL made from the
    /// resource (§3.1: `https://api.example/mcp` → `https://api.example/.well-known/oauth-protected-resource/mcp`).
    /// The document's `resource` must be exactly `resource` (§3.3). Redirects are followed only
    /// within the document's origin, at most three. Cached per resource for its `Cache-Control`
    /// (24 hours without one), like server metadata. Next: ``authorizationServer(for:issuer:)``.
    /// See [RFC 9728](https://www.rfc-editor.org/rfc/rfc9728).
    /// - Throws: ``OAuthError`` (endpoint `.resource`) `.configuration` for a URL that is neither
    ///   `https://` nor loopback `http://`; `.transport`; `.httpStatus` when no document is found;
    ///   `.invalidResponse` for a document whose `resource` differs, that lists no server or a
    ///   malformed one, exceeds a bound, for a challenge holding control characters, or a redirect
    ///   to another origin.
    public func resourceMetadata(for resource: URL) async throws(OAuthError) -> ProtectedResourceMetadata {
        let client = anonymousClient(for: resource)
        do {
            return try await discovery.resourceCache.document(resource.absoluteString, now: options.now) { () async throws(OAuthError) in
                try await ResourceDiscovery.fetch(resource, client: client)
            }.0
        } catch {
            var error = error
            error.providerID = nil
            throw error
        }
    }

    /// The metadata of the authorization server `resource` names: `issuer` when given (it must be
    /// one the resource lists), else the first it lists. Fetched and cached as
    /// ``metadata(for:)`` does, and its `issuer` must equal the listed one exactly (RFC 8414 §3.3),
    /// so the resource's and the server's metadata agree.
    /// - Throws: ``OAuthError`` `.configuration` for an issuer the resource does not list; what
    ///   ``metadata(for:)`` throws.
    public func authorizationServer(for resource: ProtectedResourceMetadata, issuer: String? = nil) async throws(OAuthError) -> ProviderMetadata {
        let chosen = try ResourceDiscovery.chooseServer(resource, issuer: issuer)
        let probe = Provider(id: "authorization-server", issuer: chosen, clientID: "-")
        do {
            return try await discovery.metadata(client(for: probe))
        } catch {
            var error = error
            error.providerID = nil
            throw error
        }
    }

    /// A client for requests that belong to no provider (a resource's metadata), with the flow's
    /// transport and `User-Agent`.
    private func anonymousClient(for url: URL) -> EndpointClient {
        EndpointClient(provider: Provider(id: "resource", tokenURL: url, clientID: "-"), transport: transport,
                       userAgent: options.userAgent, log: logger)
    }

    // MARK: Dynamic registration (RFC 7591, RFC 7592)

    /// The registration stored for `provider`, or nil when none is.
    /// - Throws: ``OAuthError`` `.storage` when the record cannot be read.
    public func registration(for provider: String) async throws(OAuthError) -> ClientRegistration? {
        let key = ClientRegistration.storeKey(for: provider)
        guard let data = try await store.load(key) else { return nil }
        return try RegistrationEntry.decode(data, key: key, provider: provider)
    }

    /// Registers a client for `provider` at its issuer's registration endpoint and stores the answer.
    ///
    /// The request (RFC 7591 §2, §3.1) names the provider's redirect URI (a loopback one with its
    /// port: servers compare it exactly), the code and refresh grants, the scopes (the provider's
    /// ``Provider/DynamicRegistration/scopes``, else its scopes and every scope the server lists), `client_name`,
    /// and the method: the provider's ``Provider/DynamicRegistration/authentication``, else the
    /// first of `none`, `private_key_jwt` and `client_secret_basic` that the server's
    /// `token_endpoint_auth_methods_supported` lists (`none` when it lists nothing). For
    /// `private_key_jwt` a key is made (RSA-2048, or P-256 when the server lists ES256 and not
    /// RS256) and its public JWK sent as `jwks`, with its thumbprint as `kid`; for `none`,
    /// `client_confidential: false` is sent too, which a server that does not know it ignores
    /// (§2) and glewlwyd needs to make the client public. The answer's `client_id`, secret and
    /// its expiry, registration access token and configuration URI are kept in the store under
    /// ``ClientRegistration/storeKey(for:)``, sealed like tokens. Flows made afterwards apply it
    /// to the provider; this flow's provider is unchanged (providers never change after `init`).
    /// See [RFC 7591 §3](https://www.rfc-editor.org/rfc/rfc7591#section-3).
    /// - Parameters:
    ///   - provider: a configured provider with an `issuer`.
    ///   - initialAccessToken: the token a server that registers only known clients wants (§3);
    ///     nil for the provider's own (``Provider/DynamicRegistration/initialAccessToken``).
    /// - Throws: ``OAuthError`` `.configuration` for an unknown provider, one without an issuer or a
    ///   redirect URI, a server without a `registration_endpoint`; what ``metadata(for:)`` throws;
    ///   `.serverRejected` with `invalid_redirect_uri` / `invalid_client_metadata` (§3.2.2);
    ///   `.accessDenied`, `.httpStatus` for a missing or refused initial access token;
    ///   `.invalidResponse` for an answer without `client_id` or with a value out of bounds;
    ///   `.storage`; `.transport`. A failure is published as `.error` for the provider.
    public func registerClient(provider id: String, initialAccessToken: Secret? = nil) async throws(OAuthError) -> ClientRegistration {
        let provider = try resolveForRegistration(id)
        return try await reporting(id) { () async throws(OAuthError) -> ClientRegistration in
            let (metadata, endpoint) = try await registrationEndpoint(provider)
            let method = provider.dynamicRegistration?.authentication ?? Self.registrationMethod(metadata)
            guard let redirect = provider.redirectURI else {
                throw OAuthError(.configuration, providerID: id, endpoint: .registration,
                                 message: "provider \"\(id)\" has no redirectURI to register (a loopback one, RFC 8252 §7.3)")
            }
            var key: (key: ClientKey, pem: Secret, id: String)?
            var jwks: JSONValue?
            if method == .privateKeyJWT {
                let made = try ClientKeyMaker.make(Self.registrationKeyAlgorithm(metadata))
                key = made
                jwks = try ClientKeyMaker.jwks(made.key, keyID: made.id)
            }
            let settings = provider.dynamicRegistration ?? Provider.DynamicRegistration()
            let request = ClientMetadata(
                redirectURIs: [redirect], tokenEndpointAuthMethod: method, clientName: settings.clientName ?? "authflow",
                scope: settings.scopes.isEmpty ? Self.registrationScopes(provider, metadata) : settings.scopes, softwareID: settings.softwareID,
                softwareVersion: settings.softwareVersion, jwks: jwks,
                extra: method == .none ? ["client_confidential": .bool(false)] : [:])
            let client = client(for: provider)
            let answer = try await RegistrationEndpoint.register(
                request, at: endpoint, initialAccessToken: initialAccessToken ?? settings.initialAccessToken, client: client)
            let registration = try ClientRegistration(
                answer: answer, asked: request, previous: nil, providerID: id, issuer: metadata.issuer, registrationEndpoint: endpoint,
                key: key, now: options.now())
            try await store.save(RegistrationEntry.encode(registration), for: ClientRegistration.storeKey(for: id))
            logger.info(id, "registered client \(registration.clientID) at \(endpoint.redactedForLog) (\(method.rawValue))")
            return registration
        }
    }

    /// The stored registration, checked with the server: read back (RFC 7592 §2.1) when it has a
    /// configuration endpoint; registered anew when there is none yet, when its secret has
    /// expired (RFC 7591 §3.2.1 `client_secret_expires_at`), or when the server no longer knows it
    /// (the read answers 401, or `invalid_token`, `invalid_client` or `access_denied`). An expired
    /// secret is so never reported as a failed login. Run it before a login; apply the result to
    /// the provider (``ClientRegistration/applied(to:)``) or make a new flow, which does.
    /// - Throws: what ``registerClient(provider:initialAccessToken:)`` and
    ///   ``readRegistration(provider:)`` throw (other than the refusals above).
    public func currentRegistration(provider id: String, initialAccessToken: Secret? = nil) async throws(OAuthError) -> ClientRegistration {
        _ = try resolveForRegistration(id)
        guard var stored = try await reporting(id, { () async throws(OAuthError) in try await registration(for: id) }) else {
            return try await registerClient(provider: id, initialAccessToken: initialAccessToken)
        }
        if stored.registrationClientURI != nil, stored.registrationAccessToken != nil {
            do {
                stored = try await readRegistration(provider: id)
            } catch where Self.meansUnknownClient(error) {
                logger.info(id, "the server no longer knows client \(stored.clientID) (\(error.code)); registering again")
                return try await registerClient(provider: id, initialAccessToken: initialAccessToken)
            }
        }
        if stored.isSecretExpired(at: options.now()) {
            logger.info(id, "the client secret of \(stored.clientID) expired; registering again")
            // The old client is deleted first where the server lets us; a refusal leaves it to expire there.
            if let uri = stored.registrationClientURI, let token = stored.registrationAccessToken {
                let provider = try resolveForRegistration(id)
                try? await RegistrationEndpoint.delete(uri, token: token, client: client(for: provider))
            }
            return try await registerClient(provider: id, initialAccessToken: initialAccessToken)
        }
        return stored
    }

    /// Reads the registration back from its configuration endpoint (RFC 7592 §2.1) and stores
    /// what it says (a server may rotate the secret on a read); what the answer leaves out (the
    /// registration access token, the configuration URI: glewlwyd sends neither) is kept.
    /// - Throws: ``OAuthError`` `.configuration` when nothing is stored or the record has no
    ///   configuration endpoint or token; `.httpStatus` (401: the token or the client is gone),
    ///   `.serverRejected`, `.accessDenied`, `.invalidResponse`, `.transport`, `.storage`.
    public func readRegistration(provider id: String) async throws(OAuthError) -> ClientRegistration {
        let provider = try resolveForRegistration(id)
        return try await reporting(id) { () async throws(OAuthError) -> ClientRegistration in
            let (stored, uri, token) = try await managedRegistration(id)
            let answer = try await RegistrationEndpoint.read(uri, token: token, client: client(for: provider))
            let registration = try ClientRegistration(
                answer: answer, asked: try stored.metadata(), previous: stored, providerID: id, issuer: stored.issuer,
                registrationEndpoint: uri, key: nil, now: options.now())
            try await store.save(RegistrationEntry.encode(registration), for: ClientRegistration.storeKey(for: id))
            return registration
        }
    }

    /// Replaces the registered metadata (RFC 7592 §2.2) with `metadata` (nil: the stored one, as a
    /// refresh) and stores the answer: a new secret or registration access token in it replaces
    /// the old one at once (glewlwyd issues a new secret at every update). The full metadata is
    /// sent, since a server may drop what an update leaves out.
    /// - Throws: ``OAuthError`` as ``readRegistration(provider:)``, and `.serverRejected` with
    ///   `invalid_client_metadata` or `invalid_redirect_uri` for refused metadata.
    public func updateRegistration(provider id: String, metadata: ClientMetadata? = nil) async throws(OAuthError) -> ClientRegistration {
        let provider = try resolveForRegistration(id)
        return try await reporting(id) { () async throws(OAuthError) -> ClientRegistration in
            let (stored, uri, token) = try await managedRegistration(id)
            var request: ClientMetadata
            if let metadata { request = metadata } else { request = try stored.metadata() }
            if request.tokenEndpointAuthMethod == .privateKeyJWT, request.jwks == nil, let key = stored.clientKey {
                request.jwks = try ClientKeyMaker.jwks(key, keyID: stored.clientKeyID)
            }
            let answer = try await RegistrationEndpoint.update(uri, token: token, metadata: request, clientID: stored.clientID,
                                                               client: client(for: provider))
            let registration = try ClientRegistration(
                answer: answer, asked: request, previous: stored, providerID: id, issuer: stored.issuer, registrationEndpoint: uri,
                key: nil, now: options.now())
            try await store.save(RegistrationEntry.encode(registration), for: ClientRegistration.storeKey(for: id))
            return registration
        }
    }

    /// Deletes the client at the server (RFC 7592 §2.3) and then the stored record; the tokens
    /// are left to ``revoke(provider:)`` or ``clear(provider:)``. A record without a configuration
    /// endpoint (a server without RFC 7592) is only forgotten.
    /// - Returns: true when the server deleted the client; false when there was no configuration
    ///   endpoint to ask, or nothing was stored.
    /// - Throws: ``OAuthError`` `.httpStatus`, `.serverRejected`, `.accessDenied`, `.transport` from
    ///   the server (the record is then kept, so it can be tried again); `.storage`.
    @discardableResult
    public func deleteRegistration(provider id: String) async throws(OAuthError) -> Bool {
        let provider = try resolveForRegistration(id)
        return try await reporting(id) { () async throws(OAuthError) -> Bool in
            guard let stored = try await registration(for: id) else { return false }
            var deleted = false
            if let uri = stored.registrationClientURI, let token = stored.registrationAccessToken {
                try await RegistrationEndpoint.delete(uri, token: token, client: client(for: provider))
                deleted = true
            }
            try await store.delete(ClientRegistration.storeKey(for: id))
            return deleted
        }
    }

    // MARK: Step-up (RFC 6750 §3, RFC 9470)

    /// An authorization request that answers a resource's step-up challenge: the scopes the
    /// provider asks for and the current token holds, plus those the resource asked for, and its
    /// `acr_values` and `max_age` ([RFC 9470 §4](https://www.rfc-editor.org/rfc/rfc9470#section-4)).
    ///
    /// Get the challenge from the `.stepUpRequired` error (``OAuthError/Fields/challenge``) that
    /// ``AuthorizingTransport`` or ``TokenSource/stepUpError(status:headers:)`` gives. Nothing runs
    /// without a person: send them to ``AuthorizationRequest/url`` and complete it with
    /// ``completeAuthorization(callbackURL:)`` as for any browser login.
    /// - Throws: what ``authorizationRequest(provider:scopes:parameters:usePKCE:resources:)`` throws.
    public func stepUpRequest(provider id: String, challenge: ResourceChallenge) async throws(OAuthError) -> AuthorizationRequest {
        let provider = try resolve(id)
        let held = tokens[id]?.scopes ?? []
        let scopes = challenge.scopes(adding: provider.scopes + held.filter { !provider.scopes.contains($0) })
        return try await authorizationRequest(provider: id, scopes: scopes, parameters: challenge.authorizationParameters)
    }

    // MARK: Helpers

    /// The configured provider `id`, whether registered yet or not.
    private func resolveForRegistration(_ id: String) throws(OAuthError) -> Provider {
        do { return try provider(id) } catch { throw fail(id, error) }
    }

    /// The issuer's metadata and its registration endpoint.
    private func registrationEndpoint(_ provider: Provider) async throws(OAuthError) -> (ProviderMetadata, URL) {
        guard provider.issuer != nil else {
            throw OAuthError(.configuration, providerID: provider.id, endpoint: .registration,
                             message: "provider \"\(provider.id)\" has no issuer to find a registration endpoint at")
        }
        let metadata = try await discovery.metadata(client(for: provider))
        guard let endpoint = metadata.registrationEndpoint else {
            throw OAuthError(.configuration, providerID: provider.id, endpoint: .registration,
                             message: "the metadata of \(metadata.issuer) has no registration_endpoint: it does not register clients dynamically (RFC 7591)")
        }
        return (metadata, endpoint)
    }

    /// The stored record with its configuration endpoint and token.
    private func managedRegistration(_ id: String) async throws(OAuthError) -> (ClientRegistration, URL, Secret) {
        guard let stored = try await registration(for: id) else {
            throw OAuthError(.configuration, providerID: id, endpoint: .registration, message: "no registration is stored for \"\(id)\"")
        }
        guard let uri = stored.registrationClientURI, let token = stored.registrationAccessToken else {
            throw OAuthError(.configuration, providerID: id, endpoint: .registration,
                             message: "the registration of \"\(id)\" has no configuration endpoint or registration access token (RFC 7592 §3)")
        }
        return (stored, uri, token)
    }

    /// The method to register when none is configured: `none` when the server lists it (or lists
    /// nothing), else `private_key_jwt`, else `client_secret_basic`, else `client_secret_post`.
    static func registrationMethod(_ metadata: ProviderMetadata) -> Provider.ClientAuthentication {
        guard let listed = metadata.tokenEndpointAuthMethodsSupported, !listed.isEmpty else { return .none }
        for method in [Provider.ClientAuthentication.none, .privateKeyJWT, .clientSecretBasic, .clientSecretPost]
        where listed.contains(method.rawValue) {
            return method
        }
        return .clientSecretBasic
    }

    /// The scopes registered when none are configured: the provider's, then every other scope the
    /// server lists, so that a later step-up (RFC 6750 §3.1) can ask for one a server checks
    /// against the registration (Authlib does).
    static func registrationScopes(_ provider: Provider, _ metadata: ProviderMetadata) -> [String] {
        var seen = Set<String>()
        return (provider.scopes + (metadata.scopesSupported ?? [])).filter { Provider.isValidScopeToken($0) && seen.insert($0).inserted }
    }

    /// RS256, unless the server lists signing algorithms without it and with ES256.
    static func registrationKeyAlgorithm(_ metadata: ProviderMetadata) -> SigningAlgorithm {
        guard case .array(let values)? = metadata.document["token_endpoint_auth_signing_alg_values_supported"] else { return .rs256 }
        let names = values.compactMap(\.stringValue)
        return !names.contains("RS256") && names.contains("ES256") ? .es256 : .rs256
    }

    /// True for a refusal that means the server does not know the client (or its token) any more.
    static func meansUnknownClient(_ error: OAuthError) -> Bool {
        if error.code == .httpStatus, error.httpStatus == 401 || error.httpStatus == 404 { return true }
        if error.code == .accessDenied { return true }
        guard let code = error.response?.code else { return false }
        return code == .invalidToken || code == .invalidClient
    }

    /// The providers with their stored registrations applied (dynamic ones only): what `init` runs,
    /// so a flow made after a registration has the client's ID and credentials. A record that
    /// cannot be read or used leaves its provider unregistered (a warning is logged), as an
    /// unreadable token entry leaves the others loading: its grants then ask for a login, whose
    /// ``currentRegistration(provider:initialAccessToken:)`` reports the record's problem.
    static func applyingRegistrations(_ providers: [String: Provider], store: any SecretStore, logger: Logger) async -> [String: Provider] {
        var result = providers
        for (id, provider) in providers where provider.dynamicRegistration != nil {
            let key = ClientRegistration.storeKey(for: id)
            do {
                guard let data = try await store.load(key) else { continue }
                let applied = try RegistrationEntry.decode(data, key: key, provider: id).applied(to: provider)
                try applied.validate()
                result[id] = applied
            } catch {
                logger.warning(id, "the stored registration cannot be used (\(error.code)): \(error.message ?? "")")
            }
        }
        return result
    }
}
