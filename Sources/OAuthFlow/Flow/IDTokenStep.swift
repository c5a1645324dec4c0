#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The OpenID Connect part of the pipeline's validation step and of the callback check: nothing
/// reaches the store before these pass.
extension AuthFlow {
    /// The validated ID token of a grant's answer, or nil when there is none to validate.
    ///
    /// - An `id_token` in the answer is validated (``IDTokenValidator``) against the provider's
    ///   issuer and client id, its keys (``withSigningKeys(of:_:)``) and the allowed algorithms;
    ///   authorization code: with the nonce sent and `c_hash`/`at_hash`; refresh: `iss`, `sub`,
    ///   `aud` kept from the previous ID token, no nonce; device and client credentials: no nonce.
    /// - None in an authorization code answer for which `openid` was requested (and not refused in
    ///   the answer's `scope`) is a rejection: OpenID Connect Core §3.1.3.3 makes it required.
    /// - A provider without `issuer` cannot have its ID tokens validated: nil is returned (the
    ///   token is then dropped, see ``keepOnlyValidated(_:of:_:in:)``) and a warning naming only the
    ///   token's shape is logged.
    /// - Throws: ``OAuthError`` `.idTokenRejected` naming the check; what fetching metadata or keys throws.
    func verifiedIDToken(
        _ response: TokenResponse, of grant: GrantRequest, for provider: Provider, now: Date
    ) async throws(OAuthError) -> IDToken? {
        guard let token = response.idToken else {
            let openIDGranted = response.scope.map { $0.split(separator: " ").contains("openid") } ?? true
            if grant.previous == nil, grant.grant == .authorizationCode, grant.requestedScopes.contains("openid"), openIDGranted {
                throw OAuthError(.idTokenRejected, providerID: provider.id, endpoint: .token,
                                 message: "openid was requested but the token response has no id_token (OpenID Connect Core §3.1.3.3)")
            }
            return nil
        }
        guard let issuer = provider.issuer else {
            let shape = "\(token.reveal().utf8.count) bytes, \(token.reveal().split(separator: ".", omittingEmptySubsequences: false).count) segments"
            logger.warning(provider.id, "the token response has an id_token (\(shape)), but the provider has no issuer to validate "
                + "it against: it was discarded, not stored; set issuer (and jwksURL) in the catalog to validate and keep it")
            return nil
        }
        return try await validate(token, issuer: issuer, of: response, grant, for: provider, now: now)
    }

    /// The validation itself, in a function of its own: its async frame (the validator, the
    /// expectations, the parsed token: 2 KB) is allocated only for an answer that has an ID token,
    /// not for every client-credentials fetch.
    @inline(never)
    private func validate(
        _ token: Secret, issuer: String, of response: TokenResponse, _ grant: GrantRequest, for provider: Provider, now: Date
    ) async throws(OAuthError) -> IDToken? {
        let validator = IDTokenValidator(
            issuer: issuer, clientID: provider.clientID, allowedAlgorithms: try await allowedAlgorithms(for: provider),
            clientSecret: provider.clientSecret, clockSkew: options.clockSkew)
        let expectations = IDTokenValidator.Expectations(
            nonce: grant.previous == nil ? grant.nonce : nil, maxAge: grant.maxAge, requestedAt: grant.requestedAt,
            accessToken: response.accessToken, code: grant.code, previous: grant.previous?.validatedIDToken)
        do {
            // An HMAC token is verified with the client secret alone: no keys to fetch.
            if try JWS(compact: token.reveal()).header.algorithm.isHMAC {
                return try validator.validate(token, keys: JWKSet(keys: []), now: now, expecting: expectations)
            }
            return try await withSigningKeys(of: provider) { keys throws(OAuthError) in
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

    /// The JWS algorithms `provider`'s ID tokens may use: the catalog's `idTokenSigningAlgorithms`;
    /// else, when the JWKS comes from discovery, the document's asymmetric
    /// `id_token_signing_alg_values_supported`; else `RS256`.
    func allowedAlgorithms(for provider: Provider) async throws(OAuthError) -> Set<JWSAlgorithm> {
        if let names = provider.idTokenSigningAlgorithms { return Set(names.compactMap(JWSAlgorithm.init(rawValue:))) }
        if provider.jwksURL == nil, provider.issuer != nil {
            let advertised = try await discoveredMetadata(for: provider).idTokenSigningAlgorithmsSupported ?? []
            let asymmetric = advertised.compactMap(JWSAlgorithm.init(rawValue:)).filter(\.isAsymmetric)
            if !asymmetric.isEmpty { return Set(asymmetric) }
        }
        return [.rs256]
    }

    /// RFC 9207 §2.4 for a callback of `provider`, before any code is exchanged.
    ///
    /// Only with a configured `issuer`: a callback's `iss` must equal it exactly. A callback without
    /// `iss` that carries a code is refused when the server's metadata advertises
    /// `authorization_response_iss_parameter_supported: true`; to know, the metadata is read
    /// (cached, else fetched now). A server publishing no metadata at all (both well-known
    /// documents answer 4xx) counts as not advertising. An error response without `iss` is
    /// reported as its error: it carries no code to exchange.
    /// - Throws: ``OAuthError`` `.invalidCallback`; what ``metadata(for:)`` throws otherwise (fail closed).
    func checkCallbackIssuer(_ response: AuthorizationResponse, of provider: Provider) async throws(OAuthError) {
        guard let issuer = provider.issuer else { return }
        if let returned = response.issuer {
            guard returned == issuer else {
                throw OAuthError(.invalidCallback, providerID: provider.id, endpoint: .authorization,
                                 message: "the callback's iss \"\(TokenRejection.printable(returned))\" is not the provider's issuer "
                                    + "\"\(issuer)\" (RFC 9207 §2.4)")
            }
            return
        }
        guard response.code != nil, response.error == nil else { return }
        let advertised: Bool
        do {
            advertised = try await discoveredMetadata(for: provider).authorizationResponseIssParameterSupported
        } catch where error.code == .httpStatus && (400..<500).contains(error.httpStatus ?? 0) {
            advertised = false
        }
        if advertised {
            throw OAuthError(.invalidCallback, providerID: provider.id, endpoint: .authorization,
                             message: "the callback has no iss, and \(issuer) advertises authorization_response_iss_parameter_supported "
                                + "(RFC 9207 §2.4)")
        }
    }
}

extension IDToken: Codable {
    /// Decodes the claims written by ``encode(to:)``: one string holding the claims' JSON.
    /// - Throws: `DecodingError.dataCorrupted` when it is not a claims set with the required claims.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            guard case .object(let claims) = try JSONValue.parse(Data(text.utf8)) else {
                throw OAuthError(.invalidResponse, message: "the ID token claims are not an object")
            }
            try self.init(claims: claims)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ID token claims set")
        }
    }

    /// Encodes the claims as one string of JSON (``JSONValue/jsonText``).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(JSONValue.object(claims).jsonText)
    }
}

extension IDToken {
    /// The claims of a stored ID token, read without verifying its signature again: it was verified
    /// before it was stored (see `StoredEntry`).
    /// - Throws: ``OAuthError`` `.idTokenRejected` when it is not a JWT with the required claims.
    init(storedToken token: Secret) throws(OAuthError) {
        let jws = try JWS(compact: token.reveal())
        let value: JSONValue
        do {
            value = try JSONValue.parse(jws.payload)
        } catch {
            throw TokenRejection.malformed.error("the stored ID token's claims are not JSON")
        }
        guard case .object(let claims) = value else { throw TokenRejection.malformed.error("the stored ID token's claims are not an object") }
        try self.init(claims: claims)
    }
}
