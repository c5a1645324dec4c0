#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The grant runner: every grant, once (STYLE.md §11).
///
///     resolve the provider → logout ticket → the grant's request (Grants/) → publish
///     → token endpoint → exchange (the provider's EndpointClient: client authentication)
///     → validate (the ID token) → commit (store) → publish `.authorized`
///
/// and on any failure: publish `.error`, rethrow. A public grant method only says which grant.
extension AuthFlow {
    /// Runs the grant `make` builds for provider `id`, from a public entry point.
    ///
    /// Resolves the provider and takes the logout ticket (both before anything is sent), then
    /// ``run(_:ticket:locked:_:)``.
    /// - Throws: ``OAuthError`` `.configuration` for an unknown provider; what the grant and the
    ///   steps throw. Each is published as `.error`.
    func run(_ id: String, _ make: (Provider) async throws(OAuthError) -> GrantRequest) async throws(OAuthError) -> TokenSet {
        let provider = try resolve(id)
        let ticket = await grantTicket(id)
        return try await run(provider, ticket: ticket, locked: false, make)
    }

    /// The steps every grant shares, after the ticket: the grant's request (`make`; its failure
    /// publishes `.error` before anything else), `.requestingAccessToken`, the token endpoint,
    /// the exchange through the provider's ``EndpointClient``, then ``finish(_:_:for:ticket:locked:)``.
    /// - Parameter locked: true when the caller already holds the store's lock on the provider (a renewal).
    func run(
        _ provider: Provider, ticket: Ticket, locked: Bool, _ make: (Provider) async throws(OAuthError) -> GrantRequest
    ) async throws(OAuthError) -> TokenSet {
        let grant: GrantRequest
        do { grant = try await make(provider) } catch { throw fail(provider.id, error) }
        if grant.announces { publish(.requestingAccessToken(provider: provider.id)) }
        let response: TokenResponse
        do {
            response = try await exchange(grant, for: provider)
        } catch {
            guard let previous = grant.previous else { throw fail(provider.id, error) }
            if error.code == .reauthorizationRequired { await markRejected(previous, ticket: ticket) }
            throw fail(provider.id, error, since: ticket)
        }
        if grant.isRefresh { logger.info(provider.id, "refreshed; refresh token \(response.refreshToken == nil ? "kept" : "rotated")") }
        return try await finish(grant, response, for: provider, ticket: ticket, locked: locked)
    }

    /// The exchange: the token endpoint (the catalog's, else discovered), then the grant's
    /// request through the provider's client, which adds the client's authentication.
    private func exchange(_ grant: GrantRequest, for provider: Provider) async throws(OAuthError) -> TokenResponse {
        let url = try await requiredEndpoint(.token, of: provider)
        let client = client(for: provider)
        do {
            switch grant.exchange {
            case .post(let fields, let scope):
                return try await client.requestToken(fields, url: url, retrying: scope)
            case .devicePoll(let code):
                return try await DeviceAuthorizationGrant.poll(
                    code, client: client, tokenURL: url, clock: options.clock, now: options.now,
                    onSlowDown: { [weak self] raised in await self?.publishSlowDown(raised) })
            }
        } catch {
            throw grant.read(error)
        }
    }

    private func publishSlowDown(_ code: DeviceCode) {
        publish(.receivedDeviceCode(provider: code.providerID, code))
    }

    /// Remembers that `previous`'s refresh token was rejected, so a dead refresh token is not
    /// posted again on every call (not after a logout began: that would store the entry again).
    private func markRejected(_ previous: TokenSet, ticket: Ticket) async {
        guard isCurrent(ticket, previous.providerID) else { return }
        var marked = previous
        marked.needsReauthorization = true
        do { try await save(marked) } catch { logger.warning(previous.providerID, "could not mark the authorization: \(error)") }
    }

    /// Everything after the exchange: the validation step turns the token response into the set
    /// to keep (nothing is stored when it throws), then the set is committed (stored and
    /// `.authorized` published, unless a logout began after the call did; see
    /// ``commit(_:ticket:locked:what:)``). A failure publishes `.error` and is rethrown.
    private func finish(
        _ grant: GrantRequest, _ response: TokenResponse, for provider: Provider, ticket: Ticket, locked: Bool
    ) async throws(OAuthError) -> TokenSet {
        do {
            let set = try await validate(response, of: grant, for: provider)
            try await commit(set, ticket: ticket, locked: locked, what: grant.name)
            return set
        } catch {
            throw fail(provider.id, error, since: ticket)
        }
    }

    /// The validation step between exchange and storing: the ID token (OIDC/, Flow/IDTokenStep.swift).
    private func validate(_ response: TokenResponse, of grant: GrantRequest, for provider: Provider) async throws(OAuthError) -> TokenSet {
        let now = options.now()
        let idToken = try await verifiedIDToken(response, of: grant, for: provider, now: now)
        var set: TokenSet
        if let previous = grant.previous {
            set = RefreshTokenGrant.merge(response, into: previous, now: now)
        } else {
            set = TokenSet(response, providerID: provider.id, requestedScopes: grant.requestedScopes, grant: grant.grant, now: now)
        }
        Self.keepOnlyValidated(idToken, of: response, grant, in: &set)
        return set
    }

    /// The configured provider `id`; an unknown one is published as `.error`.
    /// - Throws: ``OAuthError`` `.configuration` when there is none.
    func resolve(_ id: String) throws(OAuthError) -> Provider {
        do { return try provider(id) } catch { throw fail(id, error) }
    }
}
