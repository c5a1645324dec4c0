import Foundation
@testable import OAuthFlow
import Testing

@Suite("JWK and JWKS import (RFC 7517, RFC 7518 §6, RFC 8037 §2)")
struct JWKTests {
    static func jwk(_ text: String) throws -> JWK { try JWK(JSONValue.parse(Data(text.utf8))) }

    /// The reason the key was refused at import.
    static func importFailure(_ jwk: JWK) -> OAuthError? {
        if case .failure(let error) = jwk.key { return error }
        return nil
    }

    @Test("RFC 7515 A.2 and A.3 keys import from their JWK text; the A.2 token verifies through the set")
    func rfcKeys() throws {
        let set = try keySet(
            #"{"kty":"RSA","n":"\#(Vectors.rsaN)","e":"AQAB"}"#,
            #"{"kty":"EC","crv":"P-256","x":"\#(Vectors.ecX)","y":"\#(Vectors.ecY)"}"#,
            #"{"kty":"OKP","crv":"Ed25519","x":"\#(Vectors.edX)"}"#)
        #expect(set.keys.count == 3)
        #expect(set.keys.allSatisfy { $0.isImported })
        #expect(try JWSVerifier.verify(compact: Vectors.rs256, keys: set, allowed: [.rs256], clientSecret: nil).header.algorithm == .rs256)
        #expect(try JWSVerifier.verify(compact: Vectors.es256, keys: set, allowed: [.es256], clientSecret: nil).header.algorithm == .es256)
        #expect(try JWSVerifier.verify(compact: Vectors.edDSA, keys: set, allowed: [.edDSA], clientSecret: nil).payload
            == Array("Example of Ed25519 signing".utf8))
    }

    @Test("members are read: kty, kid, use, alg, key_ops, crv")
    func members() throws {
        let key = try Self.jwk(#"{"kty":"EC","crv":"P-256","x":"\#(Vectors.ecX)","y":"\#(Vectors.ecY)","kid":"a","use":"sig","alg":"ES256","key_ops":["verify"]}"#)
        #expect(key.keyType == "EC")
        #expect(key.keyID == "a")
        #expect(key.use == "sig")
        #expect(key.algorithm == "ES256")
        #expect(key.operations == ["verify"])
        #expect(key.curve == "P-256")
        #expect(key.refusal(for: .es256) == nil)
    }

    @Test("exported JWKs of generated keys import back to keys of the same kind", arguments: ["rsa", "p256", "p384", "p521", "ed25519"])
    func exportImport(name: String) throws {
        let key: SigningKey = switch name {
        case "rsa": TestKeys.rsa
        case "p256": TestKeys.p256
        case "p384": TestKeys.p384
        case "p521": TestKeys.p521
        default: TestKeys.ed25519
        }
        let imported = try Self.jwk(key.publicJWK(kid: "x")).key.get()
        #expect(imported.kind == key.publicKey.kind)
    }

    // MARK: negative cases

    @Test("an EC point not on the curve is refused (y changed by one bit)")
    func pointNotOnCurve() throws {
        var y = Vectors.bytes(Vectors.ecY)
        y[31] ^= 0x01
        expectRejection(.unusableKey, code: .invalidResponse) {
            _ = try PublicKey.ec(curve: .p256, x: Vectors.bytes(Vectors.ecX), y: y)
        }
        let key = try Self.jwk(#"{"kty":"EC","crv":"P-256","x":"\#(Vectors.ecX)","y":"\#(Base64URL.encode(y))"}"#)
        #expect(Self.importFailure(key)?.message?.contains("not on the curve") == true)
    }

    @Test("a P-256 point given with P-384 as crv is refused (coordinate length)")
    func coordinateLength() throws {
        expectRejection(.unusableKey, code: .invalidResponse) {
            _ = try PublicKey.ec(curve: .p384, x: Vectors.bytes(Vectors.ecX), y: Vectors.bytes(Vectors.ecY))
        }
    }

    @Test("EC coordinates with a leading byte cut off are refused")
    func shortCoordinate() throws {
        expectRejection(.unusableKey, code: .invalidResponse) {
            _ = try PublicKey.ec(curve: .p256, x: Array(Vectors.bytes(Vectors.ecX).dropFirst()), y: Vectors.bytes(Vectors.ecY))
        }
    }

    @Test("an RSA key of 1024 bits is refused (RFC 7518 §3.3: at least 2048)")
    func rsaTooSmall() throws {
        let small = try SigningKey.rsa(bits: 1024)
        let key = try Self.jwk(small.publicJWK(kid: "small"))
        let error = try #require(Self.importFailure(key))
        #expect(error.tokenRejection == .unusableKey)
        #expect(error.message?.contains("1024") == true)
        // A token signed with it, naming it by kid, is refused with that reason.
        let token = try Minter(small, .rs256, kid: "small").token(claims: ["sub": .string("a")])
        let rejection = expectRejection(.unusableKey) {
            _ = try JWSVerifier.verify(compact: token, keys: JWKSet(keys: [key]), allowed: [.rs256], clientSecret: nil)
        }
        #expect(rejection?.message?.contains("2048") == true)
    }

    @Test("an RSA modulus of 2047 significant bits is refused")
    func rsa2047() throws {
        var n = Vectors.bytes(Vectors.rsaN)
        n[0] = 0x7F
        expectRejection(.unusableKey, code: .invalidResponse) { _ = try PublicKey.rsa(modulus: n, exponent: [1, 0, 1]) }
    }

    @Test("an RSA key with an even modulus is refused")
    func rsaEvenModulus() throws {
        var n = Vectors.bytes(Vectors.rsaN)
        n[n.count - 1] &= 0xFE
        expectRejection(.unusableKey, code: .invalidResponse) { _ = try PublicKey.rsa(modulus: n, exponent: [1, 0, 1]) }
    }

    @Test("an Ed25519 key of 31 bytes is refused")
    func ed25519Length() throws {
        expectRejection(.unusableKey, code: .invalidResponse) { _ = try PublicKey.ed25519(x: Array(Vectors.bytes(Vectors.edX).dropLast())) }
    }

    @Test("keys that cannot be used are kept with their reason, as RFC 7517 §5 asks", arguments: [
        #"{"kty":"EC","crv":"secp256k1","x":"AA","y":"AA"}"#,
        #"{"kty":"OKP","crv":"X25519","x":"\#(Vectors.edX)"}"#,
        #"{"kty":"oct","k":"c2VjcmV0"}"#,
        #"{"kty":"RSA","e":"AQAB"}"#,
        #"{"kty":"RSA","n":"not base64url!","e":"AQAB"}"#,
        #"{"kty":"EC","x":"\#(Vectors.ecX)","y":"\#(Vectors.ecY)"}"#,
        #"{"kty":"DSA"}"#,
        #"{"n":"AQAB"}"#,
    ])
    func unusableKeys(text: String) throws {
        let key = try Self.jwk(text)
        #expect(!key.isImported)
        #expect(Self.importFailure(key)?.tokenRejection == .unusableKey)
        #expect(key.refusal(for: .rs256)?.tokenRejection == .unusableKey)
    }

    @Test("an unusable key does not hide the usable ones in the same set")
    func unusableNextToUsable() throws {
        let minter = Minter(TestKeys.p256, .es256, kid: nil)
        let set = try keySet(#"{"kty":"oct","k":"c2VjcmV0"}"#, #"{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}"#, TestKeys.p256.publicJWK())
        #expect(try JWSVerifier.verify(compact: minter.token(claims: [:]), keys: set, allowed: [.es256], clientSecret: nil).payload == Array("{}".utf8))
    }

    struct BadSet: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let text: String
    }

    @Test("malformed JWKS documents are .invalidResponse from the discovery endpoint", arguments: [
        BadSet(testDescription: "not JSON", text: "<html>"),
        BadSet(testDescription: "a JSON array", text: "[]"),
        BadSet(testDescription: "no keys member", text: #"{"key":[]}"#),
        BadSet(testDescription: "keys is an object", text: #"{"keys":{}}"#),
        BadSet(testDescription: "an entry that is a string", text: #"{"keys":["RSA"]}"#),
        BadSet(testDescription: "kid that is a number", text: #"{"keys":[{"kty":"RSA","kid":1}]}"#),
        BadSet(testDescription: "key_ops that is a string", text: #"{"keys":[{"kty":"RSA","key_ops":"verify"}]}"#),
        BadSet(testDescription: "a member given twice", text: #"{"keys":[{"kty":"RSA","kty":"EC"}]}"#),
        BadSet(testDescription: "65 keys", text: #"{"keys":[\#(Array(repeating: #"{"kty":"oct"}"#, count: 65).joined(separator: ","))]}"#),
    ])
    func malformedSets(_ bad: BadSet) {
        let error = #expect(throws: OAuthError.self) { _ = try JWKSet(json: Data(bad.text.utf8)) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .discovery)
    }

    @Test("an empty key set parses, and every kid is unknown in it")
    func emptySet() throws {
        let set = try JWKSet(json: Data(#"{"keys":[]}"#.utf8))
        #expect(set.keys.isEmpty)
        expectRejection(.unknownKey) {
            _ = try JWSVerifier.verify(compact: Minter(TestKeys.rsa, .rs256).token(claims: [:]), keys: set, allowed: [.rs256], clientSecret: nil)
        }
    }
}

extension JWKTests {
    @Test("an RSA exponent of 1 (every padded message its own signature), an even one, or one over 8 bytes is refused", arguments: [[1], [2], [1, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0, 1]] as [[UInt8]])
    func rsaWeakExponent(exponent: [UInt8]) throws {
        expectRejection(.unusableKey, code: .invalidResponse) { _ = try PublicKey.rsa(modulus: Vectors.bytes(Vectors.rsaN), exponent: exponent) }
    }
}

extension JWKTests {
    @Test("an RSA modulus over 16384 bits is refused before OpenSSL sees it")
    func rsaTooLarge() throws {
        var n = [UInt8](repeating: 0xFF, count: 2049)
        n[0] = 0x01
        let error = expectRejection(.unusableKey, code: .invalidResponse) { _ = try PublicKey.rsa(modulus: n, exponent: [1, 0, 1]) }
        #expect(error?.message?.contains("16384") == true)
    }
}
