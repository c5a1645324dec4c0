// jwk: JWKS import (OIDC/JWK.swift) and the OpenSSL public key construction behind it
// (Crypto/Signatures.swift PublicKey: RSA size/parity/exponent checks, the EC point-on-curve
// check, Ed25519 length), then signature verification with each imported key.
//
// Input: a JWKS or a single JWK as JSON when it starts with `{`; otherwise raw key material:
// one byte choosing the kind (RSA, P-256, P-384, P-521, Ed25519) and the components
// (RSA: one length byte, then e of that length, then n; EC: x ‖ y split in half; Ed25519: x).
import Foundation

enum JWKTarget {
    static let signingInput = Array("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UifQ".utf8)

    static func run(_ bytes: [UInt8]) {
        if bytes.first == UInt8(ascii: "{") {
            json(bytes)
        } else if let kind = bytes.first {
            raw(kind, Array(bytes.dropFirst()))
        }
    }

    static func json(_ bytes: [UInt8]) {
        let set: JWKSet
        do {
            set = try JWKSet(json: Data(bytes))
        } catch {
            checkImport(error)
            // A lone JWK, as some servers publish.
            if let value = try? JSONValue.parse(bytes), value["keys"] == nil {
                do { exercise(try JWK(value)) } catch { checkImport(error) }
            }
            return
        }
        invariant(set.keys.count <= JWKSet.maximumKeys, "more than \(JWKSet.maximumKeys) keys were read")
        for key in set.keys { exercise(key) }
        // Verifying through the set, with and without a kid, must refuse a junk signature.
        for algorithm in JWSAlgorithm.allCases where algorithm.isAsymmetric {
            let header = Base64URL.encode(Array(#"{"alg":"\#(algorithm.rawValue)"}"#.utf8))
            let token = header + ".eyJpc3MiOiJqb2UifQ." + Base64URL.encode([UInt8](repeating: 0x5A, count: 64))
            do {
                _ = try JWSVerifier.verify(compact: token, keys: set, allowed: [algorithm], clientSecret: nil)
                invariant(false, "a junk \(algorithm.rawValue) signature verified")
            } catch {
                checkShown(error)
            }
        }
    }

    static func exercise(_ jwk: JWK) {
        for algorithm in JWSAlgorithm.allCases { _ = jwk.refusal(for: algorithm).map(checkShown) }
        switch jwk.key {
        case .failure(let error): checkImport(error)
        case .success(let key): verifyJunk(key)
        }
    }

    static func raw(_ kind: UInt8, _ material: [UInt8]) {
        do {
            let key: PublicKey
            switch kind % 5 {
            case 0:
                guard let length = material.first, material.count > Int(length) else { return }
                let exponent = Array(material[1..<(1 + Int(length))])
                key = try PublicKey.rsa(modulus: Array(material[(1 + Int(length))...]), exponent: exponent)
                guard case .rsa(let bits) = key.kind else { return invariant(false, "an RSA import gave another kind") }
                invariant((PublicKey.minimumRSABits...16384).contains(bits), "an RSA key of \(bits) bits was accepted")
            case 1, 2, 3:
                let curve = [EllipticCurve.p256, .p384, .p521][Int(kind % 5) - 1]
                let half = material.count / 2
                key = try PublicKey.ec(curve: curve, x: Array(material[..<half]), y: Array(material[half...]))
                invariant(key.kind == .ec(curve), "an EC import gave another kind")
            default:
                key = try PublicKey.ed25519(x: material)
                invariant(material.count == 32, "an Ed25519 key of \(material.count) bytes was accepted")
            }
            verifyJunk(key)
        } catch {
            checkImport(error)
        }
    }

    /// Every algorithm against `key`: a mismatch is a typed refusal, and no junk signature verifies.
    static func verifyJunk(_ key: PublicKey) {
        _ = key.kindName
        for algorithm in JWSAlgorithm.allCases {
            for length in [0, 64, 96, 132, 256, 512] {
                do {
                    let signature = [UInt8](repeating: UInt8(truncatingIfNeeded: length | 1), count: length)
                    let verified = try key.verify(algorithm, signingInput: signingInput, signature: signature)
                    invariant(!verified, "a junk \(algorithm.rawValue) signature of \(length) bytes verified")
                    invariant(key.fits(algorithm), "\(algorithm.rawValue) was checked with a key that does not fit it")
                } catch {
                    checkShown(error)
                    invariant(!key.fits(algorithm), "verifying \(algorithm.rawValue) with a fitting key threw: \(error)")
                }
            }
        }
    }

    static func checkImport(_ error: OAuthError) {
        checkShown(error)
        invariant(error.code == .invalidResponse || error.code == .idTokenRejected, "a key problem is \(error.code)")
    }
}
