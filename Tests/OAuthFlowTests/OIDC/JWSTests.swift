import Foundation
@testable import OAuthFlow
import Testing

/// RFC test vectors, shared by the JWS and JWK suites.
enum Vectors {
    /// RFC 7515 A.2 / A.3 payload (with its CR LF line breaks), base64url.
    static let payload64 = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    /// RFC 7515 A.2.1: the RSA key's modulus and exponent.
    static let rsaN = "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    static let rsaE = "AQAB"
    /// RFC 7515 A.2.1: the RS256 JWS.
    static let rs256 = "eyJhbGciOiJSUzI1NiJ9." + payload64 + ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
    /// RFC 7515 A.3.1: the P-256 key's coordinates.
    static let ecX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let ecY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    /// RFC 7515 A.3.1: the ES256 JWS.
    static let es256 = "eyJhbGciOiJFUzI1NiJ9." + payload64 + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
    /// RFC 8037 A.2: the Ed25519 public key.
    static let edX = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    /// RFC 8037 A.4: the EdDSA JWS of "Example of Ed25519 signing".
    static let edDSA = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"

    /// RFC 7520 §4: the payload of the cookbook's signature examples, base64url.
    static let cookbookPayload64 = "SXTigJlzIGEgZGFuZ2Vyb3VzIGJ1c2luZXNzLCBGcm9kbywgZ29pbmcgb3V0IHlvdXIgZG9vci4gWW91IHN0ZXAgb250byB0aGUgcm9hZCwgYW5kIGlmIHlvdSBkb24ndCBrZWVwIHlvdXIgZmVldCwgdGhlcmXigJlzIG5vIGtub3dpbmcgd2hlcmUgeW91IG1pZ2h0IGJlIHN3ZXB0IG9mZiB0by4"
    /// RFC 7520 §3.4: the cookbook's RSA key (public half).
    static let cookbookRSAN = "n4EPtAOCc9AlkeQHPzHStgAbgs7bTZLwUBZdR8_KuKPEHLd4rHVTeT-O-XV2jRojdNhxJWTDvNd7nqQ0VEiZQHz_AJmSCpMaJMRBSFKrKb2wqVwGU_NsYOYL-QtiWN2lbzcEe6XC0dApr5ydQLrHqkHHig3RBordaZ6Aj-oBHqFEHYpPe7Tpe-OfVfHd1E6cS6M1FZcD1NNLYD5lFHpPI9bTwJlsde3uhGqC0ZCuEHg8lhzwOHrtIQbS0FVbb9k3-tVTU4fg_3L_vniUFAKwuCLqKnS2BYwdq_mzSnbLY7h_qixoR7jig3__kRhuaxwUkRz5iaiQkqgc5gHdrNP5zw"
    /// RFC 7520 §4.2.3: PS384 (RSASSA-PSS, SHA-384, MGF1-SHA-384, 48-byte salt), kid bilbo.baggins@hobbiton.example.
    static let cookbookPS384 = "eyJhbGciOiJQUzM4NCIsImtpZCI6ImJpbGJvLmJhZ2dpbnNAaG9iYml0b24uZXhhbXBsZSJ9." + cookbookPayload64
        + ".cu22eBqkYDKgIlTpzDXGvaFfz6WGoz7fUDcfT0kkOy42miAh2qyBzk1xEsnk2IpN6-tPid6VrklHkqsGqDqHCdP6O8TTB5dDDItllVo6_1OLPpcbUrhiUSMxbbXUvdvWXzg-UD8biiReQFlfz28zGWVsdiNAUf8ZnyPEgVFn442ZdNqiVJRmBqrYRXe8P_ijQ7p8Vdz0TTrxUeT3lm8d9shnr2lfJT8ImUjvAA2Xez2Mlp8cBE5awDzT0qI0n6uiP1aCN_2_jLAeQTlqRHtfa64QQSUmFAAjVKPbByi7xho0uTOcbH510a6GYmJUAfmWjwZ6oD4ifKo8DYM-X72Eaw"
    /// RFC 7520 §3.2: the cookbook's P-521 key (public half).
    static let cookbookP521X = "AHKZLLOsCOzz5cY97ewNUajB957y-C-U88c3v13nmGZx6sYl_oJXu9A5RkTKqjqvjyekWF-7ytDyRXYgCF5cj0Kt"
    static let cookbookP521Y = "AdymlHvOiLxXkEhayXQnNCvDX4h9htZaCJN34kfmC6pV5OhQHiraVySsUdaQkAgDPrwQrJmbnX9cwlGfP-HqHZR1"
    /// RFC 7520 §4.3.3: ES512.
    static let cookbookES512 = "eyJhbGciOiJFUzUxMiIsImtpZCI6ImJpbGJvLmJhZ2dpbnNAaG9iYml0b24uZXhhbXBsZSJ9." + cookbookPayload64
        + ".AE_R_YZCChjn4791jSQCrdPZCNYqHXCTZH0-JZGYNlaAjP2kqaluUIIUnC9qvbu9Plon7KRTzoNEuT4Va2cmL1eJAQy3mtPBu_u_sDDyYjnAMDxXPn7XrT0lw-kvAD890jl8e2puQens_IEKBpHABlsbEPX6sFY8OcGDqoRuBomu9xQ2"

    /// Made outside this library, with the `openssl` 3.0 command line (not by SigningKey):
    /// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`, then over the signing input
    /// `openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -sign key.pem`
    /// (MGF1 with SHA-256, the default), checked with `openssl dgst … -verify`. The key's public half:
    static let opensslRSAN = "oO1PS5KzI1421dv5VKjtFxYoHIOXDjN51R4VwzOhoIT1IYbivoV9VvurdMnwRa58XnB5n0emqavVWEnj8Iqvr-w0KLTGKhlavlz9d4HaEAE76Mt8mgqHHP1CGLZdD18vD-a-ZghdeT4rviybMVv1QiPlJ-g8ryWrg9J1Kj4VWyTnH9omQu_I1j6J_0R7gLLDOu25iQa8SCqfyE1x6HexlO7jFzf-b9iYWSnSH2vrOufcez0Ka4fc2jlj4oaLfjAgQOyZwetAoG2A0Kxl8XtJsALEdKeOaHTEFuTmO8GrX80vKj3m5pIgDE3m76V_8KByyZ4dLZrhY2WeA85ohYTTCw"
    /// The payload of both openssl vectors: `{"iss":"https://openssl.example","sub":"external-vector",…}`.
    static let opensslPayload64 = "eyJpc3MiOiJodHRwczovL29wZW5zc2wuZXhhbXBsZSIsInN1YiI6ImV4dGVybmFsLXZlY3RvciIsImF1ZCI6ImNsaWVudCIsImlhdCI6MTcwMDAwMDAwMCwiZXhwIjoxNzAwMDAzNjAwfQ"
    /// The PS256 JWS signed by openssl, header `{"alg":"PS256","kid":"openssl-ps256"}`.
    static let opensslPS256 = "eyJhbGciOiJQUzI1NiIsImtpZCI6Im9wZW5zc2wtcHMyNTYifQ." + opensslPayload64
        + ".hSYoGZLWNd_B1-nIaGRKEbQkkB4RUUwDWrB0Ub2yfin48yOpsG7loEwWwd7oyyKtgoQ1cnj8w23enxxVreqHHFceEjPOdJ7QNOcQGJ6goPgCu7MBb5R5bFAhr22Kw6AGTTLEBpLeqCTG8cRlfPyQv170xWfdr54HhgamyjOsx76twFgPwzoFGBHPokEvGrQmFgsKxPS0_t3FUNDY-BvbRjitOchpPb4HpJb_s3eg4IAWSlmiTW6rZgwJ3gkyQSvp78jF7PnyoIe0CwkScoHyju8MyBLZVdG6nZ_amvxvlO35JvaLC6h3ixYv6Nyh4BLuM5WRtHKwmu0rF6J87qGV9A"
    /// An ES256 JWS made the same way (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`,
    /// `openssl dgst -sha256 -sign ec.pem`), its DER signature turned into raw r‖s by a script:
    /// DER `3044 0220 2ad512e7…8945adc 0220 008f2cf6…832947b2c`, where s carries a 0x00 pad byte
    /// that the raw form drops. The key's public coordinates:
    static let opensslECX = "HjuCyGJ5QIabzE5cFNBXZyGmHerYDira-OcKuYUW7-I"
    static let opensslECY = "l3j-kZtIYwBjl8ystENTPOAC11eXoY30VRzroCYpg48"
    static let opensslES256 = "eyJhbGciOiJFUzI1NiIsImtpZCI6Im9wZW5zc2wtZXMyNTYifQ." + opensslPayload64
        + ".KtUS569_EP5hunhgQ0mRBvKodqN2iRG1aeOSRuiUWtwAjyz2oRBUQz0-V5uyvb2B-_LV66flWJJCxGF4MpR7LA"

    static func bytes(_ base64url: String) -> [UInt8] { Base64URL.decode(base64url)! }

    /// `compact` with one bit of its signature flipped.
    static func tampered(_ compact: String) -> String {
        let dot = compact.lastIndex(of: ".")!
        var signature = bytes(String(compact[compact.index(after: dot)...]))
        signature[signature.count / 2] ^= 0x01
        return String(compact[...dot]) + Base64URL.encode(signature)
    }

    /// (signing input, signature) of a compact JWS.
    static func split(_ compact: String) -> ([UInt8], [UInt8]) {
        let dot = compact.lastIndex(of: ".")!
        return (Array(compact[..<dot].utf8), bytes(String(compact[compact.index(after: dot)...])))
    }
}

@Suite("JWS signatures (RFC 7515, RFC 7518, RFC 8037)")
struct SignatureTests {
    @Test("RFC 7515 A.2: the RS256 example verifies with its RSA key")
    func rfc7515RS256() throws {
        let key = try PublicKey.rsa(modulus: Vectors.bytes(Vectors.rsaN), exponent: Vectors.bytes(Vectors.rsaE))
        let (input, signature) = Vectors.split(Vectors.rs256)
        #expect(try key.verify(.rs256, signingInput: input, signature: signature))
        var tampered = signature
        tampered[10] ^= 1
        #expect(try !key.verify(.rs256, signingInput: input, signature: tampered))
    }

    @Test("RFC 7515 A.3: the ES256 example verifies with its P-256 key")
    func rfc7515ES256() throws {
        let key = try PublicKey.ec(curve: .p256, x: Vectors.bytes(Vectors.ecX), y: Vectors.bytes(Vectors.ecY))
        let (input, signature) = Vectors.split(Vectors.es256)
        #expect(signature.count == 64)
        #expect(try key.verify(.es256, signingInput: input, signature: signature))
    }

    @Test("RFC 8037 A.4: the EdDSA example verifies with its Ed25519 key")
    func rfc8037EdDSA() throws {
        let key = try PublicKey.ed25519(x: Vectors.bytes(Vectors.edX))
        let (input, signature) = Vectors.split(Vectors.edDSA)
        #expect(try key.verify(.edDSA, signingInput: input, signature: signature))
    }

    @Test("RFC 7520 §4.2: the published PS384 (RSASSA-PSS) example verifies; as PS256 or RS384 it does not")
    func rfc7520PS384() throws {
        let set = try keySet(#"{"kty":"RSA","kid":"bilbo.baggins@hobbiton.example","use":"sig","n":"\#(Vectors.cookbookRSAN)","e":"AQAB"}"#)
        let verified = try JWSVerifier.verify(compact: Vectors.cookbookPS384, keys: set, allowed: [.ps384], clientSecret: nil)
        #expect(verified.header.keyID == "bilbo.baggins@hobbiton.example")
        #expect(String(decoding: verified.payload, as: UTF8.self).hasPrefix("It\u{2019}s a dangerous business, Frodo"))
        let key = try PublicKey.rsa(modulus: Vectors.bytes(Vectors.cookbookRSAN), exponent: [1, 0, 1])
        let (input, signature) = Vectors.split(Vectors.cookbookPS384)
        #expect(try !key.verify(.ps256, signingInput: input, signature: signature))
        #expect(try !key.verify(.rs384, signingInput: input, signature: signature))
    }

    @Test("PS256 signed by the openssl command line (RSASSA-PSS, MGF1-SHA-256, 32-byte salt) verifies through its JWK; a tampered copy does not")
    func opensslPS256() throws {
        let set = try keySet(#"{"kty":"RSA","kid":"openssl-ps256","use":"sig","alg":"PS256","n":"\#(Vectors.opensslRSAN)","e":"AQAB"}"#)
        let verified = try JWSVerifier.verify(compact: Vectors.opensslPS256, keys: set, allowed: [.ps256], clientSecret: nil)
        #expect(verified.header.algorithm == .ps256)
        #expect(verified.header.keyID == "openssl-ps256")
        #expect(String(decoding: verified.payload, as: UTF8.self).contains(#""sub":"external-vector""#))
        expectRejection(.badSignature) {
            _ = try JWSVerifier.verify(compact: Vectors.tampered(Vectors.opensslPS256), keys: set, allowed: [.ps256], clientSecret: nil)
        }
        // The same bytes are not a PKCS #1 v1.5 signature, nor PSS over SHA-384.
        let key = try PublicKey.rsa(modulus: Vectors.bytes(Vectors.opensslRSAN), exponent: [1, 0, 1])
        let (input, signature) = Vectors.split(Vectors.opensslPS256)
        #expect(try !key.verify(.rs256, signingInput: input, signature: signature))
        #expect(try !key.verify(.ps384, signingInput: input, signature: signature))
    }

    @Test("ES256 signed by the openssl command line (DER converted to raw r‖s) verifies through its JWK; a tampered copy does not")
    func opensslES256() throws {
        let set = try keySet(#"{"kty":"EC","crv":"P-256","kid":"openssl-es256","use":"sig","x":"\#(Vectors.opensslECX)","y":"\#(Vectors.opensslECY)"}"#)
        let verified = try JWSVerifier.verify(compact: Vectors.opensslES256, keys: set, allowed: [.es256], clientSecret: nil)
        #expect(verified.header.keyID == "openssl-es256")
        #expect(Vectors.split(Vectors.opensslES256).1.count == 64)
        expectRejection(.badSignature) {
            _ = try JWSVerifier.verify(compact: Vectors.tampered(Vectors.opensslES256), keys: set, allowed: [.es256], clientSecret: nil)
        }
    }

    @Test("RFC 7520 §4.3: the published ES512 (P-521, 132-byte r‖s) example verifies")
    func rfc7520ES512() throws {
        let key = try PublicKey.ec(curve: .p521, x: Vectors.bytes(Vectors.cookbookP521X), y: Vectors.bytes(Vectors.cookbookP521Y))
        let (input, signature) = Vectors.split(Vectors.cookbookES512)
        #expect(signature.count == 132)
        #expect(try key.verify(.es512, signingInput: input, signature: signature))
        #expect(try !key.verify(.es512, signingInput: input + [0x20], signature: signature))
    }

    @Test("one key verifies from many tasks at once (PublicKey is Sendable and shares its EVP_PKEY)")
    func concurrentVerification() async throws {
        let key = try PublicKey.rsa(modulus: Vectors.bytes(Vectors.rsaN), exponent: Vectors.bytes(Vectors.rsaE))
        let (input, signature) = Vectors.split(Vectors.rs256)
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    var tampered = signature
                    if index.isMultiple(of: 2) { tampered[index] ^= 0x80 }
                    return (try? key.verify(.rs256, signingInput: input, signature: tampered)) ?? false
                }
            }
            var verdicts: [Bool] = []
            for await verdict in group { verdicts.append(verdict) }
            return verdicts
        }
        #expect(results.count == 64)
        #expect(results.filter { $0 }.count == 32)
    }

    @Test("generated keys sign and verify every algorithm", arguments: [
        JWSAlgorithm.rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .es256, .es384, .es512, .edDSA,
    ])
    func roundTrip(algorithm: JWSAlgorithm) throws {
        let key = try TestKeys.key(for: algorithm)
        let input = Array("eyJhbGciOiJ4In0.cGF5bG9hZA".utf8)
        let signature = try key.sign(algorithm, signingInput: input)
        #expect(try key.publicKey.verify(algorithm, signingInput: input, signature: signature))
        #expect(try !key.publicKey.verify(algorithm, signingInput: input + [0x2E], signature: signature))
    }
}

/// Keys generated once per test process (RSA generation is slow).
enum TestKeys {
    static let rsa = try! SigningKey.rsa()
    static let rsaOther = try! SigningKey.rsa()
    static let p256 = try! SigningKey.ec(.p256)
    static let p256Other = try! SigningKey.ec(.p256)
    static let p384 = try! SigningKey.ec(.p384)
    static let p521 = try! SigningKey.ec(.p521)
    static let ed25519 = try! SigningKey.ed25519()

    static func key(for algorithm: JWSAlgorithm) throws -> SigningKey {
        switch algorithm.family {
        case .rsa: return rsa
        case .ecdsa(.p256): return p256
        case .ecdsa(.p384): return p384
        case .ecdsa(.p521): return p521
        case .edDSA: return ed25519
        default: throw OAuthError(.configuration, message: "no key for \(algorithm)")
        }
    }
}

/// Builds signed compact tokens for the tests.
struct Minter: Sendable {
    let key: SigningKey
    let algorithm: JWSAlgorithm
    let kid: String?

    init(_ key: SigningKey, _ algorithm: JWSAlgorithm, kid: String? = "k1") {
        self.key = key
        self.algorithm = algorithm
        self.kid = kid
    }

    /// A compact JWS with `alg` (and `kid`) plus `header`'s members, over `claims`.
    func token(header: [String: JSONValue] = [:], claims: [String: JSONValue]) throws -> String {
        try key.compact(header: headerText(header), payload: JSONValue.object(claims).jsonText, algorithm: algorithm)
    }

    /// A compact JWS over raw payload text.
    func token(payload: String) throws -> String {
        try key.compact(header: headerText([:]), payload: payload, algorithm: algorithm)
    }

    func headerText(_ extra: [String: JSONValue]) -> String {
        var members: [String: JSONValue] = ["alg": .string(algorithm.rawValue)]
        if let kid { members["kid"] = .string(kid) }
        members.merge(extra) { $1 }
        return JSONValue.object(members).jsonText
    }

    /// The JWK of this key (with `kid`, `use: sig`, and `alg` when asked).
    func jwk(algorithm: String? = nil, use: String? = "sig") throws -> String {
        try key.publicJWK(kid: kid, algorithm: algorithm, use: use)
    }

    /// A JWKS holding this key only.
    func keySet() throws -> JWKSet { try JWKSet(json: Data(#"{"keys":[\#(jwk())]}"#.utf8)) }
}

/// A set from JWK texts.
func keySet(_ jwks: String...) throws -> JWKSet {
    try JWKSet(json: Data(#"{"keys":[\#(jwks.joined(separator: ","))]}"#.utf8))
}

/// A compact HMAC JWS over `payload` with `key` as the secret.
func hmacToken(_ algorithm: JWSAlgorithm, header: String, payload: String, key: [UInt8]) throws -> String {
    let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
    return input + "." + Base64URL.encode(try HMACVerifier.mac(algorithm, key: key, data: Array(input.utf8)))
}

/// Runs `body`, expects an `OAuthError` with `reason`, and that its description does not contain `secret`.
@discardableResult
func expectRejection(
    _ reason: TokenRejection, code: OAuthError.Code = .idTokenRejected, notContaining secret: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> OAuthError? {
    let error = #expect(throws: OAuthError.self, sourceLocation: sourceLocation) { try body() }
    #expect(error?.code == code, sourceLocation: sourceLocation)
    #expect(error?.tokenRejection == reason, "\(String(describing: error))", sourceLocation: sourceLocation)
    if let secret, let error {
        #expect(!String(reflecting: error).contains(secret), sourceLocation: sourceLocation)
        #expect(!(error.message ?? "").contains(secret), sourceLocation: sourceLocation)
    }
    return error
}

@Suite("Compact JWS parsing (RFC 7515 §7.1)")
struct JWSParsingTests {
    static let header64 = "eyJhbGciOiJSUzI1NiJ9"  // {"alg":"RS256"}
    static let body64 = Vectors.payload64
    static let signature64 = "c2lnbmF0dXJl"

    static func compact(_ header: String) -> String {
        Base64URL.encode(Array(header.utf8)) + "." + body64 + "." + signature64
    }

    @Test("the RFC 7515 A.2 token parses: alg, payload, signing input")
    func parsesVector() throws {
        let jws = try JWS(compact: Vectors.rs256)
        #expect(jws.header == JWS.Header(algorithm: .rs256, keyID: nil, type: nil))
        #expect(String(decoding: jws.payload, as: UTF8.self).hasPrefix("{\"iss\":\"joe\",\r\n"))
        #expect(jws.signingInput == Array(("eyJhbGciOiJSUzI1NiJ9." + Vectors.payload64).utf8))
        #expect(jws.signature.count == 256)
    }

    @Test("kid and typ are read when present")
    func kidAndTyp() throws {
        let jws = try JWS(compact: Self.compact(#"{"alg":"ES256","kid":"2024-01","typ":"JWT"}"#))
        #expect(jws.header == JWS.Header(algorithm: .es256, keyID: "2024-01", type: "JWT"))
    }

    struct Malformed: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let compact: String
        let reason: TokenRejection
    }

    @Test("malformed compact serializations are refused", arguments: [
        Malformed(testDescription: "two segments", compact: "\(header64).\(body64)", reason: .malformed),
        Malformed(testDescription: "four segments", compact: "\(header64).\(body64).\(signature64).\(signature64)", reason: .malformed),
        Malformed(testDescription: "one segment", compact: header64, reason: .malformed),
        Malformed(testDescription: "empty string", compact: "", reason: .malformed),
        Malformed(testDescription: "empty header segment", compact: ".\(body64).\(signature64)", reason: .malformed),
        Malformed(testDescription: "empty signature segment", compact: "\(header64).\(body64).", reason: .malformed),
        Malformed(testDescription: "standard-alphabet '+' in the header", compact: "eyJhbGciOiJSUzI1NiJ+.\(body64).\(signature64)", reason: .malformed),
        Malformed(testDescription: "'=' padding on the signature", compact: "\(header64).\(body64).c2lnbmF0dXJlMQ==", reason: .malformed),
        Malformed(testDescription: "whitespace inside the payload", compact: "\(header64).eyJp c3MiOiJqb2UifQ.\(signature64)", reason: .malformed),
        Malformed(testDescription: "impossible base64url length (4n+1)", compact: "\(header64).\(body64).c2lnbmF0dXJlM", reason: .malformed),
        Malformed(testDescription: "non-canonical trailing bits in the signature", compact: "\(header64).\(body64).c2lnbmF0dXJlMR", reason: .malformed),
        Malformed(testDescription: "header that is not JSON", compact: compact("alg=RS256"), reason: .malformed),
        Malformed(testDescription: "header that is a JSON array", compact: compact(#"["RS256"]"#), reason: .malformed),
        Malformed(testDescription: "header with a duplicate alg", compact: compact(#"{"alg":"RS256","alg":"none"}"#), reason: .malformed),
        Malformed(testDescription: "header without alg", compact: compact(#"{"kid":"k1"}"#), reason: .malformed),
        Malformed(testDescription: "alg that is a number", compact: compact(#"{"alg":256}"#), reason: .malformed),
        Malformed(testDescription: "kid that is a number", compact: compact(#"{"alg":"RS256","kid":7}"#), reason: .malformed),
        Malformed(testDescription: "typ that is an object", compact: compact(#"{"alg":"RS256","typ":{}}"#), reason: .malformed),
        Malformed(testDescription: "unknown alg RS1", compact: compact(#"{"alg":"RS1"}"#), reason: .algorithmNotAllowed),
        Malformed(testDescription: "unknown crit extension", compact: compact(#"{"alg":"RS256","crit":["exp"],"exp":1}"#), reason: .unsupportedCritical),
        Malformed(testDescription: "crit b64 (RFC 7797) is not implemented", compact: compact(#"{"alg":"RS256","crit":["b64"],"b64":false}"#), reason: .unsupportedCritical),
        Malformed(testDescription: "empty crit list", compact: compact(#"{"alg":"RS256","crit":[]}"#), reason: .malformed),
    ])
    func malformed(_ testCase: Malformed) {
        expectRejection(testCase.reason) { _ = try JWS(compact: testCase.compact) }
    }

    @Test("a token over 64 KiB is refused before it is decoded")
    func oversized() throws {
        let big = Self.compact(#"{"alg":"RS256"}"#) + String(repeating: "A", count: JWS.maximumSize)
        let error = expectRejection(.oversized) { _ = try JWS(compact: big) }
        #expect(error?.message?.contains("65536") == true)
    }

    @Test("a token of exactly 64 KiB is still parsed")
    func sizeLimitIsInclusive() throws {
        let base = Self.compact(#"{"alg":"RS256"}"#)
        let padded = String(base.dropLast(Self.signature64.count)) + String(repeating: "A", count: JWS.maximumSize - base.count + Self.signature64.count)
        #expect(padded.utf8.count == JWS.maximumSize)
        #expect(try JWS(compact: padded).header.algorithm == .rs256)
    }
}

@Suite("JWS verification and key selection (RFC 7515 §5.2, OpenID Connect Core §10.1)")
struct JWSVerificationTests {
    static let claims: [String: JSONValue] = ["sub": .string("alice")]

    @Test("every asymmetric algorithm verifies through a JWKS built from the exported JWK", arguments: [
        JWSAlgorithm.rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .es256, .es384, .es512, .edDSA,
    ])
    func endToEnd(algorithm: JWSAlgorithm) throws {
        let minter = Minter(try TestKeys.key(for: algorithm), algorithm)
        let token = try minter.token(claims: Self.claims)
        let verified = try JWSVerifier.verify(compact: token, keys: minter.keySet(), allowed: [algorithm], clientSecret: nil)
        #expect(verified.header.algorithm == algorithm)
        #expect(verified.header.keyID == "k1")
        #expect(String(decoding: verified.payload, as: UTF8.self) == #"{"sub":"alice"}"#)
    }

    @Test("RFC 7518 §3.5: PS256 uses MGF1-SHA-256 and a 32-byte salt, so the signature is randomized and RS256 verification of it fails")
    func ps256Conformance() throws {
        let input = Array("eyJhbGciOiJQUzI1NiJ9.e30".utf8)
        let one = try TestKeys.rsa.sign(.ps256, signingInput: input)
        let two = try TestKeys.rsa.sign(.ps256, signingInput: input)
        #expect(one != two)  // a random salt each time
        #expect(one.count == 256)
        #expect(try TestKeys.rsa.publicKey.verify(.ps256, signingInput: input, signature: one))
        #expect(try !TestKeys.rsa.publicKey.verify(.rs256, signingInput: input, signature: one))
        #expect(try !TestKeys.rsa.publicKey.verify(.ps384, signingInput: input, signature: one))
    }

    @Test("without kid, the key that fits the alg is found among several")
    func noKidPicksFittingKey() throws {
        let minter = Minter(TestKeys.p256, .es256, kid: nil)
        let set = try keySet(TestKeys.rsa.publicJWK(kid: "r"), TestKeys.p256Other.publicJWK(kid: "e1"), TestKeys.p256.publicJWK(kid: "e2"))
        let verified = try JWSVerifier.verify(compact: minter.token(claims: Self.claims), keys: set, allowed: [.es256], clientSecret: nil)
        #expect(verified.header.keyID == nil)
    }

    @Test("HS256 verifies with the client secret when it is allowed")
    func hs256WithClientSecret() throws {
        let token = try hmacToken(.hs256, header: #"{"alg":"HS256"}"#, payload: #"{"sub":"alice"}"#, key: Array("s3cr3t-of-the-client".utf8))
        let verified = try JWSVerifier.verify(
            compact: token, keys: JWKSet(keys: []), allowed: [.rs256, .hs256], clientSecret: Secret("s3cr3t-of-the-client"))
        #expect(verified.header.algorithm == .hs256)
    }

    @Test("HS384 and HS512 verify with the client secret", arguments: [JWSAlgorithm.hs384, .hs512])
    func hmacFamilies(algorithm: JWSAlgorithm) throws {
        let token = try hmacToken(algorithm, header: #"{"alg":"\#(algorithm.rawValue)"}"#, payload: "{}", key: Array("k".utf8))
        #expect(try JWSVerifier.verify(compact: token, keys: JWKSet(keys: []), allowed: [algorithm], clientSecret: Secret("k")).payload == Array("{}".utf8))
    }

    // MARK: negative cases

    @Test("a signature with one bit flipped is refused")
    func badSignature() throws {
        let minter = Minter(TestKeys.rsa, .rs256)
        var parts = try minter.token(claims: Self.claims).split(separator: ".").map(String.init)
        var signature = Base64URL.decode(parts[2])!
        signature[0] ^= 0x01
        parts[2] = Base64URL.encode(signature)
        expectRejection(.badSignature) {
            _ = try JWSVerifier.verify(compact: parts.joined(separator: "."), keys: minter.keySet(), allowed: [.rs256], clientSecret: nil)
        }
    }

    @Test("a payload changed after signing is refused")
    func changedPayload() throws {
        let minter = Minter(TestKeys.rsa, .rs256)
        var parts = try minter.token(claims: Self.claims).split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"sub":"mallory"}"#.utf8))
        expectRejection(.badSignature) {
            _ = try JWSVerifier.verify(compact: parts.joined(separator: "."), keys: minter.keySet(), allowed: [.rs256], clientSecret: nil)
        }
    }

    @Test("a token signed by another key with the same kid is refused")
    func wrongKey() throws {
        let token = try Minter(TestKeys.rsaOther, .rs256).token(claims: Self.claims)
        expectRejection(.badSignature) {
            _ = try JWSVerifier.verify(compact: token, keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.rs256], clientSecret: nil)
        }
    }

    @Test("alg none is refused even when 'allowed' lists it")
    func algNone() throws {
        let token = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array("{}".utf8)) + ".AA"
        expectRejection(.algorithmNone) {
            _ = try JWSVerifier.verify(compact: token, keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.rs256, .none], clientSecret: nil)
        }
    }

    @Test("alg None in another case is refused as none")
    func algNoneMixedCase() throws {
        let token = Base64URL.encode(Array(#"{"alg":"NoNe"}"#.utf8)) + "." + Base64URL.encode(Array("{}".utf8)) + ".AA"
        expectRejection(.algorithmNone) {
            _ = try JWSVerifier.verify(compact: token, keys: JWKSet(keys: []), allowed: [.rs256], clientSecret: nil)
        }
    }

    @Test("an alg outside the allowed list is refused (ES256 token, only RS256 allowed)")
    func disallowedAlgorithm() throws {
        let minter = Minter(TestKeys.p256, .es256)
        expectRejection(.algorithmNotAllowed) {
            _ = try JWSVerifier.verify(compact: minter.token(claims: Self.claims), keys: minter.keySet(), allowed: [.rs256], clientSecret: nil)
        }
    }

    /// The classic attack: sign HS256 with the RSA public key (as the JWK text, or DER) as HMAC secret.
    static func confusionToken(kid: String? = "k1") throws -> String {
        let jwk = try TestKeys.rsa.publicJWK(kid: "k1")
        let header = kid.map { #"{"alg":"HS256","kid":"\#($0)"}"# } ?? #"{"alg":"HS256"}"#
        return try hmacToken(.hs256, header: header, payload: #"{"sub":"admin"}"#, key: Array(jwk.utf8))
    }

    @Test("HS256 signed with the RSA public key is refused when only RS256 is allowed")
    func confusionDisallowed() throws {
        expectRejection(.algorithmNotAllowed) {
            _ = try JWSVerifier.verify(compact: Self.confusionToken(), keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.rs256], clientSecret: nil)
        }
    }

    @Test("HS256 naming the RSA key by kid is algorithm confusion even when HS256 is allowed")
    func confusionByKid() throws {
        expectRejection(.algorithmConfusion) {
            _ = try JWSVerifier.verify(
                compact: Self.confusionToken(), keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.rs256, .hs256], clientSecret: Secret("x"))
        }
    }

    @Test("HS256 without a client secret is refused: no public key ever serves as HMAC key")
    func confusionWithoutSecret() throws {
        expectRejection(.algorithmConfusion) {
            _ = try JWSVerifier.verify(
                compact: Self.confusionToken(kid: nil), keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.rs256, .hs256], clientSecret: nil)
        }
    }

    @Test("HS256 signed with the RSA public key fails against the real client secret")
    func confusionWithSecret() throws {
        expectRejection(.badSignature, notContaining: "real-client-secret") {
            _ = try JWSVerifier.verify(
                compact: Self.confusionToken(kid: nil), keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.hs256],
                clientSecret: Secret("real-client-secret"))
        }
    }

    @Test("a public key refuses to verify an HMAC algorithm (algorithm confusion at the key)")
    func publicKeyRefusesHMAC() throws {
        expectRejection(.algorithmConfusion) {
            _ = try TestKeys.rsa.publicKey.verify(.hs256, signingInput: [1], signature: [2])
        }
    }

    @Test("an EC key refuses RS256 (key type does not fit alg)")
    func ecKeyRefusesRSA() throws {
        expectRejection(.keyMismatch) {
            _ = try TestKeys.p256.publicKey.verify(.rs256, signingInput: [1], signature: [2])
        }
    }

    @Test("an ES256 signature one byte short is refused", arguments: [63, 65, 0, 128])
    func ecSignatureLength(length: Int) throws {
        let input = Array("a.b".utf8)
        let signature = try TestKeys.p256.sign(.es256, signingInput: input)
        #expect(try TestKeys.p256.publicKey.verify(.es256, signingInput: input, signature: signature))
        let wrong = Array((signature + signature).prefix(length))
        #expect(try !TestKeys.p256.publicKey.verify(.es256, signingInput: input, signature: wrong))
    }

    @Test("an ES256 signature in DER (as OpenSSL emits it) is refused: JWS wants raw r‖s")
    func ecSignatureInDER() throws {
        let input = Array("a.b".utf8)
        let raw = try TestKeys.p256.sign(.es256, signingInput: input)
        let der = try #require(ECDSASignature.der(fromJWS: raw, coordinateSize: 32))
        #expect(try !TestKeys.p256.publicKey.verify(.es256, signingInput: input, signature: der))
    }

    @Test("an ES256 token whose JWKS key is P-384 is refused (crv does not fit alg)")
    func curveMismatch() throws {
        let token = try Minter(TestKeys.p256, .es256).token(claims: Self.claims)
        expectRejection(.keyMismatch) {
            _ = try JWSVerifier.verify(compact: token, keys: keySet(TestKeys.p384.publicJWK(kid: "k1")), allowed: [.es256], clientSecret: nil)
        }
    }

    @Test("an unknown kid is reported distinctly as unknownKey, so the fetcher can refetch")
    func unknownKid() throws {
        let token = try Minter(TestKeys.rsa, .rs256, kid: "rotated-2025").token(claims: Self.claims)
        let error = expectRejection(.unknownKey) {
            _ = try JWSVerifier.verify(compact: token, keys: Minter(TestKeys.rsa, .rs256, kid: "old").keySet(), allowed: [.rs256], clientSecret: nil)
        }
        #expect(error?.message?.contains("rotated-2025") == true)
    }

    @Test("a token without kid and no key fitting its alg is unknownKey")
    func noKidNoFittingKey() throws {
        let token = try Minter(TestKeys.ed25519, .edDSA, kid: nil).token(claims: Self.claims)
        expectRejection(.unknownKey) {
            _ = try JWSVerifier.verify(compact: token, keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.edDSA], clientSecret: nil)
        }
    }

    @Test("the key named by kid has use=enc: refused")
    func encryptionKey() throws {
        let minter = Minter(TestKeys.rsa, .rs256)
        expectRejection(.unusableKey) {
            _ = try JWSVerifier.verify(
                compact: minter.token(claims: Self.claims), keys: keySet(minter.jwk(use: "enc")), allowed: [.rs256], clientSecret: nil)
        }
    }

    @Test("the key named by kid declares alg RS512 but the token says RS256: refused")
    func keyAlgorithmMismatch() throws {
        let minter = Minter(TestKeys.rsa, .rs256)
        expectRejection(.unusableKey) {
            _ = try JWSVerifier.verify(
                compact: minter.token(claims: Self.claims), keys: keySet(minter.jwk(algorithm: "RS512")), allowed: [.rs256, .rs512], clientSecret: nil)
        }
    }

    @Test("the key named by kid has key_ops without verify: refused")
    func keyOperations() throws {
        let minter = Minter(TestKeys.rsa, .rs256)
        var jwk = try minter.jwk()
        jwk.removeLast()
        jwk += #","key_ops":["encrypt"]}"#
        expectRejection(.unusableKey) {
            _ = try JWSVerifier.verify(compact: minter.token(claims: Self.claims), keys: keySet(jwk), allowed: [.rs256], clientSecret: nil)
        }
    }

    @Test("a PS256 signature presented as RS256 is refused (padding is part of the algorithm)")
    func pssAsPKCS1() throws {
        let pss = try Minter(TestKeys.rsa, .ps256).token(claims: Self.claims)
        let parts = pss.split(separator: ".")
        let relabelled = Base64URL.encode(Array(#"{"alg":"RS256","kid":"k1"}"#.utf8)) + "." + parts[1] + "." + parts[2]
        expectRejection(.badSignature) {
            _ = try JWSVerifier.verify(compact: relabelled, keys: Minter(TestKeys.rsa, .rs256).keySet(), allowed: [.rs256, .ps256], clientSecret: nil)
        }
    }

    @Test("the RFC 7515 A.3 signature does not verify with a different P-256 key")
    func vectorWithOtherKey() throws {
        let (input, signature) = Vectors.split(Vectors.es256)
        #expect(try !TestKeys.p256.publicKey.verify(.es256, signingInput: input, signature: signature))
    }
}

@Suite("ECDSA signature encoding (RFC 7518 §3.4)")
struct ECDSAEncodingTests {
    @Test("r‖s becomes a minimal DER SEQUENCE of two INTEGERs and back, at every curve size", arguments: [32, 48, 66])
    func roundTrip(size: Int) throws {
        var raw = [UInt8](repeating: 0, count: 2 * size)
        raw[0] = 0x80  // high bit set: DER needs a leading zero
        raw[size - 1] = 1
        raw[size + 3] = 0x7F  // leading zeros in s: stripped
        let der = try #require(ECDSASignature.der(fromJWS: raw, coordinateSize: size))
        #expect(der[0] == 0x30)
        #expect(ECDSASignature.jws(fromDER: der, coordinateSize: size) == raw)
        if size == 66 { #expect(der[1] == 0x81) }  // long-form length for P-521
    }

    @Test("a signature that is not exactly 2 × the coordinate size has no DER form")
    func wrongLength() {
        #expect(ECDSASignature.der(fromJWS: [UInt8](repeating: 1, count: 63), coordinateSize: 32) == nil)
        #expect(ECDSASignature.der(fromJWS: [UInt8](repeating: 1, count: 132), coordinateSize: 32) == nil)
    }
}
