import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Synchronization
import TestSupport
import Testing

/// DPoP (RFC 9449) judged by glewlwyd 2.7.5 (Debian), the server of ``PushedAuthorizationIntegration``:
/// its own proof verification (signature, `typ`, `alg`, `htm`, `htu`, `iat`, `jti` replay, `ath`,
/// the key a code, device code or refresh token was bound to) and its own server nonces. Two
/// instances of its OpenID Connect plugin (`Server/par/provision.py`): `dpop`, without nonces, and
/// `dpopn`, which requires them (`oauth-dpop-nonce-mandatory`; it changes the nonce after every
/// second request that proves one). Every grant glewlwyd has runs with DPoP here: authorization code
/// (pushed, with and without a request object), refresh, client credentials and the device grant;
/// the resource is glewlwyd's userinfo endpoint, reached through ``AuthorizingTransport``.
extension PushedAuthorizationIntegration {
    @Suite("DPoP against glewlwyd: every grant, server nonces rotated, PAR, the userinfo endpoint as the resource (RFC 9449)")
    struct DPoP {
        /// A transport that keeps every request with its answer.
        final class Exchanges: HTTPTransport {
            struct Exchange: Sendable {
                var request: HTTPRequest
                var response: HTTPResponse
            }
            let base: any HTTPTransport
            private let sent = Mutex<[Exchange]>([])
            init(_ base: any HTTPTransport) { self.base = base }
            var maximumBodySize: Int { base.maximumBodySize }
            func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
                let response = try await base.send(request)
                sent.withLock { $0.append(Exchange(request: request, response: response)) }
                return response
            }
            /// The exchanges whose path ends with `suffix`, in order.
            func to(_ suffix: String) -> [Exchange] { sent.withLock { $0 }.filter { $0.request.url.path.hasSuffix(suffix) } }
            func clear() { sent.withLock { $0.removeAll() } }
        }

        static func transport(_ server: GlewlwydServer) -> Exchanges {
            Exchanges(CurlTransport(timeout: 30, proxy: .none, caFile: URL(fileURLWithPath: server.pki("ca.crt"))))
        }

        /// A provider of plugin instance `instance` (`dpop` or `dpopn`) with DPoP required.
        static func provider(
            _ server: GlewlwydServer, instance: String, clientID: String, method: Provider.ClientAuthentication = .clientSecretBasic,
            algorithm: SigningAlgorithm? = nil, pushed: Bool = false, requestObject: Bool = false
        ) throws -> Provider {
            let secret = method == .clientSecretBasic ? Secret("\(clientID)-value-0123456789abcdef") : nil
            var provider = Provider(
                id: "glewlwyd", issuer: "\(server.base)/api/\(instance)", clientID: clientID, clientSecret: secret,
                clientAuthentication: method, redirectURI: PushedAuthorizationIntegration.redirect, scopes: ["openid"],
                clientKey: method == .privateKeyJWT ? try ClientKey(contentsOfFile: server.pki("client.key")) : nil)
            provider.dpop = .required
            provider.dpopAlgorithm = algorithm
            provider.pushedAuthorization = pushed
            provider.requestObject = requestObject
            try provider.validate()
            return provider
        }

        /// The claims of a compact JWS (a request object, or glewlwyd's JWT access token).
        static func claims(_ jwt: String) throws -> [String: Any] { try WireJWS(jwt).claims }

        /// The `cnf` `jkt` of glewlwyd's JWT access token: the thumbprint of the key it bound the token to.
        static func boundThumbprint(_ token: Secret) throws -> String? {
            (try claims(token.reveal())["cnf"] as? [String: Any])?["jkt"] as? String
        }

        static func proof(_ exchange: Exchanges.Exchange) throws -> WireJWS {
            try WireJWS(try #require(exchange.request.headerValue("DPoP"), "no DPoP header to \(exchange.request.url.path)"))
        }

        static func error(_ exchange: Exchanges.Exchange) -> String? {
            (try? JSONSerialization.jsonObject(with: exchange.response.body) as? [String: Any])?["error"] as? String
        }

        @Test("client credentials with DPoP, each algorithm: token_type DPoP, glewlwyd binds the JWT access token (cnf.jkt) to the proof's key",
              arguments: [SigningAlgorithm.es256, .edDSA, .es384, .ps256, .rs256])
        func clientCredentials(algorithm: SigningAlgorithm) async throws {
            let server = try GlewlwydServer.require()
            let transport = Self.transport(server)
            let flow = try await AuthFlow(providers: [Self.provider(server, instance: "dpop", clientID: "dpop-secret", algorithm: algorithm)],
                                          transport: transport)
            let authorization = try await flow.clientCredentials(provider: "glewlwyd")

            #expect(authorization.grant == .clientCredentials && authorization.tokenType == "DPoP" && authorization.isDPoPBound)
            let exchange = try #require(transport.to("/api/dpop/token").only)
            #expect(exchange.response.status == 200)
            let proof = try Self.proof(exchange)
            #expect(proof.header["typ"] as? String == "dpop+jwt" && proof.header["alg"] as? String == algorithm.rawValue)
            #expect(Set(proof.header.keys) == ["typ", "alg", "jwk"] && proof.jwk["d"] == nil)
            #expect(Set(proof.claims.keys) == ["jti", "htm", "htu", "iat"])
            #expect(proof.claims["htm"] as? String == "POST" && proof.claims["htu"] as? String == "\(server.base)/api/dpop/token")
            let set = try await flow.tokenSet(for: "glewlwyd")
            #expect(try Self.boundThumbprint(set.accessToken) == proof.thumbprint())
            #expect(try proof.thumbprint() == DPoPProver(try #require(set.dpopKey)).thumbprint)
        }

        @Test("PAR with DPoP, with and without a signed request object: the push carries a proof and dpop_jkt, the code exchange proves the same key; the token then reads glewlwyd's userinfo through the authorizing transport, and a replayed proof is refused",
              arguments: [("dpop-secret", false), ("dpop-jwt", true)])
        func pushed(clientID: String, requestObject: Bool) async throws {
            let server = try GlewlwydServer.require()
            let transport = Self.transport(server)
            let provider = try Self.provider(server, instance: "dpop", clientID: clientID, method: requestObject ? .privateKeyJWT : .clientSecretBasic,
                                             pushed: true, requestObject: requestObject)
            let flow = try await AuthFlow(providers: [provider], transport: transport)
            let request = try await flow.authorizationRequest(provider: "glewlwyd")
            let callback = try await PushedAuthorizationIntegration.approve(server, request.url)
            let authorization = try await flow.completeAuthorization(callbackURL: callback)
            #expect(authorization.tokenType == "DPoP" && authorization.isDPoPBound)

            let push = try #require(transport.to("/api/dpop/par").only)
            #expect(push.response.status == 201)
            let pushProof = try Self.proof(push)
            #expect(pushProof.claims["htm"] as? String == "POST" && pushProof.claims["htu"] as? String == "\(server.base)/api/dpop/par")
            let fields = Dictionary(PushedAuthorizationIntegration.fields(push.request), uniquingKeysWith: { first, _ in first })
            let pushedThumbprint: String?
            if requestObject {
                #expect(fields["dpop_jkt"] == nil, "dpop_jkt is inside the signed request object")
                pushedThumbprint = try Self.claims(try #require(fields["request"]))["dpop_jkt"] as? String
            } else {
                pushedThumbprint = fields["dpop_jkt"]
            }
            #expect(try pushedThumbprint == pushProof.thumbprint())
            let exchange = try #require(transport.to("/api/dpop/token").only)
            #expect(exchange.response.status == 200)
            #expect(try Self.proof(exchange).thumbprint() == pushedThumbprint)
            let set = try await flow.tokenSet(for: "glewlwyd")
            #expect(try Self.boundThumbprint(set.accessToken) == pushedThumbprint)

            // The resource: glewlwyd's userinfo endpoint checks the proof (signature, htm, htu, iat, ath, jti).
            let api = AuthorizingTransport(base: transport, source: flow.tokenSource(for: "glewlwyd"))
            let userinfo = URL(string: "\(server.base)/api/dpop/userinfo")!
            let answer = try await api.send(HTTPRequest(method: "GET", url: userinfo))
            #expect(answer.status == 200)
            #expect((try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["sub"] != nil)
            let resource = try #require(transport.to("/api/dpop/userinfo").only)
            #expect(resource.request.headerValue("Authorization") == "DPoP \(set.accessToken.reveal())")
            let resourceProof = try Self.proof(resource)
            #expect(resourceProof.claims["htm"] as? String == "GET" && resourceProof.claims["htu"] as? String == userinfo.absoluteString)
            #expect(resourceProof.claims["ath"] as? String == (try DPoPProof.ath(set.accessToken)))
            // glewlwyd's userinfo does not compare the proof's key with the token's cnf.jkt (Testing.md): checked here.
            #expect(try resourceProof.thumbprint() == pushedThumbprint)

            // The same request again with the same proof: glewlwyd has seen its jti.
            let replay = try await CurlTransport(timeout: 30, proxy: .none, caFile: URL(fileURLWithPath: server.pki("ca.crt")))
                .send(resource.request)
            #expect(replay.status == 401)
        }

        @Test("server nonces: the code exchange gets use_dpop_nonce and sends once more; refreshes use the nonce glewlwyd rotated in its last answer (one request each); userinfo too, and a nonce made stale by another client instance gets one 401 use_dpop_nonce and one retry")
        func nonces() async throws {
            let server = try GlewlwydServer.require()
            let transport = Self.transport(server)
            let provider = try Self.provider(server, instance: "dpopn", clientID: "nonce-code")
            let flow = try await AuthFlow(providers: [provider], transport: transport)
            let request = try await flow.authorizationRequest(provider: "glewlwyd")
            _ = try await flow.completeAuthorization(callbackURL: try await PushedAuthorizationIntegration.approve(server, request.url))
            _ = try await flow.refresh(provider: "glewlwyd")
            let refreshed = try await flow.refresh(provider: "glewlwyd")
            #expect(refreshed.isDPoPBound)

            // glewlwyd 2.7.5 (counter 1): a nonce is asked for once, and a new one comes with every second success.
            let token = transport.to("/api/dpopn/token")
            #expect(token.map(\.response.status) == [400, 200, 200, 200])
            #expect(Self.error(token[0]) == "use_dpop_nonce")
            let proofs = try token.map(Self.proof)
            let sentNonces = proofs.map { $0.claims["nonce"] as? String }
            let given = token.map { $0.response.headers["dpop-nonce"] }
            let first = try #require(given[0])
            let rotated = try #require(given[2], "the second refresh-free success brought a new nonce")
            #expect(rotated != first)
            #expect(sentNonces == [nil, first, first, rotated], "each request carries the latest nonce glewlwyd gave")
            #expect(Set(try proofs.map { try $0.thumbprint() }).count == 1 && Set(proofs.compactMap(\.jti)).count == 4)
            #expect(token.map { PushedAuthorizationIntegration.fields($0.request).first { $0.0 == "grant_type" }?.1 }
                    == ["authorization_code", "authorization_code", "refresh_token", "refresh_token"])

            // The resource shares the client's nonce at glewlwyd; the kept one works at once.
            let api = AuthorizingTransport(base: transport, source: flow.tokenSource(for: "glewlwyd"))
            let userinfo = URL(string: "\(server.base)/api/dpopn/userinfo")!
            #expect(try await api.send(HTTPRequest(method: "GET", url: userinfo)).status == 200)
            let atOnce = try #require(transport.to("/api/dpopn/userinfo").only)
            #expect(try Self.proof(atOnce).claims["nonce"] as? String == rotated)
            let current = atOnce.response.headers["dpop-nonce"] ?? rotated

            // Another instance of the client (its own key and store) makes glewlwyd move the nonce on.
            let other = Self.transport(server)
            let otherFlow = try await AuthFlow(providers: [provider], transport: other)
            try await otherFlow.clientCredentials(provider: "glewlwyd")
            try await otherFlow.clientCredentials(provider: "glewlwyd")
            #expect(other.to("/api/dpopn/token").map(\.response.status) == [400, 200, 200])
            #expect(other.to("/api/dpopn/token").compactMap { $0.response.headers["dpop-nonce"] }.last != current)

            transport.clear()
            #expect(try await api.send(HTTPRequest(method: "GET", url: userinfo)).status == 200)
            let retried = transport.to("/api/dpopn/userinfo")
            #expect(retried.map(\.response.status) == [401, 200])
            #expect(retried[0].response.headers["www-authenticate"]?.contains("use_dpop_nonce") == true)
            #expect(try Self.proof(retried[0]).claims["nonce"] as? String == current)
            #expect(try Self.proof(retried[1]).claims["nonce"] as? String == retried[0].response.headers["dpop-nonce"])
            #expect(transport.to("/api/dpopn/token").isEmpty, "a nonce is not a reason to renew the token")
        }

        @Test("the device grant with DPoP and server nonces: the user approves, the poll gets use_dpop_nonce once, then a token bound to the key")
        func deviceGrant() async throws {
            let server = try GlewlwydServer.require()
            let transport = Self.transport(server)
            // The test clock makes the poll's 1 s wait instant; proofs carry the real time (glewlwyd checks iat).
            let clock = TestClock()
            let flow = try await AuthFlow(providers: [Self.provider(server, instance: "dpopn", clientID: "nonce-device")], transport: transport,
                                          options: AuthFlow.Options(clock: clock, now: { Date() }))
            let code = try await flow.requestDeviceCode(provider: "glewlwyd")
            #expect(code.interval == 1)
            try await Self.approveDevice(server, instance: "dpopn", userCode: code.userCode)

            let authorization = try await flow.pollDeviceAuthorization(code)
            #expect(authorization.grant == .deviceCode && authorization.tokenType == "DPoP")
            #expect(clock.sleeps == [.seconds(1)])
            let polls = transport.to("/api/dpopn/token")
            #expect(polls.map(\.response.status) == [400, 200])
            #expect(Self.error(polls[0]) == "use_dpop_nonce")
            #expect(polls.allSatisfy {
                PushedAuthorizationIntegration.fields($0.request).first { $0.0 == "grant_type" }?.1 == GrantType.deviceCode.rawValue
            })
            let proofs = try polls.map(Self.proof)
            #expect(proofs[0].claims["nonce"] == nil && proofs[1].claims["nonce"] as? String == polls[0].response.headers["dpop-nonce"])
            let set = try await flow.tokenSet(for: "glewlwyd")
            #expect(try Self.boundThumbprint(set.accessToken) == proofs[1].thumbprint())
        }

        @Test("PAR with required nonces: glewlwyd refuses a push without its nonce (invalid_dpop_proof, one request, no loop); once a token request taught the nonce, the push carries it, and the code exchange the nonce rotated in the push's answer")
        func pushedWithNonces() async throws {
            let server = try GlewlwydServer.require()
            let transport = Self.transport(server)
            let flow = try await AuthFlow(providers: [Self.provider(server, instance: "dpopn", clientID: "nonce-par", pushed: true)],
                                          transport: transport)
            let refused = await #expect(throws: OAuthError.self) { _ = try await flow.authorizationRequest(provider: "glewlwyd") }
            #expect(refused?.response?.code == .invalidDPoPProof)
            #expect(transport.to("/api/dpopn/par").map(\.response.status) == [403])
            #expect(transport.to("/api/dpopn/par").first?.response.headers["dpop-nonce"] == nil, "glewlwyd gives no nonce at its PAR endpoint")

            try await flow.clientCredentials(provider: "glewlwyd")
            let taught = transport.to("/api/dpopn/token")
            #expect(taught.map(\.response.status) == [400, 200])
            let nonce = try #require(taught.first?.response.headers["dpop-nonce"])

            let request = try await flow.authorizationRequest(provider: "glewlwyd")
            let push = try #require(transport.to("/api/dpopn/par").last)
            #expect(push.response.status == 201)
            #expect(try Self.proof(push).claims["nonce"] as? String == nonce)
            let rotated = try #require(push.response.headers["dpop-nonce"], "glewlwyd's second success with the nonce rotates it")
            #expect(rotated != nonce)
            let authorization = try await flow.completeAuthorization(callbackURL: try await PushedAuthorizationIntegration.approve(server, request.url))
            #expect(authorization.grant == .authorizationCode && authorization.isDPoPBound)
            let exchange = try #require(transport.to("/api/dpopn/token").last)
            #expect(exchange.response.status == 200)
            #expect(try Self.proof(exchange).claims["nonce"] as? String == rotated)
            #expect(try Self.proof(exchange).thumbprint() == Self.proof(push).thumbprint())
        }

        @Test("a refresh proved with another key than the one the tokens are bound to: glewlwyd refuses it (invalid_dpop_proof)")
        func refreshWithAnotherKey() async throws {
            let server = try GlewlwydServer.require()
            let store = MemorySecretStore()
            let bound = try Self.provider(server, instance: "dpop", clientID: "dpop-secret")
            let flow = try await AuthFlow(providers: [bound], store: store, transport: Self.transport(server))
            let request = try await flow.authorizationRequest(provider: "glewlwyd")
            _ = try await flow.completeAuthorization(callbackURL: try await PushedAuthorizationIntegration.approve(server, request.url))

            var other = bound
            other.dpopKey = try ClientKey(contentsOfFile: server.pki("client.key"))
            other.dpopAlgorithm = .rs256
            let transport = Self.transport(server)
            let thief = try await AuthFlow(providers: [other], store: store, transport: transport)
            let error = await #expect(throws: OAuthError.self) { try await thief.refresh(provider: "glewlwyd") }
            #expect(error?.response?.code == .invalidDPoPProof)
            #expect(transport.to("/api/dpop/token").map(\.response.status) == [403])
        }

        /// The user's part of the device grant, as glewlwyd's login page does it: log in, then open the
        /// verification URI with the user code and `g_continue`; glewlwyd answers with its
        /// "deviceComplete" page.
        static func approveDevice(_ server: GlewlwydServer, instance: String, userCode: String) async throws {
            let (browser, cookie) = try await server.loggedInBrowser()
            let url = try #require(URL(string: "\(server.base)/api/\(instance)/device?code=\(userCode)&g_continue"))
            let answer = try await browser.send(HTTPRequest(method: "GET", url: url, headers: [("Cookie", cookie)]))
            try #require(answer.status == 302)
            try #require(answer.headers["location"]?.contains("prompt=deviceComplete") == true, "glewlwyd sent \(answer.headers["location"] ?? "")")
        }
    }
}
