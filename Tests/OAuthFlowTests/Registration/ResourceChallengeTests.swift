import Foundation
@testable import OAuthFlow
import Testing

/// A resource's challenge (Registration/ResourceChallenge.swift): what it asks for, read from
/// `WWW-Authenticate` by the one parser (HTTP/Challenge.swift), every value checked.
@Suite("Resource challenges: insufficient_scope and step-up (RFC 6750 §3, RFC 9470 §3)")
struct ResourceChallengeTests {
    @Test("RFC 6750 §3's insufficient_scope challenge: the error, its description and the scope asked")
    func insufficientScope() throws {
        let challenge = try #require(try ResourceChallenge.parse(status: 403, headers: [
            "WWW-Authenticate": #"Bearer realm="example", error="insufficient_scope", error_description="The request requires higher privileges", scope="openid api""#,
        ]))
        #expect(challenge.error == .insufficientScope)
        #expect(challenge.errorDescription == "The request requires higher privileges")
        #expect(challenge.scope == ["openid", "api"])
        #expect(challenge.isStepUp)
        #expect(challenge.asked == #"scope="openid api""#)
        #expect(challenge.authorizationParameters.isEmpty)
    }

    @Test("RFC 9470 §3's examples: acr_values, then max_age; both become authorization parameters (§4)", arguments: [
        (#"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="myACR""#,
         ["myACR"], nil as Int?, ["acr_values": "myACR"]),
        (#"Bearer error="insufficient_user_authentication", error_description="More recent authentication is required", max_age="5""#,
         [], 5, ["max_age": "5"]),
        (#"Bearer error="insufficient_user_authentication", acr_values="urn:a phr", max_age="0""#,
         ["urn:a", "phr"], 0, ["acr_values": "urn:a phr", "max_age": "0"]),
    ] as [(String, [String], Int?, [String: String])])
    func stepUp(header: String, acr: [String], maxAge: Int?, parameters: [String: String]) throws {
        let challenge = try #require(try ResourceChallenge.parse(status: 401, headers: ["www-authenticate": header]))
        #expect(challenge.error == .insufficientUserAuthentication)
        #expect(challenge.acrValues == acr)
        #expect(challenge.maxAge == maxAge)
        #expect(challenge.authorizationParameters == parameters)
        #expect(challenge.isStepUp)
    }

    @Test("several challenges in one header: the Bearer (or DPoP) one with an error is read, the Basic one skipped")
    func severalChallenges() throws {
        let header = #"Basic realm="legacy", DPoP algs="ES256", Bearer realm="api", error="insufficient_scope", scope="write", resource_metadata="https://api.test/.well-known/oauth-protected-resource""#
        let challenge = try #require(try ResourceChallenge.parse(status: 403, headers: ["WWW-Authenticate": header]))
        #expect(challenge.scheme == "Bearer")
        #expect(challenge.scope == ["write"])
        #expect(challenge.resourceMetadata?.absoluteString == "https://api.test/.well-known/oauth-protected-resource")
        let dpop = try #require(try ResourceChallenge.parse(status: 403, headers: ["WWW-Authenticate": #"DPoP algs="ES256", error="insufficient_scope", scope="admin""#]))
        #expect(dpop.scheme == "DPoP")
        #expect(dpop.scope == ["admin"])
    }

    @Test("quoted-string escapes are undone before a value is checked (RFC 9110 §5.6.4)")
    func escapes() throws {
        let challenge = try #require(try ResourceChallenge.parse(status: 403, headers: [
            "WWW-Authenticate": #"Bearer error="insufficient_scope", error_description="say \"more\"", scope="re\ad""#,
        ]))
        #expect(challenge.errorDescription == #"say "more""#)
        #expect(challenge.scope == ["read"])
    }

    @Test("no Bearer or DPoP challenge, or none at all: nil", arguments: [
        [:], ["WWW-Authenticate": #"Basic realm="x""#], ["WWW-Authenticate": ""],
    ] as [[String: String]])
    func none(headers: [String: String]) throws {
        #expect(try ResourceChallenge.parse(status: 401, headers: headers) == nil)
    }

    @Test("a hostile header is a typed error, never read in part: control characters, over 8 KiB, bad values", arguments: [
        "Bearer error=\"insufficient_scope\", scope=\"api\u{1B}[2J\"",
        "Bearer error=\"insufficient_scope\", scope=\"api\"\r\nSet-Cookie: x=1",
        "Bearer error=\"insufficient_scope\u{0}\"",
        "Bearer error=\"insufficient_scope\", error_description=\"\u{7F}\"",
        "Bearer error=\"insufficient_scope\", scope=\"" + String(repeating: "a", count: 9000) + "\"",
        "Bearer error=\"insufficient_scope\", scope=\"" + String(repeating: "s ", count: 65) + "\"",
        "Bearer error=\"insufficient_user_authentication\", max_age=\"-1\"",
        "Bearer error=\"insufficient_user_authentication\", max_age=\"99999999999999999999\"",
        "Bearer error=\"insufficient_user_authentication\", max_age=\"5s\"",
        "Bearer error=\"insufficient_user_authentication\", acr_values=\"caf\u{E9}\"",
        "Bearer error=\"insufficient_scope\", resource_metadata=\"http://evil.example/m\"",
    ])
    func hostile(header: String) {
        let error = #expect(throws: OAuthError.self) { try ResourceChallenge.parse(status: 403, headers: ["WWW-Authenticate": header]) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .resource)
        #expect(error?.httpStatus == 403)
        #expect(!(error?.description.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } ?? true),
                "the error's description carries no control character")
    }

    @Test("the step-up error: .stepUpRequired, reauthorize, the challenge and the §3.1 error; other refusals give none")
    func stepUpError() throws {
        let error = try #require(try ResourceChallenge.stepUpError(
            status: 403, headers: ["www-authenticate": #"Bearer error="insufficient_scope", scope="api""#], provider: "api"))
        #expect(error.code == .stepUpRequired)
        #expect(error.recovery == .reauthorize)
        #expect(error.providerID == "api")
        #expect(error.endpoint == .resource)
        #expect(error.httpStatus == 403)
        #expect(error.response?.code == .insufficientScope)
        #expect(error.challenge?.scope == ["api"])
        #expect(error.description.contains(#"the token lacks what the resource asks for: scope="api""#))
        for (status, header) in [(401, #"Bearer error="invalid_token""#), (403, #"Bearer realm="x""#), (400, #"Bearer error="insufficient_scope""#),
                                 (200, #"Bearer error="insufficient_scope""#)] {
            #expect(try ResourceChallenge.stepUpError(status: status, headers: ["www-authenticate": header], provider: nil) == nil)
        }
    }

    @Test("the scopes of the login again: those held first, then each asked one not held, once")
    func mergedScopes() {
        let challenge = ResourceChallenge(httpStatus: 403, error: .insufficientScope, scope: ["api", "openid", "write"])
        #expect(challenge.scopes(adding: ["openid", "read"]) == ["openid", "read", "api", "write"])
        #expect(challenge.scopes(adding: []) == ["api", "openid", "write"])
    }
}
