import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Authorization callback (RFC 6749 §4.1.2, RFC 9207)", .timeLimit(.minutes(1)))
struct CallbackTests {
    let mock = MockProvider()
    let clock = TestClock()
    let log = LogCollector()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, transport: mock.transport(), options: options(clock, log: log))
    }

    // MARK: Parsing

    @Test("code, state and iss are parsed and decoded (RFC 6749 §4.1.2, RFC 9207 §2)")
    func parsesParameters() throws {
        let response = try AuthorizationResponse(callbackURL: callback(query: "code=a%2Bb+c&state=s%3D1&iss=https%3A%2F%2Fidp.example"))
        #expect(response.code?.reveal() == "a+b c")
        #expect(response.state?.reveal() == "s=1")
        #expect(response.issuer == "https://idp.example")
        #expect(response.error == nil)
        #expect(response.duplicates.isEmpty)
    }

    @Test("the first value of a repeated parameter wins and the repeat is reported", arguments: [
        ("code=one&state=s&code=two", "one", "s", ["code"]),
        ("state=s&code=one&state=t&code=two&iss=x&iss=y", "one", "s", ["state", "code", "iss"]),
    ])
    func firstValueWins(query: String, code: String, state: String, duplicates: [String]) throws {
        let response = try AuthorizationResponse(callbackURL: callback(query: query))
        #expect(response.code?.reveal() == code)
        #expect(response.state?.reveal() == state)
        #expect(response.duplicates == duplicates)
    }

    @Test("an error response is parsed with its description and URI (RFC 6749 §4.1.2.1)")
    func parsesError() throws {
        let response = try AuthorizationResponse(callbackURL: callback(
            query: "error=access_denied&error_description=The+user+said+no&error_uri=https%3A%2F%2Fidp.example%2Fe&state=s"))
        #expect(response.error == ErrorResponse(
            code: .accessDenied, errorDescription: "The user said no", errorURI: "https://idp.example/e"))
        #expect(response.code == nil)
    }

    @Test("a callback without a query is .invalidCallback", arguments: [
        "http://127.0.0.1:8765/callback", "http://127.0.0.1:8765/callback?", "http://127.0.0.1:8765/callback#code=x&state=y",
    ])
    func noQuery(url: String) throws {
        let error = #expect(throws: OAuthError.self) { try AuthorizationResponse(callbackURL: URL(string: url)!) }
        #expect(error?.code == .invalidCallback)
    }

    // MARK: The checks before any token request

    @Test("error=… in the callback is a typed error and sends no token request (RFC 6749 §4.1.2.1)", arguments: [
        ("access_denied", OAuthError.Code.accessDenied, OAuthError.Recovery.none),
        ("invalid_scope", .serverRejected, .fixConfiguration),
        ("temporarily_unavailable", .serverRejected, .retryLater),
    ])
    func errorCallback(error code: String, expected: OAuthError.Code, recovery: OAuthError.Recovery) async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let recorders = recordStates(flow)
        let request = try await flow.authorizationRequest(provider: "web")
        let url = callback(query: "error=\(code)&error_description=nope&state=\(request.state.reveal())")
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: url) })
        #expect(error.code == expected)
        #expect(error.response?.code.rawValue == code)
        #expect(error.response?.errorDescription == "nope")
        #expect(error.endpoint == .authorization)
        #expect(error.recovery == recovery)
        #expect(mock.requests().isEmpty)
        let expectedStates: [State] = [.empty, .authorizing(provider: "web", grant: .authorizationCode), .error(provider: "web", error)]
        for seen in await collected(recorders) { #expect(seen == expectedStates) }
    }

    @Test("a callback whose state matches nothing, or that has none, publishes .error for no provider (it is no login's)")
    func unknownStatePublishes() async throws {
        let flow = try await flow(mock.provider(id: "web"))
        _ = try await flow.authorizationRequest(provider: "web")
        let recorders = recordStates(flow, count: 1)
        let error = try #require(await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "code=c&state=nobody-sent-this"))
        })
        #expect(error.code == .stateMismatch)
        let seen = await collected(recorders)
        #expect(seen == [[.authorizing(provider: "web", grant: .authorizationCode), .error(provider: nil, error)]])
        #expect(error.providerID == nil)
        let none = try #require(await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "code=c"))
        })
        #expect(flow.state == .error(provider: nil, none))
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("a callback without state is refused without a token request (RFC 6749 §10.12)")
    func missingState() async throws {
        let flow = try await flow(mock.provider(id: "web"))
        _ = try await flow.authorizationRequest(provider: "web")
        let error = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "code=c"))
        }
        #expect(error?.code == .stateMismatch)
        #expect(mock.requests().isEmpty)
    }

    @Test("a mismatched state is refused, sends nothing, and leaves the real request usable (RFC 6749 §10.12)", arguments: [
        "forged", "", "PREFIX",
    ])
    func mismatchedState(kind: String) async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        let real = request.state.reveal()
        let wrong: String
        switch kind {
        case "forged": wrong = String(real.reversed())
        case "": wrong = ""
        default: wrong = String(real.dropLast())  // a prefix of the real state
        }
        let error = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "code=c&state=\(wrong)"))
        }
        #expect(error?.code == .stateMismatch)
        #expect(mock.requests(.token).isEmpty, "no token request for a forged callback")

        _ = try await flow.completeAuthorization(callbackURL: callback(request))
        #expect(mock.requests(.token).count == 1)
    }

    @Test("a state is single-use: the second completion fails without a token request")
    func reusedState() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        _ = try await flow.completeAuthorization(callbackURL: callback(request))
        let error = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(request, code: "replayed"))
        }
        #expect(error?.code == .stateMismatch)
        #expect(mock.requests(.token).count == 1)
    }

    @Test("a state is single-use even when its first completion failed")
    func stateConsumedByFailure() async throws {
        mock.script(.token, [.oauthError("invalid_grant"), .token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: callback(request)) }
        let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: callback(request)) }
        #expect(error?.code == .stateMismatch)
        #expect(mock.requests(.token).count == 1)
    }

    @Test("a state expires after 10 minutes (RFC 9700 §4.7.1)", arguments: [(599, true), (600, false), (601, false)])
    func expiredState(seconds: Int, succeeds: Bool) async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        clock.advance(by: .seconds(seconds))
        if succeeds {
            _ = try await flow.completeAuthorization(callbackURL: callback(request))
            #expect(mock.requests(.token).count == 1)
        } else {
            let error = try #require(await #expect(throws: OAuthError.self) {
                try await flow.completeAuthorization(callbackURL: callback(request))
            })
            #expect(error.code == .stateMismatch)
            #expect(error.recovery == .reauthorize)
            #expect(mock.requests(.token).isEmpty)
            #expect(flow.state == .error(provider: "web", error))
        }
    }

    @Test("with duplicate parameters the first value is used and the repeat is logged")
    func duplicateParameters() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        let state = request.state.reveal()
        _ = try await flow.completeAuthorization(callbackURL: callback(query: "code=first&state=\(state)&code=second&state=other"))
        #expect(mock.requests(.token).only?.form["code"] == "first")
        #expect(log.all.contains { $0.level == .warning && $0.message.contains("code") && $0.message.contains("state") })
    }

    @Test("a forged state after the real one does not help: the first state is checked")
    func duplicateStateFirstWins() async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        let error = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "code=c&state=forged&state=\(request.state.reveal())"))
        }
        #expect(error?.code == .stateMismatch)
        #expect(mock.requests().isEmpty)
    }

    @Test("iss is checked against the provider's issuer (RFC 9207 §2.4)", arguments: [
        (nil, true), ("ISSUER", true), ("https://evil.example", false), ("ISSUER/", false), ("UPPERCASED", false),
    ] as [(String?, Bool)])
    func issuerCheck(iss: String?, accepted: Bool) async throws {
        mock.script(.token, [.token(access: "at-1")])
        // The server does not advertise RFC 9207 support, so an absent iss is accepted.
        mock.script(.openIDConfiguration, [mock.discoveryDocument(issParameterSupported: false)])
        let flow = try await flow(mock.provider(id: "oidc", issuer: mock.issuer))
        let request = try await flow.authorizationRequest(provider: "oidc")
        let sent = iss.map { $0.replacingOccurrences(of: "ISSUER", with: mock.issuer).replacingOccurrences(of: "UPPERCASED", with: mock.issuer.uppercased()) }
        let url = callback(request, extra: sent.map { [("iss", $0)] } ?? [])
        if accepted {
            _ = try await flow.completeAuthorization(callbackURL: url)
            #expect(mock.requests(.token).count == 1)
            #expect(mock.requests(.openIDConfiguration).count == (iss == nil ? 1 : 0), "metadata is read only to judge an absent iss")
        } else {
            let error = try #require(await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: url) })
            #expect(error.code == .invalidCallback)
            #expect(mock.requests(.token).isEmpty, "a mix-up attack must not get the code exchanged")
            #expect(flow.state == .error(provider: "oidc", error))
        }
    }

    @Test("a wrong iss is refused even when the callback carries an error")
    func issuerCheckedBeforeError() async throws {
        let flow = try await flow(mock.provider(id: "oidc", issuer: mock.issuer))
        let request = try await flow.authorizationRequest(provider: "oidc")
        let url = callback(query: "error=access_denied&state=\(request.state.reveal())&iss=https%3A%2F%2Fevil.example")
        let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(callbackURL: url) }
        #expect(error?.code == .invalidCallback)
    }

    @Test("a callback with state but neither code nor error is .invalidCallback")
    func neitherCodeNorError() async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        let error = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(callbackURL: callback(query: "state=\(request.state.reveal())&code="))
        }
        #expect(error?.code == .invalidCallback)
        #expect(mock.requests().isEmpty)
    }

    @Test("a callback matches the request it belongs to among several pending ones")
    func severalPending() async throws {
        mock.script(.token, [.token(access: "at-a"), .token(access: "at-b")])
        let flow = try await flow(mock.provider(id: "a"), mock.provider(id: "b"))
        let first = try await flow.authorizationRequest(provider: "a")
        let second = try await flow.authorizationRequest(provider: "b")
        #expect(!first.state.constantTimeEquals(second.state))
        let authorizationB = try await flow.completeAuthorization(callbackURL: callback(second, code: "code-b"))
        #expect(authorizationB.providerID == "b")
        let authorizationA = try await flow.completeAuthorization(callbackURL: callback(first, code: "code-a"))
        #expect(authorizationA.providerID == "a")
        #expect(mock.requests(.token).map { $0.form["code"] } == ["code-b", "code-a"])
        #expect(mock.requests(.token).map { $0.form["code_verifier"] } == [second.codeVerifier?.reveal(), first.codeVerifier?.reveal()])
    }
}
