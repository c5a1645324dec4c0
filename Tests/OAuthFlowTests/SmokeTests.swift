import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Test("client credentials over the mock: wire and result")
func smokeClientCredentials() async throws {
    let mock = MockProvider()
    mock.script(.token, [.token(access: "at-123", expiresIn: 3600, scope: "read")])
    let flow = try await AuthFlow(providers: [mock.provider(id: "svc", clientSecret: "s3cr:et")], transport: mock.transport())
    let auth = try await flow.clientCredentials(provider: "svc")
    #expect(auth.scopes == ["read"])
    let sent = try #require(mock.requests(.token).first)
    #expect(sent.form["grant_type"] == "client_credentials")
    #expect(sent.basicCredentials?.secret == "s3cr:et")
    #expect(try await flow.accessToken(for: "svc").reveal() == "at-123")
}

@Test("device flow polls through pending and slow_down")
func smokeDevice() async throws {
    let mock = MockProvider()
    let clock = TestClock()
    mock.script(.deviceAuthorization, [.deviceCode(interval: 2)])
    mock.script(.token, [.oauthError("authorization_pending"), .oauthError("slow_down"), .token(access: "at-9", refresh: "rt-9")])
    let flow = try await AuthFlow(providers: [mock.provider(id: "dev")], transport: mock.transport(), options: clock.options())
    let auth = try await flow.authorizeWithDeviceCode(provider: "dev")
    #expect(auth.isRefreshable)
    #expect(clock.sleeps == [.seconds(2), .seconds(2), .seconds(7)])
}
