import Foundation
@testable import OAuthFlow
import Testing

/// The assertion's header and claims are written straight into bytes (for speed; see
/// Documentation/Performance.md): they must be exactly what ``JSONValue`` writes for the same
/// members, escapes included.
@Suite("Client assertion JSON is JSONValue's, byte for byte")
struct ClientAssertionJSONTests {
    static let cases: [(String, String, String?, String?)] = [
        ("0b6f8e2c-4a1d-4f57-9a3e-client", "https://login.example.com/oauth2/v2.0/token", nil, nil),
        ("my-client", "https://issuer.example.com", "key-2026/12", "n4bQgYhMfWWaL-qgxVrQFaO_TxsrC4Is0V1sFbDwCgg"),
        (#"quote"and\backslash"#, "urn:aud:\u{7F}del", "tab\tnewline\ncr\r", "ü-é-\u{202E}-bidi"),
        ("\u{01}control\u{1F}", "https://例え.jp/token", "", "x"),
    ]

    @Test("Header and claims match JSONValue.text for the same members", arguments: cases)
    func sameBytes(clientID: String, audience: String, keyID: String?, thumbprint: String?) throws {
        let parameters = ClientAssertion.Parameters(
            clientID: clientID, audience: audience, algorithm: .es256, keyID: keyID, certificateThumbprint: thumbprint)
        let now = Date(timeIntervalSince1970: 1_800_000_000.75)
        let input = try ClientAssertion.signingInput(parameters, now: now)
        let parts = input.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 2)
        let header = try #require(Base64URL.decode(String(parts[0])))
        let claims = try #require(Base64URL.decode(String(parts[1])))

        var headerMembers: [(String, JSONValue)] = [("alg", .string("ES256")), ("typ", .string("JWT"))]
        if let keyID { headerMembers.append(("kid", .string(keyID))) }
        if let thumbprint { headerMembers.append(("x5t#S256", .string(thumbprint))) }
        #expect(String(decoding: header, as: UTF8.self) == JSONValue.text(orderedMembers: headerMembers))

        // The jti is random: take it from the claims, then compare every byte.
        let parsed = try #require(try JSONValue.parse(Data(claims)).objectValue)
        let jti = try #require(parsed["jti"]?.stringValue)
        #expect(Base64URL.decode(jti)?.count == ClientAssertion.jtiBytes)
        let claimMembers: [(String, JSONValue)] = [
            ("iss", .string(clientID)), ("sub", .string(clientID)), ("aud", .string(audience)), ("jti", .string(jti)),
            ("iat", .number(1_800_000_000)), ("exp", .number(1_800_000_060)),
        ]
        #expect(String(decoding: claims, as: UTF8.self) == JSONValue.text(orderedMembers: claimMembers))
    }
}
