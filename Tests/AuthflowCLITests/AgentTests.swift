import Foundation
@testable import AuthflowAgent
@testable import AuthflowCLI
import Glibc
import OAuthFlow
import TestSupport
import Testing

/// `authflow agent` as a child process (Documentation/Agent.md): the socket protocol from Swift
/// and from Python, SO_PEERCRED access control with a second uid, socket activation, sd_notify,
/// token files, SIGHUP and SIGTERM, re-authorization through a device login, and hostile clients.
/// The provider is a scripted loopback HTTP server; every wait is bounded (guards against hangs,
/// not timing assertions).
@Suite("authflow agent", .timeLimit(.minutes(3)))
struct AgentTests {
    /// A temporary directory with a catalog and a store, a socket directory other users can pass
    /// through (0711), and a scripted token endpoint.
    struct Rig {
        let directory: TemporaryDirectory
        let sockets: TemporaryDirectory
        let server: TestHTTPServer

        init() throws {
            directory = try TemporaryDirectory()
            sockets = try TemporaryDirectory("authflow-agent", in: URL(fileURLWithPath: "/tmp"), permissions: 0o711)  // short socket paths
            server = try TestHTTPServer()
        }

        var socketDirectory: URL { sockets.url }
        var socket: String { socketDirectory.appendingPathComponent("agent.sock").path }

        func file(_ name: String) -> String { directory.url.appendingPathComponent(name).path }

        /// A client-credentials provider on the scripted server, with `extra` members.
        func service(_ id: String, path: String = "/token", extra: String = "") -> String {
            #"{ "id": "\#(id)", "clientID": "client-\#(id)", "clientSecret": "s3cret", "tokenURL": "\#(server.baseURL)\#(path)"\#(extra) }"#
        }

        var environment: [String: String] {
            cleanEnvironment(directory, ["AUTHFLOW_CONFIG": directory.config.path, "AUTHFLOW_STORE": directory.store.path])
        }

        /// Starts `authflow agent --socket SOCKET` with `arguments` after it.
        func start(_ arguments: [String] = [], environment extra: [String: String] = [:]) throws -> Child {
            try Child(Binary.url!.path, ["agent", "--socket", socket] + arguments, environment: environment.merging(extra) { _, new in new },
                      directory: directory.url, name: "agent")
        }

        /// The common opening: one client-credentials provider `svc` whose endpoint answers
        /// `token` (valid an hour), the agent started with `arguments`, and its "ready" awaited
        /// (recorded as an issue when it never comes).
        func startServing(_ token: String, _ arguments: [String] = []) async throws -> Child {
            try directory.writeCatalog([service("svc")])
            server.script("/token", [.token(token, expiresIn: 3600)])
            let agent = try start(arguments)
            #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
            return agent
        }

        func remove() {
            server.stop()
            directory.remove()
            sockets.remove()
        }
    }

    // MARK: The protocol

    @Test("a token from the socket (Swift client and `authflow token`), token files with their modes, metrics, SIGTERM exits 0")
    func servesTokens() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        let agent = try await rig.startServing("at-agent-1", ["--sink", "svc=\(rig.file("token.json")),mode=0640,format=json",
                                                              "--sink", "svc=\(rig.file("token"))", "--metrics-file", rig.file("metrics.prom")])

        let answer = try #require(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc"}"# + "\n"))
        #expect(answer["v"]?.integerValue == 1)
        #expect(answer["access_token"]?.stringValue == "at-agent-1")
        #expect(answer["token_type"]?.stringValue == "Bearer")
        #expect(answer["expires_at"]?.integerValue != nil)
        #expect(rig.server.requests("/token").count == 1, "fetched once at start; the socket answers from memory")
        #expect(rig.server.requests("/token").first?.form["grant_type"] == "client_credentials")

        // The token files: exact contents and modes.
        #expect(await eventually { (try? String(contentsOfFile: rig.file("token"), encoding: .utf8)) == "at-agent-1" })
        #expect(fileMode(rig.file("token")) == 0o600)
        #expect(fileMode(rig.file("token.json")) == 0o640)
        let json = try String(contentsOfFile: rig.file("token.json"), encoding: .utf8)
        #expect(json.hasPrefix(#"{"access_token":"at-agent-1","token_type":"Bearer","expires_at":"#))
        #expect(fileMode(rig.socket) == 0o600, "only the agent's uid is served")

        // `authflow token` asks the agent: no catalog or store is needed.
        var env = cleanEnvironment(rig.directory, ["AUTHFLOW_AGENT": rig.socket, "AUTHFLOW_CONFIG": rig.file("none.json")])
        let token = try await runBinary(["token", "svc"], environment: env)
        #expect(token.status == 0 && token.stdout == "at-agent-1\n", "\(token.stderr)")
        let unknown = try await runBinary(["token", "nope"], environment: env)
        #expect(unknown.status == 64 && unknown.stdout.isEmpty)
        #expect(unknown.stderr.contains("[unknown_provider]"))
        env["AUTHFLOW_AGENT"] = rig.socketDirectory.appendingPathComponent("nobody-here.sock").path
        let fallback = try await runBinary(["token", "svc"], environment: env)
        #expect(fallback.status == 65 && fallback.stderr.contains("no provider catalog"), "no agent: the store path runs and reports")

        // Metrics on the socket and in the file.
        let metrics = try #require(AgentClient.ask(rig.socket, request: #"{"v":1,"metrics":true}"# + "\n")?["metrics"]?.stringValue)
        #expect(metrics.contains(#"authflow_refreshes_total{provider="svc"} 1"#))
        #expect(metrics.contains(#"authflow_needs_person{provider="svc"} 0"#))
        #expect(metrics.contains("authflow_agent_start_time_seconds "))
        #expect(!metrics.contains("at-agent"))
        #expect(await eventually { ((try? String(contentsOfFile: rig.file("metrics.prom"), encoding: .utf8)) ?? "").contains(#"authflow_token_expiry_seconds{provider="svc"} "#) })

        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
        #expect(!FileManager.default.fileExists(atPath: rig.socket), "the socket file is removed on exit")
        #expect(!agent.stderr.contains("at-agent"), "no token in the log")
    }

    @Test("the protocol from Python: a stranger's client in a few lines")
    func pythonClient() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        let agent = try await rig.startServing("at-python")
        let result = try await runProcess("/usr/bin/python3", ["-c", Self.pythonClient, rig.socket, "svc"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "at-python Bearer\n")
        let bad = try await runProcess("/usr/bin/python3", ["-c", Self.pythonClient, rig.socket, "svc", "not json"])
        #expect(bad.stdout == "error invalid_request\n")
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    /// Sends `{"v":1,"token":ARGV[2]}` (or ARGV[3] as is) and prints `TOKEN TYPE` or `error CODE`.
    static let pythonClient = """
    import json, socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sys.argv[1])
    line = sys.argv[3] if len(sys.argv) > 3 else json.dumps({"v": 1, "token": sys.argv[2]})
    s.sendall(line.encode() + b"\\n")
    data = b""
    while not data.endswith(b"\\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    answer = json.loads(data)
    print("error " + answer["error"] if "error" in answer else answer["access_token"] + " " + answer["token_type"])
    """

    // MARK: Access control

    @Test("SO_PEERCRED: an allowed second uid gets its provider's token; nobody is refused, and the refusal is logged without a token")
    func peerCredentials() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([rig.service("svc", extra: #", "agentAllow": ["uid:4242"]"#), rig.service("other", path: "/other")])
        rig.server.script("/token", [.token("at-shared", expiresIn: 3600)])
        rig.server.script("/other", [.token("at-private", expiresIn: 3600)])
        let agent = try rig.start()
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        #expect(fileMode(rig.socket) == 0o666, "a uid is allowed: the socket is open and SO_PEERCRED decides")

        func ask(as user: String, _ provider: String) async throws -> String {
            try await runProcess("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user == "nobody" ? "65534" : user)", "--clear-groups",
                                                      "/usr/bin/python3", "-c", Self.pythonClient, rig.socket, provider]).stdout
        }
        #expect(try await ask(as: "4242", "svc") == "at-shared Bearer\n")
        #expect(try await ask(as: "4242", "other") == "error access_denied\n")
        // The agent's own uid asks with the very line the Python client sends (so both socket
        // loops remember that answer for it); the line from another uid is still refused.
        for _ in 0..<20 {
            #expect(AgentClient.ask(rig.socket, request: #"{"v": 1, "token": "other"}"# + "\n")?["access_token"]?.stringValue == "at-private")
        }
        #expect(try await ask(as: "4242", "other") == "error access_denied\n")
        #expect(try await ask(as: "nobody", "svc") == "error access_denied\n")
        #expect(try await ask(as: "nobody", "no-such-provider") == "error access_denied\n", "a refused peer cannot probe for provider ids")
        #expect(agent.stderr.contains(#"refused uid 65534 gid 65534 pid "#))
        #expect(agent.stderr.contains(#"for "svc": not in its agentAllow list"#))
        #expect(!agent.stderr.contains("at-shared") && !agent.stderr.contains("at-private"))
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    @Test("agentAllow groups: a peer with the group among its supplementary groups (SO_PEERGROUPS) is served; without it, refused")
    func supplementaryGroups() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([
            rig.service("svc", extra: #", "agentAllow": ["gid:4343"]"#), rig.service("other", path: "/other", extra: #", "agentAllow": ["gid:4344"]"#),
        ])
        rig.server.script("/token", [.token("at-group", expiresIn: 3600)])
        rig.server.script("/other", [.token("at-other", expiresIn: 3600)])
        let agent = try rig.start()
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        #expect(fileMode(rig.socket) == 0o666, "two groups are allowed: the socket is open and the peer's credentials decide")

        /// Uid and gid 4242, with `groups` as its supplementary groups ("" for none).
        func ask(groups: String, _ provider: String) async throws -> String {
            try await runProcess("/usr/bin/setpriv", ["--reuid=4242", "--regid=4242", groups.isEmpty ? "--clear-groups" : "--groups=\(groups)",
                                                      "/usr/bin/python3", "-c", Self.pythonClient, rig.socket, provider]).stdout
        }
        #expect(try await ask(groups: "4343", "svc") == "at-group Bearer\n")
        #expect(try await ask(groups: "4343", "other") == "error access_denied\n")
        #expect(try await ask(groups: "4100,4344", "other") == "at-other Bearer\n")
        #expect(try await ask(groups: "", "svc") == "error access_denied\n")
        #expect(agent.stderr.contains(#"refused uid 4242 gid 4242 pid "#))
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    // MARK: systemd

    @Test("socket activation: the listening socket comes as descriptor 3 with LISTEN_FDS and LISTEN_PID")
    func socketActivation() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([rig.service("svc")])
        rig.server.script("/token", [.token("at-activated", expiresIn: 3600)])
        // What systemd does: bind and listen, put the socket on fd 3, set the variables, exec.
        let launcher = """
        import os, socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sys.argv[1])
        s.listen(16)
        if s.fileno() != 3:
            os.dup2(s.fileno(), 3)
        os.set_inheritable(3, True)
        os.environ["LISTEN_FDS"] = "1"
        os.environ["LISTEN_PID"] = str(os.getpid())
        os.execv(sys.argv[2], sys.argv[2:])
        """
        let agent = try Child("/usr/bin/python3", ["-c", launcher, rig.socket, Binary.url!.path, "agent"], environment: rig.environment,
                              directory: rig.directory.url, name: "activated")
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        #expect(agent.stderr.contains("socket from systemd (LISTEN_FDS)"))
        #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc"}"# + "\n")?["access_token"]?.stringValue == "at-activated")
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
        #expect(FileManager.default.fileExists(atPath: rig.socket), "systemd's socket file is systemd's to remove")
    }

    @Test("sd_notify: READY=1 with STATUS, WATCHDOG=1 when WATCHDOG_USEC is set, STOPPING=1 on SIGTERM")
    func notifiesSystemd() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([rig.service("svc")])
        rig.server.script("/token", [.token("at-notify", expiresIn: 3600)])
        let path = rig.socketDirectory.appendingPathComponent("notify.sock").path
        let listener = try FileDescriptor(returnedBy: socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0))
        #expect(UnixSocket.withAddress(path) { bind(listener.raw, $0, $1) } == 0)
        let agent = try rig.start(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"])
        var messages: [String] = []
        func receive(until done: ([String]) -> Bool) async -> Bool {
            for _ in 0..<3000 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(listener.raw, &buffer, buffer.count, 0)
                if count > 0 { messages.append(String(decoding: buffer[0..<count], as: UTF8.self)) }
                if done(messages) { return true }
                if count <= 0 { try? await Task.sleep(for: .milliseconds(20)) }
            }
            return false
        }
        #expect(await receive { $0.contains { $0.hasPrefix("READY=1\nSTATUS=1 provider(s); all fresh") } }, "\(messages)")
        #expect(await receive { $0.filter { $0 == "WATCHDOG=1" }.count >= 2 }, "\(messages)")
        agent.signal(SIGTERM)
        #expect(await receive { $0.contains("STOPPING=1\nSTATUS=stopping") }, "\(messages)")
        #expect(await agent.waitExit() == 0)
    }

    // MARK: Refresh, reload, re-authorization

    @Test("token files are rewritten after a background renewal, keeping their modes; the socket serves the new token")
    func sinksFollowRefresh() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([rig.service("svc")])
        // A 20 s token is renewed in the background with a third of its life left (about 12 s in,
        // nobody asking), then a long one: the file goes from the one to the other.
        rig.server.script("/token", [.token("at-short", expiresIn: 20), .token("at-long", expiresIn: 3600)])
        let agent = try rig.start(["--sink", "svc=\(rig.file("header")),mode=0660,format=header"])
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        #expect(await eventually { (try? String(contentsOfFile: rig.file("header"), encoding: .utf8)) == "Authorization: Bearer at-short\n" })
        #expect(await eventually { (try? String(contentsOfFile: rig.file("header"), encoding: .utf8)) == "Authorization: Bearer at-long\n" })
        #expect(rig.server.requests("/token").count == 2)
        #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc"}"# + "\n")?["access_token"]?.stringValue == "at-long")
        #expect(fileMode(rig.file("header")) == 0o660)
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    @Test("SIGHUP reloads the catalog (a new provider is served; a removed one is not, though its answer was remembered); a broken catalog keeps the previous one")
    func reloads() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([rig.service("svc")])
        rig.server.script("/token", [.token("at-a", expiresIn: 3600)])
        rig.server.script("/token2", [.token("at-b", expiresIn: 3600)])
        let agent = try rig.start()
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc2"}"# + "\n")?["error"]?.stringValue == "unknown_provider")

        try rig.directory.writeCatalog([rig.service("svc"), rig.service("svc2", path: "/token2")])
        agent.signal(SIGHUP)
        #expect(await agent.waitForStderr("reloaded: 2 provider(s)"), "\(agent.stderr)")
        #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc2"}"# + "\n")?["access_token"]?.stringValue == "at-b")

        try Data("[ not json".utf8).write(to: rig.directory.config)
        agent.signal(SIGHUP)
        #expect(await agent.waitForStderr("reload failed, still serving the previous catalog"), "\(agent.stderr)")
        #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc2"}"# + "\n")?["access_token"]?.stringValue == "at-b")

        // svc, asked often enough that both socket loops remember its answer, then left out of
        // the catalog: no loop gives the remembered answer again.
        for _ in 0..<20 {
            #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc"}"# + "\n")?["access_token"]?.stringValue == "at-a")
        }
        try rig.directory.writeCatalog([rig.service("svc2", path: "/token2")])
        agent.signal(SIGHUP)
        #expect(await agent.waitForStderr("reloaded: 1 provider(s)"), "\(agent.stderr)")
        for _ in 0..<20 {
            #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc"}"# + "\n")?["error"]?.stringValue == "unknown_provider")
        }
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    @Test("re-authorization: no login → a device authorization, the notify command gets URL and user code (never a token or the device code), then the socket and the sink serve the approved token")
    func reauthorizes() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([
            #"{ "id": "dev", "clientID": "client-dev", "tokenURL": "\#(rig.server.baseURL)/token", "deviceAuthorizationURL": "\#(rig.server.baseURL)/device/code", "scopes": ["read"] }"#,
        ])
        rig.server.script("/device/code", [.deviceCode(user: "WDJB-MJHT", interval: 1)])
        rig.server.script("/token", [.oauthError("authorization_pending"), .token("at-approved", expiresIn: 3600, refresh: "rt-approved")])
        let notified = rig.file("notified")
        let agent = try rig.start(["--notify-command", "env | grep '^AUTHFLOW_' | sort > \(notified)", "--sink", "dev=\(rig.file("dev-token"))"])
        #expect(await eventually(attempts: 600) { (try? String(contentsOfFile: notified, encoding: .utf8))?.contains("AUTHFLOW_USER_CODE") == true })
        let environment = try String(contentsOfFile: notified, encoding: .utf8)
        #expect(environment.contains("AUTHFLOW_PROVIDER=dev\n"))
        #expect(environment.contains("AUTHFLOW_USER_CODE=WDJB-MJHT\n"))
        #expect(environment.contains("AUTHFLOW_VERIFICATION_URI=https://example.com/device\n"))
        #expect(environment.contains("AUTHFLOW_VERIFICATION_URI_COMPLETE=https://example.com/device?user_code=WDJB-MJHT\n"))
        #expect(environment.contains("AUTHFLOW_EXPIRES_AT="))
        #expect(!environment.contains("test-device-code"))
        #expect(await eventually(attempts: 600) { (try? String(contentsOfFile: rig.file("dev-token"), encoding: .utf8)) == "at-approved" })
        #expect(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"dev"}"# + "\n")?["access_token"]?.stringValue == "at-approved")
        // The rotated refresh token was stored before anything was served.
        let stored = try String(contentsOfFile: rig.directory.store.appendingPathComponent("dev.json").path, encoding: .utf8)
        #expect(stored.contains("rt-approved"))
        #expect(agent.stderr.contains("dev: a person must approve a login: open https://example.com/device and enter the code WDJB-MJHT"))
        #expect(!agent.stderr.contains("test-device-code") && !agent.stderr.contains("at-approved"))
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    @Test("a service-account key the server does not know (invalid_grant, \"Invalid JWT Signature.\"): the agent logs the key file and the account, never authflow login; authflow token through it exits 65, as without it")
    func refusedServiceAccountKey() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        let accountPath = try rig.directory.serviceAccountFile(email: "sa-wrong@demo.iam.example", keyID: "k-gone", tokenURI: "\(rig.server.baseURL)/token")
        try rig.directory.writeCatalog([#"{"id": "sa-wrong", "serviceAccountFile": "\#(accountPath)", "scopes": ["read"]}"#])
        rig.server.script("/token", [.json(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#, status: 400)])
        let agent = try rig.start()
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        #expect(await agent.waitForStderr("Invalid JWT Signature."), "\(agent.stderr)")
        let logged = try #require(agent.stderr.split(separator: "\n").first { $0.contains("Invalid JWT Signature.") })
        #expect(logged.contains("sa-wrong: token request failed, trying again later"), "\(logged)")
        #expect(logged.contains("The provider refused the service-account key \(accountPath) (sa-wrong@demo.iam.example): "
                                + "check that it is still valid there"), "\(logged)")

        let run = try await runBinary(["token", "sa-wrong"], environment: rig.environment.merging(["AUTHFLOW_AGENT": rig.socket]) { _, new in new })
        #expect(run.status == 65, "\(run.stderr)")
        #expect(run.stderr.contains("agent \(rig.socket)") && run.stderr.contains("[invalid_grant]"), "answered by the agent: \(run.stderr)")
        #expect(!run.stderr.contains("authflow login"), "\(run.stderr)")
        #expect(rig.server.requests("/token").allSatisfy { $0.form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" })
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
        #expect(!agent.stderr.contains("authflow login"), "\(agent.stderr)")
        #expect(!agent.stderr.contains("a person"), "\(agent.stderr)")
    }

    @Test("the agent path of authflow token exits as the CLI's advice table says for each recovery the agent can answer")
    func agentRecoveryStatuses() {
        for recovery in OAuthError.Recovery.allCases {
            let name = AgentProtocol.name(of: recovery)
            #expect(AgentProtocol.recovery(named: name) == recovery)
            let error = OAuthError(recovery == .retryLater ? .timedOut : recovery == .reauthorize ? .expired
                                   : recovery == .fixConfiguration ? .configuration : .accessDenied)
            #expect(error.recovery == recovery)
            #expect(ErrorAdvice.status(for: recovery) == ErrorAdvice.row(for: error, ErrorAdvice.Subject()).status, "\(recovery)")
        }
        #expect(ErrorAdvice.status(for: .retryLater) == .temporaryFailure)
        #expect(ErrorAdvice.status(for: .fixConfiguration) == .dataError)
        #expect(ErrorAdvice.status(for: .reauthorize) == .denied)
        #expect(AgentProtocol.recovery(named: "fix_request") == nil)
    }

    @Test("a fleet: two agents on one store ask a person once; the other waits, and both serve the approved token")
    func fleetAsksOnce() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([
            #"{ "id": "dev", "clientID": "client-dev", "tokenURL": "\#(rig.server.baseURL)/token", "deviceAuthorizationURL": "\#(rig.server.baseURL)/device/code" }"#,
        ])
        rig.server.script("/device/code", [.deviceCode(user: "FLEE-TONE", interval: 1)])
        rig.server.script("/token", [.oauthError("authorization_pending"), .token("at-fleet", expiresIn: 3600, refresh: "rt-fleet")])
        let second = rig.socketDirectory.appendingPathComponent("second.sock").path
        let first = try rig.start()
        let other = try Child(Binary.url!.path, ["agent", "--socket", second], environment: rig.environment, directory: rig.directory.url,
                              name: "second")
        #expect(await eventually(attempts: 3000) {
            (first.stderr + other.stderr).contains("is asking a person already") && (first.stderr + other.stderr).contains("a person must approve")
        }, "\(first.stderr)\n---\n\(other.stderr)")
        for socket in [rig.socket, second] {
            #expect(await eventually(attempts: 600) {
                AgentClient.ask(socket, request: #"{"v":1,"token":"dev"}"# + "\n")?["access_token"]?.stringValue == "at-fleet"
            })
        }
        #expect(rig.server.requests("/device/code").count == 1, "one device login for the fleet")
        #expect(!FileManager.default.fileExists(atPath: rig.directory.store.appendingPathComponent("dev.agent-login.json").path),
                "the marker is removed after the login")
        for agent in [first, other] {
            agent.signal(SIGTERM)
            #expect(await agent.waitExit() == 0)
        }
    }

    // MARK: Hostile clients

    @Test("hostile clients: silent, 1 MiB line, invalid JSON, 10,000 dropped connections, a peer that never reads — others are served, no descriptor leaks, SIGTERM exits 0")
    func hostileClients() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        let agent = try await rig.startServing("at-hostile", ["--client-timeout", "1"])
        let request = #"{"v":1,"token":"svc"}"# + "\n"
        #expect(AgentClient.ask(rig.socket, request: request)?["access_token"]?.stringValue == "at-hostile")
        let baseline = descriptors(agent.pid)

        let silent = try UnixSocket.connect(rig.socket)
        let neverReads = try UnixSocket.connect(rig.socket)
        #expect(sendAll(neverReads.raw, Array(request.utf8)))
        // Served while the silent client and the non-reader hold their connections.
        #expect(AgentClient.ask(rig.socket, request: request)?["access_token"]?.stringValue == "at-hostile")

        let huge = try UnixSocket.connect(rig.socket)
        _ = sendAll(huge.raw, [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20))   // the agent stops reading and closes
        #expect(readAnswer(huge.raw)?.contains(#""error":"invalid_request""#) == true)
        #expect(AgentClient.ask(rig.socket, request: "{not json\n")?["error"]?.stringValue == "invalid_request")
        #expect(AgentClient.ask(rig.socket, request: "[1,2]\n")?["error"]?.stringValue == "invalid_request")
        #expect(AgentClient.ask(rig.socket, request: #"{"v":2,"token":"svc"}"# + "\n")?["error"]?.stringValue == "unsupported_version")

        for _ in 0..<10_000 {
            guard let connection = try? UnixSocket.connect(rig.socket) else { continue }
            _ = connection   // closed at once
        }
        #expect(AgentClient.ask(rig.socket, request: request)?["access_token"]?.stringValue == "at-hostile")

        // The silent client is dropped after its deadline: it reads the end of the stream.
        #expect(readAnswer(silent.raw) == nil)
        #expect(agent.stderr.contains("no request line within"))
        // The non-reader's answer was written and its connection closed on the agent's side. (At most
        // the baseline: a connection to the token server open when it was counted may be gone since.)
        #expect(await eventually { descriptors(agent.pid) <= baseline }, "\(descriptors(agent.pid)) descriptors, \(baseline) before")
        _ = neverReads
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    @Test("a client that hangs up while its token is fetched, a line in pieces, 200 connections at once: the others are answered, one fetch, no descriptor leaks")
    func connectionPaths() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([rig.service("svc")])
        // The first token takes a second: requests meanwhile wait for the one fetch in flight.
        rig.server.script("/token", [TestHTTPServer.Reply.token("at-paths", expiresIn: 3600).delayed(.seconds(1))])
        let agent = try rig.start()
        let request = Array((#"{"v":1,"token":"svc"}"# + "\n").utf8)
        #expect(await eventually { access(rig.socket, F_OK) == 0 })
        let waiting = try UnixSocket.connect(rig.socket)
        let leaving = try UnixSocket.connect(rig.socket)
        #expect(sendAll(waiting.raw, request) && sendAll(leaving.raw, request))
        _ = consume leaving   // hangs up before its answer
        #expect(readAnswer(waiting.raw)?.contains(#""access_token":"at-paths""#) == true)
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        let baseline = descriptors(agent.pid)

        // A line in three pieces (the pauses only make separate reads likely; nothing depends on them).
        let pieces = try UnixSocket.connect(rig.socket)
        for piece in [request[..<5], request[5..<12], request[12...]] {
            #expect(sendAll(pieces.raw, Array(piece)))
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(readAnswer(pieces.raw)?.contains(#""access_token":"at-paths""#) == true)

        // 200 connections open together, then 200 requests, then 200 answers.
        var connections: [SharedFileDescriptor] = []
        for _ in 0..<200 { connections.append(SharedFileDescriptor(try UnixSocket.connect(rig.socket))) }
        #expect(connections.allSatisfy { sendAll($0.raw, request) })
        #expect(connections.filter { readAnswer($0.raw)?.contains(#""access_token":"at-paths""#) == true }.count == 200)
        connections.removeAll()

        #expect(rig.server.requests("/token").count == 1)
        #expect(await eventually { descriptors(agent.pid) <= baseline }, "\(descriptors(agent.pid)) descriptors, \(baseline) before")
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    @Test("a burst of mixed requests read in the same turns of the loops: each answer reaches its own client; one socket loop per CPU it may run on (at most two), asleep when idle")
    func burstAnswersReachTheirClients() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        try rig.directory.writeCatalog([rig.service("p", path: "/p"), rig.service("q", path: "/q")])
        rig.server.script("/p", [.token("at-for-p", expiresIn: 3600)])
        rig.server.script("/q", [.token("at-for-q", expiresIn: 3600)])
        let agent = try rig.start()
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        let shapes: [(request: String, expected: String)] = [
            (#"{"v":1,"token":"p"}"#, #""access_token":"at-for-p""#),
            (#"{"v":1,"token":"q"}"#, #""access_token":"at-for-q""#),
            (#"{"v":1,"token":"nobody"}"#, #""error":"unknown_provider""#),
            ("{not json", #""error":"invalid_request""#),
            (#"{"v":2,"token":"p"}"#, #""error":"unsupported_version""#),
        ]
        let baseline = descriptors(agent.pid)
        // 500 connections open first (each waits for its line in the loop's table), then every
        // line is written before any answer is read: the loop reads many requests in one turn.
        var connections: [SharedFileDescriptor] = []
        for _ in 0..<500 { connections.append(SharedFileDescriptor(try UnixSocket.connect(rig.socket))) }
        for (index, connection) in connections.enumerated() {
            #expect(sendAll(connection.raw, Array((shapes[index % shapes.count].request + "\n").utf8)))
        }
        var mismatches: [String] = []
        for (index, connection) in connections.enumerated() {
            let answer = readAnswer(connection.raw) ?? "(none)"
            if !answer.contains(shapes[index % shapes.count].expected) { mismatches.append("#\(index): \(answer)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
        connections.removeAll()
        #expect(await eventually { descriptors(agent.pid) <= baseline }, "\(descriptors(agent.pid)) descriptors, \(baseline) before")

        // One socket loop per CPU, at most two. Idle, each sleeps in epoll_wait: the loops' CPU
        // time stays put. (A loop that kept polling would add up to a second of CPU time per
        // second; load on the machine can only make that less, never more.)
        let before = loopCPUTicks(agent.pid)
        #expect(before.count == min(try #require(allowedCPUs()), 2), "loops: \(before.count)")
        try await Task.sleep(for: .seconds(1))
        let after = loopCPUTicks(agent.pid)
        #expect(after.reduce(0, +) - before.reduce(0, +) <= 5, "the socket loops used \(before) then \(after) ticks of CPU time while idle")
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    @Test("pinned to one CPU after it started (taskset -a -p), only the first socket loop accepts; on two CPUs again, both do", .enabled(if: ProcessInfo.processInfo.activeProcessorCount >= 2))
    func loopsFollowTheAffinity() async throws {
        let allowed = try #require(allowedCPUList())
        try #require(allowedCPUs() ?? 0 >= 2, "needs two CPUs: \(allowed)")
        let first = try #require(allowed.split(whereSeparator: { $0 == "," || $0 == "-" }).first.map(String.init))
        let rig = try Rig()
        defer { rig.remove() }
        let agent = try await rig.startServing("at-pinned")
        #expect(listeningLoops(agent.pid) == 2)

        func pin(_ cpus: String) async throws {
            let taskset = try await runProcess("/usr/bin/taskset", ["-a", "-p", "-c", cpus, "\(agent.pid)"])
            try #require(taskset.status == 0, "taskset: \(taskset.stderr)")
        }
        // Each request wakes a loop, which reads the mask at most once a second.
        func served() -> Bool { AgentClient.ask(rig.socket, request: #"{"v":1,"token":"svc"}"# + "\n")?["access_token"]?.stringValue == "at-pinned" }
        try await pin(first)
        #expect(await eventually { served() && listeningLoops(agent.pid) == 1 }, "\(agent.stderr)")
        #expect(agent.stderr.contains("the agent may run on 1 CPU(s) now: 1 of its 2 socket loops accept connections"), "\(agent.stderr)")
        // The one loop takes every connection: 600, more than its share of two loops (512), held at once.
        var held: [SharedFileDescriptor] = []
        for _ in 0..<600 { held.append(SharedFileDescriptor(try UnixSocket.connect(rig.socket))) }
        #expect(await eventually { descriptors(agent.pid) >= 600 })
        for connection in held { #expect(sendAll(connection.raw, Array((#"{"v":1,"token":"svc"}"# + "\n").utf8))) }
        #expect(held.filter { readAnswer($0.raw)?.contains(#""access_token":"at-pinned""#) == true }.count == 600)
        held.removeAll()

        try await pin(allowed)
        #expect(await eventually { served() && listeningLoops(agent.pid) == 2 }, "\(agent.stderr)")
        #expect(agent.stderr.contains("2 of its 2 socket loops accept connections"), "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
    }

    /// How many of the agent's epoll sets watch its listening socket: the sets whose
    /// `/proc/PID/fdinfo` has an entry tagged `ffffffff` (the loops' tag for the listener).
    func listeningLoops(_ pid: Int32) -> Int {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return descriptors.filter { fd in
            guard (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == "anon_inode:[eventpoll]",
                  let info = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8) else { return false }
            return info.split(separator: "\n").contains { line in
                let words = line.split(separator: " ")
                guard let data = words.firstIndex(of: "data:"), data + 1 < words.count else { return false }
                return words[data + 1] == "ffffffff"
            }
        }.count
    }

    /// The kernel's `Cpus_allowed_list` of this process, such as `0-1` or `0,2-3`.
    func allowedCPUList() -> String? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") }) else { return nil }
        return line.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces)
    }

    /// How many CPUs this process may run on (the agent, its child, inherits the mask): the
    /// kernel's `Cpus_allowed_list` in `/proc/self/status`, such as `0-1` or `0,2-3`.
    func allowedCPUs() -> Int? {
        guard let list = allowedCPUList() else { return nil }
        var count = 0
        for range in list.split(separator: ",") {
            let bounds = range.split(separator: "-").compactMap { Int($0) }
            guard let first = bounds.first, let last = bounds.last, last >= first else { return nil }
            count += last - first + 1
        }
        return count
    }

    /// User and system CPU time, in clock ticks, of each of the agent's socket loop threads (named
    /// `authflow-agent`), from `/proc/PID/task/TID/stat`.
    func loopCPUTicks(_ pid: Int32) -> [Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")"),
                  stat[stat.index(after: open)..<close] == "authflow-agent" else { return nil }
            // After the name: state is field 3, utime 14 and stime 15.
            let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
            guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
            return user + system
        }
    }

    // MARK: Parsing

    @Test("--sink PROVIDER=FILE[,mode=][,owner=USER:GROUP][,format=] is parsed; bad specs are usage errors")
    func sinkSpecs() throws {
        let invocation = try Authflow.parse(["agent", "--sink", "gh=/run/gh/token,mode=0640,owner=root:adm,format=header", "--sink=x=/t"])
        guard case .agent(let options) = invocation.command else { Issue.record("not agent: \(invocation.command)"); return }
        #expect(options.sinks == [
            AgentOptions.Sink(provider: "gh", path: "/run/gh/token", mode: 0o640, owner: "root", group: "adm", format: .header),
            AgentOptions.Sink(provider: "x", path: "/t"),
        ])
        for bad in ["gh", "gh=token", "gh=/t,mode=0644", "gh=/t,mode=9", "gh=/t,format=yaml", "gh=/t,color=red", "=/t", "gh=/t,owner="] {
            #expect(throws: UsageError.self, "\(bad)") { try Authflow.parse(["agent", "--sink", bad]) }
        }
        #expect(throws: UsageError.self) { try Authflow.parse(["agent", "--socket", "relative.sock"]) }
        #expect(throws: UsageError.self) { try Authflow.parse(["agent", "--client-timeout", "0"]) }
        #expect(throws: UsageError.self) { try Authflow.parse(["agent", "extra"]) }
    }

    @Test("--ciba-notification-listen ADDRESS:PORT: IPv4, bracketed IPv6, localhost; anything else is a usage error", arguments: [
        ("127.0.0.1:8443", AgentOptions.ListenAddress(host: "127.0.0.1", port: 8443)),
        ("0.0.0.0:0", AgentOptions.ListenAddress(host: "0.0.0.0", port: 0)),
        ("[::1]:65535", AgentOptions.ListenAddress(host: "::1", port: 65535)),
        ("localhost:9000", AgentOptions.ListenAddress(host: "127.0.0.1", port: 9000)),
        ("8443", nil), ("127.0.0.1", nil), ("127.0.0.1:65536", nil), ("127.0.0.1:-1", nil), ("::1:8443", nil),
        ("[::1]8443", nil), ("example.com:8443", nil), ("127.0.0.1:", nil), (":8443", nil), ("[127.0.0.1]:8443", nil),
    ] as [(String, AgentOptions.ListenAddress?)])
    func notificationListen(value: String, expected: AgentOptions.ListenAddress?) throws {
        guard let expected else {
            let error = #expect(throws: UsageError.self) { try Authflow.parse(["agent", "--ciba-notification-listen", value]) }
            #expect(error?.message.contains("--ciba-notification-listen") == true)
            return
        }
        let invocation = try Authflow.parse(["agent", "--ciba-notification-listen", value])
        guard case .agent(let options) = invocation.command else { Issue.record("not agent: \(invocation.command)"); return }
        #expect(options.cibaNotificationListen == expected)
    }
}

// MARK: Helpers

/// A child process whose standard output and error go to files.
final class Child {
    let process = ChildProcess()
    let errorPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String], directory: URL, name: String) throws {
        errorPath = directory.appendingPathComponent("\(name).stderr").path
        let outputPath = directory.appendingPathComponent("\(name).stdout").path
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle(forWritingAtPath: outputPath)
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var stderr: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// Waits (at most 3,000 × 20 ms) until standard error holds `text`.
    func waitForStderr(_ text: String) async -> Bool {
        await eventually(attempts: 3000) { self.stderr.contains(text) }
    }

    func signal(_ number: Int32) { kill(pid, number) }

    /// The exit status; -1 (after SIGKILL) when it did not exit within 60 s.
    func waitExit() async -> Int32 {
        for _ in 0..<3000 where process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { if process.isRunning { kill(pid, SIGKILL) } }
}

/// Runs a program to completion (killed after 60 s) and returns its status and output.
func runProcess(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let child = try Child(executable, arguments, environment: ["PATH": "/usr/bin:/bin"], directory: directory.url, name: "run")
    let status = await child.waitExit()
    let stdout = (try? String(contentsOfFile: directory.url.appendingPathComponent("run.stdout").path, encoding: .utf8)) ?? ""
    return (status, stdout, child.stderr)
}

/// Polls `condition` every 20 ms, at most `attempts` times; whether it held.
func eventually(attempts: Int = 1500, _ condition: () -> Bool) async -> Bool {
    for _ in 0..<attempts {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

func fileMode(_ path: String) -> mode_t? {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o7777 : nil
}

/// How many descriptors `pid` has open.
func descriptors(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

/// Sends every byte (blocking, at most 30 s); false when the peer closed first.
func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var limit = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    var sent = 0
    while sent < bytes.count {
        let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { return false }
        sent += count
    }
    return true
}

/// Reads until a newline or the end of the stream (at most 30 s); nil at the end with nothing read.
func readAnswer(_ fd: Int32) -> String? {
    var limit = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while !data.contains(UInt8(ascii: "\n")) {
        let count = recv(fd, &chunk, chunk.count, 0)
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        data += chunk[0..<count]
    }
    return data.isEmpty ? nil : String(decoding: data, as: UTF8.self)
}
