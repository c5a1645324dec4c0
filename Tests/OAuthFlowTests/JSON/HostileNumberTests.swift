import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

/// Numbers a server chooses are range-checked before they are used: 2^63, 1e308, negative and
/// fractional values are typed errors, never a trap (the process used to die with SIGILL).
@Suite("Hostile numbers in responses and stored entries", .timeLimit(.minutes(1)))
struct HostileNumberTests {
    let mock = MockProvider()
    let clock = TestClock()

    static let badLifetimes: [String] = [
        "9223372036854775807", "9223372036854775808", "18446744073709551616", "1e308", "-1e308", "-1", "1.5",
        #""9223372036854775808""#, #""-5""#, #""1e3""#, #""abc""#, "true", "[]", "{}",
    ]

    @Test("token response: a hostile expires_in is .invalidResponse naming expires_in", arguments: badLifetimes)
    func tokenExpiresIn(_ raw: String) async throws {
        mock.script(.token, [.json(#"{"access_token":"AT","token_type":"Bearer","expires_in":\#(raw)}"#)])
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "svc", clientSecret: "s")], transport: mock.transport(), options: options(clock))
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message?.contains("expires_in") == true)
        #expect(await flow.authorization(for: "svc") == nil)
    }

    @Test("token response: whole numbers in any JSON spelling are accepted", arguments: [
        ("3600", 3600), ("3600.0", 3600), ("3.6e3", 3600), (#""3599""#, 3599), ("0", 0), ("2147483647", 2_147_483_647),
    ])
    func tokenExpiresInAccepted(_ raw: String, _ seconds: Int) async throws {
        mock.script(.token, [.json(#"{"access_token":"AT","token_type":"Bearer","expires_in":\#(raw)}"#)])
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "svc", clientSecret: "s")], transport: mock.transport(), options: options(clock))
        let authorization = try await flow.clientCredentials(provider: "svc")
        #expect(authorization.expiresAt == clock.date.addingTimeInterval(TimeInterval(seconds)))
    }

    @Test("device response: a hostile expires_in or interval is .invalidResponse (RFC 8628 §3.2)", arguments: [
        ("expires_in", "9223372036854775808"), ("expires_in", "1e308"), ("expires_in", "0"), ("expires_in", "-600"),
        ("expires_in", "1.5"), ("interval", "9223372036854775807"), ("interval", "1e308"), ("interval", "-5"), ("interval", "2.5"),
        ("interval", #""x""#),
    ])
    func deviceNumbers(_ key: String, _ raw: String) async throws {
        var members = [
            "device_code": #""dc""#, "user_code": #""ABCD""#, "verification_uri": #""https://example.com/device""#,
            "expires_in": "600", "interval": "5",
        ]
        members[key] = raw
        let body = "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        mock.script(.deviceAuthorization, [.json(body)])
        let flow = try await AuthFlow(providers: [mock.provider(id: "dev")], transport: mock.transport(), options: options(clock))
        let error = await #expect(throws: OAuthError.self) { try await flow.requestDeviceCode(provider: "dev") }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .deviceAuthorization)
        #expect(error?.message?.contains(key) == true)
    }

    @Test("device response: interval 0 is raised to 1 s so polling never spins (RFC 8628 §3.2)")
    func deviceIntervalZero() async throws {
        mock.script(.deviceAuthorization, [.json(
            #"{"device_code":"dc","user_code":"ABCD","verification_uri":"https://example.com/device","expires_in":600,"interval":0}"#)])
        let flow = try await AuthFlow(providers: [mock.provider(id: "dev")], transport: mock.transport(), options: options(clock))
        let code = try await flow.requestDeviceCode(provider: "dev")
        #expect(code.interval == 1)
    }

    @Test("a duplicated member in a token response is refused, not silently last-wins")
    func duplicateMember() async throws {
        mock.script(.token, [.json(#"{"access_token":"A1","token_type":"Bearer","access_token":"A2"}"#)])
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "svc", clientSecret: "s")], transport: mock.transport(), options: options(clock))
        let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message?.contains("appears twice") == true)
    }

    @Test("a stored entry with a hostile time is a .storage error at restore, and stays on disk", arguments: [
        #""expiresAt":1e300"#, #""expiresAt":"9223372036854775808""#, #""expiresAt":-1"#, #""issuedAt":1e300"#,
    ])
    func storedHostileTime(_ member: String) async throws {
        let base = [#""accessToken":"AT""#, #""grant":"client_credentials""#, #""issuedAt":1000"#,
                    #""needsReauthorization":false"#, #""providerID":"svc""#, #""scopes":[]"#, #""tokenType":"Bearer""#]
        let name = member.split(separator: ":").first!
        let members = base.filter { !$0.hasPrefix(name + ":") } + [member]
        let entry = Data(("{\"tokens\":{" + members.joined(separator: ",") + "},\"version\":1}").utf8)
        let store = MemorySecretStore(["svc": entry])
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "svc", clientSecret: "s")], store: store, transport: mock.transport(),
            options: options(clock))
        #expect(await flow.authorization(for: "svc") == nil)
        guard case .error(let provider, let error) = flow.state else {
            Issue.record("expected .error, got \(flow.state)")
            return
        }
        #expect(provider == "svc" && error.code == .storage)
        #expect(try await store.load("svc") == entry)
    }
}
