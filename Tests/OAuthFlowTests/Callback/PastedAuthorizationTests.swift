import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

/// `completeAuthorization(pasted:request:)`: the paste-back login. The pasted line is read by the
/// redirect's parser and checked as strictly (redirect URI, repeats, state, iss, error) before any
/// request, then exchanged through the runner like every grant.
@Suite("Paste-back login: completeAuthorization(pasted:request:) (RFC 6749 §4.1.2, RFC 7636, RFC 9207)", .timeLimit(.minutes(1)))
struct PastedAuthorizationTests {
    let mock = MockProvider()
    let clock = TestClock()
    let store = MemorySecretStore()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, store: store, transport: mock.transport(), options: options(clock))
    }

    // MARK: What is accepted

    @Test("the URL the browser ended on: states authorizing → requestingAccessToken → authorized, and the exact token request")
    func pastedURL() async throws {
        mock.script(.token, [.token(access: "at-1", expiresIn: 3600, refresh: "rt-1", scope: "read")])
        let flow = try await flow(mock.provider(id: "web", clientID: "public-client"))
        let recorders = recordStates(flow)
        let request = try await flow.authorizationRequest(provider: "web")
        // As a terminal hands it over: blanks around it and the line end.
        let authorization = try await flow.completeAuthorization(pasted: "  \(callback(request, code: "c0de-1.~_"))\r\n", request: request)

        let sent = try #require(mock.requests(.token).only)
        #expect(sent.method == "POST" && sent.url == mock.url(.token) && sent.url.query == nil)
        #expect(uniqueForm(sent) == [
            "grant_type": "authorization_code", "code": "c0de-1.~_", "redirect_uri": "http://127.0.0.1:8765/callback",
            "code_verifier": try #require(request.codeVerifier).reveal(), "client_id": "public-client",
        ])
        let items = try #require(query(request.url))
        #expect(items["code_challenge"] == (try PKCE(verifier: try #require(request.codeVerifier))).challenge)
        #expect(items["code_challenge_method"] == "S256")
        let expected: [State] = [
            .empty, .authorizing(provider: "web", grant: .authorizationCode), .requestingAccessToken(provider: "web"),
            .authorized(provider: "web", authorization),
        ]
        for seen in await collected(recorders) { #expect(seen == expected) }
        #expect(try await store.keys() == ["web"])
        #expect(try await flow.accessToken(for: "web").reveal() == "at-1")
    }

    @Test("a bare code, as a provider's page shows it: exchanged with the PKCE verifier, same states")
    func bareCode() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web", clientID: "public-client"))
        let recorders = recordStates(flow)
        let request = try await flow.authorizationRequest(provider: "web")
        let authorization = try await flow.completeAuthorization(pasted: "4/0AdQt8qh-x_Y.z~+=\n", request: request)
        #expect(uniqueForm(try #require(mock.requests(.token).only)) == [
            "grant_type": "authorization_code", "code": "4/0AdQt8qh-x_Y.z~+=", "redirect_uri": "http://127.0.0.1:8765/callback",
            "code_verifier": try #require(request.codeVerifier).reveal(), "client_id": "public-client",
        ])
        let expected: [State] = [
            .empty, .authorizing(provider: "web", grant: .authorizationCode), .requestingAccessToken(provider: "web"),
            .authorized(provider: "web", authorization),
        ]
        for seen in await collected(recorders) { #expect(seen == expected) }
    }

    @Test("an out-of-band redirect URI (urn:ietf:wg:oauth:2.0:oob): the code the page shows is exchanged with that redirect_uri")
    func outOfBand() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "oob", redirectURI: URL(string: "urn:ietf:wg:oauth:2.0:oob")))
        let request = try await flow.authorizationRequest(provider: "oob")
        #expect(query(request.url)?["redirect_uri"] == "urn:ietf:wg:oauth:2.0:oob")
        _ = try await flow.completeAuthorization(pasted: "4/P7q7W91a-oMsCeLvIaQm6bTrgtp7", request: request)
        let sent = try #require(mock.requests(.token).only)
        #expect(sent.form["redirect_uri"] == "urn:ietf:wg:oauth:2.0:oob" && sent.form["code"] == "4/P7q7W91a-oMsCeLvIaQm6bTrgtp7")
    }

    @Test("the redirect URI matches however the browser spells it: scheme and host case, a default port, an empty path, a fragment",
          arguments: [
        ("http://127.0.0.1:8765/callback", "HTTP://127.0.0.1:8765/callback?Q#_=_"),
        ("https://app.example/done", "https://APP.example:443/done?Q"),
        ("https://app.example", "https://app.example/?Q"),
        ("com.example.app:/oauth", "com.example.app:/oauth?Q"),
        ("http://127.0.0.1:8765/callback?tenant=a", "http://127.0.0.1:8765/callback?tenant=a&Q"),
    ])
    func redirectSpellings(redirect: String, pasted: String) async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web", redirectURI: URL(string: redirect)))
        let request = try await flow.authorizationRequest(provider: "web")
        let query = "code=c1&state=\(request.state.reveal())"
        _ = try await flow.completeAuthorization(pasted: pasted.replacingOccurrences(of: "Q", with: query), request: request)
        #expect(mock.requests(.token).only?.form["redirect_uri"] == redirect)
        #expect(mock.requests(.token).only?.form["code"] == "c1")
    }

    @Test("a line of exactly maximumPastedLength bytes is read; one byte more is refused before any request")
    func lengthBoundary() async throws {
        #expect(AuthorizationResponse.maximumPastedLength == 8192)
        for extra in [0, 1] {
            mock.clearRequests()
            mock.script(.token, [.token(access: "at-1")])
            let flow = try await flow(mock.provider(id: "web"))
            let request = try await flow.authorizationRequest(provider: "web")
            let base = callback(request).absoluteString + "&pad="
            let line = base + String(repeating: "p", count: AuthorizationResponse.maximumPastedLength - base.utf8.count + extra)
            if extra == 0 {
                _ = try await flow.completeAuthorization(pasted: line, request: request)
                #expect(mock.requests(.token).count == 1)
            } else {
                let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(pasted: line, request: request) }
                #expect(error?.code == .invalidCallback)
                #expect(mock.requests().isEmpty)
            }
        }
    }

    // MARK: What is refused, before anything is sent or stored

    /// A malformed paste: its name, the line made from the request, the error code.
    struct Malformed: Sendable, CustomTestStringConvertible {
        let name: String
        let line: @Sendable (AuthorizationRequest) -> String
        let code: OAuthError.Code
        var testDescription: String { name }
    }

    static let malformed: [Malformed] = [
        Malformed(name: "wrong state", line: { _ in "http://127.0.0.1:8765/callback?code=c1&state=forged" }, code: .stateMismatch),
        Malformed(name: "a prefix of the state", line: { "http://127.0.0.1:8765/callback?code=c1&state=\($0.state.reveal().dropLast())" },
                  code: .stateMismatch),
        Malformed(name: "missing state", line: { _ in "http://127.0.0.1:8765/callback?code=c1" }, code: .stateMismatch),
        Malformed(name: "error answer access_denied", line: {
            "http://127.0.0.1:8765/callback?error=access_denied&error_description=no&state=\($0.state.reveal())"
        }, code: .accessDenied),
        Malformed(name: "error answer invalid_scope", line: {
            "http://127.0.0.1:8765/callback?error=invalid_scope&state=\($0.state.reveal())"
        }, code: .serverRejected),
        Malformed(name: "a second code", line: { "\(callback($0))&code=c2" }, code: .invalidCallback),
        Malformed(name: "a second state", line: { "\(callback($0))&state=\($0.state.reveal())" }, code: .invalidCallback),
        Malformed(name: "a second error", line: {
            "http://127.0.0.1:8765/callback?error=access_denied&state=\($0.state.reveal())&error=server_error"
        }, code: .invalidCallback),
        Malformed(name: "another port", line: { callback($0).absoluteString.replacingOccurrences(of: ":8765", with: ":8766") },
                  code: .invalidCallback),
        Malformed(name: "another path", line: { callback($0).absoluteString.replacingOccurrences(of: "/callback", with: "/callbacks") },
                  code: .invalidCallback),
        Malformed(name: "another host", line: { callback($0).absoluteString.replacingOccurrences(of: "127.0.0.1", with: "127.0.0.2") },
                  code: .invalidCallback),
        Malformed(name: "another scheme", line: { callback($0).absoluteString.replacingOccurrences(of: "http:", with: "https:") },
                  code: .invalidCallback),
        Malformed(name: "a user name", line: { callback($0).absoluteString.replacingOccurrences(of: "//", with: "//me@") },
                  code: .invalidCallback),
        Malformed(name: "no query", line: { _ in "http://127.0.0.1:8765/callback" }, code: .invalidCallback),
        Malformed(name: "state but neither code nor error", line: { "http://127.0.0.1:8765/callback?state=\($0.state.reveal())" },
                  code: .invalidCallback),
        Malformed(name: "a terminal escape before the URL", line: { "\u{1B}[31m\(callback($0))" }, code: .invalidCallback),
        Malformed(name: "a bell inside", line: { "\(callback($0))\u{07}" + "&x=1" }, code: .invalidCallback),
        Malformed(name: "NUL", line: { "\(callback($0))\u{00}" + "x" }, code: .invalidCallback),
        Malformed(name: "DEL", line: { "\(callback($0))\u{7F}" + "x" }, code: .invalidCallback),
        Malformed(name: "C1 CSI", line: { "\u{9B}31m\(callback($0))" }, code: .invalidCallback),
        Malformed(name: "a bidirectional override", line: { "\(callback($0))\u{202E}" + "x" }, code: .invalidCallback),
        Malformed(name: "a line break inside", line: { "\(callback($0))\nhttp://127.0.0.1:8765/callback?code=c2" }, code: .invalidCallback),
        Malformed(name: "non-ASCII", line: { "\(callback($0))&n=é" }, code: .invalidCallback),
        Malformed(name: "a space inside", line: { "\(callback($0)) x" }, code: .invalidCallback),
        Malformed(name: "overlong", line: { "\(callback($0))&pad=" + String(repeating: "p", count: 9000) }, code: .invalidCallback),
        Malformed(name: "nothing", line: { _ in " \t\r\n" }, code: .invalidCallback),
        Malformed(name: "a query without the URL", line: { "code=c1&state=\($0.state.reveal())" }, code: .invalidCallback),
        Malformed(name: "code= alone", line: { _ in "code=c1" }, code: .invalidCallback),
        Malformed(name: "not a URL", line: { _ in "http://[zz/callback?code=c1" }, code: .invalidCallback),
    ]

    @Test("each malformed paste is a typed error: no request, nothing stored, .error published, the request spent, no secret in the error",
          arguments: malformed)
    func refused(_ malformed: Malformed) async throws {
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        let recorders = recordStates(flow, count: 1)
        let error = try #require(await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(pasted: malformed.line(request), request: request)
        })
        #expect(error.code == malformed.code)
        #expect(error.endpoint == .authorization)
        #expect(error.providerID == "web")
        #expect(mock.requests().isEmpty, "nothing may be sent for a refused paste")
        #expect(try await store.keys().isEmpty)
        #expect(await collected(recorders) == [[.authorizing(provider: "web", grant: .authorizationCode), .error(provider: "web", error)]])
        for rendering in [String(describing: error), String(reflecting: error), error.message ?? ""] {
            #expect(!rendering.contains(request.state.reveal()))
            #expect(!rendering.contains("c1") && !rendering.contains("auth-code-1"))
        }
        // Single use: the correct URL no longer completes this request.
        let spent = await #expect(throws: OAuthError.self) {
            try await flow.completeAuthorization(pasted: callback(request).absoluteString, request: request)
        }
        #expect(spent?.code == .stateMismatch)
        #expect(mock.requests().isEmpty)
    }

    @Test("a request that is not pending is refused: completed already, or made by another flow")
    func notPending() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        _ = try await flow.completeAuthorization(pasted: callback(request).absoluteString, request: request)
        let again = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(pasted: "other-code", request: request) }
        #expect(again?.code == .stateMismatch)
        let other = try await self.flow(mock.provider(id: "web"))
        let foreign = await #expect(throws: OAuthError.self) { try await other.completeAuthorization(pasted: "c2", request: request) }
        #expect(foreign?.code == .stateMismatch)
        #expect(mock.requests(.token).count == 1)
    }

    @Test("an expired request is refused (10 minutes, RFC 9700 §4.7.1)", arguments: [(599, true), (601, false)])
    func expiry(seconds: Int, accepted: Bool) async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web"))
        let request = try await flow.authorizationRequest(provider: "web")
        clock.advance(by: .seconds(seconds))
        if accepted {
            _ = try await flow.completeAuthorization(pasted: "c1", request: request)
        } else {
            let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(pasted: "c1", request: request) }
            #expect(error?.code == .stateMismatch)
        }
        #expect(mock.requests(.token).count == (accepted ? 1 : 0))
    }

    @Test("a bare code needs PKCE: a confidential client without it must paste the URL")
    func bareCodeNeedsPKCE() async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "web", clientSecret: "s3cret"))
        let request = try await flow.authorizationRequest(provider: "web", usePKCE: false)
        let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(pasted: "c1", request: request) }
        #expect(error?.code == .invalidCallback)
        #expect(mock.requests().isEmpty)
        let second = try await flow.authorizationRequest(provider: "web", usePKCE: false)
        _ = try await flow.completeAuthorization(pasted: callback(second).absoluteString, request: second)
        #expect(mock.requests(.token).only?.form["code_verifier"] == nil)
    }

    // MARK: RFC 9207 and the ID token

    @Test("iss in the pasted URL must be the provider's issuer (RFC 9207 §2.4)", arguments: [
        ("ISSUER", true), ("https://evil.example", false), ("ISSUER/", false),
    ])
    func issuer(iss: String, accepted: Bool) async throws {
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "oidc", issuer: mock.issuer))
        let request = try await flow.authorizationRequest(provider: "oidc")
        let line = callback(request, extra: [("iss", iss.replacingOccurrences(of: "ISSUER", with: mock.issuer))]).absoluteString
        if accepted {
            _ = try await flow.completeAuthorization(pasted: line, request: request)
            #expect(mock.requests(.token).count == 1)
        } else {
            let error = try #require(await #expect(throws: OAuthError.self) {
                try await flow.completeAuthorization(pasted: line, request: request)
            })
            #expect(error.code == .invalidCallback)
            #expect(mock.requests().isEmpty, "a mix-up must be caught before the code is sent anywhere")
            #expect(flow.state == .error(provider: "oidc", error))
            #expect(try await store.keys().isEmpty)
        }
    }

    @Test("a bare code is refused by an issuer that advertises RFC 9207 iss, taken from one that does not", arguments: [true, false])
    func bareCodeAndIssuer(advertised: Bool) async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument(issParameterSupported: advertised)])
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "oidc", issuer: mock.issuer))
        let request = try await flow.authorizationRequest(provider: "oidc")
        if advertised {
            let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(pasted: "c1", request: request) }
            #expect(error?.code == .invalidCallback)
            #expect(mock.requests(.token).isEmpty)
        } else {
            _ = try await flow.completeAuthorization(pasted: "c1", request: request)
            #expect(mock.requests(.token).only?.form["code"] == "c1")
        }
    }

    @Test("the ID token is validated with the request's nonce: right nonce authorized, wrong nonce .idTokenRejected and nothing stored",
          arguments: [true, false])
    func idTokenNonce(rightNonce: Bool) async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try IDTokenFlowTests.keyA.jwk()])])
        let flow = try await flow(mock.discoveredProvider(id: "op"))
        let request = try await flow.authorizationRequest(provider: "op")
        let now = Int(clock.date.timeIntervalSince1970)
        let claims: [String: JSONValue] = [
            "iss": .string(mock.issuer), "sub": .string("user-1"), "aud": .string("mock-client"),
            "exp": .number(String(now + 600)), "iat": .number(String(now)),
            "nonce": .string(rightNonce ? try #require(request.nonce).reveal() : "not-the-nonce"),
        ]
        mock.script(.token, [.token(access: "at-1", refresh: "rt-1", idToken: try IDTokenFlowTests.keyA.token(claims: claims))])
        let line = callback(request).absoluteString
        if rightNonce {
            let authorization = try await flow.completeAuthorization(pasted: line, request: request)
            #expect(authorization.idToken?.subject == "user-1")
            #expect(try await store.keys() == ["op"])
        } else {
            let error = await #expect(throws: OAuthError.self) { try await flow.completeAuthorization(pasted: line, request: request) }
            #expect(error?.code == .idTokenRejected)
            #expect(try await store.keys().isEmpty)
        }
    }
}
