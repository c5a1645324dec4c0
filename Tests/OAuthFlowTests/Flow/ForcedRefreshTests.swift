import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

/// Regression: a forced refresh of a still-valid token must reach the token endpoint, even after
/// the stored entry went through a JSON round trip (whose dates may differ in the last bits).
@Test("refresh(provider:) posts a refresh even while the access token is valid (RFC 6749 §6)")
func forcedRefreshOfValidToken() async throws {
    let mock = MockProvider()
    // A start whose Date → seconds-since-1970 → Date round trip is lossy (as most real dates are).
    let clock = TestClock(start: Date(timeIntervalSinceReferenceDate: 800_000_000.000_246_914))
    mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
    mock.script(.token, [.token(access: "at-1", refresh: "rt-1"), .token(access: "at-2", refresh: "rt-2")])
    let store = MemorySecretStore()
    let flow = try await AuthFlow(providers: [mock.provider(id: "p")], store: store, transport: mock.transport(), options: clock.options())
    _ = try await flow.authorizeWithDeviceCode(provider: "p")

    try await flow.refresh(provider: "p")

    let refresh = try #require(mock.requests(.token).last)
    #expect(refresh.form["grant_type"] == "refresh_token")
    #expect(refresh.form["refresh_token"] == "rt-1")
    #expect(try await flow.accessToken(for: "p").reveal() == "at-2")
    let stored = try #require(try await store.load("p"))
    #expect(String(decoding: stored, as: UTF8.self).contains("rt-2"))
}

/// A second process that renewed under the lock is seen: its token is used and no request is sent.
@Test("a token renewed by another process is used, not refreshed again")
func renewedByAnotherProcess() async throws {
    let mock = MockProvider()
    let clock = TestClock()
    mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
    mock.script(.token, [.token(access: "at-1", expiresIn: 600, refresh: "rt-1"), .token(access: "at-2", expiresIn: 600, refresh: "rt-2")])
    let store = MemorySecretStore()
    let first = try await AuthFlow(providers: [mock.provider(id: "p")], store: store, transport: mock.transport(), options: clock.options())
    _ = try await first.authorizeWithDeviceCode(provider: "p")
    let second = try await AuthFlow(providers: [mock.provider(id: "p")], store: store, transport: mock.transport(), options: clock.options())

    clock.advance(by: .seconds(590))                      // inside the refresh margin for both
    #expect(try await second.accessToken(for: "p").reveal() == "at-2")
    let requestsAfterSecond = mock.requests(.token).count
    #expect(try await first.accessToken(for: "p").reveal() == "at-2")   // re-read under the lock
    #expect(mock.requests(.token).count == requestsAfterSecond)
}
