import Foundation
import OAuthFlow
import Testing

extension Integration {
    @Suite("Authorization code grant with PKCE (RFC 6749 §4.1, RFC 7636, RFC 9207)")
    struct AuthorizationCode {
        @Test("Public client: PKCE S256 end to end; the stored token works at userinfo and introspection (RFC 7636 §4, RFC 7662 §2.2)")
        func publicClientEndToEnd() async throws {
            let server = try IntegrationServer.require()
            let api = ServerAPI(server)
            let transport = RecordingTransport()
            let flow = try await server.flow(server.pkceProvider(), transport: transport)
            let recorder = StateRecorder(flow)

            let request = try await flow.authorizationRequest(provider: "dot-pkce")
            let sent = Form.query(request.url)
            #expect(sent["client_id"] == Fixture.publicPKCEClient)
            #expect(sent["code_challenge_method"] == "S256")
            #expect(sent["code_challenge"]?.count == 43)

            let callback = try await userAuthorizes(request)
            let returned = Form.query(callback)
            #expect(returned["state"] == request.state.reveal())
            #expect(returned["iss"] == server.issuer, "the server sends RFC 9207 iss")
            let code = try #require(returned["code"])

            let authorization = try await flow.completeAuthorization(callbackURL: callback)
            #expect(authorization.grant == .authorizationCode)
            #expect(authorization.isRefreshable && authorization.hasIDToken)
            #expect(authorization.idToken?.subject == "1", "validated against the server's RS256 key")
            #expect(Set(authorization.scopes) == ["openid", "profile", "email", "read"])
            let states = try await recorder.finished()
            #expect(states.map(\.name) == ["empty", "authorizing", "requestingAccessToken", "authorized"])
            #expect(states.dropFirst().allSatisfy { $0.providerID == "dot-pkce" })
            #expect(states.last?.authorization == authorization)

            // What went over the wire, and the server's answer to it.
            let exchange = try #require(transport.exchanges(to: "/o/token/").only)
            #expect(exchange.form["grant_type"] == "authorization_code")
            #expect(exchange.form["code"] == code)
            #expect(exchange.form["code_verifier"] == request.codeVerifier?.reveal())
            #expect(exchange.form["client_id"] == Fixture.publicPKCEClient)
            #expect(exchange.request.header("Authorization") == nil)
            #expect(exchange.response?.status == 200)

            // The server accepts the stored token.
            let token = try await flow.accessToken(for: "dot-pkce")
            let (status, claims) = try await api.userinfo(token)
            #expect(status == 200)
            #expect(claims?.sub == "1")
            #expect(claims?.preferredUsername == Fixture.username)
            #expect(claims?.email == "alice@example.com")
            let introspection = try await api.introspect(token)
            #expect(introspection.active)
            #expect(introspection.clientID == Fixture.publicPKCEClient)
            #expect(introspection.username == Fixture.username)
            #expect(introspection.scopes == ["openid", "profile", "email", "read"])

            // The state is single use: the same callback again is refused without a request.
            let replay = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: callback) }
            #expect(replay?.code == .stateMismatch)
            // The code exchange and the JWKS that verified the ID token (jwksURL is in the catalog); nothing for the replay.
            #expect(transport.exchanges.map(\.path) == ["/o/token/", "/o/.well-known/jwks.json"])
        }

        @Test("Confidential web client authenticates with client_secret_basic (RFC 6749 §2.3.1, §4.1.3)", arguments: [true, false])
        func confidentialWebClient(usePKCE: Bool) async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(server.webProvider(), transport: transport)

            let request = try await flow.authorizationRequest(provider: "dot-web", usePKCE: usePKCE)
            #expect((Form.query(request.url)["code_challenge"] != nil) == usePKCE)
            let callback = try await userAuthorizes(request)
            let authorization = try await flow.completeAuthorization(callbackURL: callback)
            #expect(authorization.grant == .authorizationCode && authorization.hasIDToken)

            let exchange = try #require(transport.exchanges(to: "/o/token/").only)
            let expected = Data("\(Fixture.confidentialWebClient):\(Fixture.confidentialWebSecret)".utf8).base64EncodedString()
            #expect(exchange.request.header("Authorization") == "Basic \(expected)")
            #expect(exchange.form["client_secret"] == nil)
            #expect((exchange.form["code_verifier"] != nil) == usePKCE)
            #expect(exchange.response?.status == 200)

            let introspection = try await ServerAPI(server).introspect(flow.accessToken(for: "dot-web"))
            #expect(introspection.active)
            #expect(introspection.clientID == Fixture.confidentialWebClient)
            #expect(introspection.username == Fixture.username)
            #expect(introspection.scopes == ["openid", "read", "write"])
        }

        @Test("A tampered state is rejected before any code exchange; the code stays unspent (RFC 6749 §10.12)")
        func tamperedState() async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(server.pkceProvider(), transport: transport)

            let request = try await flow.authorizationRequest(provider: "dot-pkce")
            let callback = try await userAuthorizes(request)
            let code = try #require(Form.query(callback)["code"])
            let state = request.state.reveal()
            let forged = String(state.dropLast()) + (state.last == "A" ? "B" : "A")
            let tampered = try replacingQuery(callback, "state", with: forged)

            let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: tampered) }
            #expect(error?.code == .stateMismatch)
            #expect(transport.exchanges.isEmpty, "no request may leave before state is checked")
            #expect(await flow.authorization(for: "dot-pkce") == nil)

            // The server still honours the code: nobody redeemed it.
            let (status, reply) = try await ServerAPI(server).token(directExchange(code: code, request: request))
            #expect(status == 200)
            #expect(reply.accessToken != nil)
        }

        enum IssuerCase: String, CaseIterable, Sendable {
            case matching, wrong
        }

        @Test("The callback's iss must equal the configured issuer (RFC 9207 §2.4)", arguments: IssuerCase.allCases)
        func issuerCheck(_ issuerCase: IssuerCase) async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let configured = issuerCase == .matching ? server.issuer : "\(server.origin)/not-the-issuer"
            let flow = try await server.flow(server.pkceProvider(issuer: configured), transport: transport)

            let request = try await flow.authorizationRequest(provider: "dot-pkce")
            let callback = try await userAuthorizes(request)
            #expect(Form.query(callback)["iss"] == server.issuer)
            let code = try #require(Form.query(callback)["code"])

            switch issuerCase {
            case .matching:
                let authorization = try await flow.completeAuthorization(callbackURL: callback)
                #expect(authorization.grant == .authorizationCode)
                #expect(transport.exchanges(to: "/o/token/").only?.response?.status == 200)
            case .wrong:
                let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: callback) }
                #expect(error?.code == .invalidCallback)
                #expect(error?.recovery == .reauthorize)
                #expect(transport.exchanges.isEmpty, "a mix-up must be caught before the code is sent anywhere")
                #expect(flow.state.error?.code == .invalidCallback)
                let (status, _) = try await ServerAPI(server).token(directExchange(code: code, request: request))
                #expect(status == 200, "the code was not spent")
            }
        }

        @Test("The user denies consent: access_denied reaches the caller as .accessDenied (RFC 6749 §4.1.2.1)")
        func consentDenied() async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(server.pkceProvider(), transport: transport)

            let request = try await flow.authorizationRequest(provider: "dot-pkce")
            let callback = try await userAuthorizes(request, approve: false)
            #expect(Form.query(callback)["error"] == "access_denied")
            #expect(Form.query(callback)["state"] == request.state.reveal())

            let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: callback) }
            #expect(error?.code == .accessDenied)
            #expect(error?.recovery == OAuthError.Recovery.none)
            #expect(transport.exchanges.isEmpty)
        }
    }
}

extension Array {
    /// The single element, or nil when there are none or several.
    var only: Element? { count == 1 ? first : nil }
}
