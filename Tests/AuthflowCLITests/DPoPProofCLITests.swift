import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow token P --dpop-proof METHOD URL` and `status` for DPoP-bound tokens (RFC 9449 §7.1).
@Suite("authflow and DPoP")
struct DPoPProofCLITests {
    /// A client-credentials provider with `"dpop": true`.
    static func entry(_ base: String) -> String {
        #"{ "id": "pay", "clientID": "client-pay", "tokenURL": "\#(base)/token", "clientSecret": "s3cret", "dpop": true, "scopes": ["read"] }"#
    }

    @Test("--dpop-proof prints exactly the Authorization: DPoP and DPoP lines for curl -H @-; the proof names the method, the URL without query and the token")
    func proofLines() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base))
        h.mock.script(.token, [.token(access: "at-dpop-1", type: "DPoP", expiresIn: 3600)])

        let result = await h.run(["token", "pay", "--dpop-proof", "GET", "https://api.example.com/v1/pay?x=1"])

        #expect(result.status == .success)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[2].isEmpty)
        #expect(lines[0] == "Authorization: DPoP at-dpop-1")
        #expect(lines[1].hasPrefix("DPoP: "))
        let proof = try WireJWS(lines[1].dropFirst("DPoP: ".count))
        #expect(proof.header["typ"] as? String == "dpop+jwt" && proof.header["alg"] as? String == "ES256")
        #expect(proof.claims["htm"] as? String == "GET" && proof.claims["htu"] as? String == "https://api.example.com/v1/pay")
        #expect(proof.claims["ath"] as? String != nil)
        #expect(h.mock.requests(.token).first?.header("DPoP") != nil, "the token request carried a proof too")

        let status = await h.run(["status", "pay", "--json"])
        #expect(record(status.stdout.trimmingCharacters(in: .newlines))["dpop_bound"] as? Bool == true)
        #expect(!status.stdout.contains("at-dpop-1"))
    }

    @Test("--dpop-proof needs a method and an absolute http(s) URL (exit 64)", arguments: [
        ["token", "pay", "--dpop-proof", "GET"], ["token", "pay", "--dpop-proof", "G E T", "https://a.example/x"],
        ["token", "pay", "--dpop-proof", "GET", "/relative"], ["token", "pay", "--dpop-proof", "--json", "GET", "https://a.example/x"],
    ])
    func usage(arguments: [String]) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(Self.entry(h.base))
        let result = await h.run(arguments)
        #expect(result.status == .usage && result.stdout.isEmpty)
    }
}
