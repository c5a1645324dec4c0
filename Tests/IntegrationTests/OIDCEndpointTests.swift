import Foundation
import OAuthFlow
import Testing

extension Integration {
    @Suite("Userinfo, introspection and revocation through the library (OpenID Connect Core §5.3, RFC 7662, RFC 7009)")
    struct OIDCEndpoints {
        @Test("userInfo(provider:) after an authorization code login: Bearer GET, claims of alice, sub equal to the ID token's")
        func userInfo() async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(server.pkceProvider(), transport: transport)
            let request = try await flow.authorizationRequest(provider: "dot-pkce")
            let authorization = try await flow.completeAuthorization(callbackURL: userAuthorizes(request))
            #expect(authorization.hasIDToken)

            let info = try await flow.userInfo(provider: "dot-pkce")

            #expect(info.subject == "1")
            #expect(info.claims["preferred_username"]?.stringValue == Fixture.username)
            #expect(info.claims["email"]?.stringValue == "alice@example.com")
            #expect(info.claims["email_verified"] != nil)
            let exchange = try #require(transport.exchanges(to: "/o/userinfo/").only)
            #expect(exchange.request.method == "GET")
            #expect(exchange.request.header("Authorization") == "Bearer \(try await flow.accessToken(for: "dot-pkce").reveal())")
            #expect(exchange.response?.status == 200)
        }

        @Test("introspect(provider:) of the access token is active; after revoke(provider:) a flow holding the old entry sees it inactive")
        func introspectThenRevoke() async throws {
            let server = try IntegrationServer.require()
            let store = MemorySecretStore()
            let transport = RecordingTransport()
            let flow = try await server.flow(server.webProvider(), store: store, transport: transport)
            let request = try await flow.authorizationRequest(provider: "dot-web")
            _ = try await flow.completeAuthorization(callbackURL: userAuthorizes(request))
            let held = try #require(try await store.load("dot-web"))

            let active = try await flow.introspect(provider: "dot-web")
            #expect(active.active)
            #expect(active.clientID == Fixture.confidentialWebClient)
            #expect(active.username == Fixture.username)
            #expect(Set(active.scopes) == ["openid", "read", "write"])
            let expiresAt = try #require(active.expiresAt)
            #expect(expiresAt > Date() && expiresAt < Date().addingTimeInterval(3700))
            let exchange = try #require(transport.exchanges(to: "/o/introspect/").only)
            let basic = Data("\(Fixture.confidentialWebClient):\(Fixture.confidentialWebSecret)".utf8).base64EncodedString()
            #expect(exchange.request.header("Authorization") == "Basic \(basic)")
            #expect(exchange.form["token_type_hint"] == "access_token")

            let result = try await flow.revoke(provider: "dot-web")
            #expect(result.isComplete && result.refreshTokenRevoked && result.accessTokenRevoked)
            #expect(await flow.authorization(for: "dot-web") == nil)

            // Another process still holding the entry asks the server: inactive.
            let stale = try await server.flow(server.webProvider(), store: MemorySecretStore(["dot-web": held]))
            let inactive = try await stale.introspect(provider: "dot-web")
            #expect(!inactive.active)
            #expect(inactive.clientID == nil && inactive.scopes.isEmpty)
        }
    }
}
