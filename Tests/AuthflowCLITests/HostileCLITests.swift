@testable import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import OAuthFlowURLSession
import TestSupport
import Testing

/// The hostile-server suite through the command line: each case runs one `authflow` command
/// against a misbehaving loopback server (`HostileServer`) and states the exit code, the typed
/// error named on stderr, what ended it (the server's answer, or the total deadline for a server that
/// never finishes; never a wall-clock bound, issue 21), and that the entry stored before it is byte-identical
/// afterwards (removed after `logout`, which forgets tokens whatever the server says).
///
/// Most cases run `Authflow.run(arguments:…)` in-process with a short-deadline transport; a subset
/// runs the built binary, with its default `CurlTransport`, for the modes that end on their own.
@Suite("Hostile servers through authflow: exit codes, typed errors, stored entries", .timeLimit(.minutes(3)))
struct HostileCLITests {}

/// One command of the CLI, pointed at the hostile server.
enum HostileCommand: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case clientCredentials, deviceLogin, devicePolling, refresh, userinfo, logout, discover

    var testDescription: String { rawValue }

    func arguments(_ server: HostileServer) -> [String] {
        switch self {
        case .clientCredentials: ["login", CLIRig.provider, "--client-credentials"]
        case .deviceLogin, .devicePolling: ["login", CLIRig.provider, "--device"]
        case .refresh: ["token", CLIRig.provider]
        case .userinfo: ["userinfo", CLIRig.provider]
        case .logout: ["logout", CLIRig.provider]
        case .discover: ["discover", server.baseURL]
        }
    }

    var hostilePaths: [String] {
        switch self {
        case .clientCredentials, .devicePolling, .refresh: ["/token"]
        case .deviceLogin: ["/device"]
        case .userinfo: ["/userinfo"]
        case .logout: ["/revoke"]
        case .discover: ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"]
        }
    }

    /// Token requests retry transport failures (3 attempts), device polling up to 5 in a row, a
    /// logout revokes two tokens.
    var attempts: Int {
        switch self {
        case .clientCredentials, .refresh: 3
        case .devicePolling: 6
        case .logout: 2
        default: 1
        }
    }

    func goodBody(_ server: HostileServer) -> String {
        switch self {
        case .clientCredentials, .devicePolling, .refresh:
            #"{"access_token":"new-at","token_type":"Bearer","expires_in":3600,"refresh_token":"new-rt"}"#
        case .deviceLogin:
            #"{"device_code":"dc-1","user_code":"ABCD-EFGH","verification_uri":"https://example.com/device","expires_in":600,"interval":1}"#
        case .userinfo: #"{"sub":"user-1","name":"A. User"}"#
        case .logout: #"{"note":"RFC 7009 says nothing of the body of a 200; this one is long enough to trickle"}"#
        case .discover:
            #"{"issuer":"\#(server.baseURL)","token_endpoint":"\#(server.baseURL)/token","response_types_supported":["code"]}"#
        }
    }
}

/// A catalog and a store in a private directory (on a tmpfs when there is one), with an entry
/// stored for the provider before the command runs.
struct CLIRig {
    static let provider = "hostile"
    static let accessToken = "stored-at-5ecret"
    static let refreshToken = "stored-rt-5ecret"
    static let clientSecret = "client-5ecret"
    static let secrets = [accessToken, refreshToken, clientSecret, "new-at", "new-rt", "dc-1"]

    static let scratch: URL = {
        let shm = URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        return access(shm.path, W_OK) == 0 ? shm : FileManager.default.temporaryDirectory
    }()

    let home: TemporaryDirectory
    var directory: URL { home.url }
    let clock = TestClock(start: Date())
    var config: URL { directory.appendingPathComponent("providers.json") }
    var store: URL { directory.appendingPathComponent("store", isDirectory: true) }
    var entryFile: URL { store.appendingPathComponent("\(Self.provider).json") }

    /// Writes the catalog for `server` and stores `entry` (or the default one for `command`).
    init(server: HostileServer, command: HostileCommand?, entry: Data? = nil) async throws {
        home = try TemporaryDirectory("hostile-cli", in: Self.scratch)
        let base = server.baseURL
        let catalog = #"[{"id":"\#(Self.provider)","clientID":"client-hostile","clientSecret":"\#(Self.clientSecret)","#
            + #""tokenURL":"\#(base)/token","deviceAuthorizationURL":"\#(base)/device","revocationURL":"\#(base)/revoke","#
            + #""userinfoURL":"\#(base)/userinfo","scopes":["read"]}]"#
        try Data(catalog.utf8).write(to: config)
        let now = Int(clock.date.timeIntervalSince1970)
        let grant = command == .clientCredentials ? "client_credentials" : "urn:ietf:params:oauth:grant-type:device_code"
        // `token` must refresh: its entry expired a minute ago.
        let expiresAt = command == .refresh ? now - 60 : now + 3600
        let stored = try FileSecretStore(directory: store, lockTimeout: .seconds(5))
        try await stored.save(entry ?? Self.entry(grant: grant, issuedAt: now - 3600, expiresAt: "\(expiresAt)"), for: Self.provider)
    }

    static func entry(grant: String, issuedAt: Int, expiresAt: String, issuedAtText: String? = nil) -> Data {
        Data((#"{"tokens":{"accessToken":"\#(accessToken)","expiresAt":\#(expiresAt),"grant":"\#(grant)","#
            + #""issuedAt":\#(issuedAtText ?? String(issuedAt)),"needsReauthorization":false,"providerID":"\#(provider)","#
            + #""refreshToken":"\#(refreshToken)","scopes":["read"],"tokenType":"Bearer"},"version":1}"#).utf8)
    }

    var environment: [String: String] {
        ["HOME": directory.path, "AUTHFLOW_CONFIG": config.path, "AUTHFLOW_STORE": store.path, "NO_COLOR": "1",
         "no_proxy": "127.0.0.1,localhost", "PATH": "/usr/bin:/bin"]
    }

    var storedBytes: Data? { try? Data(contentsOf: entryFile) }

    func remove() { home.remove() }

    /// Runs `authflow arguments` in-process through `transport`, on the rig's test clock.
    func run(_ arguments: [String], transport: any HTTPTransport) async -> (status: ExitCode, stdout: String, stderr: String) {
        let (output, stdout, stderr) = Output.capture()
        let services = Authflow.Services(transport: transport, clock: clock, now: { [clock] in clock.date }, openURL: { _ in },
                                         lockTimeout: .seconds(5))
        let status = await Authflow.run(arguments: arguments, output: output, environment: environment, services: services)
        return (status, stdout.text, stderr.text)
    }

    /// Checks what every case promises: the exit code, the typed error on stderr, no secret and no
    /// control character in the output, what ended the command, the stored entry.
    ///
    /// `atDeadline`: the command must end on the transport's total deadline (a server that never
    /// finishes its answer), named on stderr; otherwise it must end on what the server did, never by
    /// waiting a deadline out. This replaces a wall-clock bound, which a busy machine could exceed
    /// (issue 21); a command that never ends is caught by the suite's time limit.
    static func check(
        _ result: (status: ExitCode, stdout: String, stderr: String), exit: ExitCode, code: OAuthError.Code?,
        atDeadline: Bool = false, before: Data?, after: Data?, removed: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == exit, "\(result.stderr)", sourceLocation: sourceLocation)
        if let code {
            #expect(result.stderr.contains("authflow: error:"), "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.contains("[\(code)]"), "\(result.stderr)", sourceLocation: sourceLocation)
        }
        for text in [result.stdout, result.stderr] {
            for secret in secrets { #expect(!text.contains(secret), "\(secret) in \(text)", sourceLocation: sourceLocation) }
            #expect(!text.unicodeScalars.contains { $0 != "\n" && DisplayText.isUnsafe($0) }, "\(text.debugDescription)",
                    sourceLocation: sourceLocation)
        }
        if atDeadline {
            #expect(result.stderr.contains("within the total deadline (1 s)"), "\(result.stderr)", sourceLocation: sourceLocation)
        } else {
            #expect(!result.stderr.contains("total deadline"), "\(result.stderr)", sourceLocation: sourceLocation)
        }
        if removed {
            #expect(after == nil, "logout did not forget the tokens", sourceLocation: sourceLocation)
        } else {
            #expect(after != nil && after == before, "the stored entry changed", sourceLocation: sourceLocation)
        }
    }
}

/// The two transports, with a total deadline of `timeout` and no proxy.
enum CLITransport: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case curl, urlSession
    var testDescription: String { rawValue }

    func make(timeout: TimeInterval) -> any HTTPTransport {
        switch self {
        case .curl: CurlTransport(timeout: timeout, connectTimeout: min(timeout, 5), proxy: .none)
        case .urlSession: URLSessionTransport(timeout: timeout)
        }
    }
}

// MARK: Transport-level misbehaviour

extension HostileCLITests {
    struct TransportCase: Sendable, CustomTestStringConvertible {
        var command: HostileCommand
        var mode: HostileServer.Mode
        var transport: CLITransport
        var testDescription: String { "\(command.rawValue) \(mode.rawValue) \(transport.rawValue)" }

        var isSlow: Bool { mode == .trickleBody || mode == .silent }

        /// The exit code and the error code on stderr; nil code: the command succeeds.
        var expected: (exit: ExitCode, code: OAuthError.Code?) {
            switch mode {
            case .endlessBody, .hugeDeclaredLength:
                // A revocation answered 200 is confirmed whatever the body (RFC 7009 §2.2).
                return command == .logout ? (.success, nil) : (.dataError, .invalidResponse)
            case .headerFlood:
                if transport == .urlSession { return (.unavailable, .transport) }
                return command == .logout ? (.success, nil) : (.dataError, .invalidResponse)
            case .redirectElsewhere:
                return (.dataError, .httpStatus)
            default:
                return (.unavailable, .transport)
            }
        }

    }

    static let cliModes: [HostileServer.Mode] = [
        .trickleBody, .silent, .endlessBody, .hugeDeclaredLength, .resetMidBody, .closeWithoutAnswer, .chunkedBadSize,
        .garbageStatusLine, .headerFlood, .redirectElsewhere,
    ]
    static let urlSessionModes: [HostileServer.Mode] = [.trickleBody, .silent, .endlessBody, .resetMidBody, .headerFlood]

    static let transportCases: [TransportCase] = HostileCommand.allCases.flatMap { command in
        cliModes.map { TransportCase(command: command, mode: $0, transport: .curl) }
            + urlSessionModes.map { TransportCase(command: command, mode: $0, transport: .urlSession) }
    }

    @Test("a hostile server: the exit code, the typed error on stderr, what ended it, bounded attempts, the stored entry intact",
          arguments: HostileServer.selected(transportCases))
    func transportLevel(_ test: TransportCase) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let (server, elsewhere) = try HostileServer.transportCase(test.mode, paths: test.command.hostilePaths, good: test.command.goodBody)
        defer { server.stop(); elsewhere.stop() }
        if test.command == .devicePolling { server.script("/device", .reply(200, HostileCommand.deviceLogin.goodBody(server))) }
        let rig = try await CLIRig(server: server, command: test.command)
        defer { rig.remove() }
        let before = rig.storedBytes

        let result = await rig.run(test.command.arguments(server), transport: test.transport.make(timeout: test.isSlow ? 1 : 30))

        let expected = test.expected
        CLIRig.check(result, exit: expected.exit, code: expected.code, atDeadline: test.isSlow, before: before, after: rig.storedBytes,
                     removed: test.command == .logout)
        #expect(elsewhere.requests().isEmpty, "a request reached the redirect target")
        let asked = test.command.hostilePaths.flatMap { server.requests($0) }.count
        #expect(asked >= 1, "the hostile path was never asked")
        #expect(asked <= test.command.attempts, "\(asked) requests: the command went on past its \(test.command.attempts) attempts")
        if test.command == .logout, expected.code != nil {
            #expect(result.stdout.contains("Forgot the tokens of hostile locally."), "\(result.stdout)")
        }
    }
}

// MARK: Hostile content

extension HostileCLITests {
    struct ContentCase: Sendable, CustomTestStringConvertible {
        var command: HostileCommand
        var name: String
        var status: Int = 200
        var body: @Sendable (HostileServer) -> String
        var exit: ExitCode = .dataError
        var code: OAuthError.Code = .invalidResponse
        var testDescription: String { "\(command.rawValue) \(name)" }
    }

    static func token(_ replacing: [String: String], extra: String = "") -> @Sendable (HostileServer) -> String {
        { _ in
            var members = [
                "access_token": #""new-at""#, "token_type": #""Bearer""#, "expires_in": "3600", "refresh_token": #""new-rt""#,
            ]
            for (key, value) in replacing { members[key] = value }
            return "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + extra + "}"
        }
    }

    static func tokenCases(_ command: HostileCommand) -> [ContentCase] {
        [
            ContentCase(command: command, name: "expires_in 2^63", body: token(["expires_in": "9223372036854775808"])),
            ContentCase(command: command, name: "expires_in 2^63 as a string", body: token(["expires_in": #""9223372036854775808""#])),
            ContentCase(command: command, name: "expires_in 1e300", body: token(["expires_in": "1e300"])),
            ContentCase(command: command, name: "access_token with CR LF", body: token(["access_token": #""at\r\nX-Injected: 1""#])),
            ContentCase(command: command, name: "access_token with ESC", body: token(["access_token": #""\u001b]0;pwned\u0007""#])),
            ContentCase(command: command, name: "token_type mac", body: token(["token_type": #""mac""#])),
            ContentCase(command: command, name: "a duplicate access_token", body: token([:], extra: #","access_token":"other""#)),
            ContentCase(command: command, name: "an error of control characters", status: 400,
                        body: { _ in #"{"error":"\u001b[2J\u001b[H","error_description":"\r\nFAKE PROMPT $ "}"# }, code: .serverRejected),
        ]
    }

    static func device(_ replacing: [String: String]) -> @Sendable (HostileServer) -> String {
        { _ in
            var members = [
                "device_code": #""dc-1""#, "user_code": #""ABCD-EFGH""#, "verification_uri": #""https://example.com/device""#,
                "expires_in": "600", "interval": "5",
            ]
            for (key, value) in replacing { members[key] = value }
            return "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
    }

    static let contentCases: [ContentCase] = [HostileCommand.clientCredentials, .devicePolling, .refresh].flatMap(tokenCases) + [
        ContentCase(command: .deviceLogin, name: "expires_in 2^63", body: device(["expires_in": "9223372036854775808"])),
        ContentCase(command: .deviceLogin, name: "expires_in 2^63 as a string", body: device(["expires_in": #""9223372036854775808""#])),
        ContentCase(command: .deviceLogin, name: "interval 2^63", body: device(["interval": "9223372036854775808"])),
        ContentCase(command: .deviceLogin, name: "verification_uri with a newline",
                    body: device(["verification_uri": #""https://example.com/\nOpen https://evil.example""#])),
        ContentCase(command: .userinfo, name: "sub a number", body: { _ in #"{"sub":42}"# }),
        ContentCase(command: .userinfo, name: "a duplicate sub", body: { _ in #"{"sub":"user-1","sub":"admin"}"# }),
        ContentCase(command: .discover, name: "another issuer", body: { _ in #"{"issuer":"https://evil.example","response_types_supported":["code"]}"# }),
        ContentCase(command: .discover, name: "a duplicate issuer",
                    body: { server in #"{"issuer":"\#(server.baseURL)","issuer":"https://evil.example"}"# }),
        ContentCase(command: .logout, name: "an error of control characters", status: 400,
                    body: { _ in #"{"error":"\u001b[2J"}"# }, code: .serverRejected),
    ]

    @Test("a hostile body: exit code 65 and the typed error, nothing stored changes", arguments: HostileServer.selected(contentCases))
    func hostileContent(_ test: ContentCase) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        if test.command == .devicePolling { server.script("/device", .reply(200, HostileCommand.deviceLogin.goodBody(server))) }
        for path in test.command.hostilePaths { server.script(path, .reply(test.status, test.body(server))) }
        let rig = try await CLIRig(server: server, command: test.command)
        defer { rig.remove() }
        let before = rig.storedBytes

        let result = await rig.run(test.command.arguments(server), transport: CLITransport.curl.make(timeout: 30))

        CLIRig.check(result, exit: test.exit, code: test.code, before: before, after: rig.storedBytes,
                     removed: test.command == .logout)
    }

    @Test("device polling abuse ends at expires_in with exit 77 (RFC 8628 §3.5)", arguments: [
        ("slow_down for ever", 30, 5, "slow_down"), ("interval 100000 with expires_in 3", 3, 100_000, "authorization_pending"),
        ("interval above expires_in, then slow_down", 12, 10, "slow_down"),
    ])
    func pollingAbuse(name: String, expiresIn: Int, interval: Int, answer: String) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        server.script("/device", .reply(200, Self.device(["expires_in": "\(expiresIn)", "interval": "\(interval)"])(server)))
        server.script("/token", .reply(400, #"{"error":"\#(answer)"}"#))
        let rig = try await CLIRig(server: server, command: .devicePolling)
        defer { rig.remove() }
        let before = rig.storedBytes

        let result = await rig.run(["login", CLIRig.provider, "--device"], transport: CLITransport.curl.make(timeout: 30))

        CLIRig.check(result, exit: .denied, code: .expired, before: before, after: rig.storedBytes)
        #expect(rig.clock.sleeps.reduce(.zero, +) == .seconds(expiresIn), "\(rig.clock.sleeps)")
    }
}

// MARK: Hostile stored entries

extension HostileCLITests {
    /// Entries another process (or an old bug) left with times no date can hold.
    static let hostileEntries: [(String, String, String?)] = [
        ("expiresAt 1e300", "1e300", nil),
        ("expiresAt -1e300", "-1e300", nil),
        ("expiresAt 2^63", "9223372036854775808", nil),
        ("expiresAt 2^63 as a string", #""9223372036854775808""#, nil),
        ("expiresAt 2^64 as a string", #""18446744073709551616""#, nil),
        ("issuedAt 1e300", "1800000000", "1e300"),
        ("issuedAt 2^63 as a string", "1800000000", #""9223372036854775808""#),
    ]

    @Test("status and token on a stored entry with a hostile time: no crash, a typed message, exit 77 and 65, the entry kept",
          arguments: hostileEntries)
    func hostileStoredTime(name: String, expiresAt: String, issuedAt: String?) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        let entry = CLIRig.entry(grant: "urn:ietf:params:oauth:grant-type:device_code", issuedAt: 1_700_000_000, expiresAt: expiresAt,
                                 issuedAtText: issuedAt)
        let rig = try await CLIRig(server: server, command: nil, entry: entry)
        defer { rig.remove() }
        let before = rig.storedBytes
        let transport = CLITransport.curl.make(timeout: 5)

        let status = await rig.run(["status", CLIRig.provider], transport: transport)
        let json = await rig.run(["status", CLIRig.provider, "--json"], transport: transport)
        let token = await rig.run(["token", CLIRig.provider], transport: transport)

        #expect(status.status == .denied, "\(status.stdout)\(status.stderr)")
        #expect(status.stdout.contains("unreadable"), "\(status.stdout)")
        #expect(status.stdout.contains("corrupted"), "\(status.stdout)")
        let line = record(try #require(json.stdout.split(separator: "\n").first))
        #expect(line["logged_in"] as? Bool == false)
        #expect((line["error"] as? String)?.contains("corrupted") == true, "\(line)")
        #expect(json.status == .denied)
        CLIRig.check(token, exit: .dataError, code: .storage, before: before, after: rig.storedBytes)
        #expect(token.stdout.isEmpty)
        #expect(server.requests().isEmpty, "nothing is sent for an entry that cannot be read")
    }
}

// MARK: The default deadline

extension HostileCLITests {
    @Test("without an injected transport the CLI uses CurlTransport with the documented 30 s total deadline")
    func defaultTransport() throws {
        let context = Context(invocation: try Authflow.parse(["token", "p"]), output: Output.capture().output, environment: [:],
                              services: Authflow.Services())
        let transport = try #require(context.transport as? CurlTransport)
        #expect(transport.timeout == 30)
        #expect(transport.connectTimeout == 10)
        #expect(transport.proxy == .environment)
    }
}

// MARK: The real binary

extension HostileCLITests {
    struct BinaryCase: Sendable, CustomTestStringConvertible {
        var name: String
        var command: HostileCommand
        var behaviour: @Sendable (HostileServer) -> HostileServer.Behaviour
        var exit: Int32
        var code: OAuthError.Code?
        var testDescription: String { "\(command.rawValue) \(name)" }
    }

    static func mode(_ mode: HostileServer.Mode, _ command: HostileCommand) -> @Sendable (HostileServer) -> HostileServer.Behaviour {
        { server in HostileServer.behaviour(mode, good: command.goodBody(server), endless: 64 << 20) }
    }

    static let binaryCases: [BinaryCase] = [
        BinaryCase(name: "resetMidBody", command: .clientCredentials, behaviour: mode(.resetMidBody, .clientCredentials), exit: 69, code: .transport),
        BinaryCase(name: "endlessBody", command: .clientCredentials, behaviour: mode(.endlessBody, .clientCredentials), exit: 65, code: .invalidResponse),
        BinaryCase(name: "hugeDeclaredLength", command: .refresh, behaviour: mode(.hugeDeclaredLength, .refresh), exit: 65, code: .invalidResponse),
        BinaryCase(name: "garbageStatusLine", command: .deviceLogin, behaviour: mode(.garbageStatusLine, .deviceLogin), exit: 69, code: .transport),
        BinaryCase(name: "chunkedBadSize", command: .userinfo, behaviour: mode(.chunkedBadSize, .userinfo), exit: 69, code: .transport),
        BinaryCase(name: "redirectElsewhere", command: .refresh, behaviour: mode(.redirectElsewhere, .refresh), exit: 65, code: .httpStatus),
        BinaryCase(name: "headerFlood", command: .clientCredentials, behaviour: mode(.headerFlood, .clientCredentials), exit: 65, code: .invalidResponse),
        BinaryCase(name: "expires_in 2^63", command: .clientCredentials,
                   behaviour: { server in .reply(200, Self.token(["expires_in": "9223372036854775808"])(server)) }, exit: 65, code: .invalidResponse),
        BinaryCase(name: "access_token with CR LF", command: .refresh,
                   behaviour: { server in .reply(200, Self.token(["access_token": #""at\r\nX-Injected: 1""#])(server)) }, exit: 65, code: .invalidResponse),
        BinaryCase(name: "device expires_in 2^63 as a string", command: .deviceLogin,
                   behaviour: { server in .reply(200, Self.device(["expires_in": #""9223372036854775808""#])(server)) }, exit: 65, code: .invalidResponse),
    ]

    @Test("the built binary against a hostile server: exit code, typed error, no crash, the stored entry intact",
          arguments: HostileServer.selected(binaryCases))
    func binary(_ test: BinaryCase) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        let behaviour = test.behaviour(server)
        for path in test.command.hostilePaths { server.script(path, behaviour) }
        let rig = try await CLIRig(server: server, command: test.command)
        defer { rig.remove() }
        let before = rig.storedBytes
        // The binary runs on the wall clock: its stored entry must be relative to now, which the rig's clock started at.
        // A generous kill deadline (it ends as soon as the binary exits): a binary that never ends is
        // killed and fails on its status, whatever the machine's load.
        let run = try await runBinary(test.command.arguments(server), environment: rig.environment, timeout: .seconds(120))

        #expect(run.status == test.exit, "\(run.stderr)")
        if let code = test.code { #expect(run.stderr.contains("[\(code)]"), "\(run.stderr)") }
        for text in [run.stdout, run.stderr] {
            for secret in CLIRig.secrets { #expect(!text.contains(secret), "\(secret) in \(text)") }
            #expect(!text.unicodeScalars.contains { $0 != "\n" && DisplayText.isUnsafe($0) }, "\(text.debugDescription)")
        }
        // Ended on the server's answer, not by waiting out the binary's 30 s total deadline.
        #expect(!run.stderr.contains("total deadline"), "\(run.stderr)")
        #expect(rig.storedBytes == before, "the stored entry changed")
    }

    @Test("the built binary: status on a stored entry with expiresAt 1e300 or 2^63 exits 77 with a message, never a signal",
          arguments: ["1e300", #""9223372036854775808""#])
    func binaryStatus(expiresAt: String) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let server = try HostileServer()
        defer { server.stop() }
        let entry = CLIRig.entry(grant: "urn:ietf:params:oauth:grant-type:device_code", issuedAt: 1_700_000_000, expiresAt: expiresAt)
        let rig = try await CLIRig(server: server, command: nil, entry: entry)
        defer { rig.remove() }
        let before = rig.storedBytes

        let run = try await runBinary(["status", CLIRig.provider], environment: rig.environment, timeout: .seconds(120))

        #expect(run.status == 77, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("unreadable") && run.stdout.contains("corrupted"), "\(run.stdout)")
        #expect(rig.storedBytes == before)
    }
}
