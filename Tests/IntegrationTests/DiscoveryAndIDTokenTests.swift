import Foundation
import OAuthFlow
import OAuthFlowURLSession
import Testing

extension Integration {
    @Suite("OpenID Connect: discovery, ID tokens on the server's RS256 key, key rotation (Discovery 1.0, Core §3.1.3.7)")
    struct DiscoveryAndIDTokens {
        /// `it-public-pkce` configured from the issuer alone: every endpoint comes from discovery.
        func issuerOnlyProvider(_ server: IntegrationServer, id: String = "dot-discovered") -> Provider {
            Provider(id: id, issuer: server.issuer, clientID: Fixture.publicPKCEClient,
                     redirectURI: URL(string: Fixture.pkceRedirect), scopes: ["openid", "profile", "read"])
        }

        /// One browser login as alice; returns the authorization.
        func login(_ flow: AuthFlow, provider: String) async throws -> Authorization {
            let request = try await flow.authorizationRequest(provider: provider)
            return try await flow.completeAuthorization(callbackURL: try await userAuthorizes(request))
        }

        @Test("A provider configured from issuer alone: discovery fills the endpoints, the ID token validates on the real RS256 key")
        func issuerOnly() async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(issuerOnlyProvider(server), transport: transport)

            let metadata = try await flow.metadata(for: flow.provider("dot-discovered"))
            #expect(metadata.issuer == server.issuer)
            #expect(metadata.tokenEndpoint == server.url("/o/token/"))
            #expect(metadata.authorizationResponseIssParameterSupported)

            let authorization = try await login(flow, provider: "dot-discovered")
            let idToken = try #require(authorization.idToken, "the ID token was validated and kept")
            #expect(idToken.subject == "1", "alice")
            #expect(idToken.issuer == server.issuer)
            #expect(idToken.audience == [Fixture.publicPKCEClient])
            #expect(idToken.nonce != nil)
            #expect(transport.exchanges.map(\.path) == [
                "/o/.well-known/openid-configuration", "/o/token/", "/o/.well-known/jwks.json",
            ])
            #expect(transport.exchanges(to: "/o/token/").only?.response?.status == 200)

            // The discovered token endpoint serves the refresh too, and the refreshed ID token keeps sub.
            let refreshed = try await flow.refresh(provider: "dot-discovered")
            #expect(refreshed.idToken?.subject == "1")
            #expect(transport.exchanges.filter { $0.path == "/o/.well-known/openid-configuration" }.count == 1, "cached")
            #expect(transport.exchanges.filter { $0.path == "/o/.well-known/jwks.json" }.count == 1, "cached")
        }

        @Test("The server's signing key rotated mid-test: the next login refetches the JWKS once and still validates")
        func keyRotation() async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(issuerOnlyProvider(server), transport: transport)
            let jwksPath = "/o/.well-known/jwks.json"

            let first = try await login(flow, provider: "dot-discovered")
            #expect(first.idToken?.subject == "1")
            #expect(transport.exchanges(to: jwksPath).count == 1)

            let rotation = try await ServerAPI(server).post("/it/rotate-signing-key", [])
            try #require(rotation.status == 200, "the test server rotates its key")
            let kids = try JSONDecoder().decode([String: String].self, from: rotation.body)
            #expect(kids["kid"] != kids["previous_kid"])

            let second = try await login(flow, provider: "dot-discovered")
            #expect(second.idToken?.subject == "1")
            let fetches = transport.exchanges(to: jwksPath)
            #expect(fetches.count == 2, "one refetch for the unknown kid, no restart")
            let body = try #require(fetches.last?.response?.body)
            #expect(String(decoding: body, as: UTF8.self).contains(kids["kid"] ?? "?"))
            #expect(!String(decoding: body, as: UTF8.self).contains(kids["previous_kid"] ?? "?"), "the old key is gone")
        }

        @Test("A tampered ID token from the real server is rejected and nothing is stored")
        func tamperedRejected() async throws {
            let server = try IntegrationServer.require()
            let store = MemorySecretStore()
            let flow = try await AuthFlow(providers: [issuerOnlyProvider(server)], store: store, transport: TamperingTransport())
            let error = await #expect(throws: OAuthError.self) { try await login(flow, provider: "dot-discovered") }
            #expect(error?.code == .idTokenRejected)
            #expect(try await store.keys().isEmpty)
            #expect(flow.state.error?.code == .idTokenRejected)
        }
    }
}

/// Passes everything through, but swaps the `sub` of every ID token in a token response for
/// another (re-encoding the payload without re-signing), as a man in the middle would.
struct TamperingTransport: HTTPTransport {
    let base = URLSessionTransport(timeout: 15)

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        var response = try await base.send(request)
        guard request.url.path.hasSuffix("/o/token"), var object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any],
              let token = object["id_token"] as? String
        else { return response }
        var parts = token.split(separator: ".").map(String.init)
        guard parts.count == 3, let payload = Data(base64URL: parts[1]),
              var claims = (try? JSONSerialization.jsonObject(with: payload)) as? [String: Any],
              let changed = try? JSONSerialization.data(withJSONObject: { claims["sub"] = "mallory"; return claims }())
        else { return response }
        parts[1] = changed.base64URLEncoded
        object["id_token"] = parts.joined(separator: ".")
        response.body = (try? JSONSerialization.data(withJSONObject: object)) ?? response.body
        return response
    }
}

extension Data {
    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }

    var base64URLEncoded: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
