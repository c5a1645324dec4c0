import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import OAuthFlowURLSession
import Synchronization
import TestSupport
import Testing

/// The hostile-server suite: every endpoint OAuthFlow calls, against a loopback server that
/// misbehaves on purpose (`HostileServer`), through both shipped transports.
///
/// Each case names the endpoint, the behaviour, the typed error it must end in (code, endpoint,
/// recovery), what ended it (the server's answer, or the total deadline only where nothing else
/// can; no wall-clock bound, issue 21), and what becomes of the entry stored before it ran:
/// byte-identical on disk (a `FileSecretStore` file), except after a revocation, which forgets the
/// tokens locally by design (RFC 7009). The exit codes the CLI gives the same failures are in
/// `HostileCLITests`.
///
/// Every case first takes a place at `HostileServer.flows`, before it creates a server: hundreds
/// of parallel cases, each with servers, transports and threads, would starve the other suites.
@Suite("Hostile servers: every endpoint, every misbehaviour, both transports", .timeLimit(.minutes(3)))
struct HostileServerTests {}

// MARK: The rig

/// What a hostile case calls: one endpoint of the flow.
enum HostileTarget: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case clientCredentials, refresh, authorizationCode, deviceAuthorization, devicePolling, discovery, jwks, userinfo,
         introspection, revocation, backchannelAuthentication, backchannelPolling

    var testDescription: String { rawValue }

    /// The endpoint an error must name.
    var endpoint: OAuthError.Endpoint {
        switch self {
        case .clientCredentials, .refresh, .authorizationCode, .devicePolling, .backchannelPolling: .token
        case .deviceAuthorization: .deviceAuthorization
        case .backchannelAuthentication: .backchannelAuthentication
        case .discovery, .jwks: .discovery
        case .userinfo: .userinfo
        case .introspection: .introspection
        case .revocation: .revocation
        }
    }

    /// The paths the hostile behaviour is served on.
    var hostilePaths: [String] {
        switch self {
        case .clientCredentials, .refresh, .authorizationCode, .devicePolling, .backchannelPolling: ["/token"]
        case .deviceAuthorization: ["/device"]
        case .backchannelAuthentication: ["/ciba"]
        case .discovery: ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"]
        case .jwks: ["/jwks"]
        case .userinfo: ["/userinfo"]
        case .introspection: ["/introspect"]
        case .revocation: ["/revoke"]
        }
    }

    /// How many requests the flow may send to the hostile path for one call: token requests are
    /// retried after transport failures (RetryPolicy: 3 attempts), device and CIBA polling after up
    /// to 5 transport failures in a row (RFC 8628 §3.5), a revocation sends two tokens; a CIBA
    /// request is never retried.
    var attempts: Int {
        switch self {
        case .clientCredentials, .refresh, .authorizationCode: 3
        case .devicePolling, .backchannelPolling: 6
        case .revocation: 2
        default: 1
        }
    }

    /// The answer a well-behaved server gives here (hostile modes are built around it).
    func goodBody(_ server: HostileServer) -> String {
        switch self {
        case .clientCredentials, .refresh, .authorizationCode, .devicePolling:
            #"{"access_token":"new-at","token_type":"Bearer","expires_in":3600,"refresh_token":"new-rt"}"#
        case .deviceAuthorization:
            #"{"device_code":"dc-1","user_code":"ABCD-EFGH","verification_uri":"https://example.com/device","expires_in":600,"interval":1}"#
        case .backchannelAuthentication:
            #"{"auth_req_id":"ari-5ecret","expires_in":600,"interval":1}"#
        case .backchannelPolling:
            // `openid` refused in `scope`: no ID token is due (CIBA Core §10.1.1), so the body alone decides.
            #"{"access_token":"new-at","token_type":"Bearer","expires_in":3600,"refresh_token":"new-rt","scope":"read"}"#
        case .discovery:
            Hostile.discoveryDocument(server)
        case .jwks: #"{"keys":[]}"#
        case .userinfo: #"{"sub":"user-1"}"#
        case .introspection: #"{"active":true}"#
        case .revocation: #"{"note":"RFC 7009 says nothing of the body of a 200; this one is long enough to trickle"}"#
        }
    }
}

/// What happened to the entry stored before the case ran.
enum StoredOutcome: String, Sendable {
    /// Byte-identical.
    case unchanged
    /// Deleted: a revocation forgets the tokens locally whatever the server answered (RFC 7009 §2).
    case removed
}

/// One run's result.
struct HostileRun: Sendable {
    var error: OAuthError?
    var before: Data
    var after: Data?
    var requests: [HostileServer.Request]
    var elsewhere: [HostileServer.Request]
    var sleeps: [Duration]
}

enum Hostile {
    static let provider = "hostile"
    static let accessToken = "stored-at-5ecret"
    static let refreshToken = "stored-rt-5ecret"
    static let clientSecret = "client-5ecret"

    /// The per-request deadline for modes that only a deadline ends, and for the rest (which
    /// must end by their own means, long before it).
    static let shortDeadline: TimeInterval = 1
    static let longDeadline: TimeInterval = 30

    /// The transports, each with `timeout` as its total deadline and no proxy.
    static func transport(_ kind: TransportKind, timeout: TimeInterval) -> any HTTPTransport {
        switch kind {
        case .curl: CurlTransport(timeout: timeout, connectTimeout: min(timeout, 5), proxy: .none)
        case .urlSession: URLSessionTransport(timeout: timeout)
        }
    }

    static func discoveryDocument(_ server: HostileServer, issuer: String? = nil) -> String {
        let base = server.baseURL
        return #"{"issuer":"\#(issuer ?? base)","authorization_endpoint":"\#(base)/authorize","token_endpoint":"\#(base)/token","#
            + #""jwks_uri":"\#(base)/jwks","response_types_supported":["code"],"subject_types_supported":["public"],"#
            + #""id_token_signing_alg_values_supported":["RS256"]}"#
    }

    /// An ID token a JWKS is needed for (RS256, `kid` k1); its signature is never reached.
    static func idToken(_ server: HostileServer) -> String {
        func encode(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = encode(#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#)
        let claims = encode(#"{"iss":"\#(server.baseURL)","sub":"user-1","aud":"client-hostile","exp":1900000000,"iat":1800000000}"#)
        return "\(header).\(claims).c2lnbmF0dXJl"
    }

    /// Where the stores live: a tmpfs when there is one. The store fsyncs every write on the calling
    /// thread; hundreds of cases doing that on a loaded disk at once stall the whole concurrency pool.
    static let scratch: URL = {
        let shm = URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        return access(shm.path, W_OK) == 0 ? shm : FileManager.default.temporaryDirectory
    }()

    /// The entry stored before each case, in the store's own format.
    static func storedEntry(grant: String, issuedAt: Int, expiresAt: Int) -> Data {
        Data((#"{"tokens":{"accessToken":"\#(accessToken)","expiresAt":\#(expiresAt),"grant":"\#(grant)","issuedAt":\#(issuedAt),"#
            + #""needsReauthorization":false,"providerID":"\#(provider)","refreshToken":"\#(refreshToken)","scopes":["read"],"#
            + #""tokenType":"Bearer"},"version":1}"#).utf8)
    }

    /// Runs `target` once against `server` (whose hostile paths the caller scripted), through
    /// `transport`, with an entry stored first; reports the error, the time, and the entry after.
    static func run(
        _ target: HostileTarget, server: HostileServer, elsewhere: HostileServer? = nil, transport: any HTTPTransport,
        clock: TestClock = TestClock(), retry: RetryPolicy = RetryPolicy()
    ) async throws -> HostileRun {
        let parent = try TemporaryDirectory("hostile", in: scratch)
        defer { parent.remove() }
        let directory = parent.url.appendingPathComponent("store", isDirectory: true)
        let store = try FileSecretStore(directory: directory, lockTimeout: .seconds(10))
        let base = server.baseURL
        let now = Int(clock.date.timeIntervalSince1970)
        let grant = target == .clientCredentials || target == .jwks || target == .discovery
            ? "client_credentials" : "urn:ietf:params:oauth:grant-type:device_code"
        let entry = storedEntry(grant: grant, issuedAt: now - 60, expiresAt: now + 3600)
        try await store.save(entry, for: provider)
        let file = directory.appendingPathComponent("\(provider).json")
        let before = try Data(contentsOf: file)

        // The paths a target needs besides its hostile one answer well.
        let good = HostileTarget.clientCredentials.goodBody(server)
        switch target {
        case .devicePolling:
            server.script("/device", .reply(200, HostileTarget.deviceAuthorization.goodBody(server)))
        case .backchannelPolling:
            server.script("/ciba", .reply(200, HostileTarget.backchannelAuthentication.goodBody(server)))
        case .jwks:
            server.script("/token", .reply(200, #"{"access_token":"new-at","token_type":"Bearer","expires_in":3600,"id_token":"\#(idToken(server))"}"#))
        case .deviceAuthorization:
            server.script("/token", .reply(200, good))
        default: break
        }

        let url = { (path: String) in URL(string: base + path)! }
        var configured = Provider(
            id: provider, authorizationURL: url("/authorize"), tokenURL: url("/token"), deviceAuthorizationURL: url("/device"),
            revocationURL: url("/revoke"), introspectionURL: url("/introspect"), userinfoURL: url("/userinfo"),
            clientID: "client-hostile", clientSecret: Secret(clientSecret), redirectURI: URL(string: "http://127.0.0.1:8765/callback"),
            scopes: ["read"])
        configured.backchannelAuthenticationURL = url("/ciba")
        configured.cibaLoginHint = "alice@example.com"
        let providerConfig: Provider
        switch target {
        case .discovery:
            providerConfig = Provider(id: provider, issuer: base, clientID: "client-hostile", clientSecret: Secret(clientSecret), scopes: ["read"])
        case .jwks:
            providerConfig = Provider(id: provider, tokenURL: url("/token"), issuer: base, jwksURL: url("/jwks"), idTokenSigningAlgorithms: ["RS256"],
                                      clientID: "client-hostile", clientSecret: Secret(clientSecret), scopes: ["read"])
        default:
            providerConfig = configured
        }
        var options = clock.options()
        options.retry = retry
        let flow = try await AuthFlow(providers: [providerConfig], store: store, transport: transport, options: options)

        var failure: OAuthError?
        do throws(OAuthError) {
            switch target {
            case .clientCredentials, .discovery, .jwks:
                _ = try await flow.clientCredentials(provider: provider)
            case .refresh:
                _ = try await flow.refresh(provider: provider)
            case .authorizationCode:
                let request = try await flow.authorizationRequest(provider: provider)
                _ = try await flow.completeAuthorization(callbackURL: callback(request))
            case .deviceAuthorization:
                _ = try await flow.requestDeviceCode(provider: provider)
            case .devicePolling:
                _ = try await flow.authorizeWithDeviceCode(provider: provider)
            case .backchannelAuthentication:
                _ = try await flow.requestBackchannelAuthentication(provider: provider)
            case .backchannelPolling:
                _ = try await flow.authorizeWithBackchannel(provider: provider)
            case .userinfo:
                _ = try await flow.userInfo(provider: provider)
            case .introspection:
                _ = try await flow.introspect(provider: provider)
            case .revocation:
                let result = try await flow.revoke(provider: provider)
                failure = result.errors[.refreshToken] ?? result.errors[.accessToken]
            }
        } catch {
            failure = error
        }
        let after = FileManager.default.fileExists(atPath: file.path) ? try Data(contentsOf: file) : nil
        let requests = target.hostilePaths.flatMap { server.requests($0) }
        return HostileRun(error: failure, before: before, after: after, requests: requests,
                          elsewhere: elsewhere?.requests() ?? [], sleeps: clock.sleeps)
    }

    /// Every secret the rig uses; none may appear in an error's text or dump.
    static let secrets = [accessToken, refreshToken, clientSecret, "new-at", "new-rt", "dc-1", "ari-5ecret"]

    /// Checks what every case promises about `run`: the code and endpoint, the recovery, no secret
    /// in any rendering of the error, what ended the call, and the stored entry.
    ///
    /// `atDeadline`: the call must end on the transport's total deadline (a server that never finishes
    /// its answer), as its error says; otherwise it must end on what the server did, never by waiting a
    /// deadline out. This replaces a wall-clock bound, which a busy machine could exceed (issue 21); a
    /// call that never ends is caught by the suite's time limit, and the callers count the requests sent.
    static func check(
        _ run: HostileRun, code: OAuthError.Code?, endpoint: OAuthError.Endpoint, recovery: OAuthError.Recovery? = nil,
        status: Int? = nil, atDeadline: Bool = false, stored: StoredOutcome, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if let code {
            #expect(run.error?.code == code, "\(String(describing: run.error))", sourceLocation: sourceLocation)
            #expect(run.error?.endpoint == endpoint, "\(String(describing: run.error))", sourceLocation: sourceLocation)
            #expect(run.error?.providerID == provider, sourceLocation: sourceLocation)
            if let recovery { #expect(run.error?.recovery == recovery, sourceLocation: sourceLocation) }
            if let status { #expect(run.error?.httpStatus == status, sourceLocation: sourceLocation) }
        } else {
            #expect(run.error == nil, "\(String(describing: run.error))", sourceLocation: sourceLocation)
        }
        if let error = run.error {
            var dumped = ""
            dump(error, to: &dumped)
            for text in [error.description, String(reflecting: error), dumped, error.message ?? ""] {
                for secret in secrets { #expect(!text.contains(secret), "\(secret) in \(text)", sourceLocation: sourceLocation) }
                #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || $0.value == 0x7F }, "\(text.debugDescription)",
                        sourceLocation: sourceLocation)
            }
        }
        if atDeadline {
            #expect(run.error?.message?.contains("within the total deadline (1 s)") == true, "\(String(describing: run.error))",
                    sourceLocation: sourceLocation)
        } else {
            #expect(run.error?.message?.contains("total deadline") != true, "\(String(describing: run.error))", sourceLocation: sourceLocation)
        }
        switch stored {
        case .unchanged: #expect(run.after == run.before, "the stored entry changed", sourceLocation: sourceLocation)
        case .removed: #expect(run.after == nil, "the entry was not forgotten", sourceLocation: sourceLocation)
        }
        #expect(run.elsewhere.isEmpty, "a request reached the redirect target", sourceLocation: sourceLocation)
    }
}

// MARK: Transport-level misbehaviour, both transports

extension HostileServerTests {
    /// A transport-level case: the endpoint, the mode, and the transport.
    struct TransportCase: Sendable, CustomTestStringConvertible {
        var target: HostileTarget
        var mode: HostileServer.Mode
        var kind: TransportKind
        var testDescription: String { "\(target.rawValue) \(mode.rawValue) \(kind.rawValue)" }

        /// Modes only a total deadline ends.
        var isSlow: Bool { [.trickleBody, .trickleHeaders, .silent].contains(mode) }

        /// The error this case must end in; nil when the call must succeed (a revocation a 200 confirms).
        var expected: (code: OAuthError.Code?, recovery: OAuthError.Recovery?, status: Int?) {
            switch mode {
            case .endlessBody, .endlessChunked, .hugeDeclaredLength:
                // The body limit, checked as the body arrives. A revocation answered 200 is confirmed
                // whatever the body (RFC 7009 §2.2).
                if target == .revocation { return (nil, nil, nil) }
                return (.invalidResponse, .fixConfiguration, 200)
            case .headerFlood, .interimForever:
                // CurlTransport refuses response headers over 64 KiB (a 200 status line came first, so a
                // revocation counts as confirmed); URLSession gives up inside libcurl's own limits.
                if kind == .curl { return target == .revocation && mode == .headerFlood ? (nil, nil, nil) : (.invalidResponse, .fixConfiguration, nil) }
                return (.transport, .retryLater, nil)
            case .redirectElsewhere, .redirect307Elsewhere, .redirect308Elsewhere:
                let status = mode == .redirectElsewhere ? 302 : mode == .redirect307Elsewhere ? 307 : 308
                return (.httpStatus, .fixConfiguration, status)
            case .bogusGzip:
                // CurlTransport asks for no encoding and decodes none: the bytes are not JSON. URLSession
                // tries to inflate them and fails.
                return kind == .curl ? (.invalidResponse, .fixConfiguration, 200) : (.transport, .retryLater, nil)
            default:
                return (.transport, .retryLater, nil)
            }
        }

    }

    /// The modes run against every endpoint; the rest run against the token endpoint, where the
    /// transport sees exactly the same bytes.
    static let everywhereModes: [HostileServer.Mode] = [
        .trickleBody, .silent, .endlessBody, .hugeDeclaredLength, .resetMidBody, .closeWithoutAnswer, .chunkedBadSize,
        .garbageStatusLine, .headerFlood, .redirectElsewhere,
    ]

    static let transportCases: [TransportCase] = TransportKind.allCases.flatMap { kind in
        HostileServer.Mode.allCases.map { TransportCase(target: .clientCredentials, mode: $0, kind: kind) }
            + HostileTarget.allCases.filter { $0 != .clientCredentials }.flatMap { target in
                everywhereModes.map { TransportCase(target: target, mode: $0, kind: kind) }
            }
    }

    @Test("a hostile transport-level answer ends in its typed error, by the deadline only when nothing else ends it, with the stored entry intact",
          arguments: HostileServer.selected(transportCases))
    func transportLevel(_ test: TransportCase) async throws {
        await HostileServer.flows.enter()
        defer { Task { await HostileServer.flows.leave() } }
        let (server, elsewhere) = try HostileServer.transportCase(test.mode, paths: test.target.hostilePaths, good: test.target.goodBody)
        defer { server.stop(); elsewhere.stop() }
        let transport = Hostile.transport(test.kind, timeout: test.isSlow ? Hostile.shortDeadline : Hostile.longDeadline)

        let run = try await Hostile.run(test.target, server: server, elsewhere: elsewhere, transport: transport)

        let expected = test.expected
        Hostile.check(run, code: expected.code, endpoint: test.target.endpoint, recovery: expected.recovery, status: expected.status,
                      atDeadline: test.isSlow, stored: test.target == .revocation ? .removed : .unchanged)
        #expect(!run.requests.isEmpty, "the hostile path was never asked")
        #expect(run.requests.count <= test.target.attempts * test.target.hostilePaths.count)
        if !test.isSlow {
            #expect(run.error?.message?.contains("deadline") != true, "ended by the deadline, not by its own means")
        }
        if test.kind == .curl, test.mode == .notHTTP || test.mode == .garbageStatusLine {
            #expect(run.error?.message?.contains("answered with something that is not HTTP") == true, "\(String(describing: run.error?.message))")
        }
        if test.isSlow, expected.code == .transport, test.kind == .curl || test.mode != .silent {
            #expect(run.error?.message?.contains("deadline") == true || run.error?.message?.contains("timed out") == true,
                    "\(String(describing: run.error?.message))")
        }
    }
}
