import Foundation
@testable import OAuthFlow
import Testing

/// The one `WWW-Authenticate` parser (HTTP/Challenge.swift): RFC 9110 §11.2 / §11.6.1 (formerly
/// RFC 7235 §2.1, §4.1) and the Bearer error of RFC 6750 §3.
@Suite("WWW-Authenticate challenges (RFC 9110 §11, RFC 6750 §3)")
struct ChallengeTests {
    @Test("RFC 9110 §11.6.1's example: two challenges, a quoted-pair inside a value, a token value")
    func rfcExample() {
        let parsed = Challenge.parse(#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#)
        #expect(parsed == [
            Challenge(scheme: "Newauth", parameters: ["realm": "apps", "type": "1", "title": #"Login to "apps""#]),
            Challenge(scheme: "Basic", parameters: ["realm": "simple"]),
        ])
    }

    @Test("RFC 6750 §3's example challenge")
    func bearerExample() {
        let header = #"Bearer realm="example", error="invalid_token", error_description="The access token expired""#
        #expect(Challenge.parse(header) == [Challenge(scheme: "Bearer", parameters: [
            "realm": "example", "error": "invalid_token", "error_description": "The access token expired",
        ])])
        #expect(Challenge.isInvalidBearerToken(header))
        let error = BearerChallenge.parse(header)
        #expect(error?.code == .invalidToken)
        #expect(error?.errorDescription == "The access token expired")
    }

    @Test("quoted-string escapes: \\\" and \\\\ and any escaped character are unescaped (RFC 9110 §5.6.4)", arguments: [
        (#"Bearer error_description="say \"hi\"""#, #"say "hi""#),
        (#"Bearer error_description="back\\slash""#, #"back\slash"#),
        (#"Bearer error_description="\a\b\c""#, "abc"),
        (#"Bearer error_description="""#, ""),
    ])
    func quotedPairs(header: String, value: String) {
        #expect(Challenge.parse(header).first?.parameters["error_description"] == value)
    }

    @Test("a comma or an equals sign inside quotes belongs to the value, not the list")
    func commasInsideQuotes() {
        let parsed = Challenge.parse(#"Bearer realm="a, b=c", error="invalid_token", Basic realm="x,y""#)
        #expect(parsed == [
            Challenge(scheme: "Bearer", parameters: ["realm": "a, b=c", "error": "invalid_token"]),
            Challenge(scheme: "Basic", parameters: ["realm": "x,y"]),
        ])
    }

    @Test("schemes and parameter names are case-insensitive; values are not", arguments: [
        #"bearer error="invalid_token""#, #"BEARER ERROR="invalid_token""#, #"BeArEr Error = "invalid_token""#,
        #"Bearer error=invalid_token"#,
    ])
    func caseInsensitive(header: String) {
        #expect(Challenge.isInvalidBearerToken(header))
        #expect(BearerChallenge.parse(header)?.code == .invalidToken)
    }

    @Test("error values are compared exactly", arguments: [#"Bearer error="INVALID_TOKEN""#, #"Bearer error="invalid_token ""#])
    func valuesExact(header: String) {
        #expect(!Challenge.isInvalidBearerToken(header))
    }

    @Test("token68 credentials-style challenges (RFC 9110 §11.2), alone or before another challenge")
    func token68() {
        #expect(Challenge.parse("Negotiate YIIBhwYGKwYBBQUCoIIBezCCAXeg==") == [Challenge(scheme: "Negotiate", token68: "YIIBhwYGKwYBBQUCoIIBezCCAXeg==")])
        #expect(Challenge.parse(#"Negotiate a-b.c_d~e+f/g=, Bearer error="invalid_token""#) == [
            Challenge(scheme: "Negotiate", token68: "a-b.c_d~e+f/g="),
            Challenge(scheme: "Bearer", parameters: ["error": "invalid_token"]),
        ])
        // "name=value" is a parameter, not a token68 followed by junk.
        #expect(Challenge.parse("Bearer error=invalid_token") == [Challenge(scheme: "Bearer", parameters: ["error": "invalid_token"])])
    }

    @Test("several challenges, as several header lines joined with commas; the Bearer one is found wherever it stands")
    func severalChallenges() {
        let header = #"Basic realm="legacy", DPoP algs="ES256", Bearer realm="api", error="invalid_token""#
        #expect(Challenge.parse(header).map(\.scheme) == ["Basic", "DPoP", "Bearer"])
        #expect(Challenge.isInvalidBearerToken(header))
        #expect(BearerChallenge.parse(header)?.code == .invalidToken)
        // A Bearer challenge without an error before one with an error.
        #expect(BearerChallenge.parse(#"Bearer realm="a", Bearer error="insufficient_scope""#)?.code == .insufficientScope)
    }

    @Test("an error parameter of another scheme is not a Bearer error", arguments: [
        #"Basic realm="x", error="invalid_token""#, #"Bearerx error="invalid_token""#, #"DPoP error="invalid_token""#,
    ])
    func otherSchemes(header: String) {
        #expect(!Challenge.isInvalidBearerToken(header))
        #expect(BearerChallenge.parse(header) == nil)
    }

    @Test("broken input keeps what was read before it, and never traps", arguments: [
        #"Bearer error="unterminated"#, #"Bearer error="#, "Bearer =x", "Bearer error=,", "\u{0}", "=", ",,,,", "",
        #"Bearer error="a\"#, "Bearer \u{7F}", "Bearer error=\"\u{1B}[31m\"", String(repeating: "Bearer, ", count: 2000),
        String(repeating: "a=", count: 5000), "Bearer error=\"" + String(repeating: "x", count: 20_000),
    ])
    func brokenInput(header: String) {
        // None of these holds a complete error="invalid_token": parsing ends, and finds none.
        #expect(Challenge.parse(header).count <= Challenge.maximumLength / 2)
        #expect(BearerChallenge.parse(header)?.code != .invalidToken)
        #expect(!Challenge.isInvalidBearerToken(header))
    }

    @Test("an unterminated value drops only that parameter")
    func unterminatedKeepsEarlier() {
        #expect(Challenge.parse(#"Bearer realm="api", error="invalid_tok"#) == [Challenge(scheme: "Bearer", parameters: ["realm": "api"])])
        #expect(BearerChallenge.parse(#"Bearer error="unterminated"#) == nil)
    }

    @Test("the first value of a repeated parameter wins; an empty error is no error")
    func repeatedAndEmpty() {
        #expect(Challenge.parse(#"Bearer error="invalid_token", error="other""#).first?.parameters["error"] == "invalid_token")
        #expect(BearerChallenge.parse(#"Bearer error="""#) == nil)
    }

    @Test("a Bearer error description with control characters is escaped on the way into ErrorResponse")
    func sanitized() {
        let error = BearerChallenge.parse("Bearer error=\"invalid_token\", error_description=\"a\u{1B}[31mb\"")
        #expect(error?.errorDescription == "a\\u{1B}[31mb")
    }

    @Test("only the first 8 KiB of a header are read")
    func bounded() {
        let header = "Bearer realm=\"" + String(repeating: "x", count: 9000) + "\", error=\"invalid_token\""
        #expect(!Challenge.isInvalidBearerToken(header))
        #expect(Challenge.isInvalidBearerToken(#"Bearer error="invalid_token", realm=""# + String(repeating: "x", count: 9000) + "\""))
    }
}
