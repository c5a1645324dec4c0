import Foundation
import OAuthFlow
import Testing

extension Integration {
    @Suite("Client credentials grant (RFC 6749 §4.4, §2.3.1)")
    struct ClientCredentials {
        @Test("A token for the client itself, with basic and with post authentication (RFC 6749 §4.4.2)",
              arguments: [Provider.ClientAuthentication.clientSecretBasic, .clientSecretPost])
        func clientCredentials(_ authentication: Provider.ClientAuthentication) async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(server.clientCredentialsProvider(authentication: authentication), transport: transport)

            let authorization = try await flow.clientCredentials(provider: "dot-cc")
            #expect(authorization.grant == .clientCredentials)
            #expect(!authorization.isRefreshable)
            #expect(Set(authorization.scopes) == ["read", "write"])

            let exchange = try #require(transport.exchanges(to: "/o/token/").only)
            #expect(exchange.form["grant_type"] == "client_credentials")
            #expect(exchange.form["scope"] == "read write")
            switch authentication {
            case .clientSecretBasic:
                let expected = Data("\(Fixture.confidentialCCClient):\(Fixture.confidentialCCSecret)".utf8).base64EncodedString()
                #expect(exchange.request.header("Authorization") == "Basic \(expected)")
                #expect(exchange.form["client_secret"] == nil)
            default:
                #expect(exchange.request.header("Authorization") == nil)
                #expect(exchange.form["client_id"] == Fixture.confidentialCCClient)
                #expect(exchange.form["client_secret"] == Fixture.confidentialCCSecret)
            }
            #expect(exchange.response?.status == 200)

            let introspection = try await ServerAPI(server).introspect(flow.accessToken(for: "dot-cc"))
            #expect(introspection.active)
            #expect(introspection.clientID == Fixture.confidentialCCClient)
            #expect(introspection.username == nil, "no user behind a client credentials token")
            #expect(introspection.scopes == ["read", "write"])
        }

        @Test("A wrong secret gives .serverRejected with invalid_client and HTTP 401 (RFC 6749 §5.2)",
              arguments: [Provider.ClientAuthentication.clientSecretBasic, .clientSecretPost])
        func wrongSecret(_ authentication: Provider.ClientAuthentication) async throws {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let provider = server.clientCredentialsProvider(secret: "not-the-secret", authentication: authentication)
            let flow = try await server.flow(provider, transport: transport)

            let error = await #expect(throws: OAuthError.self) {
                try await withTimeout("the invalid_client answer") { try await flow.clientCredentials(provider: "dot-cc") }
            }
            #expect(error?.code == .serverRejected)
            #expect(error?.response?.code == .invalidClient)
            #expect(error?.httpStatus == 401)
            #expect(error?.endpoint == .token)
            #expect(error?.recovery == .fixConfiguration)

            let exchange = try #require(transport.exchanges(to: "/o/token/").only)
            #expect(exchange.response?.status == 401)
            #expect(exchange.serverError == "invalid_client")
            #expect(flow.state.error?.response?.code == .invalidClient)
            #expect(await flow.authorization(for: "dot-cc") == nil)
        }
    }
}
