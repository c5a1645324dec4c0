#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The authorization request's way to the server: in the browser's URL, signed (RFC 9101), or
// pushed (RFC 9126).
extension AuthFlow {
    /// A new authorization request for `provider`: its parameters made, then signed into a
    /// request object when the provider says `requestObject`, then pushed when it says
    /// `pushedAuthorization` or its metadata says `require_pushed_authorization_requests`. A DPoP
    /// provider's push carries a DPoP proof of the key its `dpop_jkt` names (RFC 9449 §10.1).
    /// - Throws: ``OAuthError`` as ``authorizationRequest(provider:scopes:parameters:usePKCE:resources:)`` documents.
    func makeAuthorizationRequest(
        _ provider: Provider, scopes: [String], parameters: [String: String], usePKCE: Bool, resources: [URL], now: Date
    ) async throws(OAuthError) -> AuthorizationRequest {
        let prepared = try AuthorizationCodeGrant.parameters(
            provider: provider, authorizationURL: try await requiredEndpoint(.authorization, of: provider), scopes: scopes,
            parameters: parameters, usePKCE: usePKCE, resources: resources)
        let lifetime = options.pendingAuthorizationLifetime
        let signed = provider.requestObject ? try await RequestObject.make(prepared.query, provider: provider, now: now) : nil
        guard try await pushesAuthorizationRequests(provider) else {
            let browserQuery = signed.map { Self.requestObjectQuery(prepared.query, clientID: provider.clientID, requestObject: $0) }
                ?? prepared.query
            return try AuthorizationCodeGrant.request(prepared, providerID: provider.id, browserQuery: browserQuery, now: now, lifetime: lifetime)
        }
        let url = try await requiredEndpoint(.pushedAuthorization, of: provider)
        let client = client(for: provider)
        let fields = PushedAuthorization.fields(
            prepared.query, requestObject: signed, clientID: provider.clientID, authentication: client.authentication)
        // A DPoP provider proves its key on the push too (RFC 9449 §10.1): the key dpop_jkt named,
        // held in the client's slot since addingDPoPThumbprint made or found it.
        let proof = try await dpopProver(for: provider)
        let answer = try await PushedAuthorization.push(fields, to: url, client: client, proof: proof)
        logger.debug(provider, "authorization request pushed; request_uri expires in \(answer.expiresIn) s; request object=\(signed != nil); "
            + "DPoP=\(proof != nil)")
        return try AuthorizationCodeGrant.request(
            prepared, providerID: provider.id, browserQuery: [("client_id", provider.clientID), ("request_uri", answer.requestURI)],
            now: now, lifetime: lifetime, requestURIExpiresAt: now.addingTimeInterval(TimeInterval(answer.expiresIn)))
    }

    /// The browser's query for a request object sent by value, not pushed: `client_id`, then
    /// `response_type` and `scope` as the object has them, then `request`. OpenID Connect Core 1.0
    /// §6.1 requires `response_type`, `client_id` and `scope` outside the object too (an OpenID
    /// provider such as idpyoidc checks them before it opens the object); RFC 9101 §5 needs only
    /// `client_id`, lets a client repeat the others, and has its servers read the object alone.
    static func requestObjectQuery(_ query: [(String, String)], clientID: String, requestObject: Secret) -> [(String, String)] {
        [("client_id", clientID)] + query.filter { $0.0 == "response_type" || $0.0 == "scope" } + [("request", requestObject.reveal())]
    }

    /// True when `provider`'s authorization requests are pushed: the catalog's
    /// `pushedAuthorization`, or the discovered `require_pushed_authorization_requests`.
    ///
    /// The metadata is read when the flow needs it anyway (the authorization endpoint is not
    /// written in the catalog) or already holds it; a provider whose endpoints are all written
    /// costs no discovery request.
    /// - Throws: what ``metadata(for:)`` throws when discovery was needed and failed.
    func pushesAuthorizationRequests(_ provider: Provider) async throws(OAuthError) -> Bool {
        if provider.pushedAuthorization { return true }
        guard let issuer = provider.issuer else { return false }
        if provider.authorizationURL == nil {
            return try await discoveredMetadata(for: provider).requirePushedAuthorizationRequests
        }
        return discoveryCache.fresh(issuer, now: options.now())?.0.requirePushedAuthorizationRequests ?? false
    }

    /// Refuses a callback for a pushed request whose `request_uri` has expired (RFC 9126 §2.2:
    /// its `expires_in` bounds the pending request).
    /// - Throws: ``OAuthError`` `.expired` (recovery: authorize again) naming the expiry.
    func checkRequestURIExpiry(of request: AuthorizationRequest) throws(OAuthError) {
        guard let expiry = request.requestURIExpiresAt, expiry <= options.now() else { return }
        throw OAuthError(.expired, providerID: request.providerID, endpoint: .pushedAuthorization,
                         message: "the pushed authorization request's request_uri expired at \(expiry) (its expires_in, RFC 9126 §2.2); "
                            + "start a new authorization request")
    }
}
