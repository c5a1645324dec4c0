import Foundation
import OAuthFlow
import TestSupport
import Testing

/// Logs alice in through the public PKCE client and returns the flow's token set.
private func signIn(_ flow: AuthFlow, provider: String = "dot-pkce") async throws -> TokenSet {
    let request = try await flow.authorizationRequest(provider: provider)
    _ = try await flow.completeAuthorization(callbackURL: userAuthorizes(request))
    return try await flow.tokenSet(for: provider)
}

/// A fresh `FileSecretStore` directory, removed after `body`.
private func withFileStore<T>(_ body: (URL) async throws -> T) async throws -> T {
    let parent = try TemporaryDirectory("oauthflow-it-store")
    defer { parent.remove() }
    return try await body(parent.url.appendingPathComponent("store", isDirectory: true))
}

/// The raw `refreshToken` of an entry the flow stored (versioned JSON: `{"version":1,"tokens":{…}}`).
private func storedRefreshToken(_ data: Data?) throws -> String? {
    let data = try #require(data, "nothing stored")
    let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    let tokens = try #require(object["tokens"] as? [String: Any])
    return tokens["refreshToken"] as? String
}

extension Integration {
    @Suite("Refresh with rotation (RFC 6749 §6, RFC 9700 §4.14.2)")
    struct Refresh {
        @Test("After a refresh the server rejects the old refresh token, and the store holds the new one")
        func rotation() async throws {
            let server = try IntegrationServer.require()
            let api = ServerAPI(server)
            try await withFileStore { directory in
                let store = try FileSecretStore(directory: directory)
                let transport = RecordingTransport()
                let flow = try await server.flow(server.pkceProvider(), store: store, transport: transport)
                let before = try await signIn(flow)
                let oldRefresh = try #require(before.refreshToken).reveal()

                try await flow.refresh(provider: "dot-pkce")
                let after = try await flow.tokenSet(for: "dot-pkce")
                let newRefresh = try #require(after.refreshToken).reveal()
                #expect(newRefresh != oldRefresh, "the server rotates refresh tokens")
                let request = try #require(transport.exchanges(to: "/o/token/").last)
                #expect(request.form["grant_type"] == "refresh_token")
                #expect(request.form["refresh_token"] == oldRefresh)
                #expect(request.response?.status == 200)

                // The server's view: the old refresh token and the old access token are dead, the new ones live.
                let (status, reply) = try await api.refresh(oldRefresh)
                #expect(status == 400)
                #expect(reply.error == "invalid_grant")
                #expect(try await api.introspect(before.accessToken).active == false)
                #expect(try await api.introspect(after.accessToken).active)

                // The store holds the new refresh token, on disk...
                #expect(try storedRefreshToken(await store.load("dot-pkce")) == newRefresh)
                let file = directory.appendingPathComponent("dot-pkce.json")
                #expect(try storedRefreshToken(Data(contentsOf: file)) == newRefresh)

                // ...and a new process restored from it refreshes fine at the server.
                let restoredTransport = RecordingTransport()
                let restored = try await server.flow(server.pkceProvider(), store: try FileSecretStore(directory: directory),
                                                     transport: restoredTransport)
                #expect(restored.state.authorization?.isRefreshable == true)
                try await restored.refresh(provider: "dot-pkce")
                let exchange = try #require(restoredTransport.exchanges(to: "/o/token/").only)
                #expect(exchange.form["refresh_token"] == newRefresh)
                #expect(exchange.response?.status == 200)
                #expect(try await api.introspect(restored.accessToken(for: "dot-pkce")).active)
            }
        }

        @Test("Reusing a rotated-out refresh token through the library gives .reauthorizationRequired (RFC 6749 §5.2 invalid_grant)")
        func reuseAfterRotation() async throws {
            let server = try IntegrationServer.require()
            let store = MemorySecretStore()
            let flow = try await server.flow(server.pkceProvider(), store: store)
            _ = try await signIn(flow)
            let stale = try #require(try await store.load("dot-pkce"))
            try await flow.refresh(provider: "dot-pkce")

            // Another process still holding the entry from before the rotation.
            let transport = RecordingTransport()
            let staleFlow = try await server.flow(server.pkceProvider(), store: MemorySecretStore(["dot-pkce": stale]),
                                                  transport: transport)
            let error = await #expect(throws: OAuthError.self) { try await staleFlow.refresh(provider: "dot-pkce") }
            #expect(error?.code == .reauthorizationRequired)
            #expect(error?.response?.code == .invalidGrant)
            #expect(error?.recovery == .reauthorize)
            let exchange = try #require(transport.exchanges(to: "/o/token/").only)
            #expect(exchange.response?.status == 400)
            #expect(exchange.serverError == "invalid_grant")
            #expect(await staleFlow.authorization(for: "dot-pkce")?.needsReauthorization == true)

            // Marked: the next call asks for a new login without another request to the server.
            let again = await #expect(throws: OAuthError.self) { try await staleFlow.refresh(provider: "dot-pkce") }
            #expect(again?.code == .reauthorizationRequired)
            #expect(transport.exchanges.count == 1)

            // The rotation's winner is unaffected.
            #expect(try await ServerAPI(server).introspect(flow.accessToken(for: "dot-pkce")).active)
        }
    }

    @Suite("Revocation (RFC 7009)")
    struct Revocation {
        @Test("revoke(provider:) ends the user's tokens at the server: introspection says active=false (RFC 7009 §2.1, RFC 7662 §2.2)")
        func userTokens() async throws {
            let server = try IntegrationServer.require()
            let api = ServerAPI(server)
            let transport = RecordingTransport()
            let flow = try await server.flow(server.pkceProvider(), transport: transport)
            let tokens = try await signIn(flow)
            #expect(try await api.introspect(tokens.accessToken).active)

            let result = try await flow.revoke(provider: "dot-pkce")
            #expect(result == RevocationResult(refreshTokenRevoked: true, accessTokenRevoked: true, heldTokens: [.refreshToken, .accessToken]))
            // The refresh token first, then the access token (RFC 7009 §2.1 lets a server keep it alive).
            let exchanges = transport.exchanges(to: "/o/revoke_token/")
            try #require(exchanges.count == 2)
            #expect(exchanges[0].form["token"] == tokens.refreshToken?.reveal())
            #expect(exchanges[0].form["token_type_hint"] == "refresh_token")
            #expect(exchanges[1].form["token"] == tokens.accessToken.reveal())
            #expect(exchanges[1].form["token_type_hint"] == "access_token")
            for exchange in exchanges {
                #expect(exchange.form["client_id"] == Fixture.publicPKCEClient)
                #expect(exchange.response?.status == 200)
            }

            #expect(try await api.introspect(tokens.accessToken).active == false)
            let (status, reply) = try await api.refresh(try #require(tokens.refreshToken).reveal())
            #expect(status == 400 && reply.error == "invalid_grant")
            #expect(await flow.authorization(for: "dot-pkce") == nil)
            #expect(flow.state == .empty(provider: "dot-pkce"))
        }

        @Test("A confidential client's access token is revoked with client authentication (RFC 7009 §2.1)",
              arguments: [Provider.ClientAuthentication.clientSecretBasic, .clientSecretPost])
        func clientCredentialsToken(_ authentication: Provider.ClientAuthentication) async throws {
            let server = try IntegrationServer.require()
            let api = ServerAPI(server)
            let transport = RecordingTransport()
            let flow = try await server.flow(server.clientCredentialsProvider(authentication: authentication), transport: transport)
            _ = try await flow.clientCredentials(provider: "dot-cc")
            let token = try await flow.accessToken(for: "dot-cc")
            #expect(try await api.introspect(token).active)

            let result = try await flow.revoke(provider: "dot-cc")
            #expect(result == RevocationResult(accessTokenRevoked: true, heldTokens: [.accessToken]))
            let exchange = try #require(transport.exchanges(to: "/o/revoke_token/").only)
            #expect(exchange.form["token_type_hint"] == "access_token")
            #expect((exchange.request.header("Authorization") != nil) == (authentication == .clientSecretBasic))
            #expect((exchange.form["client_secret"] != nil) == (authentication == .clientSecretPost))
            #expect(exchange.response?.status == 200)
            #expect(try await api.introspect(token).active == false)
        }
    }
}
