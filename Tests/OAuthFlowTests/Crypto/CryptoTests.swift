import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Crypto and encodings (RFC 7636, RFC 4648, RFC 6749 App. B)")
struct CryptoTests {
    @Test("PKCE S256 matches the RFC 7636 Appendix B vector")
    func rfc7636Vector() throws {
        let pkce = try PKCE(verifier: Secret("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"))
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(pkce.method == "S256")
    }

    @Test("SHA-256 matches the FIPS 180-2 vectors", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func sha256(input: String, hex: String) throws {
        let digest = try Digest.sha256(Array(input.utf8))
        #expect(digest.map { String(format: "%02x", $0) }.joined() == hex)
    }

    @Test("a generated PKCE verifier is 43 base64url characters with a matching challenge (RFC 7636 §4.1)")
    func generatedVerifier() throws {
        let pkce = try PKCE()
        let verifier = pkce.verifier.reveal()
        #expect(verifier.count == 43)
        #expect(verifier.allSatisfy(base64URLAlphabet.contains))
        #expect(pkce.challenge.count == 43)
        #expect(pkce.challenge.allSatisfy(base64URLAlphabet.contains))
        #expect(try PKCE(verifier: pkce.verifier).challenge == pkce.challenge)
    }

    @Test("generated verifiers, states and nonces are unique")
    func uniqueness() async throws {
        let verifiers = try (0..<1000).map { _ in try PKCE().verifier.reveal() }
        #expect(Set(verifiers).count == 1000)
        let tokens = try (0..<1000).map { _ in try SecureRandom.token() }
        #expect(Set(tokens).count == 1000)
        #expect(tokens.allSatisfy { $0.count == 43 })

        let mock = MockProvider()
        let flow = try await AuthFlow(providers: [mock.provider(id: "web", scopes: ["openid"])], transport: mock.transport())
        var seen: Set<String> = []
        for _ in 0..<100 {
            let request = try await flow.authorizationRequest(provider: "web")
            for value in [request.state.reveal(), request.nonce?.reveal() ?? "", request.codeVerifier?.reveal() ?? ""] {
                #expect(seen.insert(value).inserted)
            }
        }
        #expect(seen.count == 300)
    }

    @Test("random bytes are not constant", arguments: [1, 16, 32])
    func randomBytes(count: Int) throws {
        let a = try SecureRandom.bytes(count)
        let b = try SecureRandom.bytes(count)
        let c = try SecureRandom.bytes(count)
        #expect(a.count == count)
        #expect(!(a == b && b == c))
    }

    @Test("invalid PKCE verifiers are rejected (RFC 7636 §4.1)", arguments: [
        "", String(repeating: "a", count: 42), String(repeating: "a", count: 129),
        String(repeating: "a", count: 42) + "+", String(repeating: "a", count: 42) + "/", String(repeating: "a", count: 42) + "=",
        String(repeating: "a", count: 42) + " ", String(repeating: "a", count: 42) + "é", String(repeating: "a", count: 42) + "\n",
    ])
    func invalidVerifier(verifier: String) {
        let error = #expect(throws: OAuthError.self) { try PKCE(verifier: Secret(verifier)) }
        #expect(error?.code == .configuration)
    }

    @Test("verifiers of 43 to 128 unreserved characters are accepted (RFC 7636 §4.1)", arguments: [
        String(repeating: "a", count: 43), String(repeating: "Z", count: 128), "0123456789-._~ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh",
    ])
    func validVerifier(verifier: String) throws {
        #expect(try PKCE(verifier: Secret(verifier)).challenge.count == 43)
    }

    @Test("base64url matches RFC 4648 §10 without padding, in the URL alphabet (RFC 4648 §5)", arguments: [
        ([], ""), (Array("f".utf8), "Zg"), (Array("fo".utf8), "Zm8"), (Array("foo".utf8), "Zm9v"),
        (Array("foob".utf8), "Zm9vYg"), (Array("fooba".utf8), "Zm9vYmE"), (Array("foobar".utf8), "Zm9vYmFy"),
        ([0xFB, 0xFF], "-_8"), ([0xFB, 0xFF, 0xBF], "-_-_"), ([0x03, 0xE0, 0xFF], "A-D_"),
    ] as [([UInt8], String)])
    func base64URL(bytes: [UInt8], encoded: String) {
        #expect(Base64URL.encode(bytes) == encoded)
        #expect(Base64URL.decode(encoded) == bytes)
    }

    @Test("base64url decoding refuses padding and the standard alphabet's symbols", arguments: ["Zg==", "Zm8=", "+/8", "Z"])
    func base64URLRejects(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("form encoding: space is +, reserved characters are escaped (RFC 6749 App. B)", arguments: [
        ("a b", "a+b"), ("a+b", "a%2Bb"), ("&=?#/:;,", "%26%3D%3F%23%2F%3A%3B%2C"), ("%", "%25"), ("~", "%7E"),
        ("AZaz09-._*", "AZaz09-._*"), ("é€", "%C3%A9%E2%82%AC"), ("\n\"'<>", "%0A%22%27%3C%3E"),
    ])
    func formEscape(raw: String, encoded: String) {
        #expect(FormEncoding.escape(raw) == encoded)
        #expect(FormEncoding.unescape(encoded) == raw)
        // The request body's byte writer escapes the same way, names and values alike.
        #expect(FormEncoding.body([(raw, raw)]) == Data((encoded + "=" + encoded).utf8))
    }

    @Test("a request body is the bytes of encode(_:), for every byte value and for none")
    func formBodyBytes() {
        let every = String(decoding: (1...0x7F).map { UInt8($0) }, as: UTF8.self) + "é€ "
        let cases: [[(String, String)]] = [
            [], [("", "")], [("grant_type", "client_credentials")], [("a", every), (every, "b"), ("scope", "x y")],
        ]
        for fields in cases {
            #expect(FormEncoding.body(fields) == Data(FormEncoding.encode(fields).utf8))
            // Both come from one byte writer, so check what it writes against the decoder too.
            let decoded = FormEncoding.decode(String(decoding: FormEncoding.body(fields), as: UTF8.self))
            #expect(decoded.elementsEqual(fields, by: { $0 == $1 }))
        }
        #expect(FormEncoding.body([]).isEmpty)
    }

    @Test("form bodies keep order and round-trip")
    func formBody() {
        let fields = [("grant_type", "refresh_token"), ("refresh_token", "a+b c/=&"), ("scope", "openid ip:phone_verify")]
        let body = FormEncoding.encode(fields)
        #expect(body == "grant_type=refresh_token&refresh_token=a%2Bb+c%2F%3D%26&scope=openid+ip%3Aphone_verify")
        let decoded = FormEncoding.decode(body)
        #expect(decoded.map(\.0) == fields.map(\.0))
        #expect(decoded.map(\.1) == fields.map(\.1))
        #expect(FormEncoding.decode("a&b=&=c&d=%ZZ").map { [$0.0, $0.1] } == [["a", ""], ["b", ""], ["", "c"], ["d", "%ZZ"]])
    }

    @Test("constant-time comparison is exact (eight bytes at a time, then the rest)", arguments: [
        ("abc", "abc", true), ("abc", "abd", false), ("abc", "ab", false), ("", "", true), ("", "a", false), ("é", "e\u{301}", false),
        ("abcdefgh", "abcdefgh", true), ("abcdefgh", "abcdefgi", false), ("abcdefghi", "abcdefghj", false),
        ("Xbcdefghijklmnopq", "abcdefghijklmnopq", false), ("abcdefghijklmnopq", "abcdefghijklmnopq", true),
        (String(repeating: "k", count: 64), String(repeating: "k", count: 64), true),
        (String(repeating: "k", count: 40) + "x" + String(repeating: "k", count: 23), String(repeating: "k", count: 64), false),
        (String(repeating: "k", count: 64), String(repeating: "k", count: 65), false),
    ])
    func constantTime(a: String, b: String, equal: Bool) {
        #expect(ConstantTime.equals(Array(a.utf8), Array(b.utf8)) == equal)
        #expect(Secret(a).constantTimeEquals(Secret(b)) == equal)
        // A copy shares the storage of what it copies (equal without reading the bytes).
        let secret = Secret(a), copy = secret
        #expect(secret.constantTimeEquals(copy))
    }
}
