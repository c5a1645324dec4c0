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

    static func bytes(_ base64url: String) -> [UInt8] { Base64URL.decode(base64url)! }

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
