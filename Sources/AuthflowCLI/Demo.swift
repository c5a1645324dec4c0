#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import Synchronization

/// A clock for the demo: demo time passes only while something sleeps on it, and a sleep takes
/// 1/`factor` of its duration on the wall.
///
/// Work between sleeps takes no demo time, so what the demo prints (its times, the device code's
/// remaining lifetime) is the same on a quiet machine and on a busy one, where wall-clock scaling
/// would let a slow start eat the device code's 900 s (45 s of wall time at 20×). ``date`` follows
/// demo time, so expiry and the device code's lifetime stay consistent with the sleeps.
struct DemoClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    let factor: Int
    let startDate: Date
    private let current = DemoTime()

    init(factor: Int, startDate: Date = Date()) {
        self.factor = factor
        self.startDate = startDate
    }

    var now: Instant { Instant(offset: current.offset) }
    var minimumResolution: Duration { .milliseconds(1) }

    /// Sleeps 1/`factor` of the time to `deadline`, then moves demo time to it (never back: with
    /// several sleepers, the latest deadline reached wins). A cancelled sleep moves nothing.
    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let remaining = now.duration(to: deadline)
        if remaining > .zero { try await Task.sleep(for: remaining / factor) }
        current.advance(to: deadline.offset)
    }

    /// Demo seconds since the start.
    var elapsed: Double {
        let offset = current.offset
        return Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18
    }

    /// The demo's wall clock.
    var date: Date { startDate.addingTimeInterval(elapsed) }

    /// Demo time so far, shared by every copy of the clock.
    private final class DemoTime: Sendable {
        private let value = Mutex(Duration.zero)
        var offset: Duration { value.withLock { $0 } }
        func advance(to offset: Duration) { value.withLock { $0 = max($0, offset) } }
    }
}

/// Shows each request's shape and each answer's status and RFC 6749 §5.2 `error` as it happens. Never a body.
final class DemoTransport: HTTPTransport {
    private let base: any HTTPTransport
    private let write: @Sendable (String) async -> Void

    init(base: any HTTPTransport, write: @escaping @Sendable (String) async -> Void) {
        self.base = base
        self.write = write
    }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let body = String(decoding: request.body ?? Data(), as: UTF8.self)
        let grant = body.split(separator: "&").first { $0.hasPrefix("grant_type=") }.map {
            " grant_type=" + (ASCIIText.removingPercentEncoding(String($0.dropFirst("grant_type=".count))) ?? "")
        } ?? ""
        await write("→ \(request.method) \(request.url.path)\(grant)")
        let response = try await base.send(request)
        var answer = "← \(response.status)"
        // Only a JSON object's shape is shown; a body that is not one shows just the status.
        if case .object(let object)? = Self.parsed(response.body) {
            if let error = object["error"]?.stringValue { answer += " error=\(DisplayText.escape(error))" }
            if object["access_token"] != nil { answer += " tokens (access token <redacted>)" }
            if let code = object["user_code"] { answer += " device code <redacted>, user code \(DisplayText.escape(code.stringValue ?? ""))" }
        }
        await write(answer)
        return response
    }

    /// The body as JSON, or nil when it is not JSON (the line then shows only the status).
    private static func parsed(_ body: Data) -> JSONValue? {
        do { return try JSONValue.parse(body) } catch { return nil }
    }
}

/// An authorization server inside the process: answers each request from a script per URL path, in
/// order, the last one repeating. No URLSession and no socket, so the CLI never links FoundationNetworking.
final class DemoServer: HTTPTransport {
    /// The host its providers point at (`.test` never resolves, RFC 6761).
    let host = "authflow-demo-\(UUID().uuidString.prefix(8).lowercased()).test"
    private let scripts = Mutex<[String: [HTTPResponse]]>([:])

    func url(_ path: String) -> URL { URL(string: "https://\(host)\(path)")! }

    func provider(id: String, clientSecret: String? = nil, scopes: [String], redirectURI: URL?) -> Provider {
        Provider(
            id: id, authorizationURL: url("/authorize"), tokenURL: url("/token"), deviceAuthorizationURL: url("/device/code"),
            clientID: "demo-client", clientSecret: clientSecret.map(Secret.init), redirectURI: redirectURI, scopes: scopes)
    }

    func script(_ path: String, _ objects: [(status: Int, object: [String: JSONValue])]) {
        let responses = objects.map { reply in
            HTTPResponse(status: reply.status, headers: ["Content-Type": "application/json"], body: JSONValue.object(reply.object).jsonData)
        }
        scripts.withLock { $0[path, default: []] += responses }
    }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard request.url.host == host else { throw OAuthError(.transport, message: "could not resolve \(request.url.host ?? "?")") }
        let response = scripts.withLock { scripts -> HTTPResponse? in
            guard var queue = scripts[request.url.path], let first = queue.first else { return nil }
            if queue.count > 1 { queue.removeFirst() }
            scripts[request.url.path] = queue
            return first
        }
        return response ?? HTTPResponse(status: 404, headers: ["Content-Type": "application/json"], body: Data(#"{"error":"not_found"}"#.utf8))
    }

    static func token(access: String, expiresIn: Int, refresh: String? = nil, scope: String) -> (status: Int, object: [String: JSONValue]) {
        var object: [String: JSONValue] = [
            "access_token": .string(access), "token_type": .string("Bearer"), "expires_in": .int(expiresIn), "scope": .string(scope),
        ]
        if let refresh { object["refresh_token"] = .string(refresh) }
        return (200, object)
    }

    static func error(_ code: String, description: String) -> (status: Int, object: [String: JSONValue]) {
        (400, ["error": .string(code), "error_description": .string(description)])
    }
}

/// Sends each request to the ``DemoServer`` of its host.
struct DemoRouter: HTTPTransport {
    let hosts: [DemoServer]

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard let server = hosts.first(where: { $0.host == request.url.host }) else {
            throw OAuthError(.transport, message: "could not resolve \(request.url.host ?? "?")")
        }
        return try await server.send(request)
    }
}

/// `authflow demo`: the main job end to end, offline, against a ``DemoServer`` in the process.
struct Demo {
    static let speedup = 20
    let context: Context

    private var out: any TextSink { context.out }

    func run() async -> ExitCode {
        let style = context.outStyle
        let fileManager = FileManager.default
        let temporary = fileManager.temporaryDirectory
            .appendingPathComponent("authflow-demo-\(UUID().uuidString.prefix(8))", isDirectory: true)
        defer { try? fileManager.removeItem(at: temporary) }
        let clock = DemoClock(factor: Self.speedup)

        // The embedded provider: two in-memory hosts, one per provider, so their scripts stay apart.
        let deviceHost = DemoServer()
        let serviceHost = DemoServer()
        let secret = "demo-secret-" + Self.random()
        let device = deviceHost.provider(id: "demo-device", scopes: ["read", "profile"], redirectURI: URL(string: "http://127.0.0.1:8765/callback"))
        let service = serviceHost.provider(id: "demo-service", clientSecret: secret, scopes: ["billing:read"], redirectURI: nil)
        deviceHost.script("/device/code", [(200, [
            "device_code": .string("mock_dc_" + Self.random()), "user_code": .string("WDJB-MJHT"),
            "verification_uri": .string("https://\(deviceHost.host)/device"),
            "verification_uri_complete": .string("https://\(deviceHost.host)/device?user_code=WDJB-MJHT"), "expires_in": .int(900), "interval": .int(5),
        ])])
        deviceHost.script("/token", [
            DemoServer.error("authorization_pending", description: "the user has not approved yet"),
            DemoServer.error("slow_down", description: "polling too fast"),
            DemoServer.error("authorization_pending", description: "the user has not approved yet"),
            DemoServer.token(access: "mock_at_" + Self.random(), expiresIn: 3600, refresh: "mock_rt_" + Self.random(), scope: "read profile"),
            DemoServer.token(access: "mock_at_" + Self.random(), expiresIn: 3600, refresh: "mock_rt_" + Self.random(), scope: "read profile"),
        ])
        serviceHost.script("/token", [DemoServer.token(access: "mock_at_" + Self.random(), expiresIn: 1800, scope: "billing:read")])

        out.write("""
            \(style.bold("authflow demo")): the main job, end to end, offline.
            The provider is a scripted authorization server inside this process: no network, no real account.
            Demo time passes only while the flow waits, \(Self.speedup)× faster (a 5 s poll interval takes 0.25 s); times below are demo time.
            Tokens are stored in a temporary store, \(temporary.path), removed at the end. No token is printed.


            """)

        let reporterBox = Mutex<StateReporter?>(nil)
        let flowBox = Mutex<AuthFlow?>(nil)
        let stamp: @Sendable () -> String = {
            return "[\(Self.tenths(clock.elapsed))s]"
        }
        // Wire lines wait until every state published so far has been printed: one ordered story.
        let server = DemoRouter(hosts: [deviceHost, serviceHost])
        let transport = DemoTransport(base: server) { [out] line in
            if let flow = flowBox.withLock({ $0 }), let reporter = reporterBox.withLock({ $0 }) {
                await reporter.waitUntilHandled(flow.state)
            }
            out.write("\(stamp())     \(style.dim(line))\n")
        }

        do throws(OAuthError) {
            let store = try FileSecretStore(directory: temporary.appendingPathComponent("store", isDirectory: true))
            let flow = try await AuthFlow(
                providers: [device, service], store: store, transport: transport,
                options: AuthFlow.Options(clock: clock, now: { clock.date }, userAgent: "authflow-demo/\(Authflow.version)"))
            flowBox.withLock { $0 = flow }
            let interval = Mutex<Int?>(nil)
            let reporter = StateReporter(flow.states, skipFirst: false) { [out] state in
                let name = state.name + String(repeating: " ", count: max(0, 22 - state.name.count))
                var line = "\(stamp()) \(style.bold(name)) \(Self.summary(state, now: clock.date))"
                if case .receivedDeviceCode(_, let code) = state {
                    let previous = interval.withLock { last -> Int? in
                        defer { last = code.interval }
                        return last
                    }
                    if let previous, code.interval > previous {
                        line += "  \(style.yellow("note:")) slow_down raised the interval from \(previous) s"
                    }
                }
                out.write(line + "\n")
            }
            reporterBox.withLock { $0 = reporter }
            defer { reporter.stop() }

            out.write(style.bold("1. Device login (RFC 8628): authflow login demo-device --device") + "\n")
            out.write("   The mock says authorization_pending, then slow_down (+5 s), pending again, then approves.\n")
            let code = try await flow.requestDeviceCode(provider: device.id)
            await reporter.waitUntilHandled(flow.state)
            out.write("         A person would open \(code.verificationURI.absoluteString) and type \(style.bold(code.userCode)).\n")
            _ = try await flow.pollDeviceAuthorization(code)
            await reporter.waitUntilHandled(flow.state)

            out.write("\n" + style.bold("2. A script asks for the token: authflow token demo-device") + "\n")
            let token = try await flow.accessToken(for: device.id)
            out.write("         served from the store without a request: <redacted> (\(token.reveal().count) characters)\n")

            out.write("\n" + style.bold("3. Refresh (RFC 6749 §6), as token does when the access token is about to expire") + "\n")
            _ = try await flow.refresh(provider: device.id)
            await reporter.waitUntilHandled(flow.state)

            out.write("\n" + style.bold("4. Client credentials (RFC 6749 §4.4): authflow login demo-service") + "\n")
            _ = try await flow.clientCredentials(provider: service.id)
            await reporter.waitUntilHandled(flow.state)

            out.write("\n" + style.bold("5. authflow status, read back from the store by a fresh flow") + "\n")
            let reader = try await AuthFlow(providers: [device, service], store: store, transport: transport,
                                            options: AuthFlow.Options(clock: clock, now: { clock.date }))
            let authorizations = await reader.authorizations
            let rows = [device, service].map { StatusRow(provider: $0.id, authorization: authorizations[$0.id], problem: nil) }
            out.write(StatusRow.table(rows, now: clock.date, style: style))
        } catch {
            context.err.write("authflow demo failed: \(Context.explain(error))\n")
            return ExitCode(error)
        }
        out.write("\nDone: the temporary store is removed. "
            + "Next: write a catalog (Documentation/Catalog.md), then authflow login PROVIDER.\n")
        return .success
    }

    /// One line about a state, without secrets.
    static func summary(_ state: AuthFlow.State, now: Date) -> String {
        switch state {
        case .empty(let provider): return provider.map { "\($0): logged out" } ?? "nothing stored yet"
        case .authorizing(let provider, let grant, _): return "\(provider) (\(grant.rawValue))"
        case .requestingAccessToken(let provider), .requestingDeviceCode(let provider): return provider
        case .receivedDeviceCode(let provider, let code):
            return "\(provider): user code \(code.userCode), expires in \(code.expiresIn) s, poll every \(code.interval) s"
        case .authorized(let provider, let authorization):
            let expiry = authorization.expiresAt.map { "expires \(Timestamps.relative($0, now: now))" } ?? "no expiry"
            return "\(provider): scopes \(authorization.scopes.joined(separator: " ")), \(expiry)"
                + (authorization.isRefreshable ? ", refreshable" : "")
        case .error(let provider, let error): return (provider.map { "\($0): " } ?? "") + Context.explain(error)
        }
    }

    private static func random() -> String {
        ASCIIText.replacing(UInt8(ascii: "-"), in: UUID().uuidString, with: "").lowercased()
    }

    /// `seconds` with one decimal, right-aligned in six columns (what `%6.1f` prints).
    static func tenths(_ seconds: Double) -> String {
        let tenths = seconds.isFinite ? Int((max(0, min(seconds, 1e9)) * 10).rounded()) : 0
        let text = "\(tenths / 10).\(tenths % 10)"
        return String(repeating: " ", count: max(0, 6 - text.count)) + text
    }
}
