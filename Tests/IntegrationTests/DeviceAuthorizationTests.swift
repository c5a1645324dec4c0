import Foundation
import OAuthFlow
import Testing

extension Integration {
    /// Real clock: the server's polling interval is 1 s, so each test takes about two seconds.
    @Suite("Device authorization grant (RFC 8628)")
    struct DeviceAuthorization {
        /// Runs ``AuthFlow/authorizeWithDeviceCode(provider:scopes:)`` while a background task plays the
        /// user: it takes the code from the state stream, waits for the first `authorization_pending`
        /// answer, then approves or denies in the browser (typing the user code, or opening
        /// `verification_uri_complete`).
        private func run(
            approve: Bool, typeUserCode: Bool
        ) async throws -> (server: IntegrationServer, flow: AuthFlow, transport: RecordingTransport,
                          recorder: StateRecorder, result: Result<Authorization, OAuthError>) {
            let server = try IntegrationServer.require()
            let transport = RecordingTransport()
            let flow = try await server.flow(server.deviceProvider(), transport: transport)
            let recorder = StateRecorder(flow)

            let user = Task {
                try await waitUntil("receivedDeviceCode") { recorder.states.contains { $0.deviceCode != nil } }
                let code = try #require(recorder.states.lazy.compactMap(\.deviceCode).first)
                try await waitUntil("the first authorization_pending") {
                    transport.exchanges(to: "/o/token/").contains { $0.serverError == "authorization_pending" }
                }
                let uri = typeUserCode ? code.verificationURI : try #require(code.verificationURIComplete)
                try await TestBrowser().approveDevice(
                    verificationURI: uri, userCode: code.userCode, username: Fixture.username, password: Fixture.password,
                    approve: approve)
            }
            defer { user.cancel() }

            let result: Result<Authorization, OAuthError>
            do {
                result = .success(try await withTimeout("device authorization", .seconds(30)) {
                    try await flow.authorizeWithDeviceCode(provider: "dot-device")
                })
            } catch let error as OAuthError {
                result = .failure(error)
            }
            try await user.value
            return (server, flow, transport, recorder, result)
        }

        @Test("authorization_pending until the user approves, then authorized; a subscriber sees exactly that (RFC 8628 §3.4–3.5)")
        func approved() async throws {
            let (server, flow, transport, recorder, result) = try await run(approve: true, typeUserCode: true)
            let authorization = try result.get()
            #expect(authorization.grant == .deviceCode)
            #expect(authorization.isRefreshable)
            #expect(Set(authorization.scopes) == ["read", "write"])

            // The server said "pending" at least once, then issued the token; every poll was well formed.
            let polls = transport.exchanges(to: "/o/token/")
            #expect(polls.count >= 2)
            #expect(polls.dropLast().allSatisfy { $0.response?.status == 400 && $0.serverError == "authorization_pending" })
            #expect(polls.last?.response?.status == 200)
            #expect(polls.allSatisfy {
                $0.form["grant_type"] == "urn:ietf:params:oauth:grant-type:device_code"
                    && $0.form["client_id"] == Fixture.publicDeviceClient && $0.form["device_code"] != nil
            })

            // Exactly the states a UI needs, in order.
            let states = try await recorder.finished()
            #expect(states.map(\.name) == ["empty", "requestingDeviceCode", "receivedDeviceCode", "authorized"])
            #expect(states.map(\.providerID) == [nil, "dot-device", "dot-device", "dot-device"])
            let code = try #require(states[2].deviceCode)
            #expect(code.userCode.count == 8)
            #expect(code.verificationURI == server.url("/o/device/"))
            #expect(code.verificationURIComplete == server.url("/o/device/?user_code=\(code.userCode)"))
            #expect(code.interval == 1)
            #expect(code.expiresIn == 1800)
            #expect(states[3].authorization == authorization)

            let introspection = try await ServerAPI(server).introspect(flow.accessToken(for: "dot-device"))
            #expect(introspection.active)
            #expect(introspection.clientID == Fixture.publicDeviceClient)
            #expect(introspection.username == Fixture.username)
            #expect(introspection.scopes == ["read", "write"])
        }

        @Test("The user denies the device: access_denied becomes .accessDenied (RFC 8628 §3.5)")
        func denied() async throws {
            let (_, flow, transport, recorder, result) = try await run(approve: false, typeUserCode: false)
            guard case .failure(let error) = result else {
                Issue.record("a denied device was authorized")
                return
            }
            #expect(error.code == .accessDenied)
            #expect(error.response?.code == .accessDenied)
            #expect(error.recovery == OAuthError.Recovery.none)

            let polls = transport.exchanges(to: "/o/token/")
            #expect(polls.dropLast().allSatisfy { $0.serverError == "authorization_pending" })
            #expect(polls.last?.response?.status == 400)
            #expect(polls.last?.serverError == "access_denied")

            let states = try await recorder.finished()
            #expect(states.map(\.name) == ["empty", "requestingDeviceCode", "receivedDeviceCode", "error"])
            #expect(states.last?.error?.code == .accessDenied)
            #expect(await flow.authorization(for: "dot-device") == nil)
        }
    }
}
