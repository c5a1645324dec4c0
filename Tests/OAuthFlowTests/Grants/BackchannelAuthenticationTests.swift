import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import OAuthFlowURLSession
import Synchronization
import Testing

@Suite("CIBA: client-initiated backchannel authentication (OpenID Connect CIBA Core 1.0)", .timeLimit(.minutes(1)))
struct BackchannelAuthenticationTests {
    let mock = MockProvider()
    let clock = TestClock()

    static let path = "/bc-authorize"
    static let grant = "urn:openid:params:grant-type:ciba"

    func provider(
        id: String = "phone", secret: String? = "s3cret", method: Provider.ClientAuthentication? = nil, mode: CIBADeliveryMode = .poll,
        hint: String? = nil, scopes: [String] = ["openid", "api"], issuer: String? = nil
    ) -> Provider {
        var provider = mock.provider(id: id, clientID: "ciba-client", clientSecret: secret, clientAuthentication: method, scopes: scopes,
                                     issuer: issuer)
        provider.backchannelAuthenticationURL = mock.baseURL.appendingPathComponent(String(Self.path.dropFirst()))
        provider.cibaDeliveryMode = mode
        provider.cibaLoginHint = hint
        return provider
    }

    func flow(_ providers: Provider..., clock: (any Clock<Duration>)? = nil) async throws -> AuthFlow {
        var flowOptions = options(self.clock)
        if let clock { flowOptions.clock = clock }
        return try await AuthFlow(providers: providers, transport: mock.transport(), options: flowOptions)
    }

    /// The answer of an approved request: tokens with an ID token signed by ``minter`` (the
    /// provider needs `issuer: mock.issuer`; the discovery document and the JWKS are scripted here).
    func approved(access: String = "at-1", refresh: String? = "rt-1") throws -> MockResponse {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.minter.jwk()])])
        return .token(access: access, refresh: refresh, scope: "openid api", idToken: try idToken())
    }

    /// A §7.3 acknowledgement.
    static func ack(id: String = "ari-0123456789abcdef", expiresIn: Int = 120, interval: Int? = 5) -> MockResponse {
        var object: [String: JSONValue] = ["auth_req_id": .string(id), "expires_in": .number(expiresIn)]
        if let interval { object["interval"] = .number(interval) }
        return .json(object: object)
    }

    static let alice = BackchannelAuthenticationRequest(hint: .loginHint(#"{"username":"alice"}"#), bindingMessage: "Ticket 4711")

    // MARK: The request (§7.1)

    static let hints: [(BackchannelAuthenticationRequest.Hint, String, String)] = [
        (.loginHint("alice@example.com"), "login_hint", "alice@example.com"),
        (.loginHint(#"{"username":"alice"}"#), "login_hint", #"{"username":"alice"}"#),
        (.idTokenHint(Secret("eyJ.id.token")), "id_token_hint", "eyJ.id.token"),
        (.loginHintToken(Secret("eyJ.hint.token")), "login_hint_token", "eyJ.hint.token"),
    ]

    @Test("the request is a form POST with the client's authentication, scope with openid, one hint, binding_message, user_code and requested_expiry (CIBA Core §7.1)",
          arguments: hints)
    func request(hint: BackchannelAuthenticationRequest.Hint, name: String, value: String) async throws {
        mock.script(path: Self.path, [Self.ack(expiresIn: 300, interval: 7)])
        let flow = try await flow(provider(scopes: ["api"]))
        let request = BackchannelAuthenticationRequest(hint: hint, bindingMessage: "Ticket 4711", userCode: Secret("uc-1"), requestedExpiry: 300)
        let authentication = try await flow.requestBackchannelAuthentication(provider: "phone", request)

        let sent = try #require(mock.requests(path: Self.path).only)
        #expect(sent.method == "POST")
        #expect(sent.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(sent.basicCredentials?.id == "ciba-client" && sent.basicCredentials?.secret == "s3cret")
        #expect(sent.formPairs.map(\.0) == ["scope", name, "binding_message", "user_code", "requested_expiry"])
        #expect(uniqueForm(sent) == ["scope": "openid api", name: value, "binding_message": "Ticket 4711", "user_code": "uc-1",
                                     "requested_expiry": "300"])
        #expect(mock.requests(.token).isEmpty, "asking the person polls nothing")

        #expect(authentication.providerID == "phone")
        #expect(authentication.bindingMessage == "Ticket 4711")
        #expect(authentication.expiresIn == 300)
        #expect(authentication.expiresAt == clock.date.addingTimeInterval(300))
        #expect(authentication.interval == 7)
        #expect(authentication.deliveryMode == .poll)
        #expect(authentication.scopes == ["openid", "api"])
        #expect(flow.state == .authorizing(provider: "phone", grant: .ciba, backchannel: authentication))
    }

    @Test("client_secret_post and private_key_jwt authenticate the request as at the token endpoint; the assertion's aud is the backchannel endpoint")
    func clientAuthentication() async throws {
        mock.script(path: Self.path, [Self.ack(), Self.ack()])
        let post = try await flow(provider(method: .clientSecretPost))
        _ = try await post.requestBackchannelAuthentication(provider: "phone", Self.alice)
        let posted = try #require(mock.requests(path: Self.path).first)
        #expect(posted.header("Authorization") == nil)
        #expect(posted.form["client_id"] == "ciba-client" && posted.form["client_secret"] == "s3cret")

        let files = try KeyFiles()
        defer { files.remove() }
        var keyed = provider(secret: nil)
        keyed.clientKey = try ClientKey(contentsOfFile: try files.key(.p256SEC1))
        keyed.clientAuthentication = .privateKeyJWT
        let jwt = try await flow(keyed)
        _ = try await jwt.requestBackchannelAuthentication(provider: "phone", Self.alice)
        let signed = try #require(mock.requests(path: Self.path).last)
        #expect(signed.form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        let assertion = try #require(signed.form["client_assertion"])
        let claims = try JSONValue.parse(Data(try #require(Base64URL.decode(String(assertion.split(separator: ".")[1])))))
        #expect(claims["aud"]?.stringValue == mock.baseURL.appendingPathComponent("bc-authorize").absoluteString)
    }

    @Test("without a hint the catalog's cibaLoginHint is sent")
    func catalogHint() async throws {
        mock.script(path: Self.path, [Self.ack()])
        let flow = try await flow(provider(hint: "+15555550100"))
        _ = try await flow.requestBackchannelAuthentication(provider: "phone")
        #expect(mock.requests(path: Self.path).only?.form["login_hint"] == "+15555550100")
    }

    static let refusals: [(String, BackchannelAuthenticationRequest, String)] = [
        ("binding message with ESC", .init(hint: .loginHint("alice"), bindingMessage: "Ticket \u{1B}[2J4711"), "binding message holds a control character"),
        ("binding message with a line break", .init(hint: .loginHint("alice"), bindingMessage: "Ticket\nApprove everything"), "binding message holds"),
        ("binding message with CR", .init(hint: .loginHint("alice"), bindingMessage: "Ticket\r4711"), "binding message holds"),
        ("binding message with BEL", .init(hint: .loginHint("alice"), bindingMessage: "\u{07}4711"), "binding message holds"),
        ("binding message with a bidi override", .init(hint: .loginHint("alice"), bindingMessage: "A\u{202E}B"), "binding message holds"),
        ("binding message with a C1 control", .init(hint: .loginHint("alice"), bindingMessage: "A\u{9B}B"), "binding message holds"),
        ("binding message of 129 characters", .init(hint: .loginHint("alice"), bindingMessage: String(repeating: "é", count: 129)),
         "binding message is longer than 128"),
        ("empty binding message", .init(hint: .loginHint("alice"), bindingMessage: ""), "binding message is empty"),
        ("no hint and no cibaLoginHint", .init(bindingMessage: "Ticket 4711"), "names the person"),
        ("login hint with ESC", .init(hint: .loginHint("alice\u{1B}]0;x\u{07}")), "login hint holds a control character"),
        ("empty login hint", .init(hint: .loginHint("")), "login hint is empty"),
        ("huge login hint", .init(hint: .loginHint(String(repeating: "a", count: 8193))), "login hint is longer"),
        ("ID token hint with a space", .init(hint: .idTokenHint(Secret("eyJ a.b"))), "ID token hint is not printable ASCII"),
        ("user code with a line break", .init(hint: .loginHint("alice"), userCode: Secret("12\n34")), "user code holds"),
        ("requested_expiry 0", .init(hint: .loginHint("alice"), requestedExpiry: 0), "requested_expiry must be from 1"),
        ("requested_expiry beyond Int32", .init(hint: .loginHint("alice"), requestedExpiry: Int(Int32.max) + 1), "requested_expiry must be from 1"),
    ]

    @Test("what the client sends is checked first: each refusal is .configuration and nothing is sent (not even to discovery)", arguments: refusals)
    func refusedBeforeSending(name: String, request: BackchannelAuthenticationRequest, reason: String) async throws {
        let flow = try await flow(provider(issuer: mock.issuer))
        let recorders = recordStates(flow)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", request) })
        #expect(error.code == .configuration)
        #expect(error.endpoint == .backchannelAuthentication)
        #expect(error.message?.contains(reason) == true, "\(error.message ?? "")")
        #expect(!String(describing: error).contains("\u{1B}") && !String(describing: error).contains("\n"))
        #expect(mock.requests().isEmpty, "\(name): nothing may reach the server")
        for seen in await collected(recorders) { #expect(seen == [.empty, .error(provider: "phone", error)]) }
    }

    @Test("a public client is refused: CIBA needs a client that authenticates (CIBA Core §7.1)")
    func publicClient() async throws {
        let flow = try await flow(provider(secret: nil))
        let error = await #expect(throws: OAuthError.self) { try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains("public client") == true)
        #expect(mock.requests().isEmpty)
    }

    @Test("without backchannelAuthenticationURL and no issuer: .configuration naming the key")
    func noEndpoint() async throws {
        var provider = provider()
        provider.backchannelAuthenticationURL = nil
        let flow = try await flow(provider)
        let error = await #expect(throws: OAuthError.self) { try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains("backchannelAuthenticationURL") == true)
    }

    @Test("the endpoint comes from discovery's backchannel_authentication_endpoint; a user_code is refused unless it says backchannel_user_code_parameter_supported",
          arguments: [true, false])
    func discovered(userCodes: Bool) async throws {
        var document = try #require(try JSONValue.parse(mock.discoveryDocument().body).objectValue)
        document["backchannel_authentication_endpoint"] = .string(mock.baseURL.appendingPathComponent("ciba").absoluteString)
        document["backchannel_user_code_parameter_supported"] = .bool(userCodes)
        mock.script(.openIDConfiguration, [.json(object: document)])
        mock.script(path: "/ciba", [Self.ack()])
        var provider = provider(issuer: mock.issuer)
        provider.backchannelAuthenticationURL = nil
        let flow = try await flow(provider)
        let request = BackchannelAuthenticationRequest(hint: .loginHint("alice"), userCode: Secret("uc-1"))
        if userCodes {
            _ = try await flow.requestBackchannelAuthentication(provider: "phone", request)
            #expect(mock.requests(path: "/ciba").only?.form["user_code"] == "uc-1")
        } else {
            let error = await #expect(throws: OAuthError.self) { try await flow.requestBackchannelAuthentication(provider: "phone", request) }
            #expect(error?.code == .configuration)
            #expect(error?.message?.contains("backchannel_user_code_parameter_supported") == true)
            #expect(mock.requests(path: "/ciba").isEmpty)
        }
    }

    @Test("§13 errors at the backchannel endpoint: .serverRejected with the code (invalid_binding_message, unknown_user_id, missing_user_code), access_denied → .accessDenied, 403 invalid_client as Glewlwyd sends it",
          arguments: [
              (MockResponse.oauthError("invalid_binding_message"), OAuthError.Code.serverRejected),
              (.oauthError("unknown_user_id"), .serverRejected), (.oauthError("missing_user_code"), .serverRejected),
              (.oauthError("access_denied", status: 403), .accessDenied), (.oauthError("invalid_client", status: 403), .serverRejected),
          ])
    func endpointErrors(response: MockResponse, expected: OAuthError.Code) async throws {
        mock.script(path: Self.path, [response])
        let flow = try await flow(provider())
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) }
        #expect(error?.code == expected)
        #expect(error?.endpoint == .backchannelAuthentication)
        #expect(mock.requests(.token).isEmpty)
        #expect(mock.requests(path: Self.path).count == 1, "never retried: each request asks the person again")
    }

    // MARK: Hostile acknowledgements (§7.3)

    static let hostileAcknowledgements: [String] = [
        #"{"expires_in":120,"interval":5}"#,
        #"{"auth_req_id":"","expires_in":120}"#,
        #"{"auth_req_id":17,"expires_in":120}"#,
        #"{"auth_req_id":"ari\u001b[2Jx","expires_in":120}"#,
        #"{"auth_req_id":"ari\r\nSet-Cookie: x","expires_in":120}"#,
        #"{"auth_req_id":"ari with space","expires_in":120}"#,
        #"{"auth_req_id":"ärï","expires_in":120}"#,
        #"{"auth_req_id":"\#(String(repeating: "A", count: 1025))","expires_in":120}"#,
        #"{"auth_req_id":"ari-1"}"#,
        #"{"auth_req_id":"ari-1","expires_in":"soon"}"#,
        #"{"auth_req_id":"ari-1","expires_in":0}"#,
        #"{"auth_req_id":"ari-1","expires_in":-5}"#,
        #"{"auth_req_id":"ari-1","expires_in":1.5}"#,
        #"{"auth_req_id":"ari-1","expires_in":9223372036854775808}"#,
        #"{"auth_req_id":"ari-1","expires_in":1e400}"#,
        #"{"auth_req_id":"ari-1","expires_in":2147483648}"#,
        #"{"auth_req_id":"ari-1","expires_in":120,"interval":"x"}"#,
        #"{"auth_req_id":"ari-1","expires_in":120,"interval":-1}"#,
        #"{"auth_req_id":"ari-1","expires_in":120,"interval":99999999999999999999}"#,
        #"{"auth_req_id":"ari-1","expires_in":120,"interval":[5]}"#,
        #"[{"auth_req_id":"ari-1","expires_in":120}]"#,
    ]

    @Test("a hostile acknowledgement (auth_req_id missing, with control characters, not ASCII or huge; expires_in or interval missing, non-numeric, negative, fractional or huge) is .invalidResponse, never a trap, and nothing is polled",
          arguments: hostileAcknowledgements)
    func hostileAcknowledgement(body: String) async throws {
        mock.script(path: Self.path, [.json(body)])
        let flow = try await flow(provider())
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .backchannelAuthentication)
        for rendering in [String(describing: error), String(reflecting: error), error.message ?? ""] {
            #expect(!rendering.contains("\u{1B}") && !rendering.contains("\r") && !rendering.contains("AAAAAAAA") && !rendering.contains("Set-Cookie"))
        }
        #expect(mock.requests(.token).isEmpty)
        #expect(await flow.authorization(for: "phone") == nil)
    }

    @Test("an interval of 0 is raised to 1 s, a string number is read (as for device codes), an absent one is 5 s (CIBA Core §7.3)",
          arguments: [(#""interval":0,"#, 1), (#""interval":"9","#, 9), ("", 5)])
    func intervals(member: String, expected: Int) async throws {
        mock.script(path: Self.path, [.json(#"{\#(member)"auth_req_id":"ari-1","expires_in":"120"}"#)])
        let flow = try await flow(provider())
        let authentication = try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice)
        #expect(authentication.interval == expected)
        #expect(authentication.expiresIn == 120)
    }

    // MARK: Polling (§10.1, §11)

    @Test("each poll carries grant_type=urn:openid:params:grant-type:ciba and auth_req_id with the client's authentication; states: authorizing → requestingAccessToken → authorized")
    func pollAndStates() async throws {
        mock.script(path: Self.path, [Self.ack(id: "ari-42", interval: 5)])
        mock.script(.token, [.oauthError("authorization_pending"), .oauthError("authorization_pending"), try approved()])
        let flow = try await flow(provider(issuer: mock.issuer))
        let recorders = recordStates(flow)
        let authentication = try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice)
        let authorization = try await flow.pollBackchannelAuthentication(authentication)

        let polls = mock.requests(.token)
        #expect(polls.count == 3)
        for poll in polls {
            #expect(poll.basicCredentials?.id == "ciba-client")
            #expect(poll.formPairs.map(\.0) == ["grant_type", "auth_req_id"])
            #expect(uniqueForm(poll) == ["grant_type": Self.grant, "auth_req_id": "ari-42"])
        }
        #expect(clock.sleeps == [.seconds(5), .seconds(5), .seconds(5)])
        #expect(authorization.grant == .ciba)
        #expect(authorization.scopes == ["openid", "api"])
        #expect(authorization.isRefreshable)
        #expect(try await flow.accessToken(for: "phone").reveal() == "at-1")
        let expected: [State] = [
            .empty, .authorizing(provider: "phone", grant: .ciba, backchannel: authentication), .requestingAccessToken(provider: "phone"),
            .authorized(provider: "phone", authorization),
        ]
        for seen in await collected(recorders) { #expect(seen == expected) }
    }

    @Test("slow_down adds 5 s for the rest of the flow and republishes .authorizing with the new interval (CIBA Core §11)")
    func slowDown() async throws {
        mock.script(path: Self.path, [Self.ack(interval: 3)])
        mock.script(.token, [
            .oauthError("authorization_pending"), .oauthError("slow_down"), .oauthError("authorization_pending"),
            .oauthError("slow_down"), try approved(),
        ])
        let flow = try await flow(provider(issuer: mock.issuer))
        let recorders = recordStates(flow)
        _ = try await flow.authorizeWithBackchannel(provider: "phone", Self.alice)
        #expect(clock.sleeps == [3, 3, 8, 8, 13].map { .seconds($0) })
        for seen in await collected(recorders) {
            #expect(seen.map(\.name) == ["empty", "authorizing", "authorizing", "authorizing", "requestingAccessToken", "authorized"])
            let intervals = seen.compactMap { state -> Int? in
                if case .authorizing(_, .ciba, let backchannel?) = state { return backchannel.interval }
                return nil
            }
            #expect(intervals == [3, 8, 13])
        }
    }

    @Test("access_denied, expired_token and invalid_grant end the poll with .accessDenied, .expired, .serverRejected; nothing stored", arguments: [
        ("access_denied", OAuthError.Code.accessDenied), ("expired_token", .expired), ("invalid_grant", .serverRejected),
    ])
    func terminalErrors(code: String, expected: OAuthError.Code) async throws {
        mock.script(path: Self.path, [Self.ack()])
        mock.script(.token, [.oauthError("authorization_pending"), .oauthError(code), .token(access: "never")])
        let flow = try await flow(provider())
        let recorders = recordStates(flow)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) })
        #expect(error.code == expected)
        #expect(error.endpoint == .token)
        #expect(mock.requests(.token).count == 2)
        #expect(await flow.authorization(for: "phone") == nil)
        for seen in await collected(recorders) { #expect(seen.map(\.name) == ["empty", "authorizing", "error"]) }
    }

    @Test("never a poll past expires_in: at 12 s with interval 5 the request is dead after two polls and a 2 s wait")
    func localExpiry() async throws {
        mock.script(path: Self.path, [Self.ack(expiresIn: 12, interval: 5)])
        mock.script(.token, [.oauthError("authorization_pending")])
        let flow = try await flow(provider())
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) }
        #expect(error?.code == .expired)
        #expect(error?.message?.contains("CIBA Core §11") == true)
        #expect(mock.requests(.token).count == 2)
        #expect(clock.sleeps == [.seconds(5), .seconds(5), .seconds(2)])
    }

    @Test("slow_down forever, or an interval beyond expires_in, never waits past expires_in", arguments: [(30, 5), (3, 100_000), (10, 1)])
    func neverPastExpiry(expiresIn: Int, interval: Int) async throws {
        mock.script(path: Self.path, [Self.ack(expiresIn: expiresIn, interval: interval)])
        mock.script(.token, [.oauthError("slow_down")])
        let flow = try await flow(provider())
        let start = clock.date
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) }
        #expect(error?.code == .expired)
        #expect(clock.date.timeIntervalSince(start) == TimeInterval(expiresIn))
    }

    @Test("cancelling the poll stops it with .cancelled after exactly the polls made")
    func cancellation() async throws {
        let parking = ParkingClock(instantSleeps: 2)
        mock.script(path: Self.path, [Self.ack()])
        mock.script(.token, [.oauthError("authorization_pending")])
        let flow = try await flow(provider(), clock: parking)
        let task = Task { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) }
        var parked = parking.parked.makeAsyncIterator()
        _ = await parked.next()
        #expect(mock.requests(.token).count == 2)
        task.cancel()
        let error = await #expect(throws: OAuthError.self) { try await task.value }
        #expect(error?.code == .cancelled)
        #expect(mock.requests(.token).count == 2)
    }

    // MARK: The ID token

    static let minter = Minter(TestKeys.rsa, .rs256, kid: "key-a")

    func idToken(_ changes: [String: JSONValue] = [:]) throws -> String {
        let now = Int(clock.date.timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(mock.issuer), "sub": .string("alice"), "aud": .string("ciba-client"), "exp": .number(String(now + 600)),
            "iat": .number(String(now)), "urn:openid:params:jwt:claim:auth_req_id": .string("ari-0123456789abcdef"),
        ]
        claims.merge(changes) { $1 }
        return try Self.minter.token(claims: claims)
    }

    @Test("the ID token is validated as the code flow's (issuer, audience, signature, at_hash), without a nonce, and kept")
    func validatedIDToken() async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.minter.jwk()])])
        mock.script(path: Self.path, [Self.ack()])
        let atHash = try IDTokenValidator.halfHash(Secret("at-1"), algorithm: .rs256)
        mock.script(.token, [.token(access: "at-1", refresh: "rt-1", idToken: try idToken(["at_hash": .string(atHash)]))])
        let flow = try await flow(provider(issuer: mock.issuer))
        let authorization = try await flow.authorizeWithBackchannel(provider: "phone", Self.alice)
        #expect(authorization.idToken?.subject == "alice")
        #expect(try await flow.tokenSet(for: "phone").validatedIDToken != nil)
    }

    @Test("an ID token that fails a check, or none at all when openid was granted, is .idTokenRejected and nothing is stored", arguments: [
        "wrong issuer", "wrong audience", "expired", "at_hash", "missing",
    ])
    func rejectedIDToken(problem: String) async throws {
        mock.script(.openIDConfiguration, [mock.discoveryDocument()])
        mock.script(.jwks, [MockProvider.jwks([try Self.minter.jwk()])])
        mock.script(path: Self.path, [Self.ack()])
        let token: String? = switch problem {
        case "wrong issuer": try idToken(["iss": .string("https://evil.example")])
        case "wrong audience": try idToken(["aud": .string("another-client")])
        case "expired": try idToken(["exp": .number(String(Int(clock.date.timeIntervalSince1970) - 3600))])
        case "at_hash": try idToken(["at_hash": .string("AAAAAAAAAAAAAAAAAAAAAA")])
        default: nil
        }
        mock.script(.token, [.token(access: "at-1", refresh: "rt-1", scope: "openid api", idToken: token)])
        let flow = try await flow(provider(issuer: mock.issuer))
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) }
        #expect(error?.code == .idTokenRejected)
        #expect(await flow.authorization(for: "phone") == nil)
    }

    // MARK: Secrets

    @Test("the auth_req_id, the notification token, the hints and the user code never print: not in the request's, the state's or an error's description, dump or reflection")
    func redaction() async throws {
        let id = "ari-SECRET-4c1d0e7f"
        mock.script(path: Self.path, [Self.ack(id: id)])
        mock.script(.token, [.oauthError("access_denied")])
        let flow = try await flow(provider(mode: .ping))
        let request = BackchannelAuthenticationRequest(hint: .idTokenHint(Secret("eyJ.HINTSECRET.x")), userCode: Secret("USERCODESECRET"))
        let authentication = try await flow.requestBackchannelAuthentication(provider: "phone", request)
        let token = try #require(mock.requests(path: Self.path).only?.form["client_notification_token"])
        let error = await #expect(throws: OAuthError.self) { try await flow.pollBackchannelAuthentication(authentication) }
        var dumped = ""
        dump(authentication, to: &dumped)
        var dumpedRequest = ""
        dump(request, to: &dumpedRequest)
        let renderings = [
            String(describing: authentication), String(reflecting: authentication), dumped, dumpedRequest,
            String(describing: State.authorizing(provider: "phone", grant: .ciba, backchannel: authentication)),
            String(describing: error as Any), String(reflecting: error as Any),
        ]
        for rendering in renderings {
            for secret in [id, token, "HINTSECRET", "USERCODESECRET"] { #expect(!rendering.contains(secret), "\(rendering)") }
        }
        #expect(String(describing: authentication).contains("authReqID: <redacted>"))
    }

    // MARK: Ping mode (§10.2)

    @Test("ping mode: a client_notification_token of 43 base64url characters (256 bits) is sent, fresh for each request")
    func notificationToken() async throws {
        mock.script(path: Self.path, [Self.ack(interval: nil), Self.ack(interval: nil)])
        let flow = try await flow(provider(mode: .ping))
        let first = try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice)
        _ = try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice)
        let tokens = mock.requests(path: Self.path).compactMap { $0.form["client_notification_token"] }
        #expect(tokens.count == 2 && tokens[0] != tokens[1])
        for token in tokens { #expect(token.count == 43 && token.allSatisfy { base64URLAlphabet.contains($0) }) }
        #expect(first.deliveryMode == .ping)
        #expect(first.interval == 5, "no interval in ping mode: polled every 5 s all the same")
        #expect(mock.requests(path: Self.path).map { $0.formPairs.map(\.0) }.allSatisfy { $0 == ["scope", "client_notification_token", "login_hint", "binding_message"] })
    }

    @Test("ping mode: the poll parked on its interval is woken by the ping naming it (bearer and auth_req_id), and by nothing else")
    func pingWakesThePoll() async throws {
        let parking = ParkingClock(instantSleeps: 0)   // every wait parks: only a ping moves the poll on
        mock.script(path: Self.path, [Self.ack(id: "ari-ping-1", interval: nil)])
        mock.script(.token, [try approved()])
        let flow = try await flow(provider(mode: .ping, issuer: mock.issuer), clock: parking)
        let authentication = try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice)
        let token = try #require(mock.requests(path: Self.path).only?.form["client_notification_token"])
        let poll = Task { try await flow.pollBackchannelAuthentication(authentication) }
        var parked = parking.parked.makeAsyncIterator()
        _ = await parked.next()

        let body = Data(#"{"auth_req_id":"ari-ping-1"}"#.utf8)
        #expect(!flow.receiveBackchannelNotification(authorization: "Bearer wrong-\(token)", body: body))
        #expect(!flow.receiveBackchannelNotification(authorization: "Bearer \(token)", body: Data(#"{"auth_req_id":"ari-other"}"#.utf8)))
        #expect(!flow.receiveBackchannelNotification(authorization: "Basic \(token)", body: body))
        #expect(!flow.receiveBackchannelNotification(authorization: nil, body: body))
        #expect(!flow.receiveBackchannelNotification(authorization: "Bearer \(token)", body: Data("auth_req_id=ari-ping-1".utf8)))
        #expect(mock.requests(.token).isEmpty, "no ping that names another request moves the poll")

        #expect(flow.receiveBackchannelNotification(authorization: "bearer \(token)", body: body))
        let authorization = try await poll.value
        #expect(authorization.grant == .ciba)
        #expect(mock.requests(.token).count == 1)
        #expect(!flow.receiveBackchannelNotification(authorization: "Bearer \(token)", body: body), "the request is done: a late ping names nothing")
    }

    @Test("ping mode: a ping that comes between the acknowledgement and the first poll is kept for that poll")
    func pingBeforeThePoll() async throws {
        let parking = ParkingClock(instantSleeps: 0)
        mock.script(path: Self.path, [Self.ack(id: "ari-early", interval: nil)])
        mock.script(.token, [try approved()])
        let flow = try await flow(provider(mode: .ping, issuer: mock.issuer), clock: parking)
        let authentication = try await flow.requestBackchannelAuthentication(provider: "phone", Self.alice)
        let token = try #require(mock.requests(path: Self.path).only?.form["client_notification_token"])
        #expect(flow.receiveBackchannelNotification(authorization: "Bearer \(token)", body: Data(#"{"auth_req_id":"ari-early"}"#.utf8)))
        let authorization = try await flow.pollBackchannelAuthentication(authentication)
        #expect(authorization.grant == .ciba)
        #expect(mock.requests(.token).count == 1)
    }

    @Test("ping mode: a denial the server never pings for is still learnt by polling at the interval")
    func pingModePolls() async throws {
        mock.script(path: Self.path, [Self.ack(interval: nil)])
        mock.script(.token, [.oauthError("authorization_pending"), .oauthError("access_denied")])
        let flow = try await flow(provider(mode: .ping))
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) }
        #expect(error?.code == .accessDenied)
        #expect(clock.sleeps == [.seconds(5), .seconds(5)])
    }

    @Test("ping mode: cancelling the parked poll ends it with .cancelled")
    func pingModeCancellation() async throws {
        let parking = ParkingClock(instantSleeps: 0)
        mock.script(path: Self.path, [Self.ack(interval: nil)])
        let flow = try await flow(provider(mode: .ping), clock: parking)
        let task = Task { try await flow.authorizeWithBackchannel(provider: "phone", Self.alice) }
        var parked = parking.parked.makeAsyncIterator()
        _ = await parked.next()
        task.cancel()
        let error = await #expect(throws: OAuthError.self) { try await task.value }
        #expect(error?.code == .cancelled)
        #expect(mock.requests(.token).isEmpty)
    }

    // MARK: The catalog

    static func catalog(_ extra: String) -> Data {
        Data((#"[{"id":"corp","tokenURL":"https://login.example/token","clientID":"bot","clientSecret":"s","# + extra + "}]").utf8)
    }

    @Test("the catalog reads backchannelAuthenticationURL, cibaDeliveryMode and cibaLoginHint")
    func catalogKeys() throws {
        let provider = try #require(try ProviderCatalog.load(data: Self.catalog(
            #""backchannelAuthenticationURL":"https://login.example/bc","cibaDeliveryMode":"ping","cibaLoginHint":"alice@example.com""#),
            environment: [:]).first)
        #expect(provider.backchannelAuthenticationURL == URL(string: "https://login.example/bc"))
        #expect(provider.cibaDeliveryMode == .ping)
        #expect(provider.cibaLoginHint == "alice@example.com")
        let plain = try #require(try ProviderCatalog.load(data: Self.catalog(#""scopes":"openid""#), environment: [:]).first)
        #expect(plain.cibaDeliveryMode == .poll && plain.cibaLoginHint == nil && plain.backchannelAuthenticationURL == nil)
    }

    static let badKeys: [(String, String)] = [
        (#""cibaDeliveryMode":"push""#, "cibaDeliveryMode"), (#""cibaDeliveryMode":true"#, "cibaDeliveryMode"),
        (#""cibaLoginHint":"alice\u001b[2J""#, "cibaLoginHint"), (#""cibaLoginHint":"""#, "cibaLoginHint"),
        (#""backchannelAuthenticationURL":"http://login.example/bc""#, "backchannelAuthenticationURL"),
    ]

    @Test("a catalog with a bad CIBA key does not load, and names it", arguments: badKeys)
    func badCatalogKeys(member: String, key: String) throws {
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: Self.catalog(member), environment: [:]) }
        #expect(error?.code == .configuration)
        let message = error?.message ?? ""
        #expect(message.contains(key), "\(message)")
        #expect(!message.contains("\u{1B}"))
    }

    // MARK: A provider reached only through CIBA

    @Test("a confidential provider with a backchannel endpoint and nothing stored is not fetched with client credentials")
    func notServiceOnly() async throws {
        var provider = provider()
        provider.authorizationURL = nil
        provider.deviceAuthorizationURL = nil
        #expect(provider.supportedGrants.contains(.ciba))
        let flow = try await flow(provider)
        let error = await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "phone") }
        #expect(error?.code == .reauthorizationRequired)
        #expect(mock.requests(.token).isEmpty)
    }
}
