import Foundation
import Glibc
@testable import OAuthFlow
import Synchronization
import TestSupport
import Testing

/// OpenID Connect CIBA Core 1.0 against a real OpenID provider: glewlwyd 2.7.5 from Debian
/// (`Server/ciba/`, provisioned with CIBA in poll and ping mode), on https://127.0.0.1, started once
/// for this suite. The person's side is `Server/ciba/user.py` (alice approves or denies through
/// glewlwyd's own API, choosing the request by its binding message). Every request of the flow
/// goes through CurlTransport; a recording wrapper keeps them, so the wire is asserted.
@Suite(
    "Integration: CIBA against glewlwyd on loopback (OpenID Connect CIBA Core 1.0; poll and ping)",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .cibaGlewlwyd,
    .serialized,
    .timeLimit(.minutes(4))
)
struct CIBAIntegration {
    typealias Recording = PushedAuthorizationIntegration.Recording
    static let alice = #"{"username":"alice"}"#

    func provider(
        _ server: GlewlwydServer, clientID: String, secret: String? = nil, method: Provider.ClientAuthentication, key: String? = nil,
        mode: CIBADeliveryMode = .poll
    ) throws -> Provider {
        var provider = Provider(
            id: "glewlwyd", issuer: server.issuer, clientID: clientID, clientSecret: secret.map(Secret.init), clientAuthentication: method,
            scopes: ["openid", "api"], clientKey: try key.map { try ClientKey(contentsOfFile: server.pki($0)) })
        provider.cibaDeliveryMode = mode
        try provider.validate()
        return provider
    }

    static func transport(_ server: GlewlwydServer) -> Recording {
        Recording(CurlTransport(timeout: 30, proxy: .none, caFile: URL(fileURLWithPath: server.pki("ca.crt"))))
    }

    /// A flow for the `ciba-secret` client (client_secret_basic, poll mode) through `transport`.
    func secretFlow(_ server: GlewlwydServer, _ transport: Recording) async throws -> AuthFlow {
        try await AuthFlow(providers: [try provider(server, clientID: "ciba-secret", secret: "ciba-secret-value-0123456789abcdef",
                                                    method: .clientSecretBasic)], transport: transport)
    }

    /// A binding message no other test's request has, so that user.py picks this one.
    static func message(_ what: String) -> String { "\(what) \(Int.random(in: 1000...9999))" }

    static let methods: [(String, String?, Provider.ClientAuthentication, String?)] = [
        ("ciba-secret", "ciba-secret-value-0123456789abcdef", .clientSecretBasic, nil),
        ("ciba-post", "ciba-post-value-0123456789abcdef", .clientSecretPost, nil),
        ("ciba-jwt", nil, .privateKeyJWT, "client.key"),
    ]

    @Test("poll mode, approved by alice: the request and the polls on the wire, the exact states, the ID token validated, the refresh token usable",
          arguments: methods)
    func approved(clientID: String, secret: String?, method: Provider.ClientAuthentication, key: String?) async throws {
        let server = try GlewlwydServer.require()
        let transport = Self.transport(server)
        let flow = try await AuthFlow(providers: [try provider(server, clientID: clientID, secret: secret, method: method, key: key)],
                                      transport: transport)
        let message = Self.message("Approve \(clientID)")
        let stream = flow.states
        let watcher = Task {
            var seen: [AuthFlow.State] = []
            for await state in stream {
                seen.append(state)
                if isDone(state) { break }
            }
            return seen
        }
        let login = Task {
            try await flow.authorizeWithBackchannel(
                provider: "glewlwyd", BackchannelAuthenticationRequest(hint: .loginHint(Self.alice), bindingMessage: message, requestedExpiry: 120))
        }
        let approval = try await server.user(["approve", "--client-id", clientID, "--binding-message", message, "--wait", "20"])
        #expect(approval == 0, "user.py approve exited \(approval)")
        let authorization = try await login.value
        let seen = await watcher.value

        #expect(seen.map(\.name) == ["empty", "authorizing", "requestingAccessToken", "authorized"])
        guard case .authorizing(_, .ciba, let backchannel?) = seen[1] else { Issue.record("no CIBA request in \(seen[1])"); return }
        #expect(backchannel.bindingMessage == message)
        #expect(backchannel.expiresIn == 120)
        #expect(backchannel.interval == 5, "glewlwyd's interval in poll mode")
        #expect(seen.last == .authorized(provider: "glewlwyd", authorization))

        let asked = try #require(transport.requests(path: "/api/oidc/ciba").first)
        #expect(transport.requests(path: "/api/oidc/ciba").count == 1)
        let askedFields = PushedAuthorizationIntegration.fields(asked)
        #expect(askedFields.filter { !["client_id", "client_secret", "client_assertion_type", "client_assertion"].contains($0.0) }.map(\.0)
                == ["scope", "login_hint", "binding_message", "requested_expiry"])
        #expect(askedFields.first { $0.0 == "scope" }?.1 == "openid api")
        #expect((asked.headerValue("Authorization")?.hasPrefix("Basic ") == true) == (method == .clientSecretBasic))
        let polls = transport.requests(path: "/api/oidc/token")
        #expect(!polls.isEmpty)
        for poll in polls {
            let fields = PushedAuthorizationIntegration.fields(poll)
            #expect(fields.first { $0.0 == "grant_type" }?.1 == "urn:openid:params:grant-type:ciba")
            #expect(fields.contains { $0.0 == "auth_req_id" })
        }

        #expect(authorization.grant == .ciba)
        #expect(authorization.scopes == ["openid", "api"])
        #expect(authorization.idToken?.claims["urn:openid:params:jwt:claim:auth_req_id"] != nil)
        let set = try await flow.tokenSet(for: "glewlwyd")
        #expect(set.validatedIDToken?.audience == [clientID], "glewlwyd's ID token validated: RS256, iss, aud, at_hash")
        let refreshed = try await flow.refresh(provider: "glewlwyd")
        #expect(refreshed.grant == .ciba, "a refresh keeps the grant that started it")
    }

    @Test("denied by alice: .accessDenied, nothing stored, states end in .error")
    func denied() async throws {
        let server = try GlewlwydServer.require()
        let flow = try await secretFlow(server, Self.transport(server))
        let message = Self.message("Deny")
        let login = Task {
            try await flow.authorizeWithBackchannel(provider: "glewlwyd", BackchannelAuthenticationRequest(hint: .loginHint(Self.alice), bindingMessage: message))
        }
        #expect(try await server.user(["deny", "--client-id", "ciba-secret", "--binding-message", message, "--wait", "20"]) == 0)
        let error = await #expect(throws: OAuthError.self) { try await login.value }
        #expect(error?.code == .accessDenied)
        #expect(error?.response?.code == .accessDenied)
        #expect(await flow.authorization(for: "glewlwyd") == nil)
        #expect(flow.state.name == "error")
    }

    @Test("expiry: with requested_expiry 6 s and glewlwyd's interval of 5 s, one poll (pending), then .expired without another request")
    func expired() async throws {
        let server = try GlewlwydServer.require()
        let transport = Self.transport(server)
        let flow = try await secretFlow(server, transport)
        let error = await #expect(throws: OAuthError.self) {
            try await flow.authorizeWithBackchannel(
                provider: "glewlwyd",
                BackchannelAuthenticationRequest(hint: .loginHint(Self.alice), bindingMessage: Self.message("Expire"), requestedExpiry: 6))
        }
        #expect(error?.code == .expired)
        #expect(transport.requests(path: "/api/oidc/token").count == 1, "never a poll past expires_in")
    }

    @Test("user_code: glewlwyd advertises it; the right code is accepted, a wrong one is 400 invalid_user_code before the person is asked")
    func userCode() async throws {
        let server = try GlewlwydServer.require()
        let flow = try await secretFlow(server, Self.transport(server))
        #expect(try await flow.metadata(for: flow.provider("glewlwyd")).backchannelUserCodeParameterSupported)
        let wrong = await #expect(throws: OAuthError.self) {
            try await flow.requestBackchannelAuthentication(
                provider: "glewlwyd", BackchannelAuthenticationRequest(hint: .loginHint(Self.alice), userCode: Secret("not-alice-code")))
        }
        #expect(wrong?.code == .serverRejected)
        #expect(wrong?.response?.code.rawValue == "invalid_user_code")
        #expect(wrong?.endpoint == .backchannelAuthentication)
        let accepted = try await flow.requestBackchannelAuthentication(
            provider: "glewlwyd", BackchannelAuthenticationRequest(hint: .loginHint(Self.alice), bindingMessage: Self.message("Code"),
                                                                   userCode: Secret("alice-code-4711")))
        #expect(accepted.expiresIn == 600, "glewlwyd's default expiry")
    }

    @Test("a binding message with an escape sequence, which glewlwyd would accept and show, is refused before anything is sent")
    func controlCharactersRefused() async throws {
        let server = try GlewlwydServer.require()
        let transport = Self.transport(server)
        let flow = try await secretFlow(server, transport)
        let error = await #expect(throws: OAuthError.self) {
            try await flow.requestBackchannelAuthentication(
                provider: "glewlwyd", BackchannelAuthenticationRequest(hint: .loginHint(Self.alice), bindingMessage: "Ticket\u{1B}[2J 4711"))
        }
        #expect(error?.code == .configuration)
        #expect(transport.requests(path: "/api/oidc/ciba").isEmpty)
    }

    @Test("ping mode: glewlwyd's ping to our loopback listener (Bearer client_notification_token, {auth_req_id}) wakes a poll that would otherwise never run")
    func ping() async throws {
        let server = try GlewlwydServer.require()
        let transport = Self.transport(server)
        let flow = try await AuthFlow(
            providers: [try provider(server, clientID: "ciba-ping", secret: "ciba-ping-value-0123456789abcdef", method: .clientSecretBasic,
                                     mode: .ping)],
            transport: transport, options: AuthFlow.Options(clock: ParkedClock()))
        let pings = PingListener.Log()
        let listener = try LoopbackServer { connection in
            let (authorization, body) = PingListener.read(connection)
            let woke = flow.receiveBackchannelNotification(authorization: authorization, body: body)
            pings.append(woke)
            connection.write(woke ? "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
                                  : "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
        defer { listener.stop() }
        #expect(try await server.user(["set-ping-endpoint", "ciba-ping", "\(listener.baseURL)/ciba-notify"]) == 0)

        let message = Self.message("Ping")
        let login = Task {
            try await flow.authorizeWithBackchannel(provider: "glewlwyd", BackchannelAuthenticationRequest(hint: .loginHint(Self.alice), bindingMessage: message))
        }
        #expect(try await server.user(["approve", "--client-id", "ciba-ping", "--binding-message", message, "--wait", "20"]) == 0)
        let authorization = try await login.value
        #expect(authorization.grant == .ciba)
        #expect(pings.all == [true], "one ping, which named the request")
        let asked = try #require(transport.requests(path: "/api/oidc/ciba").first)
        let token = PushedAuthorizationIntegration.fields(asked).first { $0.0 == "client_notification_token" }?.1
        #expect(token?.count == 43)
        #expect(transport.requests(path: "/api/oidc/token").count == 1, "the only poll is the one the ping woke")
    }

    @Test("authflow login --ciba (the binary): the binding message and the request on the terminal, approved by alice, then token prints a live token")
    func cliLogin() async throws {
        let server = try GlewlwydServer.require()
        let scratch = try TemporaryDirectory("authflow-it-ciba")
        defer { scratch.remove() }
        let catalog = scratch.url.appendingPathComponent("providers.json")
        try Data("""
            [{
              "id": "glewlwyd", "issuer": "\(server.issuer)", "clientID": "ciba-secret",
              "clientSecret": "ciba-secret-value-0123456789abcdef", "caFile": "\(server.pki("ca.crt"))", "scopes": ["openid", "api"]
            }]
            """.utf8).write(to: catalog)
        let environment = ["PATH": "/usr/bin:/bin", "HOME": scratch.url.path, "NO_COLOR": "1", "no_proxy": "127.0.0.1,localhost"]
        let common = ["--config", catalog.path, "--store", scratch.url.appendingPathComponent("store").path]
        let message = Self.message("CLI")

        let login = try RunningBinary(common + ["login", "glewlwyd", "--ciba", "--login-hint", Self.alice, "--binding-message", message,
                                                "--user-code", "alice-code-4711", "--requested-expiry", "120"], environment: environment)
        let shown = try #require(await login.waitForLine(containing: message, timeout: .seconds(30)), "stderr: \(login.stderr)")
        #expect(shown == message, "the binding message on a line of its own")
        #expect(try await server.user(["approve", "--client-id", "ciba-secret", "--binding-message", message, "--wait", "20"]) == 0)
        #expect(await login.wait(timeout: .seconds(60)) == 0, "stderr: \(login.stderr)")
        #expect(login.stdout.hasPrefix(#"glewlwyd is asking {"username":"alice"} to approve this login on their own device."#))
        #expect(login.stdout.contains("Logged in to glewlwyd with scopes openid api"))

        let token = try await runBinary(common + ["token", "glewlwyd"], environment: environment)
        #expect(token.status == 0, "stderr: \(token.stderr)")
        let accessToken = token.stdout.trimmingCharacters(in: .newlines)
        #expect(accessToken.split(separator: ".").count == 3, "glewlwyd's access tokens are JWTs")
        #expect(!login.stdout.contains(accessToken) && !login.stderr.contains(accessToken))
        let status = try await runBinary(common + ["status", "glewlwyd", "--json"], environment: environment)
        #expect(status.stdout.contains(#""grant":"urn:openid:params:grant-type:ciba""#))
    }

    @Test("authflow agent re-authorizes a provider with cibaLoginHint through CIBA: the notify command gets the binding message, alice approves it, the socket serves the token")
    func agentReauthorizes() async throws {
        let server = try GlewlwydServer.require()
        let scratch = try TemporaryDirectory("authflow-it-ciba-agent", in: URL(fileURLWithPath: "/tmp"))   // short socket paths
        defer { scratch.remove() }
        let directory = scratch.url
        let catalog = try Self.agentCatalog(server, in: directory, clientID: "ciba-secret", secret: "ciba-secret-value-0123456789abcdef")
        let agent = try NotifyingAgent(directory: directory, catalog: catalog)
        defer { kill(agent.pid, SIGTERM) }

        let variables = try await notifiedVariables(agent.notified, until: "AUTHFLOW_BINDING_MESSAGE")
        let message = try #require(variables["AUTHFLOW_BINDING_MESSAGE"], "no notification; stderr: \(agent.stderr)")
        #expect(message.hasPrefix("authflow agent: glewlwyd ("))
        #expect(variables["AUTHFLOW_PROVIDER"] == "glewlwyd")
        #expect(variables["AUTHFLOW_USER_CODE"] == nil && variables["AUTHFLOW_VERIFICATION_URI"] == nil)
        #expect(agent.stderr.contains("the request shows \"\(message)\""))

        #expect(try await server.user(["approve", "--client-id", "ciba-secret", "--binding-message", message, "--wait", "20"]) == 0)
        let agentEnvironment = agent.clientEnvironment
        var served: String?
        for _ in 0..<1500 where served == nil {
            let answer = try await runBinary(["token", "glewlwyd"], environment: agentEnvironment)
            if answer.status == 0 { served = answer.stdout.trimmingCharacters(in: .newlines) } else { try await Task.sleep(for: .milliseconds(50)) }
        }
        let token = try #require(served, "never served; stderr: \(agent.stderr)")
        #expect(!agent.stderr.contains(token))
        #expect(agent.stderr.contains("glewlwyd: the login was approved"))
        kill(agent.pid, SIGTERM)
        #expect(await agent.wait(timeout: .seconds(30)) == 0, "stderr: \(agent.stderr)")
    }
}

extension CIBAIntegration {
    /// `directory/providers.json`: one provider `glewlwyd` for the agent, the client `clientID`
    /// asking alice through CIBA (`cibaLoginHint`), with `extra` members.
    static func agentCatalog(_ server: GlewlwydServer, in directory: URL, clientID: String, secret: String, extra: String = "") throws -> URL {
        let catalog = directory.appendingPathComponent("providers.json")
        try Data("""
            [{
              "id": "glewlwyd", "issuer": "\(server.issuer)", "clientID": "\(clientID)",
              "clientSecret": "\(secret)", "caFile": "\(server.pki("ca.crt"))", "scopes": ["openid", "api"],
              "cibaLoginHint": "{\\"username\\":\\"alice\\"}"\(extra)
            }]
            """.utf8).write(to: catalog)
        return catalog
    }

    @Test("authflow agent --ciba-notification-listen: a ping-mode provider whose refresh token glewlwyd refuses is re-authorized through CIBA; glewlwyd's ping reaches the agent's endpoint and wakes the poll (the agent's own poll is 60 s away: one poll in all); the endpoint refuses a wrong bearer, GET, a huge body, a slow head and garbage, and keeps serving")
    func agentPing() async throws {
        let server = try GlewlwydServer.require()
        let scratch = try TemporaryDirectory("authflow-it-ciba-ping", in: URL(fileURLWithPath: "/tmp"))   // short socket paths
        defer { scratch.remove() }
        let directory = scratch.url
        let catalog = try Self.agentCatalog(server, in: directory, clientID: "ciba-ping", secret: "ciba-ping-value-0123456789abcdef",
                                            extra: #", "cibaDeliveryMode": "ping""#)
        // A login whose access token has expired and whose refresh token glewlwyd never issued.
        let stale = TokenSet(providerID: "glewlwyd", accessToken: Secret("expired-access-token"), refreshToken: Secret("refused-refresh-token"),
                             scopes: ["openid", "api"], issuedAt: Date(timeIntervalSinceNow: -7200), expiresAt: Date(timeIntervalSinceNow: -3600),
                             grant: .ciba)
        try await FileSecretStore(directory: directory.appendingPathComponent("store")).save(StoredEntry.encode(stale), for: "glewlwyd")
        let port = try LoopbackSocket.closedPort()
        #expect(try await server.user(["set-ping-endpoint", "ciba-ping", "http://127.0.0.1:\(port)/ciba-notify"]) == 0)
        // AUTHFLOW_DEBUG: the agent's log names every request it sends (never a value), so the token requests can be counted.
        let agent = try NotifyingAgent(directory: directory, catalog: catalog, arguments: ["--ciba-notification-listen", "127.0.0.1:\(port)"],
                                       variables: ["AUTHFLOW_DEBUG": "1"])
        defer { kill(agent.pid, SIGTERM) }

        let variables = try await notifiedVariables(agent.notified, until: "AUTHFLOW_BINDING_MESSAGE")
        let message = try #require(variables["AUTHFLOW_BINDING_MESSAGE"], "no notification; stderr: \(agent.stderr)")
        #expect(agent.stderr.contains("CIBA notifications on 127.0.0.1:\(port)"))
        // Past glewlwyd's 5 s interval before alice approves: an agent polling at that interval would poll twice.
        try await Task.sleep(for: .seconds(6))
        #expect(try await server.user(["approve", "--client-id", "ciba-ping", "--binding-message", message, "--wait", "20"]) == 0)
        // The agent's own poll comes 60 s after its request: a token within 45 s of the approval is the ping's doing
        // (the order of the log lines is not: the woken poll's line may come before the endpoint's).
        let agentEnvironment = agent.clientEnvironment
        let deadline = ContinuousClock.now + .seconds(45)
        var served: String?
        for _ in 0..<900 where served == nil && ContinuousClock.now < deadline {
            let answer = try await runBinary(["token", "glewlwyd"], environment: agentEnvironment)
            if answer.status == 0 { served = answer.stdout.trimmingCharacters(in: .newlines) } else { try await Task.sleep(for: .milliseconds(50)) }
        }
        let token = try #require(served, "not served within 45 s; stderr: \(agent.stderr)")
        let log = agent.stderr
        #expect(log.contains("glewlwyd: the login was approved"))
        let refused = try #require(log.range(of: "glewlwyd: a person is needed: "), "the refresh was refused; stderr: \(log)")
        #expect(log[..<refused.lowerBound].contains("POST token "), "the refresh came first")
        let asked = try #require(log.range(of: "glewlwyd: a person must approve a login on their own device"), "stderr: \(log)")
        let woke = try #require(log.range(of: "a CIBA ping woke the poll of a login"), "stderr: \(log)")
        let polls = log[asked.upperBound...].components(separatedBy: "POST token ").count - 1
        #expect(polls == 1, "the only poll is the one the ping woke; stderr: \(log)")
        #expect(woke.lowerBound > asked.upperBound)

        // A scripted client: every refusal has its status, and the endpoint serves on.
        func status(_ request: String) async throws -> String {
            let answer = try await onOwnThread { try rawExchange(port: port, Array(request.utf8)) }
            return answer.components(separatedBy: "\r\n")[0]
        }
        let ping = #"{"auth_req_id":"not-a-request"}"#
        let wrongBearer = "POST /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer not-the-token\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(ping.utf8.count)\r\n\r\n\(ping)"
        #expect(try await status(wrongBearer) == "HTTP/1.1 401 Unauthorized")
        #expect(try await status("GET /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") == "HTTP/1.1 405 Method Not Allowed")
        #expect(try await status("POST /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{")
                == "HTTP/1.1 413 Content Too Large")
        #expect(try await status("POST /ciba-notify HTTP/1.1\r\nHost: 127.0.0.1\r\n") == "HTTP/1.1 408 Request Timeout")
        #expect(try await status("\u{16}\u{03}\u{01} not http\r\n\r\n") == "HTTP/1.1 400 Bad Request")
        #expect(try await status(wrongBearer) == "HTTP/1.1 401 Unauthorized", "still serving")
        #expect(try await runBinary(["token", "glewlwyd"], environment: agentEnvironment).status == 0)
        #expect(!agent.stderr.contains(token) && !agent.stderr.contains("not-the-token") && !agent.stderr.contains("not-a-request"))
        kill(agent.pid, SIGTERM)
        #expect(await agent.wait(timeout: .seconds(30)) == 0, "stderr: \(agent.stderr)")
    }
}

@Sendable private func isDone(_ state: AuthFlow.State) -> Bool {
    switch state {
    case .authorized, .error: return true
    default: return false
    }
}

/// A clock whose every sleep lasts until its task is cancelled: a poll on it moves only when a ping wakes it.
private struct ParkedClock: Clock {
    var now: ContinuousClock.Instant { .now }
    var minimumResolution: Duration { .zero }
    func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration? = nil) async throws {
        try await Task.sleep(for: .seconds(3600))
    }
}

/// The HTTP side of a ping receiver: what a notification endpoint reads from one request.
private enum PingListener {
    /// What each ping woke, in order.
    final class Log: Sendable {
        private let woke = Mutex<[Bool]>([])
        func append(_ value: Bool) { woke.withLock { $0.append(value) } }
        var all: [Bool] { woke.withLock { $0 } }
    }

    /// The `Authorization` header and the body (its `Content-Length`, at most 4 KiB) of the request on `connection`.
    static func read(_ connection: LoopbackServer.Connection) -> (authorization: String?, body: Data) {
        let head = connection.readHead()
        var authorization: String?
        var length = 0
        for line in head.split(separator: "\r\n").dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            switch parts[0].lowercased() {
            case "authorization": authorization = parts[1]
            case "content-length": length = min(Int(parts[1]) ?? 0, 4096)
            default: break
            }
        }
        var body = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while body.count < length {
            let count = recv(connection.fd, &chunk, length - body.count, 0)
            guard count > 0 else { break }
            body += chunk.prefix(count)
        }
        return (authorization, Data(body))
    }
}

// MARK: - The server

extension GlewlwydServer {
    /// Runs `Server/ciba/user.py ARGUMENTS` (alice's side) against this server (its output goes to
    /// `HOME/fixture.log`); returns its exit status.
    func user(_ arguments: [String]) async throws -> Int32 {
        let script = ServerLauncher.serverDirectory.appendingPathComponent("ciba/user.py").path
        return try await ServerLauncher.run("/usr/bin/python3", [script, "--port", String(port), "--home", home] + arguments,
                                            environment: [:], log: URL(fileURLWithPath: home), timeout: .seconds(60))
    }
}

extension Trait where Self == ScriptedServerTrait {
    /// Runs the suite against one glewlwyd provisioned for CIBA (Server/ciba/start.sh on a free port, stop.sh
    /// after), published to the tests as ``GlewlwydServer/current`` (the PAR suite's, in its own task tree).
    static var cibaGlewlwyd: Self {
        let home = ProcessInfo.processInfo.environment["OAUTHFLOW_CIBA_HOME"] ?? "/tmp/oauthflow-ciba"
        let server = ScriptedServer(directory: "ciba", logPrefix: "oauthflow-ciba", portVariable: "OAUTHFLOW_CIBA_PORT",
                                    environment: ["OAUTHFLOW_CIBA_HOME": home])
        return Self(server: server) { port, suite in
            try await GlewlwydServer.$current.withValue(GlewlwydServer(port: port, home: home)) { try await suite() }
        }
    }
}
