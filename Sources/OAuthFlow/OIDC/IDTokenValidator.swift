#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// Validates an ID token as OpenID Connect Core 1.0 §3.1.3.7 and §12.2 require: a pure function
/// of the token, the provider's keys, the expectations of the request, and the time.
///
/// Checks, in order (each failure is ``OAuthError`` `.idTokenRejected` whose message names the
/// check, never the token; ``OAuthError/tokenRejection`` gives the reason):
/// 1. The JWS: parsing and signature, by ``JWSVerifier`` (allowed algorithms, key selection).
/// 2. Claim types and ranges (``IDToken/init(claims:)``): `iss`, `sub`, `aud`, `exp`, `iat`
///    required; times are numbers from 1970 to 9999.
/// 3. `iss` equals ``issuer`` exactly.
/// 4. `aud` (a string or an array) contains ``clientID``.
/// 5. `azp`, when present, equals ``clientID``; with more than one audience it is required
///    (§3.1.3.7 items 4–5 say SHOULD; openid-client does the same, so a token minted for
///    several clients cannot be replayed to us without naming us as the party it was issued to).
/// 6. `exp` is after now − ``clockSkew``; `iat` and `nbf` (when present) are not after now + ``clockSkew``.
/// 7. With an expected nonce: `nonce` is present and equal (constant-time). Never on refresh.
/// 8. With `maxAge`: `auth_time` is present and auth_time + maxAge + skew is not before the
///    request time (or now when the request time is not known).
/// 9. `at_hash` / `c_hash`, when present and the access token / code is given: equal to
///    base64url(left half of hash(value)), hash being the `alg`'s (SHA-512 for EdDSA).
/// 10. On refresh (``Expectations/previous``): `iss`, `sub`, `aud` and `azp` unchanged, and
///     `auth_time` unchanged when both tokens carry it.
package struct IDTokenValidator: Sendable {
    /// The provider's issuer identifier, compared exactly.
    package var issuer: String
    /// Our `client_id`.
    package var clientID: String
    /// The algorithms accepted (the catalog's `idTokenSigningAlgorithms`).
    package var allowedAlgorithms: Set<JWSAlgorithm>
    /// The client secret, the only HMAC key (used only when an HS* algorithm is allowed).
    package var clientSecret: Secret?
    /// Tolerance for `exp`, `iat`, `nbf` and `auth_time` (`Options.clockSkew`, default 60 s).
    package var clockSkew: TimeInterval

    package init(issuer: String, clientID: String, allowedAlgorithms: Set<JWSAlgorithm>, clientSecret: Secret? = nil, clockSkew: TimeInterval = 60) {
        self.issuer = issuer
        self.clientID = clientID
        self.allowedAlgorithms = allowedAlgorithms
        self.clientSecret = clientSecret
        self.clockSkew = clockSkew
    }

    /// What the request that produced the token leads us to expect.
    package struct Expectations: Sendable {
        /// The `nonce` sent with the authorization request; required and compared when set.
        package var nonce: Secret?
        /// The `max_age` sent, in seconds; makes `auth_time` required.
        package var maxAge: TimeInterval?
        /// When the authorization request was made (the reference time for `max_age`).
        package var requestedAt: Date?
        /// The access token issued with the ID token, for `at_hash`.
        package var accessToken: Secret?
        /// The authorization code exchanged, for `c_hash`.
        package var code: Secret?
        /// On refresh: the ID token being replaced. Its `iss`, `sub`, `aud`, `azp`, `auth_time`
        /// must carry over; no nonce is checked.
        package var previous: IDToken?

        package init(nonce: Secret? = nil, maxAge: TimeInterval? = nil, requestedAt: Date? = nil, accessToken: Secret? = nil,
             code: Secret? = nil, previous: IDToken? = nil) {
            self.nonce = nonce
            self.maxAge = maxAge
            self.requestedAt = requestedAt
            self.accessToken = accessToken
            self.code = code
            self.previous = previous
        }
    }

    /// Validates `token` and returns its claims.
    /// - Throws: ``OAuthError`` `.idTokenRejected` naming the failed check (see the type's
    ///   documentation); ``TokenRejection/unknownKey`` means the JWKS may be stale: refetch once and retry.
    package func validate(_ token: Secret, keys: JWKSet, now: Date, expecting expectations: Expectations = Expectations()) throws(OAuthError) -> IDToken {
        let verified = try JWSVerifier.verify(compact: token.reveal(), keys: keys, allowed: allowedAlgorithms, clientSecret: clientSecret)
        let value: JSONValue
        do {
            value = try JSONValue.parse(verified.payload)
        } catch {
            throw TokenRejection.malformed.error("the ID token's claims are not JSON: \(error.reason)")
        }
        guard case .object(let claims) = value else {
            throw TokenRejection.malformed.error("the ID token's claims are not a JSON object")
        }
        let idToken = try IDToken(claims: claims)
        try check(idToken, now: now, algorithm: verified.header.algorithm, expectations)
        return idToken
    }

    private func check(_ token: IDToken, now: Date, algorithm: JWSAlgorithm, _ expected: Expectations) throws(OAuthError) {
        guard token.issuer == issuer else {
            throw TokenRejection.issuer.error("iss \"\(TokenRejection.printable(token.issuer))\" is not the expected issuer \"\(TokenRejection.printable(issuer))\"")
        }
        guard token.audience.contains(clientID) else {
            throw TokenRejection.audience.error("aud does not contain this client's client_id")
        }
        if let party = token.authorizedParty {
            guard party == clientID else { throw TokenRejection.authorizedParty.error("azp is not this client's client_id") }
        } else if token.audience.count > 1 {
            throw TokenRejection.authorizedParty.error("aud names \(token.audience.count) clients and there is no azp")
        }
        guard now.timeIntervalSince(token.expiresAt) < clockSkew else {
            throw TokenRejection.expired.error("exp is \(Int(now.timeIntervalSince(token.expiresAt))) s in the past (clock skew allowed: \(Int(clockSkew)) s)")
        }
        guard token.issuedAt.timeIntervalSince(now) <= clockSkew else {
            throw TokenRejection.issuedInFuture.error("iat is \(Int(token.issuedAt.timeIntervalSince(now))) s in the future (clock skew allowed: \(Int(clockSkew)) s)")
        }
        let claims = JSONObject(members: token.claims) { TokenRejection.invalidClaim.error("ID token claim \($0)") }
        if let notBefore = try claims.date("nbf"), notBefore.timeIntervalSince(now) > clockSkew {
            throw TokenRejection.notYetValid.error("nbf is \(Int(notBefore.timeIntervalSince(now))) s in the future (clock skew allowed: \(Int(clockSkew)) s)")
        }
        if expected.previous == nil, let nonce = expected.nonce {
            guard let received = token.nonce else { throw TokenRejection.nonce.error("nonce is missing; the request sent one") }
            guard Secret(received).constantTimeEquals(nonce) else {
                throw TokenRejection.nonce.error("nonce differs from the one the request sent")
            }
        }
        if let maxAge = expected.maxAge {
            guard let authTime = token.authTime else { throw TokenRejection.authTime.error("auth_time is missing; the request sent max_age") }
            let reference = expected.requestedAt ?? now
            guard reference.timeIntervalSince(authTime) <= maxAge + clockSkew else {
                throw TokenRejection.authTime.error("auth_time is older than max_age \(Int(maxAge)) s allows")
            }
        }
        if let accessToken = expected.accessToken, let atHash = try claims.string("at_hash") {
            guard try Self.halfHash(accessToken, algorithm: algorithm) == atHash else {
                throw TokenRejection.accessTokenHash.error("at_hash does not match the access token")
            }
        }
        if let code = expected.code, let cHash = try claims.string("c_hash") {
            guard try Self.halfHash(code, algorithm: algorithm) == cHash else {
                throw TokenRejection.codeHash.error("c_hash does not match the authorization code")
            }
        }
        if let previous = expected.previous {
            try checkRefresh(token, previous: previous)
        }
    }

    /// OpenID Connect Core §12.2: a refreshed ID token describes the same authentication.
    private func checkRefresh(_ token: IDToken, previous: IDToken) throws(OAuthError) {
        guard token.issuer == previous.issuer else { throw TokenRejection.refreshChanged.error("the refreshed ID token changed iss") }
        guard token.subject == previous.subject else { throw TokenRejection.refreshChanged.error("the refreshed ID token changed sub") }
        guard Set(token.audience) == Set(previous.audience) else {
            throw TokenRejection.refreshChanged.error("the refreshed ID token changed aud")
        }
        guard token.authorizedParty == previous.authorizedParty else {
            throw TokenRejection.refreshChanged.error("the refreshed ID token changed azp")
        }
        if let before = previous.authTime, let after = token.authTime, before != after {
            throw TokenRejection.refreshChanged.error("the refreshed ID token changed auth_time")
        }
    }

    /// base64url(left half of hash(ASCII(value))) with the `alg`'s hash (§3.1.3.6, §3.3.2.11).
    package static func halfHash(_ value: Secret, algorithm: JWSAlgorithm) throws(OAuthError) -> String {
        guard let hash = algorithm.hash else { throw TokenRejection.algorithmNone.error("alg none has no hash") }
        let digest = try Digest.hash(Array(value.reveal().utf8), with: hash)
        return Base64URL.encode(Array(digest.prefix(digest.count / 2)))
    }
}
