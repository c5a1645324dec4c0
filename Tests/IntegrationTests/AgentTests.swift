import TestSupport
import Foundation
import OAuthFlow
import Testing

extension Integration {
    /// `authflow agent` against the real server: a client-credentials provider served from the
    /// start, and a device provider with no login that the agent re-authorizes through its notify
    /// command while it keeps serving the first; both tokens are live at the server.
    @Suite("authflow agent against the server")
    struct Agent {
        @Test("the agent serves client credentials at once, asks a person for the device provider, and serves it after approval (RFC 8628)")
        func reauthorizesWhileServing() async throws {
            let server = try IntegrationServer.require()
            let scratch = try TemporaryDirectory("authflow-it-agent", in: URL(fileURLWithPath: "/tmp"))  // short socket paths
            defer { scratch.remove() }
            let directory = scratch.url
            let catalog = directory.appendingPathComponent("providers.json")
            try Data("""
                [{
                  "id": "dot-cc", "clientID": "\(Fixture.confidentialCCClient)", "clientSecret": "\(Fixture.confidentialCCSecret)",
                  "tokenURL": "\(server.url("/o/token/").absoluteString)", "scopes": ["read"]
                }, {
                  "id": "dot-device", "clientID": "\(Fixture.publicDeviceClient)",
                  "tokenURL": "\(server.url("/o/token/").absoluteString)",
                  "deviceAuthorizationURL": "\(server.url("/o/device-authorization/").absoluteString)",
                  "scopes": ["read"]
                }]
                """.utf8).write(to: catalog)
            let agent = try NotifyingAgent(directory: directory, catalog: catalog)
            defer { kill(agent.pid, SIGTERM) }

            // The person is asked: the notify command gets the server's verification URL and user code.
            let variables = try await notifiedVariables(agent.notified, until: "AUTHFLOW_USER_CODE")
            let userCode = try #require(variables["AUTHFLOW_USER_CODE"], "no notification; stderr: \(agent.stderr)")
            let verification = try #require(variables["AUTHFLOW_VERIFICATION_URI"].flatMap(URL.init(string:)))
            #expect(verification == server.url("/o/device/"))
            #expect(variables["AUTHFLOW_PROVIDER"] == "dot-device")

            // Meanwhile the client-credentials provider is served, through `authflow token`.
            let agentEnvironment = agent.clientEnvironment
            let service = try await runBinary(["token", "dot-cc"], environment: agentEnvironment)
            #expect(service.status == 0, "stderr: \(service.stderr)")
            let serviceToken = service.stdout.trimmingCharacters(in: .newlines)
            #expect(try await ServerAPI(server).introspect(serviceToken).active)
            let pending = try await runBinary(["token", "dot-device"], environment: agentEnvironment)
            #expect(pending.status == 77 && pending.stderr.contains("reauthorization_required"), "stderr: \(pending.stderr)")

            try await TestBrowser().approveDevice(
                verificationURI: verification, userCode: userCode, username: Fixture.username, password: Fixture.password, approve: true)

            // After approval the socket serves the device provider's token, which the server knows as alice's.
            var deviceToken: String?
            for _ in 0..<1500 where deviceToken == nil {
                let answer = try await runBinary(["token", "dot-device"], environment: agentEnvironment)
                if answer.status == 0 { deviceToken = answer.stdout.trimmingCharacters(in: .newlines) } else { try await Task.sleep(for: .milliseconds(50)) }
            }
            let token = try #require(deviceToken, "never served; stderr: \(agent.stderr)")
            let introspection = try await ServerAPI(server).introspect(token)
            #expect(introspection.active)
            #expect(introspection.username == Fixture.username)
            #expect(!agent.stderr.contains(token) && !agent.stderr.contains(serviceToken))

            kill(agent.pid, SIGTERM)
            #expect(await agent.wait(timeout: .seconds(30)) == 0, "stderr: \(agent.stderr)")
        }
    }
}
