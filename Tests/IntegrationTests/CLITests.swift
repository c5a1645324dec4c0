import TestSupport
import Foundation
import OAuthFlow
import Testing

extension Integration {
    /// The `authflow` binary against the real server: what a person on a headless box does.
    @Suite("authflow CLI against the server")
    struct CLI {
        @Test("login --device --json, approved in the browser, then token prints a token the server accepts (RFC 8628)")
        func deviceLoginThenToken() async throws {
            let server = try IntegrationServer.require()
            let scratch = try TemporaryDirectory("authflow-it")
            defer { scratch.remove() }
            let directory = scratch.url
            let catalog = directory.appendingPathComponent("providers.json")
            try Data("""
                [{
                  "id": "dot-device",
                  "clientID": "\(Fixture.publicDeviceClient)",
                  "tokenURL": "\(server.url("/o/token/").absoluteString)",
                  "deviceAuthorizationURL": "\(server.url("/o/device-authorization/").absoluteString)",
                  "revocationURL": "\(server.url("/o/revoke_token/").absoluteString)",
                  "userinfoURL": "\(server.url("/o/userinfo/").absoluteString)",
                  "scopes": ["openid", "read", "write"],
                }]
                """.utf8).write(to: catalog)
            let store = directory.appendingPathComponent("store")
            let environment = ["PATH": "/usr/bin:/bin", "HOME": directory.path, "NO_COLOR": "1"]
            let common = ["--config", catalog.path, "--store", store.path]

            let login = try RunningBinary(common + ["login", "dot-device", "--device", "--json"], environment: environment)
            let line = try #require(await login.waitForLine(containing: "\"receivedDeviceCode\"", timeout: .seconds(20)),
                                    "no receivedDeviceCode line; stderr: \(login.stderr)")
            let code = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let userCode = try #require(code["user_code"] as? String)
            let uriString = try #require(code["verification_uri"] as? String)
            let verification = try #require(URL(string: uriString))
            #expect(verification == server.url("/o/device/"))

            try await TestBrowser().approveDevice(
                verificationURI: verification, userCode: userCode, username: Fixture.username, password: Fixture.password,
                approve: true)
            let status = await login.wait(timeout: .seconds(30))
            #expect(status == 0, "login exited \(status); stderr: \(login.stderr)")

            let states = login.stdout.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["state"] as? String
            }
            #expect(states.first == "requestingDeviceCode" || states.first == "empty")
            #expect(states.contains("receivedDeviceCode"))
            #expect(states.last == "authorized")

            let token = try await runBinary(common + ["token", "dot-device"], environment: environment)
            #expect(token.status == 0, "token exited \(token.status); stderr: \(token.stderr)")
            let lines = token.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines.count == 2 && lines[1].isEmpty, "stdout must be the token and one newline")
            let accessToken = String(lines[0])

            // The server itself says the printed token is live, for this client and user.
            let introspection = try await ServerAPI(server).introspect(accessToken)
            #expect(introspection.active)
            #expect(introspection.clientID == Fixture.publicDeviceClient)
            #expect(introspection.username == Fixture.username)
            // No token ever reached login's output.
            #expect(!login.stdout.contains(accessToken) && !login.stderr.contains(accessToken))

            // userinfo prints alice's claims as one JSON object (the token carries `openid`).
            let userinfo = try await runBinary(common + ["userinfo", "dot-device"], environment: environment)
            #expect(userinfo.status == 0, "userinfo exited \(userinfo.status); stderr: \(userinfo.stderr)")
            let userinfoLines = userinfo.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(userinfoLines.count == 2 && userinfoLines[1].isEmpty, "stdout must be one JSON object and a newline")
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(userinfoLines[0].utf8)) as? [String: Any])
            #expect(claims["sub"] as? String == "1")
            #expect(!userinfo.stdout.contains(accessToken) && !userinfo.stderr.contains(accessToken))

            // logout revokes at the server and forgets locally.
            let logout = try await runBinary(common + ["logout", "dot-device"], environment: environment)
            #expect(logout.status == 0, "logout exited \(logout.status); stderr: \(logout.stderr)")
            #expect(logout.stdout == "Revoked the tokens of dot-device at the provider and forgot them.\n")
            #expect(try await ServerAPI(server).introspect(accessToken).active == false)
            let after = try await runBinary(common + ["token", "dot-device"], environment: environment)
            #expect(after.status == 77)
        }
    }
}
