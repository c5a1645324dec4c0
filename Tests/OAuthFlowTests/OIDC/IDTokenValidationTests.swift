import Foundation
@testable import OAuthFlow
import Testing

@Suite("ID token validation (OpenID Connect Core 1.0 §3.1.3.7, §12.2)")
struct IDTokenValidationTests {
    static let issuer = "https://op.example.com"
    static let clientID = "client-7"
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let nonce = "n-0S6_WzA2Mj"
    static let accessToken = "jHkWEdUXMU1BwAsC4vtUsZwnNvTIxEl0z9K3vx5KF0Y"
    static let code = "Qcb0Orv1zh30vL1MPRsbm-diHiMwcLyZvn1arpZv-Jxf_11jnpEX3Tgfvk"

    static func number(_ value: Double) -> JSONValue { .number(String(value)) }
    static func number(_ value: Int) -> JSONValue { .number(String(value)) }

    /// A claims set that passes every check at ``now``.
    static func claims(_ changes: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "sub": .string("248289761001"), "aud": .string(clientID),
            "exp": number(Int(now.timeIntervalSince1970) + 600), "iat": number(Int(now.timeIntervalSince1970) - 5),
            "nonce": .string(nonce), "name": .string("Jane Doe"), "email_verified": .bool(true),
        ]
        for (key, value) in changes { claims[key] = value }
        return claims
    }

    static let minter = Minter(TestKeys.rsa, .rs256)
    static func keys() throws -> JWKSet { try minter.keySet() }

    static let validator = IDTokenValidator(issuer: issuer, clientID: clientID, allowedAlgorithms: [.rs256, .es256])

    /// Validates a token minted from `claims` with the usual expectations (nonce) unless given.
    static func validate(
        _ claims: [String: JSONValue], minter: Minter = minter, validator: IDTokenValidator = validator,
        expecting: IDTokenValidator.Expectations = .init(nonce: Secret(nonce)), now: Date = now
    ) throws -> IDToken {
        let token = try minter.token(claims: claims)
        return try validator.validate(Secret(token), keys: minter.keySet(), now: now, expecting: expecting)
    }

    /// Expects `claims` to be refused for `reason`, and the message never to contain the token.
    static func expectRefused(
        _ reason: TokenRejection, _ claims: [String: JSONValue],
        expecting: IDTokenValidator.Expectations = .init(nonce: Secret(nonce)), sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let token = try minter.token(claims: claims)
        let keys = try keys()
        let error = expectRejection(reason, notContaining: token, sourceLocation: sourceLocation) {
            _ = try validator.validate(Secret(token), keys: keys, now: now, expecting: expecting)
        }
        // No part of the token (its signature segment) leaks either.
        if let error { #expect(!error.description.contains(String(token.split(separator: ".")[2].prefix(20))), sourceLocation: sourceLocation) }
    }

    static func halfHash(_ value: String, _ algorithm: JWSAlgorithm = .rs256) throws -> JSONValue {
        .string(try IDTokenValidator.halfHash(Secret(value), algorithm: algorithm))
    }

    // MARK: accepted

    @Test("a valid token yields its typed claims")
    func valid() throws {
        let token = try Self.validate(Self.claims(["azp": .string(Self.clientID), "auth_time": Self.number(1_749_999_000)]))
        #expect(token.issuer == Self.issuer)
        #expect(token.subject == "248289761001")
        #expect(token.audience == [Self.clientID])
        #expect(token.expiresAt == Self.now.addingTimeInterval(600))
        #expect(token.issuedAt == Self.now.addingTimeInterval(-5))
        #expect(token.authTime == Date(timeIntervalSince1970: 1_749_999_000))
        #expect(token.nonce == Self.nonce)
        #expect(token.authorizedParty == Self.clientID)
        #expect(token.claims["name"] == .string("Jane Doe"))
        #expect(token.claims["email_verified"] == .bool(true))
    }

    @Test("ES256 tokens validate like RS256 ones")
    func es256() throws {
        let minter = Minter(TestKeys.p256, .es256, kid: "ec")
        #expect(try Self.validate(Self.claims(), minter: minter).subject == "248289761001")
    }

    @Test("aud as an array containing us, with azp naming us, is accepted")
    func audienceArray() throws {
        let token = try Self.validate(Self.claims(["aud": .array([.string("other"), .string(Self.clientID)]), "azp": .string(Self.clientID)]))
        #expect(token.audience == ["other", Self.clientID])
    }

    @Test("exp passed by less than the clock skew is accepted")
    func expiredWithinSkew() throws {
        _ = try Self.validate(Self.claims(["exp": Self.number(Int(Self.now.timeIntervalSince1970) - 59)]))
    }

    @Test("iat and nbf ahead by less than the clock skew are accepted")
    func futureWithinSkew() throws {
        let ahead = Self.number(Int(Self.now.timeIntervalSince1970) + 60)
        _ = try Self.validate(Self.claims(["iat": ahead, "nbf": ahead]))
    }

    @Test("a fractional NumericDate is accepted (RFC 7519 §2)")
    func fractionalTime() throws {
        let token = try Self.validate(Self.claims(["iat": Self.number(Self.now.timeIntervalSince1970 - 0.5)]))
        #expect(token.issuedAt == Self.now.addingTimeInterval(-0.5))
    }

    @Test("at_hash and c_hash that match are accepted (left half of SHA-256, base64url)")
    func hashesMatch() throws {
        let claims = Self.claims(["at_hash": try Self.halfHash(Self.accessToken), "c_hash": try Self.halfHash(Self.code)])
        _ = try Self.validate(claims, expecting: .init(nonce: Secret(Self.nonce), accessToken: Secret(Self.accessToken), code: Secret(Self.code)))
        #expect(try Self.halfHash(Self.accessToken).stringValue?.count == 22)  // 16 bytes
    }

    @Test("at_hash follows the alg's hash: SHA-384 for ES384 (24 bytes), SHA-512 for EdDSA (32 bytes)")
    func hashFollowsAlgorithm() throws {
        #expect(try Self.halfHash("x", .es384).stringValue?.count == 32)
        #expect(try Self.halfHash("x", .edDSA).stringValue?.count == 43)
        let minter = Minter(TestKeys.p384, .es384, kid: "p384")
        let validator = IDTokenValidator(issuer: Self.issuer, clientID: Self.clientID, allowedAlgorithms: [.es384])
        _ = try Self.validate(
            Self.claims(["at_hash": try Self.halfHash(Self.accessToken, .es384)]), minter: minter, validator: validator,
            expecting: .init(nonce: Secret(Self.nonce), accessToken: Secret(Self.accessToken)))
    }

    @Test("auth_time within max_age of the request is accepted")
    func maxAgeSatisfied() throws {
        let requested = Self.now.addingTimeInterval(-600)
        _ = try Self.validate(
            Self.claims(["auth_time": Self.number(Int(requested.timeIntervalSince1970) - 200)]),
            expecting: .init(nonce: Secret(Self.nonce), maxAge: 300, requestedAt: requested))
    }

    @Test("a refreshed token with the same iss, sub and aud and no nonce is accepted (§12.2)")
    func refreshAccepted() throws {
        let previous = try Self.validate(Self.claims())
        let refreshed = try Self.validate(
            Self.claims(["nonce": nil, "iat": Self.number(Int(Self.now.timeIntervalSince1970))]),
            expecting: .init(nonce: Secret("the nonce of the original request"), previous: previous))
        #expect(refreshed.subject == previous.subject)
    }

    @Test("HS256 with the client secret validates when the provider allows it")
    func hs256() throws {
        let secret = "a-long-client-secret-of-32-bytes"
        let payload = JSONValue.object(Self.claims()).jsonText
        let token = try hmacToken(.hs256, header: #"{"alg":"HS256"}"#, payload: payload, key: Array(secret.utf8))
        let validator = IDTokenValidator(issuer: Self.issuer, clientID: Self.clientID, allowedAlgorithms: [.hs256], clientSecret: Secret(secret))
        let idToken = try validator.validate(Secret(token), keys: JWKSet(keys: []), now: Self.now, expecting: .init(nonce: Secret(Self.nonce)))
        #expect(idToken.subject == "248289761001")
    }

    // MARK: refused

    @Test("exp in the past beyond the clock skew is refused")
    func expired() throws {
        try Self.expectRefused(.expired, Self.claims(["exp": Self.number(Int(Self.now.timeIntervalSince1970) - 61)]))
    }

    @Test("a zero clock skew refuses a token that expired a second ago")
    func expiredNoSkew() throws {
        var validator = Self.validator
        validator.clockSkew = 0
        let token = try Self.minter.token(claims: Self.claims(["exp": Self.number(Int(Self.now.timeIntervalSince1970) - 1)]))
        expectRejection(.expired) { _ = try validator.validate(Secret(token), keys: Self.keys(), now: Self.now, expecting: .init(nonce: Secret(Self.nonce))) }
    }

    @Test("iat in the future beyond the clock skew is refused")
    func issuedInFuture() throws {
        try Self.expectRefused(.issuedInFuture, Self.claims(["iat": Self.number(Int(Self.now.timeIntervalSince1970) + 61)]))
    }

    @Test("nbf in the future beyond the clock skew is refused")
    func notYetValid() throws {
        try Self.expectRefused(.notYetValid, Self.claims(["nbf": Self.number(Int(Self.now.timeIntervalSince1970) + 120)]))
    }

    @Test("a different iss is refused")
    func wrongIssuer() throws {
        try Self.expectRefused(.issuer, Self.claims(["iss": .string("https://evil.example.com")]))
    }

    @Test("iss with a trailing slash is refused: the comparison is exact")
    func issuerTrailingSlash() throws {
        try Self.expectRefused(.issuer, Self.claims(["iss": .string(Self.issuer + "/")]))
    }

    @Test("aud naming another client is refused")
    func audienceMissingUs() throws {
        try Self.expectRefused(.audience, Self.claims(["aud": .string("client-8")]))
    }

    @Test("aud array without us is refused")
    func audienceArrayMissingUs() throws {
        try Self.expectRefused(.audience, Self.claims(["aud": .array([.string("a"), .string("b")]), "azp": .string(Self.clientID)]))
    }

    @Test("aud that differs from client_id only in case is refused")
    func audienceCase() throws {
        try Self.expectRefused(.audience, Self.claims(["aud": .string(Self.clientID.uppercased())]))
    }

    @Test("azp naming another client is refused")
    func authorizedPartyMismatch() throws {
        try Self.expectRefused(.authorizedParty, Self.claims(["azp": .string("client-8")]))
    }

    @Test("several audiences without azp are refused")
    func severalAudiencesWithoutAzp() throws {
        try Self.expectRefused(.authorizedParty, Self.claims(["aud": .array([.string(Self.clientID), .string("other")])]))
    }

    @Test("a missing nonce is refused when the request sent one")
    func missingNonce() throws {
        try Self.expectRefused(.nonce, Self.claims(["nonce": nil]))
    }

    @Test("a different nonce is refused")
    func wrongNonce() throws {
        try Self.expectRefused(.nonce, Self.claims(["nonce": .string("n-replayed")]))
    }

    @Test("a bad at_hash is refused")
    func badAtHash() throws {
        try Self.expectRefused(
            .accessTokenHash, Self.claims(["at_hash": try Self.halfHash("another access token")]),
            expecting: .init(nonce: Secret(Self.nonce), accessToken: Secret(Self.accessToken)))
    }

    @Test("a bad c_hash is refused")
    func badCHash() throws {
        try Self.expectRefused(
            .codeHash, Self.claims(["c_hash": try Self.halfHash("another code")]),
            expecting: .init(nonce: Secret(Self.nonce), code: Secret(Self.code)))
    }

    @Test("an at_hash computed with the wrong hash (SHA-512 for RS256) is refused")
    func atHashWrongHash() throws {
        try Self.expectRefused(
            .accessTokenHash, Self.claims(["at_hash": try Self.halfHash(Self.accessToken, .rs512)]),
            expecting: .init(nonce: Secret(Self.nonce), accessToken: Secret(Self.accessToken)))
    }

    @Test("max_age without auth_time is refused")
    func maxAgeWithoutAuthTime() throws {
        try Self.expectRefused(.authTime, Self.claims(), expecting: .init(nonce: Secret(Self.nonce), maxAge: 300))
    }

    @Test("auth_time older than max_age allows is refused")
    func authTimeTooOld() throws {
        try Self.expectRefused(
            .authTime, Self.claims(["auth_time": Self.number(Int(Self.now.timeIntervalSince1970) - 3600)]),
            expecting: .init(nonce: Secret(Self.nonce), maxAge: 300, requestedAt: Self.now.addingTimeInterval(-30)))
    }

    @Test("a refreshed token with another sub is refused")
    func refreshChangedSubject() throws {
        let previous = try Self.validate(Self.claims())
        try Self.expectRefused(.refreshChanged, Self.claims(["sub": .string("someone-else")]), expecting: .init(previous: previous))
    }

    @Test("a refreshed token from another iss is refused")
    func refreshChangedIssuer() throws {
        let previous = try IDToken(claims: Self.claims(["iss": .string("https://old.example.com")]))
        try Self.expectRefused(.refreshChanged, Self.claims(), expecting: .init(previous: previous))
    }

    @Test("a refreshed token with another aud is refused")
    func refreshChangedAudience() throws {
        let previous = try Self.validate(Self.claims())
        try Self.expectRefused(
            .refreshChanged, Self.claims(["aud": .array([.string(Self.clientID), .string("x")]), "azp": .string(Self.clientID)]),
            expecting: .init(previous: previous))
    }

    @Test("a refreshed token with another auth_time is refused")
    func refreshChangedAuthTime() throws {
        let previous = try Self.validate(Self.claims(["auth_time": Self.number(1_749_990_000)]))
        try Self.expectRefused(.refreshChanged, Self.claims(["auth_time": Self.number(1_749_999_999)]), expecting: .init(previous: previous))
    }

    @Test("a token signed by a key that is not in the JWKS is refused")
    func signedByOtherKey() throws {
        let token = try Minter(TestKeys.rsaOther, .rs256).token(claims: Self.claims())
        expectRejection(.badSignature) {
            _ = try Self.validator.validate(Secret(token), keys: Self.keys(), now: Self.now, expecting: .init(nonce: Secret(Self.nonce)))
        }
    }

    @Test("an alg the provider does not allow is refused before any claim is read")
    func disallowedAlgorithm() throws {
        let minter = Minter(TestKeys.ed25519, .edDSA)
        let token = try minter.token(claims: Self.claims(["iss": .string("wrong")]))
        expectRejection(.algorithmNotAllowed) {
            _ = try Self.validator.validate(Secret(token), keys: minter.keySet(), now: Self.now)
        }
    }

    @Test("an unknown kid is refused with the unknownKey reason")
    func unknownKid() throws {
        let token = try Minter(TestKeys.rsa, .rs256, kid: "next").token(claims: Self.claims())
        expectRejection(.unknownKey) {
            _ = try Self.validator.validate(Secret(token), keys: Self.keys(), now: Self.now, expecting: .init(nonce: Secret(Self.nonce)))
        }
    }

    struct BadClaim: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let changes: [String: JSONValue?]
    }

    @Test("claims of the wrong type or out of range are refused, never trapped on", arguments: [
        BadClaim(testDescription: "exp as a string", changes: ["exp": .string("1750000600")]),
        BadClaim(testDescription: "exp of 1e300", changes: ["exp": .number("1e300")]),
        BadClaim(testDescription: "exp of 2^63", changes: ["exp": .number("9223372036854775808")]),
        BadClaim(testDescription: "exp negative", changes: ["exp": .number("-1")]),
        BadClaim(testDescription: "exp as a boolean", changes: ["exp": .bool(true)]),
        BadClaim(testDescription: "exp missing", changes: ["exp": nil]),
        BadClaim(testDescription: "iat missing", changes: ["iat": nil]),
        BadClaim(testDescription: "iat of 1e308", changes: ["iat": .number("1e308")]),
        BadClaim(testDescription: "nbf as a string", changes: ["nbf": .string("0")]),
        BadClaim(testDescription: "auth_time as an array", changes: ["auth_time": .array([])]),
        BadClaim(testDescription: "iss missing", changes: ["iss": nil]),
        BadClaim(testDescription: "iss as a number", changes: ["iss": .number("1")]),
        BadClaim(testDescription: "sub missing", changes: ["sub": nil]),
        BadClaim(testDescription: "sub empty", changes: ["sub": .string("")]),
        BadClaim(testDescription: "sub as a number", changes: ["sub": .number("248289761001")]),
        BadClaim(testDescription: "aud missing", changes: ["aud": nil]),
        BadClaim(testDescription: "aud as a number", changes: ["aud": .number("7")]),
        BadClaim(testDescription: "aud as an empty array", changes: ["aud": .array([])]),
        BadClaim(testDescription: "aud array holding a number", changes: ["aud": .array([.string(clientID), .number("1")])]),
        BadClaim(testDescription: "nonce as a number", changes: ["nonce": .number("1")]),
        BadClaim(testDescription: "azp as a boolean", changes: ["azp": .bool(true)]),
    ])
    func badClaims(_ bad: BadClaim) throws {
        try Self.expectRefused(.invalidClaim, Self.claims(bad.changes))
    }

    @Test("at_hash of the wrong type is refused when an access token is checked")
    func atHashWrongType() throws {
        try Self.expectRefused(
            .invalidClaim, Self.claims(["at_hash": .number("1")]), expecting: .init(nonce: Secret(Self.nonce), accessToken: Secret(Self.accessToken)))
    }

    @Test("a payload that is not JSON is refused")
    func payloadNotJSON() throws {
        let token = try Self.minter.token(payload: "not json")
        expectRejection(.malformed) { _ = try Self.validator.validate(Secret(token), keys: Self.keys(), now: Self.now) }
    }

    @Test("a payload that is a JSON array is refused")
    func payloadArray() throws {
        let token = try Self.minter.token(payload: #"["iss"]"#)
        expectRejection(.malformed) { _ = try Self.validator.validate(Secret(token), keys: Self.keys(), now: Self.now) }
    }

    @Test("a payload with a claim given twice is refused")
    func duplicateClaim() throws {
        let token = try Self.minter.token(payload: #"{"sub":"a","sub":"b"}"#)
        expectRejection(.malformed) { _ = try Self.validator.validate(Secret(token), keys: Self.keys(), now: Self.now) }
    }

    // MARK: the public model

    @Test("IDToken's description, debugDescription and dump show sub and iss only")
    func redaction() throws {
        let raw = try Self.minter.token(claims: Self.claims(["email": .string("jane@example.com")]))
        let token = try Self.validator.validate(Secret(raw), keys: Self.keys(), now: Self.now, expecting: .init(nonce: Secret(Self.nonce)))
        var dumped = ""
        dump(token, to: &dumped)
        for text in [String(describing: token), String(reflecting: token), "\(token)", dumped] {
            #expect(text.contains("248289761001"))
            #expect(text.contains(Self.issuer))
            #expect(!text.contains(raw))
            #expect(!text.contains(String(raw.split(separator: ".")[1].prefix(16))))
            #expect(!text.contains(Self.nonce))
            #expect(!text.contains("jane@example.com"))
            #expect(!text.contains("Jane Doe"))
        }
    }
}
