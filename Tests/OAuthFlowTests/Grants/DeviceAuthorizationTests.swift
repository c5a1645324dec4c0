import Foundation
import OAuthFlow
import OAuthFlowTesting
import OAuthFlowURLSession
import Synchronization
import Testing

@Suite("Device authorization (RFC 8628)", .timeLimit(.minutes(1)))
struct DeviceAuthorizationTests {
    let mock = MockProvider()
    let clock = TestClock()

    func flow(_ providers: Provider...) async throws -> AuthFlow {
        try await AuthFlow(providers: providers, transport: mock.transport(), options: options(clock))
    }

    static let deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

    // MARK: The device authorization request

    @Test("the device authorization request is a form POST with client_id and scope (RFC 8628 §3.1)", arguments: [
        (nil, "read write"), (["openid", "profile"], "openid profile"),
    ] as [([String]?, String)])
    func deviceRequest(scopes: [String]?, sentScope: String) async throws {
        mock.script(.deviceAuthorization, [.deviceCode(device: "dc-1", user: "ABCD-EFGH", expiresIn: 900, interval: 7)])
        let flow = try await flow(mock.provider(id: "dev", clientID: "cli-1", scopes: ["read", "write"]))
        let code = try await flow.requestDeviceCode(provider: "dev", scopes: scopes)

        let sent = try #require(mock.requests(.deviceAuthorization).only)
        #expect(sent.method == "POST")
        #expect(sent.url == mock.url(.deviceAuthorization))
        #expect(sent.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(sent.header("Accept") == "application/json")
        #expect(uniqueForm(sent) == ["client_id": "cli-1", "scope": sentScope])

        #expect(code.userCode == "ABCD-EFGH")
        #expect(code.verificationURI == URL(string: "https://example.com/device"))
        #expect(code.verificationURIComplete == nil)
        #expect(code.interval == 7)
        #expect(code.expiresIn == 900)
        #expect(code.expiresAt == clock.date.addingTimeInterval(900))
        #expect(code.scopes == (scopes ?? ["read", "write"]))
        #expect(mock.requests(.token).isEmpty, "requesting a code does not poll")
    }

    @Test("verification_url (Google) is accepted for verification_uri")
    func googleVerificationURL() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(verificationURI: "https://www.google.com/device", uriKey: "verification_url")])
        let flow = try await flow(mock.provider(id: "google"))
        let code = try await flow.requestDeviceCode(provider: "google")
        #expect(code.verificationURI == URL(string: "https://www.google.com/device"))
    }

    @Test("verification_uri_complete is kept (RFC 8628 §3.3.1)")
    func verificationURIComplete() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(user: "WDJB-MJHT", complete: "https://example.com/device?user_code=WDJB-MJHT")])
        let flow = try await flow(mock.provider(id: "dev"))
        let code = try await flow.requestDeviceCode(provider: "dev")
        #expect(code.verificationURIComplete == URL(string: "https://example.com/device?user_code=WDJB-MJHT"))
    }

    @Test("a device authorization response without a required field is .invalidResponse (RFC 8628 §3.2)", arguments: [
        #"{"user_code":"U","verification_uri":"https://e.example/d","expires_in":900}"#,
        #"{"device_code":"D","verification_uri":"https://e.example/d","expires_in":900}"#,
        #"{"device_code":"","user_code":"U","verification_uri":"https://e.example/d","expires_in":900}"#,
        #"{"device_code":"D","user_code":"U","expires_in":900}"#,
        #"{"device_code":"D","user_code":"U","verification_uri":"https://e.example/d"}"#,
        #"{"device_code":"D","user_code":"U","verification_uri":"https://e.example/d","expires_in":"soon"}"#,
        #"{"device_code":"D","user_code":"U","verification_uri":"https://e.example/d","expires_in":900,"interval":"x"}"#,
        #"{"device_code":7,"user_code":"U","verification_uri":"https://e.example/d","expires_in":900}"#,
    ])
    func invalidDeviceResponse(body: String) async throws {
        mock.script(.deviceAuthorization, [.json(body)])
        let flow = try await flow(mock.provider(id: "dev"))
        let recorders = recordStates(flow)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "dev") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .deviceAuthorization)
        #expect(mock.requests(.token).isEmpty)
        let expected: [State] = [.empty, .requestingDeviceCode(provider: "dev"), .error(provider: "dev", error)]
        for seen in await collected(recorders) { #expect(seen == expected) }
    }

    @Test("a user_code with a control character, a line break, a bidi control, or over 64 characters is .invalidResponse", arguments: [
        #"ABCD\u001b[2J"#, #"ABCD\nOpen https://evil.example"#, #"ABCD\r"#, "ABCD\\u0000", #"A\u009bB"#, #"A\u0085B"#,
        #"A\u2028B"#, #"A\u2029B"#, #"A\u202eB"#, #"A\u2066B"#, #"A\u007fB"#, #"\tABCD"#, String(repeating: "W", count: 65),
        String(repeating: "é", count: 65),
    ])
    func untrustworthyUserCode(userCode: String) async throws {
        mock.script(.deviceAuthorization, [.json(
            #"{"device_code":"D","user_code":"\#(userCode)","verification_uri":"https://e.example/d","expires_in":900}"#)])
        let flow = try await flow(mock.provider(id: "dev"))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "dev") })
        #expect(error.code == .invalidResponse)
        #expect(error.endpoint == .deviceAuthorization)
        #expect(error.message?.contains("user_code") == true)
        #expect(!(error.message ?? "").contains("evil") && !String(describing: error).contains("WWWW"))
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("a user_code of 64 characters, or with spaces, dashes and letters beyond ASCII, is accepted", arguments: [
        String(repeating: "W", count: 64), "WDJB MJHT", "ÄÖÜ-1234", String(repeating: "é", count: 64),
    ])
    func acceptableUserCode(userCode: String) async throws {
        mock.script(.deviceAuthorization, [.json(
            #"{"device_code":"D","user_code":"\#(userCode)","verification_uri":"https://e.example/d","expires_in":900}"#)])
        let flow = try await flow(mock.provider(id: "dev"))
        let code = try await flow.requestDeviceCode(provider: "dev")
        #expect(code.userCode == userCode)
    }

    @Test("a §5.2 error at the device endpoint is .serverRejected, also with HTTP 200", arguments: [400, 200])
    func deviceEndpointError(status: Int) async throws {
        mock.script(.deviceAuthorization, [.oauthError("invalid_client", status: status)])
        let flow = try await flow(mock.provider(id: "dev"))
        let error = await #expect(throws: OAuthError.self) { try await flow.requestDeviceCode(provider: "dev") }
        #expect(error?.code == .serverRejected)
        #expect(error?.response?.code == .invalidClient)
        #expect(error?.httpStatus == status)
    }

    @Test("a provider without a device endpoint is .configuration")
    func noDeviceEndpoint() async throws {
        var provider = mock.provider(id: "web")
        provider.deviceAuthorizationURL = nil
        let flow = try await flow(provider)
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "web") }
        #expect(error?.code == .configuration)
        #expect(mock.requests().isEmpty)
    }

    // MARK: Polling

    @Test("each poll carries grant_type=device_code, device_code and client_id (RFC 8628 §3.4)")
    func pollRequests() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(device: "dc-42", interval: 1)])
        mock.script(.token, [.oauthError("authorization_pending"), .oauthError("authorization_pending"), .token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "dev", clientID: "cli-1"))
        _ = try await flow.authorizeWithDeviceCode(provider: "dev")
        let polls = mock.requests(.token)
        #expect(polls.count == 3)
        for poll in polls {
            #expect(poll.method == "POST")
            #expect(poll.url == mock.url(.token))
            #expect(poll.header("Content-Type") == "application/x-www-form-urlencoded")
            #expect(uniqueForm(poll) == ["grant_type": Self.deviceGrant, "device_code": "dc-42", "client_id": "cli-1"])
        }
        #expect(try await flow.accessToken(for: "dev").reveal() == "at-1")
    }

    @Test("a confidential client authenticates its polls (RFC 8628 §3.4)")
    func confidentialPolls() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(device: "dc-42", interval: 1)])
        mock.script(.token, [.token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "dev", clientID: "cli-1", clientSecret: "s3cret"))
        _ = try await flow.authorizeWithDeviceCode(provider: "dev")
        let poll = try #require(mock.requests(.token).only)
        #expect(poll.basicCredentials?.id == "cli-1")
        #expect(poll.basicCredentials?.secret == "s3cret")
        #expect(uniqueForm(poll) == ["grant_type": Self.deviceGrant, "device_code": "dc-42"])
    }

    @Test("without interval the client waits 5 s between polls (RFC 8628 §3.2)")
    func defaultInterval() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(interval: nil)])
        mock.script(.token, [.oauthError("authorization_pending"), .oauthError("authorization_pending"), .token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "dev"))
        let code = try await flow.requestDeviceCode(provider: "dev")
        #expect(code.interval == 5)
        _ = try await flow.pollDeviceAuthorization(code)
        #expect(clock.sleeps == [.seconds(5), .seconds(5), .seconds(5)])
        #expect(mock.requests(.token).count == 3)
    }

    @Test("slow_down adds 5 s and keeps it for the rest of the flow, republishing the code (RFC 8628 §3.5)")
    func slowDown() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(interval: 3)])
        mock.script(.token, [
            .oauthError("authorization_pending"), .oauthError("slow_down"), .oauthError("authorization_pending"),
            .oauthError("authorization_pending"), .oauthError("slow_down"), .oauthError("authorization_pending"),
            .token(access: "at-1"),
        ])
        let flow = try await flow(mock.provider(id: "dev"))
        let recorders = recordStates(flow)
        let authorization = try await flow.authorizeWithDeviceCode(provider: "dev")

        #expect(clock.sleeps == [3, 3, 8, 8, 8, 13, 13].map { .seconds($0) })
        #expect(mock.requests(.token).count == 7)
        for seen in await collected(recorders) {
            #expect(seen.map(\.name) == [
                "empty", "requestingDeviceCode", "receivedDeviceCode", "receivedDeviceCode", "receivedDeviceCode", "authorized",
            ])
            let intervals = seen.compactMap { state -> Int? in
                if case .receivedDeviceCode(_, let code) = state { return code.interval }
                return nil
            }
            #expect(intervals == [3, 8, 13])
            #expect(seen.last == .authorized(provider: "dev", authorization))
        }
    }

    static let pendingResponses: [MockResponse] = [
        .oauthError("authorization_pending"),
        .oauthError("authorization_pending", status: 200),
        .form("error=authorization_pending&error_description=waiting", status: 400),
        .form("error=authorization_pending", status: 200),
        MockResponse(status: 200, headers: ["Content-Type": "text/plain"], body: Data("error=authorization_pending".utf8)),
    ]

    @Test("authorization_pending is understood as JSON or form, with HTTP 400 or 200 (GitHub)", arguments: pendingResponses)
    func pendingVariants(pending: MockResponse) async throws {
        mock.script(.deviceAuthorization, [.deviceCode(interval: 2)])
        mock.script(.token, [pending, .form("access_token=gho_abc&scope=repo%2Cuser&token_type=bearer")])
        let flow = try await flow(mock.provider(id: "github"))
        let authorization = try await flow.authorizeWithDeviceCode(provider: "github")
        #expect(mock.requests(.token).count == 2)
        #expect(clock.sleeps == [.seconds(2), .seconds(2)])
        #expect(authorization.scopes == ["repo", "user"])
        #expect(try await flow.accessToken(for: "github").reveal() == "gho_abc")
    }

    @Test("slow_down with HTTP 200 in a form body still adds 5 s (GitHub)")
    func slowDownGitHub() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
        mock.script(.token, [.form("error=slow_down&error_description=Too+fast&interval=10", status: 200), .token(access: "at-1")])
        let flow = try await flow(mock.provider(id: "github"))
        _ = try await flow.authorizeWithDeviceCode(provider: "github")
        #expect(clock.sleeps == [.seconds(5), .seconds(10)])
    }

    @Test("access_denied and expired_token stop polling with .accessDenied and .expired (RFC 8628 §3.5)", arguments: [
        (MockResponse.oauthError("access_denied"), OAuthError.Code.accessDenied),
        (.oauthError("access_denied", status: 200), .accessDenied),
        (.form("error=access_denied", status: 200), .accessDenied),
        (.oauthError("expired_token"), .expired),
        (.form("error=expired_token&error_description=gone", status: 200), .expired),
        (.oauthError("invalid_grant"), .serverRejected),
    ])
    func terminalErrors(response: MockResponse, expected: OAuthError.Code) async throws {
        mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
        mock.script(.token, [.oauthError("authorization_pending"), response, .token(access: "never")])
        let flow = try await flow(mock.provider(id: "dev"))
        let recorders = recordStates(flow)
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "dev") })
        #expect(error.code == expected)
        #expect(error.endpoint == .token)
        #expect(mock.requests(.token).count == 2, "polling stops at the error")
        #expect(await flow.authorization(for: "dev") == nil)
        for seen in await collected(recorders) {
            #expect(seen.map(\.name) == ["empty", "requestingDeviceCode", "receivedDeviceCode", "error"])
            #expect(seen.last == .error(provider: "dev", error))
        }
    }

    @Test("polling stops with .expired once expires_in has passed, without another request (RFC 8628 §3.5)")
    func localExpiry() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(expiresIn: 12, interval: 5)])
        mock.script(.token, [.oauthError("authorization_pending")])  // repeated for every poll
        let flow = try await flow(mock.provider(id: "dev"))
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "dev") }
        #expect(error?.code == .expired)
        #expect(error?.recovery == .reauthorize)
        #expect(mock.requests(.token).count == 2, "polls at 5 s and 10 s; at 12 s the code is dead")
        #expect(clock.sleeps == [.seconds(5), .seconds(5), .seconds(2)], "the last wait is only the 2 s left")
    }

    @Test("interval larger than expires_in: polling ends at expiry, after one short wait and no request (RFC 8628 §3.5)")
    func intervalBeyondExpiry() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(expiresIn: 3, interval: 100_000)])
        let flow = try await flow(mock.provider(id: "dev"))
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "dev") }
        #expect(error?.code == .expired)
        #expect(clock.sleeps == [.seconds(3)])
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("slow_down forever never waits past expires_in (RFC 8628 §3.5)", arguments: [(30, 5), (61, 7), (10, 1), (3, 3)])
    func slowDownForever(expiresIn: Int, interval: Int) async throws {
        mock.script(.deviceAuthorization, [.deviceCode(expiresIn: expiresIn, interval: interval)])
        mock.script(.token, [.oauthError("slow_down")])  // repeated for every poll
        let flow = try await flow(mock.provider(id: "dev"))
        let start = clock.date
        let error = await #expect(throws: OAuthError.self) { try await flow.authorizeWithDeviceCode(provider: "dev") }
        #expect(error?.code == .expired)
        #expect(clock.date.timeIntervalSince(start) == TimeInterval(expiresIn), "ends exactly at expiry, not an interval later")
        #expect(clock.sleeps.count <= expiresIn + 1)
    }

    @Test("a code polled after it expired sends nothing")
    func pollAfterExpiry() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(expiresIn: 60, interval: 5)])
        let flow = try await flow(mock.provider(id: "dev"))
        let code = try await flow.requestDeviceCode(provider: "dev")
        clock.advance(by: .seconds(61))
        let error = await #expect(throws: OAuthError.self) { try await flow.pollDeviceAuthorization(code) }
        #expect(error?.code == .expired)
        #expect(mock.requests(.token).isEmpty)
    }

    @Test("two concurrent subscribers see empty → requestingDeviceCode → receivedDeviceCode → authorized")
    func stateSequence() async throws {
        mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        mock.script(.token, [.oauthError("authorization_pending"), .token(access: "at-1", refresh: "rt-1")])
        let flow = try await flow(mock.provider(id: "dev"))
        let recorders = recordStates(flow)
        let code = try await flow.requestDeviceCode(provider: "dev")
        let authorization = try await flow.pollDeviceAuthorization(code)
        let expected: [State] = [
            .empty, .requestingDeviceCode(provider: "dev"), .receivedDeviceCode(provider: "dev", code),
            .authorized(provider: "dev", authorization),
        ]
        for seen in await collected(recorders) { #expect(seen == expected) }
        #expect(authorization.grant == .deviceCode)
        #expect(authorization.isRefreshable)
    }

    // MARK: Cancellation

    @Test("cancelling the polling task stops it promptly with .cancelled after exactly the polls made")
    func cancellationWhileWaiting() async throws {
        let parking = ParkingClock(instantSleeps: 3)
        mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
        mock.script(.token, [.oauthError("authorization_pending")])
        let flow = try await AuthFlow(
            providers: [mock.provider(id: "dev")], transport: mock.transport(),
            options: AuthFlow.Options(clock: parking, now: { [clock] in clock.date }))
        let recorders = recordStates(flow)
        let task = Task { try await flow.authorizeWithDeviceCode(provider: "dev") }
        var parked = parking.parked.makeAsyncIterator()
        _ = await parked.next()  // the fourth wait began: three polls were made and answered
        #expect(mock.requests(.token).count == 3)
        task.cancel()
        let error = await #expect(throws: OAuthError.self) { try await task.value }
        #expect(error?.code == .cancelled)
        #expect(error?.recovery == OAuthError.Recovery.none)
        #expect(mock.requests(.token).count == 3, "no poll after cancellation")
        for seen in await collected(recorders) {
            #expect(seen.map(\.name) == ["empty", "requestingDeviceCode", "receivedDeviceCode", "error"])
        }
    }

    @Test("cancelled while a poll is in flight, on a transport that reports it as a connection failure: .cancelled, no back-off")
    func cancellationDuringPollReportedAsTransportFailure() async throws {
        // The CLI's Ctrl-C once took 30 s under load: URLSessionTransport left the cancelled request
        // waiting for its deadline, then reported `.transport`. Even a transport that does that must
        // not send the poll into a back-off: the flow ends it as `.cancelled` without another sleep.
        let transport = ParkedPollTransport(device: mock)
        mock.script(.deviceAuthorization, [.deviceCode(interval: 5)])
        let flow = try await AuthFlow(providers: [mock.provider(id: "dev")], transport: transport, options: options(clock))
        let task = Task { try await flow.authorizeWithDeviceCode(provider: "dev") }
        var parked = transport.parked.makeAsyncIterator()
        _ = await parked.next()  // the first poll is in flight
        task.cancel()
        let error = await #expect(throws: OAuthError.self) { try await task.value }
        #expect(error?.code == .cancelled)
        #expect(clock.sleeps == [.seconds(5)], "only the interval before the first poll; no back-off sleep after the cancellation")
        #expect(transport.polls == 1)
    }

    @Test("cancelling a polling task that never waits (instant clock) still stops it with .cancelled")
    func cancellationWhileSpinning() async throws {
        // With instant sleeps the loop is always busy; 36000 s / 5 s bounds it to 7200 polls if cancellation were lost.
        mock.script(.deviceAuthorization, [.deviceCode(expiresIn: 36_000, interval: 5)])
        mock.script(.token, [.oauthError("authorization_pending")])
        let flow = try await flow(mock.provider(id: "dev"))
        let received = recordStates(flow, count: 1) { $0.name == "receivedDeviceCode" }
        let task = Task { try await flow.authorizeWithDeviceCode(provider: "dev") }
        _ = await collected(received)
        task.cancel()
        let error = await #expect(throws: OAuthError.self) { try await task.value }
        #expect(error?.code == .cancelled, "not .expired: the loop must not outlive its task")
        let polls = mock.requests(.token).count
        #expect(polls < 7200)
        #expect(flow.state.name == "error")
    }
}

/// Sleeps return at once for the first `instantSleeps` calls; later ones park until the task is
/// cancelled and announce it on ``parked``. Makes "cancelled while waiting" deterministic.
final class ParkingClock: Clock, Sendable {
    typealias Instant = ContinuousClock.Instant
    let instantSleeps: Int
    let parked: AsyncStream<Void>
    private let announce: AsyncStream<Void>.Continuation
    private let calls = Mutex(0)

    init(instantSleeps: Int) {
        self.instantSleeps = instantSleeps
        (parked, announce) = AsyncStream.makeStream(of: Void.self)
    }

    var now: Instant { .now }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let call = calls.withLock { calls in
            calls += 1
            return calls
        }
        try Task.checkCancellation()
        guard call > instantSleeps else { return }
        announce.yield()
        // Only cancellation ends this wait; a lost cancellation trips the suite's time limit.
        try await Task.sleep(for: .seconds(3600))
    }
}

/// Answers the device authorization request through `device`, and parks every token request until
/// its task is cancelled, then fails it as a lost connection (`.transport`), as a transport that
/// does not tell a cancellation from a failure would.
final class ParkedPollTransport: HTTPTransport {
    let device: URLSessionTransport
    let parked: AsyncStream<Void>
    private let parkedContinuation: AsyncStream<Void>.Continuation
    private let count = Mutex(0)

    init(device mock: MockProvider) {
        device = mock.transport()
        (parked, parkedContinuation) = AsyncStream.makeStream(of: Void.self)
    }

    /// Token requests received.
    var polls: Int { count.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard request.url.path == MockProvider.Endpoint.token.rawValue else { return try await device.send(request) }
        count.withLock { $0 += 1 }
        parkedContinuation.yield()
        let (wake, wakeContinuation) = AsyncStream.makeStream(of: Void.self)
        await withTaskCancellationHandler {
            for await _ in wake { break }
        } onCancel: {
            wakeContinuation.finish()
        }
        throw OAuthError(.transport, message: "connection lost")
    }
}
