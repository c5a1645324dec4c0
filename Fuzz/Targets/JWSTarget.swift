// jws: compact JWS parsing and its protected header (OIDC/JWS.swift), signature verification
// against a fixed key set (OIDC/JWK.swift JWSVerifier, Crypto/Signatures.swift), and ID token
// claims validation (OIDC/IDTokenValidator.swift).
//
// Input: one mode byte, then text.
//   mode % 3 == 0: the text is a compact JWS, parsed and verified as given.
//   mode % 3 == 1: the text is a protected header (JSON), sent with a fixed payload and signature.
//   mode % 3 == 2: the text is an ID token's claims (JSON), signed HS256 with the client secret by
//                  the harness, so every claim check runs (the fuzzer cannot forge signatures).
import Foundation

enum JWSTarget {
    static let clientSecret = Secret("fuzz-client-secret-0123456789abcdef")
    static let issuer = "https://issuer.example"
    static let clientID = "fuzz-client"

    /// RFC 7515 A.2 (RSA), A.3 (P-256), RFC 7520 §3.2 (P-521), RFC 8037 A.2 (Ed25519), with kids.
    static let keys: JWKSet = {
        let text = #"""
        {"keys":[
         {"kty":"RSA","kid":"rsa","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ","e":"AQAB"},
         {"kty":"EC","kid":"p256","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
         {"kty":"EC","kid":"bilbo.baggins@hobbiton.example","crv":"P-521","x":"AHKZLLOsCOzz5cY97ewNUajB957y-C-U88c3v13nmGZx6sYl_oJXu9A5RkTKqjqvjyekWF-7ytDyRXYgCF5cj0Kt","y":"AdymlHvOiLxXkEhayXQnNCvDX4h9htZaCJN34kfmC6pV5OhQHiraVySsUdaQkAgDPrwQrJmbnX9cwlGfP-HqHZR1"},
         {"kty":"OKP","kid":"ed","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
         {"kty":"EC","kid":"off-curve","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a1"},
         {"kty":"oct","kid":"hmac","k":"c2VjcmV0"}
        ]}
        """#
        do { return try JWKSet(json: Data(text.utf8)) } catch { fatalError("the fixed key set does not load: \(error)") }
    }()

    static let allowed = Set(JWSAlgorithm.allCases.filter { $0 != .none })

    static func run(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        switch mode % 3 {
        case 0: verify(String(decoding: rest, as: UTF8.self))
        case 1:
            let payload = Base64URL.encode(Array(#"{"iss":"joe","exp":1300819380}"#.utf8))
            verify(Base64URL.encode(rest) + "." + payload + "." + Base64URL.encode([UInt8](repeating: 0x5A, count: 64)))
        default: claims(rest)
        }
    }

    static func verify(_ compact: String) {
        let jws: JWS
        do {
            jws = try JWS(compact: compact)
        } catch {
            checkRejection(error)
            return
        }
        invariant(jws.signingInput.count < compact.utf8.count, "the signing input is not a prefix of the token")
        for allowedSet in [allowed, [jws.header.algorithm]] {
            do {
                let verified = try JWSVerifier.verify(jws, keys: keys, allowed: allowedSet, clientSecret: clientSecret)
                invariant(verified.header.algorithm != .none, "alg none verified")
                invariant(verified.payload == jws.payload, "the verified payload is not the token's")
            } catch {
                checkRejection(error)
            }
        }
        do { _ = try validator.validate(Secret(compact), keys: keys, now: fuzzNow) } catch { checkRejection(error) }
        do { _ = try IDToken(storedToken: Secret(compact)) } catch { checkRejection(error) }
    }

    static let validator = IDTokenValidator(issuer: issuer, clientID: clientID, allowedAlgorithms: [.hs256, .rs256, .es256, .edDSA],
                                            clientSecret: clientSecret)

    /// Signs `claims` with HS256 and validates it with every expectation set.
    static func claims(_ claims: [UInt8]) {
        let signingInput = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(claims)
        let signature: [UInt8]
        do {
            signature = try HMACVerifier.mac(.hs256, key: Array(clientSecret.reveal().utf8), data: Array(signingInput.utf8))
        } catch {
            invariant(false, "HMAC failed: \(error)")
            return
        }
        let token = Secret(signingInput + "." + Base64URL.encode(signature))
        let expectations = IDTokenValidator.Expectations(
            nonce: Secret("fuzz-nonce"), maxAge: 3600, requestedAt: fuzzNow.addingTimeInterval(-60),
            accessToken: Secret("fuzz-access-token"), code: Secret("fuzz-code"))
        for expected in [expectations, IDTokenValidator.Expectations()] {
            let idToken: IDToken
            do {
                idToken = try validator.validate(token, keys: keys, now: fuzzNow, expecting: expected)
            } catch {
                checkRejection(error)
                continue
            }
            invariant(idToken.issuer == issuer && idToken.audience.contains(clientID), "an ID token for someone else validated")
            invariant(idToken.expiresAt.timeIntervalSince(fuzzNow) > -validator.clockSkew, "an expired ID token validated")
            if expected.nonce != nil { invariant(idToken.nonce == "fuzz-nonce", "an ID token with another nonce validated") }
            _ = String(reflecting: idToken)
            // Stored, then read back (StoredEntry reads claims without the signature).
            do {
                invariant(try IDToken(storedToken: token) == idToken, "a stored ID token reads back different")
            } catch {
                invariant(false, "a validated ID token cannot be read back from storage: \(error)")
            }
            do {
                let encoded = try JSONEncoder().encode(idToken)
                invariant(try JSONDecoder().decode(IDToken.self, from: encoded) == idToken, "IDToken's Codable form does not round-trip")
            } catch {
                invariant(false, "IDToken's Codable form does not round-trip: \(error)")
            }
            // A refresh that returns the same ID token keeps iss, sub, aud, azp and auth_time.
            do {
                _ = try validator.validate(token, keys: keys, now: fuzzNow, expecting: .init(accessToken: expected.accessToken, previous: idToken))
            } catch {
                invariant(false, "an ID token is refused as its own refresh: \(error)")
            }
        }
    }

    static func checkRejection(_ error: OAuthError) {
        checkShown(error)
        invariant(error.code == .idTokenRejected || error.code == .invalidResponse, "a JWS problem is \(error.code)")
        invariant(error.tokenRejection != nil, "a JWS rejection without its reason")
    }
}
