import Foundation
@testable import OAuthFlow
import Testing

/// libcrypto is opened with `dlopen` by its soname on first use (`Crypto/LibCrypto.swift`), not linked.
@Suite("libcrypto loaded on first use")
struct LibCryptoTests {
    @Test("libcrypto.so.3 loads by its soname, and every crypto entry point works through the table")
    func loads() throws {
        try LibCrypto.require()
        #expect(LibCrypto.loaded != nil)
        #expect(try Digest.sha256(Array("abc".utf8)).map { String(format: "%02x", $0) }.joined()
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let verifier = Secret("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(try PKCE(verifier: verifier).challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")  // RFC 7636 App. B
    }

    @Test("a missing library is a typed .crypto error naming it, the reason and the fix")
    func missingLibrary() {
        let result = LibCrypto.load(soname: "libcrypto-oauthflow-missing.so.3")
        guard case .failure(let error) = result else {
            Issue.record("a library that does not exist was loaded")
            return
        }
        #expect(error.code == .crypto)
        let message = error.message ?? ""
        #expect(message.contains("libcrypto-oauthflow-missing.so.3 could not be loaded"), "\(message)")
        #expect(message.contains("install OpenSSL 3"), "\(message)")
    }

    @Test("a library without OpenSSL 3's functions is refused, naming the first missing one")
    func wrongLibrary() {
        // libc has none of libcrypto's symbols.
        guard case .failure(let error) = LibCrypto.load(soname: "libc.so.6") else {
            Issue.record("libc.so.6 was accepted as libcrypto")
            return
        }
        #expect(error.code == .crypto)
        #expect((error.message ?? "").contains("has no BN_bn2binpad"), "\(error.message ?? "")")
    }

    @Test("comparing secrets needs no libcrypto and is exact")
    func constantTimeEquals() {
        #expect(ConstantTime.equals([], []))
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(!ConstantTime.equals([0x80], [0x00]))
        #expect(Secret("same").constantTimeEquals(Secret("same")))
        #expect(!Secret("same").constantTimeEquals(Secret("sane")))
    }
}
