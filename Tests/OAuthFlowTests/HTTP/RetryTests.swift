import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// Token request retries (Retry.swift) on the injected clock and jitter source: every sleep is
/// asserted exactly, every request on the wire counted.
@Suite("Retries of token requests (RFC 6749 §5.2, RFC 9110 §10.2.3)", .timeLimit(.minutes(1)))
struct RetryTests {
    let clock = TestClock()
    let server = ScriptedTransport()
    let log = LogCollector()

    /// A flow over `server` with client credentials for "app"; jitter draws come from `jitter`.
    func flow(
        retry: RetryPolicy = RetryPolicy(), jitter: JitterSequence = JitterSequence([0.5]),
        store: MemorySecretStore = MemorySecretStore(), provider: Provider = scriptedProvider(secret: "s3cret")
    ) async throws -> AuthFlow {
        let options = AuthFlow.Options(clock: clock, now: { [clock] in clock.date }, log: log.sink, retry: retry, jitter: jitter.source)
        return try await AuthFlow(providers: [provider], store: store, transport: server, options: options)
    }

    var tokenRequests: [HTTPRequest] { server.requests("/token") }

    // MARK: What is retried

    @Test("transport errors, 5xx and 429 are retried with full-jitter backoff until one succeeds", arguments: [
        ScriptedTransport.Step.curlFailure(7, "Couldn't connect to server"), .curlFailure(28, "Timeout was reached"),
        .curlFailure(52, "Server returned nothing"), .curlFailure(56, "Failure when receiving data from the peer"),
        .status(500), .status(502, json: nil, headers: ["Content-Type": "text/html"]), .status(503), .status(504), .status(429),
        .oauthError("temporarily_unavailable", status: 503), .oauthError("server_error", status: 500),
    ])
    func transientFailuresRetried(failure: ScriptedTransport.Step) async throws {
        let jitter = JitterSequence([0.5])
        let flow = try await flow(jitter: jitter)
        server.script("/token", [failure, failure, .token("at-1")])

        let authorization = try await flow.clientCredentials(provider: "app")

        #expect(authorization.providerID == "app")
        #expect(try await flow.accessToken(for: "app").reveal() == "at-1")
        #expect(tokenRequests.count == 3, "at most 3 attempts, and the third succeeded")
        #expect(Set(tokenRequests.map(\.form)).count == 1, "each attempt sends the same form")
        // Bounds 0.5 s then 1 s, each drawn at 0.5 (full jitter: a uniform part of the bound).
        #expect(clock.sleeps == [.milliseconds(250), .milliseconds(500)])
        #expect(jitter.draws == 2)
    }

    @Test("after 3 attempts the last answer is the error; nothing more is sent")
    func attemptsExhausted() async throws {
        let flow = try await flow()
        server.script("/token", [.oauthError("temporarily_unavailable", status: 503)])

        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") })

        #expect(error.code == .serverRejected)
        #expect(error.response?.code == .temporarilyUnavailable)
        #expect(error.httpStatus == 503)
        #expect(error.recovery == .retryLater)
        #expect(tokenRequests.count == 3)
        #expect(clock.sleeps == [.milliseconds(250), .milliseconds(500)])
        #expect(flow.state == .error(provider: "app", error))
    }

    @Test("the backoff bound starts at 0.5 s, doubles per retry and stops at 4 s; the wait is the drawn part of it")
    func exponentialBackoff() async throws {
        // Draws 1, 0.5, 0.25, 0, 0.75 against bounds 0.5, 1, 2, 4, 4.
        let jitter = JitterSequence([1, 0.5, 0.25, 0, 0.75])
        let flow = try await flow(retry: RetryPolicy(maximumAttempts: 6, maximumTotalTime: .seconds(60)), jitter: jitter)
        server.script("/token", [.status(503)])

        await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }

        #expect(tokenRequests.count == 6)
        #expect(clock.sleeps == [.milliseconds(500), .milliseconds(500), .milliseconds(500), .zero, .seconds(3)])
        #expect(RetryPolicy().backoffBound(beforeRetry: 1) == .milliseconds(500))
        #expect(RetryPolicy().backoffBound(beforeRetry: 2) == .seconds(1))
        #expect(RetryPolicy().backoffBound(beforeRetry: 10) == .seconds(4))
        #expect(RetryPolicy().backoffBound(beforeRetry: Int.max) == .seconds(4), "no overflow for a huge retry number")
    }

    @Test("a jitter source out of 0...1 (or NaN) is clamped, never a negative or endless wait")
    func jitterClamped() async throws {
        let flow = try await flow(retry: RetryPolicy(maximumAttempts: 4), jitter: JitterSequence([-3, .nan, 7]))
        server.script("/token", [.status(503)])

        await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }

        #expect(clock.sleeps == [.zero, .zero, .seconds(2)])
    }

    // MARK: Retry-After (RFC 9110 §10.2.3)

    @Test("Retry-After in seconds is waited exactly, instead of the backoff", arguments: [503, 429])
    func retryAfterSeconds(status: Int) async throws {
        let jitter = JitterSequence([0.5])
        let flow = try await flow(jitter: jitter)
        server.script("/token", [.status(status, headers: ["Retry-After": "3"]), .token("at-1")])

        try await flow.clientCredentials(provider: "app")

        #expect(tokenRequests.count == 2)
        #expect(clock.sleeps == [.seconds(3)])
        #expect(jitter.draws == 0)
    }

    @Test("Retry-After as an HTTP-date in each RFC 9110 §5.6.7 form waits until that date", arguments: [
        "Fri, 15 Jan 2027 08:00:07 GMT", "Friday, 15-Jan-27 08:00:07 GMT", "Fri Jan 15 08:00:07 2027",
    ])
    func retryAfterDate(date: String) async throws {
        // The clock starts at 1_800_000_000 = Fri, 15 Jan 2027 08:00:00 GMT.
        let flow = try await flow()
        server.script("/token", [.status(503, headers: ["Retry-After": date]), .token("at-1")])

        try await flow.clientCredentials(provider: "app")

        #expect(clock.sleeps == [.seconds(7)])
        #expect(tokenRequests.count == 2)
    }

    @Test("a Retry-After date in the past retries at once")
    func retryAfterPastDate() async throws {
        let flow = try await flow()
        server.script("/token", [.status(503, headers: ["Retry-After": "Fri, 15 Jan 2027 07:43:20 GMT"]), .token("at-1")])

        try await flow.clientCredentials(provider: "app")

        #expect(clock.sleeps == [.zero])
    }

    @Test("a Retry-After over maximumRetryAfter (10 s) is not waited for: that answer is the error", arguments: [
        "11", "99999999999999999999999", "Sat, 16 Jan 2027 08:00:00 GMT",
    ])
    func retryAfterCapped(value: String) async throws {
        let flow = try await flow()
        server.script("/token", [.status(503, headers: ["Retry-After": value]), .token("at-1")])

        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") })

        #expect(error.code == .httpStatus)
        #expect(error.httpStatus == 503)
        #expect(tokenRequests.count == 1)
        #expect(clock.sleeps.isEmpty)
        #expect(log.all.contains { $0.message.contains("asks to retry after") && $0.message.contains("not retried") })
    }

    @Test("Retry-After exactly at the cap is waited; the cap is a policy setting")
    func retryAfterAtCap() async throws {
        let flow = try await flow()
        server.script("/token", [.status(429, headers: ["Retry-After": "10"]), .token("at-1")])
        try await flow.clientCredentials(provider: "app")
        #expect(clock.sleeps == [.seconds(10)])

        let strict = try await self.flow(retry: RetryPolicy(maximumRetryAfter: .seconds(2)), provider: scriptedProvider(id: "strict", secret: "s"))
        server.script("/token", [.status(429, headers: ["Retry-After": "3"])])
        await #expect(throws: OAuthError.self) { try await strict.clientCredentials(provider: "strict") }
        #expect(clock.sleeps == [.seconds(10)], "no further sleep: 3 s is over the 2 s cap")
    }

    @Test("a Retry-After that is neither delay-seconds nor an HTTP-date falls back to the backoff", arguments: [
        "soon", "-5", "1.5", "", "Fri, 31 Feb 2027 08:00:00 GMT", "Fri, 15 Jan 2027 25:00:00 GMT",
    ])
    func retryAfterUnparsable(value: String) async throws {
        let flow = try await flow()
        server.script("/token", [.status(503, headers: ["Retry-After": value]), .token("at-1")])

        try await flow.clientCredentials(provider: "app")

        #expect(clock.sleeps == [.milliseconds(250)])
    }

    @Test("HTTP-date parsing: the RFC 9110 examples, and nil (never a trap) for anything else")
    func httpDates() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            #expect(HTTPDate.parse(text, now: now) == Date(timeIntervalSince1970: 784_111_777), "\(text)")
        }
        for text in ["", "GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                     "Sun, 29 Feb 1995 08:49:37 GMT", "Sun, 06 Nov 1994 08:60:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
                     String(repeating: "9", count: 100), "Sun, 06 Nov 19944 08:49:37 GMT"] {
            #expect(HTTPDate.parse(text, now: now) == nil, "\(text)")
        }
        #expect(HTTPDate.parse("Tue, 29 Feb 2028 00:00:00 GMT", now: now) != nil, "a leap day")
        #expect(Retrier.retryAfter(" 120 ", now: now) == .seconds(120))
        #expect(Retrier.retryAfter("99999999999999999999999", now: now) == .seconds(Int.max))
    }

    // MARK: Bounds

    @Test("no retry starts when the time since the first attempt plus the wait would pass maximumTotalTime")
    func totalTimeBounded() async throws {
        let flow = try await flow()
        // Each attempt takes 8 s of the clock: the second ends at 16.25 s, past the 15 s bound with the next wait.
        server.script("/token", [ScriptedTransport.Step.status(503).taking(.seconds(8), on: clock)])

        await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }

        #expect(tokenRequests.count == 2)
        #expect(clock.sleeps == [.milliseconds(250)])
        #expect(log.all.contains { $0.message.contains("would be exceeded") })
    }

    @Test("Retry-After waits count toward maximumTotalTime too")
    func retryAfterCountsTowardTotal() async throws {
        let flow = try await flow()
        server.script("/token", [.status(503, headers: ["Retry-After": "10"])])

        await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }

        #expect(tokenRequests.count == 2, "10 s, then another 10 s would end at 20 s > 15 s")
        #expect(clock.sleeps == [.seconds(10)])
    }

    @Test("RetryPolicy.none sends once")
    func policyNone() async throws {
        let flow = try await flow(retry: .none)
        server.script("/token", [.status(503), .token("at-1")])

        await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }

        #expect(tokenRequests.count == 1)
        #expect(clock.sleeps.isEmpty)
    }

    @Test("cancelling the task during the backoff ends it with .cancelled, without another attempt")
    func cancelledDuringBackoff() async throws {
        let manual = ManualClock()
        let options = AuthFlow.Options(clock: manual, now: { [manual] in manual.date }, jitter: { 0.5 })
        let flow = try await AuthFlow(providers: [scriptedProvider(secret: "s3cret")], transport: server, options: options)
        server.script("/token", [.status(503), .token("at-1")])

        let task = Task { try await flow.clientCredentials(provider: "app") }
        #expect(await waitUntil { manual.sleepers == 1 })
        task.cancel()
        let result = await task.result

        guard case .failure(let failure) = result, let error = failure as? OAuthError else {
            Issue.record("a cancelled retry returned \(result)")
            return
        }
        #expect(error.code == .cancelled)
        #expect(tokenRequests.count == 1)
        #expect(manual.sleeps == [.milliseconds(250)])
    }

    // MARK: What is never retried

    @Test("invalid_grant, invalid_client and every other 4xx (and 501) are final: exactly one request", arguments: [
        ScriptedTransport.Step.oauthError("invalid_grant"), .oauthError("invalid_client", status: 401), .oauthError("invalid_request"),
        .oauthError("invalid_scope"), .oauthError("unauthorized_client"), .oauthError("unsupported_grant_type"),
        .status(400), .status(401), .status(403), .status(404), .status(405), .status(501),
        // A §5.2 error that is not server_error/temporarily_unavailable is final whatever the status.
        .oauthError("invalid_client", status: 500), .oauthError("invalid_grant", status: 503),
        .oauthError("invalid_request", status: 429),
    ])
    func finalAnswers(answer: ScriptedTransport.Step) async throws {
        let jitter = JitterSequence([0.5])
        let flow = try await flow(jitter: jitter)
        server.script("/token", [answer, .token("at-1")])

        await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") }

        #expect(tokenRequests.count == 1)
        #expect(clock.sleeps.isEmpty)
        #expect(jitter.draws == 0)
    }

    @Test("transport errors no retry can cure are final: a rejected certificate, a scheme other than http(s)", arguments: [
        1, 3, 58, 60, 77,
    ])
    func permanentTransportErrors(curlCode: Int) async throws {
        let flow = try await flow()
        server.script("/token", [.curlFailure(curlCode), .token("at-1")])

        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "app") })

        #expect(error.code == .transport)
        #expect(tokenRequests.count == 1)
    }

    // MARK: Per grant

    @Test("a refresh is retried after a 503, with the same refresh token; the state stream shows one refresh")
    func refreshRetried() async throws {
        let store = MemorySecretStore(["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let flow = try await flow(store: store, provider: scriptedProvider())
        clock.advance(by: .seconds(3600))
        server.script("/token", [.status(503), .curlFailure(7), .token("at-2")])
        let recorders = recordStates(flow)
        let before = flow.state

        #expect(try await flow.accessToken(for: "app").reveal() == "at-2")

        #expect(tokenRequests.map { $0.form["refresh_token"] } == ["rt-1", "rt-1", "rt-1"])
        #expect(tokenRequests.allSatisfy { $0.form["grant_type"] == "refresh_token" })
        let authorization = try #require(await flow.authorization(for: "app"))
        let expected: [State] = [before, .requestingAccessToken(provider: "app"), .authorized(provider: "app", authorization)]
        for seen in await collected(recorders) { #expect(seen == expected) }
    }

    @Test("a refresh answered invalid_grant is not retried (RFC 6749 §5.2)")
    func refreshInvalidGrantFinal() async throws {
        let store = MemorySecretStore(["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let flow = try await flow(store: store, provider: scriptedProvider())
        clock.advance(by: .seconds(3600))
        server.script("/token", [.oauthError("invalid_grant"), .token("at-2")])

        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.accessToken(for: "app") })

        #expect(error.code == .reauthorizationRequired)
        #expect(tokenRequests.count == 1)
    }

    /// Runs a browser login up to the code exchange, with `answers` scripted for the token endpoint.
    func exchangeCode(_ answers: [ScriptedTransport.Step]) async throws -> (AuthFlow, Result<Authorization, OAuthError>) {
        let flow = try await flow(provider: scriptedProvider())
        server.script("/token", answers)
        let request = try await flow.authorizationRequest(provider: "app")
        do {
            return (flow, .success(try await flow.completeAuthorization(callbackURL: callback(request, code: "code-1"))))
        } catch {
            return (flow, .failure(error))
        }
    }

    @Test("an authorization code exchange is retried only when the request never left: no name, no connection, no TLS",
          arguments: [6, 7, 35])
    func codeExchangeRetriedBeforeSending(curlCode: Int) async throws {
        let (_, result) = try await exchangeCode([.curlFailure(curlCode), .token("at-1")])

        #expect(throws: Never.self) { try result.get() }
        #expect(tokenRequests.count == 2)
        #expect(tokenRequests.map { $0.form["code"] } == ["code-1", "code-1"])
        #expect(clock.sleeps == [.milliseconds(250)])
    }

    @Test("an authorization code exchange is never retried once the server may have seen the code (RFC 6749 §4.1.2: single use)",
          arguments: [
              ScriptedTransport.Step.curlFailure(28), .curlFailure(52), .curlFailure(56), .status(500), .status(503),
              .status(429, headers: ["Retry-After": "1"]), .oauthError("temporarily_unavailable", status: 503),
              .failure(OAuthError(.transport, message: "a custom transport's failure")),
          ])
    func codeExchangeNotRetriedAfterSending(answer: ScriptedTransport.Step) async throws {
        let (_, result) = try await exchangeCode([answer, .token("at-1")])

        #expect(throws: OAuthError.self) { try result.get() }
        #expect(tokenRequests.count == 1)
        #expect(clock.sleeps.isEmpty)
    }

    @Test("URLSessionTransport's URLError codes are classified the same way")
    func urlErrorClassification() {
        func classify(_ code: URLError.Code) -> TransportFailure {
            TransportFailure.classify(OAuthError(.transport, underlying: URLError(code)))
        }
        #expect(classify(.cannotConnectToHost) == .unsent)
        #expect(classify(.cannotFindHost) == .unsent)
        #expect(classify(.secureConnectionFailed) == .unsent)
        #expect(classify(.timedOut) == .maybeSent)
        #expect(classify(.networkConnectionLost) == .maybeSent)
        #expect(classify(.serverCertificateUntrusted) == .permanent)
        #expect(TransportFailure.classify(OAuthError(.transport)) == .maybeSent)
    }

    @Test("device authorization: neither the code request nor a poll goes through the retrier")
    func deviceNotRetried() async throws {
        var provider = scriptedProvider()
        provider.deviceAuthorizationURL = URL(string: "https://as.test/device")
        let flow = try await flow(provider: provider)
        server.script("/device", [.status(503)])

        await #expect(throws: OAuthError.self) { try await flow.requestDeviceCode(provider: "app") }
        #expect(server.requests("/device").count == 1)

        server.script("/device", [.status(200, json: #"{"device_code":"dc","user_code":"U","verification_uri":"https://as.test/d","expires_in":600,"interval":1}"#)])
        server.script("/token", [.status(503), .token("at-1")])
        let code = try await flow.requestDeviceCode(provider: "app")
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.pollDeviceAuthorization(code) })
        #expect(error.httpStatus == 503)
        #expect(tokenRequests.count == 1)
    }

    @Test("userinfo, introspection, revocation and discovery are not retried")
    func otherEndpointsNotRetried() async throws {
        var provider = scriptedProvider(secret: "s3cret")
        provider.userinfoURL = URL(string: "https://as.test/userinfo")
        provider.introspectionURL = URL(string: "https://as.test/introspect")
        provider.revocationURL = URL(string: "https://as.test/revoke")
        let store = MemorySecretStore(["app": storedEntry(provider: "app", issuedAt: clock.date)])
        let flow = try await flow(store: store, provider: provider)
        server.script("/userinfo", [.status(503), .status(200, json: #"{"sub":"u"}"#)])
        server.script("/introspect", [.status(503), .status(200, json: #"{"active":true}"#)])
        server.script("/revoke", [.status(503)])

        await #expect(throws: OAuthError.self) { try await flow.userInfo(provider: "app") }
        await #expect(throws: OAuthError.self) { try await flow.introspect(provider: "app") }
        let result = try await flow.revoke(provider: "app")

        #expect(server.requests("/userinfo").count == 1)
        #expect(server.requests("/introspect").count == 1)
        #expect(server.requests("/revoke").count == 2, "one per token (refresh, then access), none repeated")
        #expect(!result.isComplete)

        let discovered = try await self.flow(provider: Provider(id: "idp", issuer: "https://idp.test", clientID: "c"))
        server.script("/.well-known/openid-configuration", [.status(503)])
        await #expect(throws: OAuthError.self) { try await discovered.metadata(for: discovered.provider("idp")) }
        #expect(server.requests("/.well-known/openid-configuration").count == 1)
        #expect(clock.sleeps.isEmpty)
    }

    @Test("retry log lines name the reason and the attempt, never a secret")
    func logging() async throws {
        let flow = try await flow()
        server.script("/token", [.status(503), .token("at-secret-1")])

        try await flow.clientCredentials(provider: "app")

        let lines = log.all.map(\.message)
        #expect(lines.contains { $0.contains("HTTP 503") && $0.contains("attempt 2 of 3") })
        #expect(!lines.joined().contains("s3cret"))
        #expect(!lines.joined().contains("at-secret-1"))
    }
}
