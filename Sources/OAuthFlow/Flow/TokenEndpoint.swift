#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The token endpoint exchange every grant goes through: one per provider, made with the flow.
///
/// ``exchange(_:onPoll:)`` reads top to bottom:
///
///     the DPoP key (when the provider uses DPoP)
///     → the endpoint (the catalog's, else discovered)
///     → client authentication (an assertion's algorithm checked against the metadata; the
///       authentication itself is applied to each attempt by the provider's EndpointClient)
///     → the POST with its retries, each attempt with a fresh DPoP proof (or the poll of the
///       device and CIBA grants)
///     → the response (RFC 6749 §5.1), and the grant's follow-up on it when it has one
///       (Google's service-account impersonation)
///     → the checks: the ID token, a certificate-bound access token's `cnf`
///     → the token set to keep
///
/// It stores nothing and publishes nothing: the flow's runner (Flow/GrantRunner.swift) stores,
/// caches and publishes what it returns, once for every grant. Nothing here calls back into the
/// flow: discovery, the signing keys and the cached tokens' DPoP key are read through the
/// ``Discovery`` and ``TokenCache`` the flow shares with it.
final class TokenEndpoint: Sendable {
    /// How ``exchange(_:onPoll:)`` failed: in the request (which a refresh's runner reads for a
    /// dead refresh token), or in the checks of an answer the server gave.
    enum Failure: Error {
        case request(OAuthError)
        case checks(OAuthError)
    }

    /// The provider's HTTP client: its client authentication, retries and DPoP nonces.
    let client: EndpointClient
    /// The flow's metadata and signing keys.
    let discovery: Discovery
    /// The flow's token cache, read for the DPoP key the provider's tokens hold.
    let tokens: TokenCache
    /// Sleeps between device polls.
    let clock: any Clock<Duration>
    /// The wall clock: token lifetimes, ID token times.
    let now: @Sendable () -> Date
    /// How far an ID token's times may be off.
    let clockSkew: TimeInterval
    /// The provider's CIBA requests waiting for a ping (ping mode), which
    /// ``AuthFlow/receiveBackchannelNotification(authorization:body:)`` wakes.
    let pings = BackchannelPings()

    init(client: EndpointClient, discovery: Discovery, tokens: TokenCache, options: AuthFlow.Options) {
        self.client = client
        self.discovery = discovery
        self.tokens = tokens
        self.clock = options.clock
        self.now = options.now
        self.clockSkew = options.clockSkew
    }

    var provider: Provider { client.provider }

    /// Sends `grant` to the token endpoint and returns the token set to keep, its ID token
    /// validated; `onPoll` follows a polled grant (`slow_down`, then the answer with tokens).
    /// - Throws: ``Failure/request(_:)`` with what the DPoP key, the endpoint, the client
    ///   authentication check or the request throws (a refusal read by the grant: see
    ///   ``GrantRequest/read(_:)``); ``Failure/checks(_:)`` with `.idTokenRejected`, what fetching
    ///   the keys throws, or `.invalidResponse` for a token bound to another certificate.
    func exchange(_ grant: GrantRequest, onPoll: (@Sendable (PollEvent) async -> Void)? = nil) async throws(Failure) -> TokenSet {
        let response: TokenResponse
        let proof: DPoPProver?
        do {
            // Checked here too, so a provider without DPoP (most) makes no async call for it.
            proof = provider.dpop == .off ? nil : try await prover(previous: grant.previous)
            response = try await request(grant, proof: proof, onPoll: onPoll)
        } catch {
            throw .request(error)
        }
        if grant.isRefresh { client.log.info(provider.id, "refreshed; refresh token \(response.refreshToken == nil ? "kept" : "rotated")") }
        do {
            var set = try await checked(response, of: grant)
            // The DPoP key the flow made is kept with the tokens it binds (RFC 9449; sealed with them).
            set.dpopKey = proof?.generatedKey
            return set
        } catch {
            throw .checks(error)
        }
    }

    // MARK: The request

    /// The endpoint, the client-authentication check, then the grant's request: one POST with its
    /// retries, or the poll.
    private func request(
        _ grant: GrantRequest, proof: DPoPProver?, onPoll: (@Sendable (PollEvent) async -> Void)?
    ) async throws(OAuthError) -> TokenResponse {
        // The catalog's token endpoint, when it has one, without the async call that would also
        // look for a discovered one (requiredEndpoint's first step is the same lookup).
        let url: URL
        if let configured = Discovery.configuredURL(.token, of: provider) {
            url = configured
        } else {
            url = try await discovery.requiredEndpoint(.token, client)
        }
        // Only a client that signs assertions has an algorithm to check.
        if case .assertion(let authenticator) = client.authenticator { try await checkAssertionAlgorithm(authenticator) }
        do {
            switch grant.exchange {
            case .post(let fields, let scope):
                let response = try await post(fields, to: url, retrying: scope, proof: proof)
                guard let followUp = grant.followUp else { return response }
                return try await followUp(response, client, now())
            case .poll(let pending):
                return try await poll(pending, url: url, proof: proof, onPoll: onPoll)
            }
        } catch {
            throw grant.read(error)
        }
    }

    /// One token request with its retries (``EndpointClient/post(_:to:endpoint:retrying:proof:)``),
    /// its §5.1 answer decoded. With `proof`, a `DPoP` token type is accepted; with the provider's
    /// DPoP `.required`, a Bearer answer is `.invalidResponse`.
    private func post(
        _ fields: [(String, String)], to url: URL, retrying scope: RetryScope = .never, proof: DPoPProver?
    ) async throws(OAuthError) -> TokenResponse {
        let object = try await client.post(fields, to: url, endpoint: .token, retrying: scope, proof: proof)
        return try TokenResponse(object, dpop: proof == nil ? .off : provider.dpop == .required ? .required : .enabled)
    }

    /// Polls for `pending` until the person acts, the time is up, or the task is cancelled: the
    /// one loop of the device grant (RFC 8628 §3.4–3.5) and CIBA (CIBA Core §7.3, §10.1, §11);
    /// each refusal is read by ``Poll``, and what differs between the grants by
    /// ``PolledAuthorization``. In CIBA's ping mode a ping cuts the wait short (``pause(_:for:cancelled:)``).
    private func poll(
        _ pending: PolledAuthorization, url: URL, proof: DPoPProver?, onPoll: (@Sendable (PollEvent) async -> Void)?
    ) async throws(OAuthError) -> TokenResponse {
        var poll = Poll(pending)
        let fields = pending.fields
        let ping = pending.awaitingPings.flatMap { pings.register($0, now: now()) }
        defer { if let ping { pings.unregister(ping) } }
        while true {
            let wait = try poll.wait(at: now())
            try await pause(wait, for: ping, cancelled: pending.cancelled)
            try poll.checkUnexpired(at: now())
            do {
                let response = try await post(fields, to: url, proof: proof)
                await onPoll?(.answered(poll.pending))
                return response
            } catch {
                if try poll.read(error, log: client.log) { await onPoll?(.slowedDown(poll.pending)) }
            }
        }
    }

    /// Sleeps `seconds` on the flow's clock; with a registered ping (CIBA ping mode), only until
    /// it arrives.
    /// - Throws: `cancelled` when the task is cancelled.
    private func pause(_ seconds: Double, for ping: UInt64?, cancelled: @autoclosure () -> OAuthError) async throws(OAuthError) {
        guard let ping else {
            do { try await clock.sleep(for: .seconds(seconds)) } catch { throw cancelled() }
            return
        }
        let clock = clock, pings = pings
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(for: .seconds(seconds)) }
            group.addTask { await pings.wait(ping) }
            _ = await group.next()
            group.cancelAll()
        }
        if Task.isCancelled { throw cancelled() }
    }

    /// Before a token request: when the provider signs client assertions and has an issuer whose
    /// metadata advertises `token_endpoint_auth_signing_alg_values_supported` (RFC 8414 §2), the
    /// algorithm must be one of them. The metadata is the cached discovery document (fetched now
    /// when there is none; a server that publishes none is not checked).
    /// - Throws: ``OAuthError`` `.configuration` (recovery: fix the configuration) before anything
    ///   is sent to the token endpoint.
    private func checkAssertionAlgorithm(_ authenticator: AssertionAuthenticator) async throws(OAuthError) {
        guard provider.issuer != nil else { return }
        let metadata: ProviderMetadata
        do {
            metadata = try await discovery.metadata(client)
        } catch {
            return
        }
        try authenticator.checkAdvertised(in: metadata, providerID: provider.id)
    }

    // MARK: The DPoP key

    /// The prover of the provider's DPoP proofs, or nil when the provider does not use DPoP.
    ///
    /// The key is ``Provider/Settings/dpopKey`` when set; else the key kept with the provider's tokens
    /// (`previous`, then the cached set), else the one made earlier in this process (the client's
    /// ``DPoPKeySlot``), else a new one. The algorithm must be one the server's
    /// `dpop_signing_alg_values_supported` lists, when its metadata has that member (RFC 9449 §5.1).
    /// The authorization request uses the same key for `dpop_jkt` and a pushed request's proof.
    /// - Throws: ``OAuthError`` `.configuration` for an algorithm the server does not list,
    ///   before anything is sent to the token endpoint; `.crypto` when no key can be made.
    func prover(previous: TokenSet? = nil) async throws(OAuthError) -> DPoPProver? {
        guard provider.dpop != .off else { return nil }
        let algorithm = provider.effectiveDPoPAlgorithm
        try await checkDPoPAlgorithm(algorithm)
        if let signer = provider.dpopKey { return try DPoPProver(signer: signer, algorithm: algorithm) }
        let slot = client.dpopKeySlot
        for candidate in [previous?.dpopKey, tokens[provider.id]?.dpopKey, slot.current(algorithm)] {
            if let key = candidate, key.algorithm == algorithm {
                slot.hold(key)
                return DPoPProver(key)
            }
        }
        let key = try DPoPKey.generate(algorithm)
        slot.hold(key)
        client.log.debug(provider, "made a DPoP key (\(algorithm.rawValue))")
        return DPoPProver(key)
    }

    /// `.configuration` when the provider's discovered metadata lists
    /// `dpop_signing_alg_values_supported` without `algorithm`; nothing when it lists none (or
    /// the provider has no issuer, or discovery fails: the token request then says what is wrong).
    private func checkDPoPAlgorithm(_ algorithm: SigningAlgorithm) async throws(OAuthError) {
        guard provider.issuer != nil else { return }
        let metadata: ProviderMetadata
        do { metadata = try await discovery.metadata(client) } catch { return }
        guard case .array(let values)? = metadata.document["dpop_signing_alg_values_supported"] else { return }
        let names = values.compactMap(\.stringValue)
        guard names.contains(algorithm.rawValue) else {
            throw OAuthError(.configuration, providerID: provider.id, endpoint: .token, message: """
                the DPoP algorithm \(algorithm.rawValue) is not in the server's dpop_signing_alg_values_supported \
                (\(names.prefix(8).map { DisplayText.escape(String($0.prefix(16))) }.joined(separator: ", "))); set dpopAlgorithm to one of them
                """)
        }
    }

    // MARK: The checks

    /// The checks between the answer and the set to keep: the ID token (nothing is stored when it
    /// is refused), then a certificate-bound access token's `cnf` (RFC 8705 §3, mutual TLS only);
    /// then the set made from the answer (a refresh's merged into the set it renews), holding an
    /// ID token only when it was validated.
    private func checked(_ response: TokenResponse, of grant: GrantRequest) async throws(OAuthError) -> TokenSet {
        let time = now()
        // Without an id_token only an authorization code or CIBA answer can be refused for it (the
        // step's own rule), so the other grants skip the async call.
        let idToken = response.idToken == nil && !grant.grant.requiresIDToken
            ? nil : try await verifiedIDToken(response, of: grant, now: time)
        try CertificateBinding.check(accessToken: response.accessToken, provider: provider)
        var set: TokenSet
        if let previous = grant.previous {
            set = RefreshTokenGrant.merge(response, into: previous, now: time)
        } else {
            set = TokenSet(response, providerID: provider.id, requestedScopes: grant.requestedScopes, grant: grant.grant, now: time)
        }
        Self.keepOnlyValidated(idToken, of: response, grant, in: &set)
        return set
    }

    /// The validated ID token of a grant's answer, or nil when there is none to validate.
    ///
    /// - An `id_token` in the answer is validated (``IDTokenValidator``) against the provider's
    ///   issuer and client id, its keys (``Discovery/withSigningKeys(_:_:)``) and the allowed
    ///   algorithms; authorization code: with the nonce sent and `c_hash`/`at_hash`; refresh: `iss`,
    ///   `sub`, `aud` kept from the previous ID token, no nonce; device, CIBA and client credentials: no nonce.
    /// - None in an authorization code or CIBA answer for which `openid` was requested (and not
    ///   refused in the answer's `scope`) is a rejection: OpenID Connect Core §3.1.3.3 and CIBA
    ///   Core §10.1.1 make it required.
    /// - A provider without `issuer` cannot have its ID tokens validated: nil is returned (the
    ///   token is then dropped, see ``keepOnlyValidated(_:of:_:in:)``) and a warning naming only the
    ///   token's shape is logged.
    /// - Throws: ``OAuthError`` `.idTokenRejected` naming the check; what fetching metadata or keys throws.
    func verifiedIDToken(_ response: TokenResponse, of grant: GrantRequest, now: Date) async throws(OAuthError) -> IDToken? {
        guard let token = response.idToken else {
            let openIDGranted = response.scope.map { $0.split(separator: " ").contains("openid") } ?? true
            if grant.previous == nil, grant.grant.requiresIDToken, grant.requestedScopes.contains("openid"), openIDGranted {
                let rule = grant.grant == .ciba ? "CIBA Core §10.1.1" : "OpenID Connect Core §3.1.3.3"
                throw OAuthError(.idTokenRejected, providerID: provider.id, endpoint: .token,
                                 message: "openid was requested but the token response has no id_token (\(rule))")
            }
            return nil
        }
        guard let issuer = provider.issuer else {
            let shape = "\(token.reveal().utf8.count) bytes, \(token.reveal().split(separator: ".", omittingEmptySubsequences: false).count) segments"
            client.log.warning(provider.id, "the token response has an id_token (\(shape)), but the provider has no issuer to validate "
                + "it against: it was discarded, not stored; set issuer (and jwksURL) in the catalog to validate and keep it")
            return nil
        }
        return try await validate(token, issuer: issuer, of: response, grant, now: now)
    }

    /// The validation itself, in a function of its own: its async frame (the validator, the
    /// expectations, the parsed token: 2 KB) is allocated only for an answer that has an ID token,
    /// not for every client-credentials fetch.
    @inline(never)
    private func validate(
        _ token: Secret, issuer: String, of response: TokenResponse, _ grant: GrantRequest, now: Date
    ) async throws(OAuthError) -> IDToken? {
        let provider = provider
        let validator = IDTokenValidator(
            issuer: issuer, clientID: provider.clientID, allowedAlgorithms: try await discovery.allowedAlgorithms(client),
            clientSecret: provider.clientSecret, clockSkew: clockSkew)
        let expectations = IDTokenValidator.Expectations(
            nonce: grant.previous == nil ? grant.nonce : nil, maxAge: grant.maxAge, requestedAt: grant.requestedAt,
            accessToken: response.accessToken, code: grant.code, previous: grant.previous?.validatedIDToken)
        do {
            // An HMAC token is verified with the client secret alone: no keys to fetch.
            if try JWS(compact: token.reveal()).header.algorithm.isHMAC {
                return try validator.validate(token, keys: JWKSet(keys: []), now: now, expecting: expectations)
            }
            return try await discovery.withSigningKeys(client) { keys throws(OAuthError) in
                try validator.validate(token, keys: keys, now: now, expecting: expectations)
            }
        } catch {
            var error = error
            if error.providerID == nil { error.providerID = provider.id }
            if error.code == .idTokenRejected, error.endpoint == nil { error.endpoint = .token }
            throw error
        }
    }

    /// Makes `set` hold an ID token only when it passed validation: `validated` with the answer's
    /// raw token; else (no ID token in the answer, or one that could not be validated and is
    /// dropped) the previous validated one a refresh carries over (OpenID Connect Core §12.2);
    /// else none. An unvalidated ID token is never stored, exposed or sent as `id_token_hint`.
    static func keepOnlyValidated(_ validated: IDToken?, of response: TokenResponse, _ grant: GrantRequest, in set: inout TokenSet) {
        if let validated, let raw = response.idToken {
            set.idToken = raw
            set.validatedIDToken = validated
        } else if let previous = grant.previous, let kept = previous.validatedIDToken {
            set.idToken = previous.idToken
            set.validatedIDToken = kept
        } else {
            set.idToken = nil
            set.validatedIDToken = nil
        }
    }
}
