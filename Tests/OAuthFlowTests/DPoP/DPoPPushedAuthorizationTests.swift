import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// DPoP on the pushed authorization request (RFC 9449 §10.1 with RFC 9126): the exact proof on
/// the push, the `use_dpop_nonce` retry shared with the token endpoint, and no proof without DPoP.
@Suite("DPoP on pushed authorization requests (RFC 9449 §10.1)", .timeLimit(.minutes(1)))
struct DPoPPushedAuthorizationTests {
    static let requestURI = "urn:ietf:params:oauth:request_uri:dpop-par-1"
    static let pushed = ScriptedTransport.Step.status(201, json: #"{"request_uri":"\#(requestURI)","expires_in":60}"#)
    let clock = TestClock()
    let server = ScriptedTransport()

    func flow(dpop: DPoPMode = .enabled) async throws -> AuthFlow {
        var provider = scriptedProvider(id: "par", secret: "s3cret")
        provider.pushedAuthorization = true
        provider.pushedAuthorizationURL = URL(string: "https://as.test/par?tenant=7")
        provider.dpop = dpop
        return try await AuthFlow(providers: [provider], transport: server, options: options(clock))
    }

    func fields(_ request: HTTPRequest) -> [(String, String)] {
        FormEncoding.decode(String(decoding: request.body ?? Data(), as: UTF8.self))
    }

    func proofs(_ path: String) throws -> [WireJWS] {
        try server.requests(path).map { try WireJWS(try #require($0.header("DPoP"))) }
    }

    @Test("the push carries one proof: typ dpop+jwt, the public jwk, htm POST, htu the PAR URL without its query, iat, a fresh jti; dpop_jkt pushed matches it and the code exchange proves the same key")
    func proofOnThePush() async throws {
        let flow = try await flow()
        server.script("/par", [Self.pushed])
        server.script("/token", [.token("at-1", type: "DPoP")])

        let request = try await flow.authorizationRequest(provider: "par")

        let push = try #require(server.requests("/par").only)
        #expect(push.headerValues("DPoP").count == 1)
        #expect(push.headerValues("Authorization") == [ClientAuthenticator.basicAuthorization(clientID: "cli-1", secret: Secret("s3cret"))])
        let proof = try WireJWS(try #require(push.header("DPoP")))
        #expect(Set(proof.header.keys) == ["typ", "alg", "jwk"])
        #expect(proof.header["typ"] as? String == "dpop+jwt" && proof.header["alg"] as? String == "ES256")
        #expect(proof.jwk["kty"] == "EC" && proof.jwk["crv"] == "P-256" && proof.jwk["d"] == nil)
        #expect(Set(proof.claims.keys) == ["jti", "htm", "htu", "iat"])
        #expect(proof.claims["htm"] as? String == "POST")
        #expect(proof.claims["htu"] as? String == "https://as.test/par")
        #expect(proof.claims["iat"] as? Int == Int(clock.date.timeIntervalSince1970))
        #expect(Base64URL.decode(proof.jti ?? "")?.count == 16)
        #expect(try proof.verifies())
        let jkt = fields(push).filter { $0.0 == "dpop_jkt" }.map(\.1)
        #expect(jkt == [try proof.thumbprint()], "RFC 9449 §10.1: dpop_jkt kept, and it matches the proof's key")
        #expect(queryPairs(request.url).map(\.0) == ["client_id", "request_uri"])

        try await flow.completeAuthorization(callbackURL: callback(request))
        let exchange = try #require(try proofs("/token").only)
        #expect(try exchange.thumbprint() == proof.thumbprint())
        #expect(exchange.jti != proof.jti)
        #expect(exchange.claims["htu"] as? String == "https://as.test/token")
    }

    @Test("use_dpop_nonce at the PAR endpoint: sent once more with the nonce and a new jti, exactly two pushes; the next push starts with the kept nonce (RFC 9449 §8)")
    func nonceRetry() async throws {
        let flow = try await flow()
        server.script("/par", [.oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "eyJ7S_zG.eyJH0-Z.HX4w-7v"]), Self.pushed, Self.pushed])

        let request = try await flow.authorizationRequest(provider: "par")

        #expect(server.requests("/par").count == 2)
        #expect(query(request.url)?["request_uri"] == Self.requestURI)
        var sent = try proofs("/par")
        #expect(sent.map { $0.claims["nonce"] as? String } == [nil, "eyJ7S_zG.eyJH0-Z.HX4w-7v"])
        #expect(sent[0].jti != sent[1].jti)
        #expect(try sent[0].thumbprint() == sent[1].thumbprint())
        // Each attempt authenticates the client again, and pushes the same fields.
        #expect(server.requests("/par").map { $0.headerValues("Authorization").count } == [1, 1])
        #expect(server.requests("/par").map { fields($0).map(\.0) }.allSatisfy { $0 == fields(server.requests("/par")[0]).map(\.0) })

        _ = try await flow.authorizationRequest(provider: "par")
        sent = try proofs("/par")
        #expect(sent.count == 3)
        #expect(sent.last?.claims["nonce"] as? String == "eyJ7S_zG.eyJH0-Z.HX4w-7v", "the server's nonce goes into the next proof")
    }

    @Test("a second use_dpop_nonce at the PAR endpoint is .serverRejected, not a loop: exactly two pushes")
    func secondNonceRequestFails() async throws {
        let flow = try await flow()
        server.script("/par", [.oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "n-1"]),
                               .oauthError("use_dpop_nonce", headers: ["DPoP-Nonce": "n-2"]), Self.pushed])

        let error = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "par") }

        #expect(error?.code == .serverRejected && error?.response?.code == .useDPoPNonce)
        #expect(error?.endpoint == .pushedAuthorization)
        #expect(server.requests("/par").count == 2)
    }

    @Test("without DPoP the push carries neither a proof nor dpop_jkt")
    func noProofWithoutDPoP() async throws {
        let flow = try await flow(dpop: .off)
        server.script("/par", [Self.pushed])

        _ = try await flow.authorizationRequest(provider: "par")

        let push = try #require(server.requests("/par").only)
        #expect(push.headerValues("DPoP").isEmpty)
        #expect(!fields(push).contains { $0.0 == "dpop_jkt" })
        #expect(push.headerValues("Authorization").count == 1)
    }
}
