import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Secrets never print", .timeLimit(.minutes(1)))
struct RedactionTests {
    /// Every type that holds a secret, built the way an application meets it.
    enum Specimen: String, CaseIterable, Sendable {
        case secret, tokenSet, deviceCode, authorizationRequest, authorizationResponse, provider, pkce
        case stateReceivedDeviceCode, stateAuthorized, stateError, exchangeError, transportError
        case httpRequest, httpResponse, flow

        /// The value and the raw secrets it holds.
        func make() async throws -> (value: any Sendable, secrets: [String]) {
            let mock = MockProvider()
            let clock = TestClock()
            let confidential = mock.provider(id: "web", clientID: "client-1", clientSecret: "SECRET-client", scopes: ["openid"])
            func flow(_ providers: Provider...) async throws -> AuthFlow {
                try await AuthFlow(providers: providers, transport: mock.transport(), options: options(clock))
            }
            switch self {
            case .secret:
                return (Secret("SECRET-raw"), ["SECRET-raw"])
            case .tokenSet:
                let set = TokenSet(
                    providerID: "p", accessToken: Secret("SECRET-at"), refreshToken: Secret("SECRET-rt"), idToken: Secret("SECRET-id"),
                    scopes: ["read"], issuedAt: clock.date, expiresAt: clock.date, grant: .deviceCode)
                return (set, ["SECRET-at", "SECRET-rt", "SECRET-id"])
            case .deviceCode, .stateReceivedDeviceCode:
                mock.script(.deviceAuthorization, [.deviceCode(device: "SECRET-device")])
                let flow = try await flow(confidential)
                let code = try await flow.requestDeviceCode(provider: "web")
                let value: any Sendable = self == .deviceCode ? code : State.receivedDeviceCode(provider: "web", code)
                return (value, ["SECRET-device", "SECRET-client"])
            case .authorizationRequest:
                let request = try await flow(confidential).authorizationRequest(provider: "web")
                return (request, try Self.secrets(of: request))
            case .authorizationResponse:
                let response = try AuthorizationResponse(callbackURL: callback(query: "code=SECRET-code&state=SECRET-state&iss=x"))
                return (response, ["SECRET-code", "SECRET-state"])
            case .provider:
                return (confidential, ["SECRET-client"])
            case .pkce:
                let pkce = try PKCE()
                return (pkce, [pkce.verifier.reveal()])
            case .stateAuthorized:
                let flow = try await flow(confidential)
                let authorization = try await authorizeByDevice(
                    flow, mock: mock, provider: "web", access: "SECRET-at", refresh: "SECRET-rt")
                return (State.authorized(provider: "web", authorization), ["SECRET-at", "SECRET-rt", "SECRET-client"])
            case .exchangeError, .stateError:
                mock.script(.token, [.oauthError("invalid_grant", description: "bad code")])
                let flow = try await flow(confidential)
                let request = try await flow.authorizationRequest(provider: "web")
                var secrets = try Self.secrets(of: request) + ["SECRET-client", "SECRET-code"]
                do {
                    _ = try await flow.completeAuthorization(callbackURL: callback(request, code: "SECRET-code"))
                } catch {
                    secrets += [Data("client-1:SECRET-client".utf8).base64EncodedString()]
                    return (self == .exchangeError ? error : State.error(provider: "web", error), secrets)
                }
                throw OAuthError(.configuration, message: "the exchange should have failed")
            case .transportError:
                var gone: MockProvider? = MockProvider()
                let provider = gone!.provider(id: "svc", clientSecret: "SECRET-client", clientAuthentication: .clientSecretPost)
                gone = nil
                let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))
                do {
                    _ = try await flow.clientCredentials(provider: "svc")
                } catch {
                    return (error, ["SECRET-client"])
                }
                throw OAuthError(.configuration, message: "the request should have failed")
            case .httpRequest:
                let basic = Data("client-1:SECRET-client".utf8).base64EncodedString()
                let request = HTTPRequest(
                    method: "POST", url: mock.url(.token),
                    headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic \(basic)")],
                    body: Data("grant_type=refresh_token&refresh_token=SECRET-rt".utf8))
                return (request, [basic, "SECRET-rt", "SECRET-client"])
            case .httpResponse:
                let response = HTTPResponse(
                    status: 200, headers: ["Content-Type": "application/json", "Set-Cookie": "sid=SECRET-cookie"],
                    body: Data(#"{"access_token":"SECRET-at","refresh_token":"SECRET-rt"}"#.utf8))
                return (response, ["SECRET-at", "SECRET-rt", "SECRET-cookie"])
            case .flow:
                // No issuer: the ID token is kept as sent, unvalidated (Documentation/OIDC.md).
                mock.script(.token, [.token(access: "SECRET-at", refresh: "SECRET-rt", idToken: "SECRET-id")])
                let flow = try await flow(confidential)
                let first = try await flow.authorizationRequest(provider: "web")
                _ = try await flow.completeAuthorization(callbackURL: callback(first, code: "SECRET-code"))
                let pending = try await flow.authorizationRequest(provider: "web")
                return (flow, try Self.secrets(of: pending) + ["SECRET-at", "SECRET-rt", "SECRET-id", "SECRET-client", "SECRET-code"])
            }
        }

        static func secrets(of request: AuthorizationRequest) throws -> [String] {
            [request.state.reveal(), try #require(request.codeVerifier).reveal(), try #require(request.nonce).reveal()]
        }
    }

    /// Every way a value commonly ends up as text.
    static func renderings(_ value: Any) -> [(String, String)] {
        var dumped = ""
        dump(value, to: &dumped)
        var dumpedInArray = ""
        dump([value], to: &dumpedInArray)
        return [
            ("String(describing:)", String(describing: value)), ("String(reflecting:)", String(reflecting: value)),
            ("dump", dumped), ("interpolation", "\(value)"), ("in an array", String(describing: [value])),
            ("optional", String(reflecting: Optional(value))), ("dump in an array", dumpedInArray),
        ]
    }

    @Test("description, debugDescription, dump and interpolation never contain a secret", arguments: Specimen.allCases)
    func neverPrints(_ specimen: Specimen) async throws {
        let (value, secrets) = try await specimen.make()
        #expect(!secrets.isEmpty)
        for (how, text) in Self.renderings(value) {
            #expect(!text.isEmpty)
            for secret in secrets {
                #expect(!text.contains(secret), "\(specimen.rawValue) leaks a secret through \(how)")
            }
        }
        if let error = value as? OAuthError {
            for secret in secrets {
                #expect(!(error.message ?? "").contains(secret))
                #expect(!error.localizedDescription.contains(secret))
            }
        }
    }

    @Test("Secret still reveals its value and encodes it for stores")
    func secretStillWorks() throws {
        let secret = Secret("SECRET-raw")
        #expect(secret.reveal() == "SECRET-raw")
        #expect(String(decoding: try JSONEncoder().encode([secret]), as: UTF8.self) == #"["SECRET-raw"]"#)
        #expect(secret.constantTimeEquals(Secret("SECRET-raw")))
        #expect(!secret.constantTimeEquals(Secret("SECRET-raX")))
    }

    @Test("log records never hold a secret across device, refresh, code and failure paths, even with debug on")
    func logsNeverLeak() async throws {
        let mock = MockProvider()
        let clock = TestClock()
        let log = LogCollector()
        let provider = mock.provider(
            id: "dev", clientID: "client-1", clientSecret: "SECRET-client", clientAuthentication: .clientSecretPost,
            scopes: ["openid"], debug: true)
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock, log: log))

        mock.script(.deviceAuthorization, [.deviceCode(device: "SECRET-device", user: "USER-CODE", interval: 1)])
        mock.script(.token, [
            .oauthError("authorization_pending"), .oauthError("slow_down"),
            .token(access: "SECRET-at-1", refresh: "SECRET-rt-1", idToken: "SECRET-id-1"),
            .token(access: "SECRET-at-2", refresh: "SECRET-rt-2"),
            .oauthError("invalid_grant", description: "revoked"),
            .token(access: "SECRET-at-3", refresh: "SECRET-rt-3", idToken: "SECRET-id-3"),
        ])
        _ = try await flow.authorizeWithDeviceCode(provider: "dev")
        clock.advance(by: .seconds(3600))
        _ = try await flow.accessToken(for: "dev")
        clock.advance(by: .seconds(3600))
        await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "dev") }

        let request = try await flow.authorizationRequest(provider: "dev")
        let state = request.state.reveal()
        _ = try await flow.completeAuthorization(
            callbackURL: callback(query: "code=SECRET-code&state=\(state)&code=SECRET-code-2&state=SECRET-state-2"))

        let secrets = try [
            "SECRET-client", "SECRET-device", "SECRET-at-1", "SECRET-rt-1", "SECRET-id-1", "SECRET-at-2", "SECRET-rt-2",
            "SECRET-at-3", "SECRET-rt-3", "SECRET-id-3", "SECRET-code", "SECRET-state-2", state,
        ] + Specimen.secrets(of: request)
        let records = log.all
        #expect(records.contains { $0.level == .debug }, "debug logging was on, so there is something to check")
        #expect(records.contains { $0.level == .warning })
        for record in records {
            for secret in secrets {
                #expect(!record.description.contains(secret), "log leaks a secret: \(record.level) \(record.message.prefix(40))")
            }
        }
        #expect(mock.requests(.token).count == 6)
    }

    @Test("without debug on the provider no debug record is emitted")
    func noDebugByDefault() async throws {
        let mock = MockProvider()
        let log = LogCollector()
        mock.script(.token, [.token(access: "at")])
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "svc", clientSecret: "s")], transport: mock.transport(), options: options(TestClock(), log: log))
        _ = try await flow.clientCredentials(provider: "svc")
        #expect(!log.all.contains { $0.level == .debug })
        #expect(mock.requests().count == 1)
    }
}
