import Foundation
import Glibc
@testable import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// Subject token sources (Credentials/SubjectTokenSource.swift): each kind asked directly, over
/// real loopback HTTP (``TestHTTPServer`` through ``CurlTransport``) and real child processes,
/// then through a flow against ``MockProvider``.
@Suite("Subject token sources: file, URL, command, variable and presets (RFC 8693 §2.1 subject_token)", .timeLimit(.minutes(2)))
struct SubjectTokenSourceTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// An unsigned JWT (the sources check the shape and `exp`, not the signature: the server does that).
    static func jwt(exp: Int?, sub: String = "system:serviceaccount:ns:sa") -> String {
        var claims = #"{"sub":"\#(sub)","aud":"sts""#
        if let exp { claims += #","exp":\#(exp)"# }
        claims += "}"
        return Base64URL.encode(Array(#"{"alg":"RS256","kid":"k1"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + ".c2lnbmF0dXJl"
    }

    static var valid: String { jwt(exp: Int(now.timeIntervalSince1970) + 600) }

    static func context(type: String = TokenType.jwt, transport: (any HTTPTransport)? = CurlTransport(timeout: 20, proxy: .none))
        -> SubjectTokenSource.Context {
        SubjectTokenSource.Context(providerID: "wl", tokenType: type, transport: transport, userAgent: "oauthflow-test", now: now)
    }

    /// The error `source` throws, checked to name the source and to hold none of `secrets`.
    static func refusal(_ source: SubjectTokenSource, type: String = TokenType.jwt, secrets: [String] = [],
                        sourceLocation: SourceLocation = #_sourceLocation) async -> OAuthError? {
        let error = await #expect(throws: OAuthError.self, sourceLocation: sourceLocation) {
            _ = try await source.token(context(type: type))
        }
        guard let error else { return nil }
        #expect(error.providerID == "wl", sourceLocation: sourceLocation)
        #expect(error.message?.hasPrefix(source.description) == true, "\(error.message ?? "")", sourceLocation: sourceLocation)
        for secret in secrets + [valid] {
            for rendering in [String(describing: error), String(reflecting: error), error.message ?? ""] {
                #expect(!rendering.contains(secret), sourceLocation: sourceLocation)
            }
        }
        return error
    }

    // MARK: File

    @Test("file: read on every call, trailing newline dropped; jsonField reads a member; description names the path")
    func file() async throws {
        let scratch = try TemporaryDirectory("token-source")
        defer { scratch.remove() }
        let path = scratch.url.appendingPathComponent("token").path
        let source = SubjectTokenSource.file(path)
        try Data((Self.valid + "\n").utf8).write(to: URL(fileURLWithPath: path))
        #expect(try await source.token(Self.context()).reveal() == Self.valid)
        let next = Self.jwt(exp: Int(Self.now.timeIntervalSince1970) + 900, sub: "second")
        try Data(next.utf8).write(to: URL(fileURLWithPath: path))
        #expect(try await source.token(Self.context()).reveal() == next)
        #expect(source.description == "the subject token file \(path)")

        let json = scratch.url.appendingPathComponent("token.json").path
        try Data(#"{"access_token": "\#(Self.valid)", "other": 1}"#.utf8).write(to: URL(fileURLWithPath: json))
        #expect(try await SubjectTokenSource.file(json, jsonField: "access_token").token(Self.context()).reveal() == Self.valid)
        let missing = await Self.refusal(.file(json, jsonField: "id_token"))
        #expect(missing?.code == .invalidResponse && missing?.message?.contains("has no string member id_token") == true)
    }

    @Test("JWT checks: an expired exp, three parts that are not a JWT under the JWT type, a non-numeric exp — typed, naming the source; opaque tokens and dotted access tokens pass",
          arguments: ["expired", "dotted-as-jwt", "exp-text", "dotted-as-access-token", "opaque-as-jwt", "no-exp"])
    func jwtChecks(_ kind: String) async throws {
        let scratch = try TemporaryDirectory("token-source")
        defer { scratch.remove() }
        let path = scratch.url.appendingPathComponent("token").path
        let expired = Self.jwt(exp: Int(Self.now.timeIntervalSince1970) - 1)
        let text: String = switch kind {
        case "expired": expired
        case "dotted-as-jwt", "dotted-as-access-token": "opaque.token.value"
        case "opaque-as-jwt": "opaque-token-value"
        case "exp-text": Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array(#"{"exp":"soon"}"#.utf8)) + ".x"
        default: Self.jwt(exp: nil)
        }
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let source = SubjectTokenSource.file(path)
        switch kind {
        case "dotted-as-access-token":
            #expect(try await source.token(Self.context(type: TokenType.accessToken)).reveal() == "opaque.token.value")
        case "opaque-as-jwt", "no-exp":
            #expect(try await source.token(Self.context()).reveal() == text)
        default:
            let error = await Self.refusal(source, secrets: [text])
            #expect(error?.code == .invalidResponse)
            let reason = ["expired": "gave a token that expired at 2027-01-15T07:59:59Z (its exp)", "dotted-as-jwt": "gave a token that is not a JWT",
                          "exp-text": "gave a JWT whose exp is not a number"][kind]!
            #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "")")
        }
    }

    // MARK: URL

    @Test("url: ${NAME} expanded in the URL and headers, the JSON field read; the CI endpoint sees the exact request")
    func url() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/id-token", [.json(#"{"count": 1, "value": "\#(Self.valid)"}"#)])
        let environment = ["CI_URL": "\(server.baseURL)/id-token?api-version=2.0", "CI_TOKEN": "request-token-123"]
        let source = SubjectTokenSource.url("${CI_URL}&audience=sts", headers: ["Authorization": "bearer ${CI_TOKEN}", "X-Extra": "plain"],
                                            jsonField: "value", environment: environment)
        #expect(try await source.token(Self.context()).reveal() == Self.valid)
        #expect(try await source.token(Self.context()).reveal() == Self.valid)
        let sent = server.requests("/id-token")
        #expect(sent.count == 2, "asked again: nothing is kept between exchanges")
        let first = try #require(sent.first)
        #expect(first.method == "GET" && first.query == "api-version=2.0&audience=sts")
        #expect(first.headers["authorization"] == "bearer request-token-123" && first.headers["x-extra"] == "plain")
        #expect(first.headers["user-agent"] == "oauthflow-test")
        #expect(source.description == "the subject token URL ${CI_URL}&audience=sts")
        #expect(!String(reflecting: source).contains("request-token-123"))

        let unset = SubjectTokenSource.url("${CI_URL}", headers: ["Authorization": "bearer ${CI_TOKEN}"], environment: ["CI_URL": server.baseURL])
        let error = await Self.refusal(unset)
        #expect(error?.code == .configuration && error?.message?.contains("needs the environment variable CI_TOKEN") == true)
    }

    @Test("github-actions preset: ACTIONS_ID_TOKEN_REQUEST_URL + &audience=, Authorization: bearer ACTIONS_ID_TOKEN_REQUEST_TOKEN, the value member")
    func githubActions() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/_apis/pipelines/workflows/run/idtoken", [.json(#"{"value":"\#(Self.valid)"}"#)])
        let source = SubjectTokenSource.githubActions(audience: "api://AzureADTokenExchange", environment: [
            "ACTIONS_ID_TOKEN_REQUEST_URL": "\(server.baseURL)/_apis/pipelines/workflows/run/idtoken?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "gh-request-token",
        ])
        #expect(try await source.token(Self.context()).reveal() == Self.valid)
        let sent = try #require(server.requests("/_apis/pipelines/workflows/run/idtoken").only)
        #expect(sent.query == "api-version=2.0&audience=api%3A%2F%2FAzureADTokenExchange")
        #expect(sent.headers["authorization"] == "bearer gh-request-token")
        #expect(source.description.hasPrefix("the github-actions subject token URL ${ACTIONS_ID_TOKEN_REQUEST_URL}"))
        let outside = SubjectTokenSource.githubActions(environment: [:])
        let error = await Self.refusal(outside)
        #expect(error?.message?.contains("needs the environment variable ACTIONS_ID_TOKEN_REQUEST_URL") == true)
    }

    /// What a hostile or broken CI endpoint answers.
    enum HostileAnswer: String, CaseIterable, Sendable {
        case html, redirectElsewhere, hugeBody, largeBody, serverError, notJSON, noField, controlCharacters, empty
    }

    @Test("url, hostile answers: HTML, a redirect to another host, a huge body, a 500, not JSON, no field, control characters, empty — each typed, naming the source",
          arguments: HostileAnswer.allCases)
    func hostileURL(_ answer: HostileAnswer) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let reply: TestHTTPServer.Reply = switch answer {
        case .html: .init(status: 200, body: "<html><body>Sign in</body></html>", headers: ["X-Kind": "html"])
        case .redirectElsewhere: .init(status: 302, body: "", headers: ["Location": "https://attacker.example/steal"])
        case .hugeBody: .json(#"{"value":""# + String(repeating: "a", count: 3 << 20) + #""}"#)
        case .largeBody: .json(#"{"value":""# + String(repeating: "a", count: 200 << 10) + #""}"#)
        case .serverError: .json(#"{"message":"down"}"#, status: 500)
        case .notJSON: .init(status: 200, body: "just text")
        case .noField: .json(#"{"token":"\#(Self.valid)"}"#)
        case .controlCharacters: .json(#"{"value":"abc\u001b[31mdef"}"#)
        case .empty: .json(#"{"value":"  "}"#)
        }
        server.script("/token", [reply])
        let source = SubjectTokenSource.url("\(server.baseURL)/token", jsonField: "value", environment: [:])
        let error = await Self.refusal(source)
        let (code, reason): (OAuthError.Code, String) = switch answer {
        case .html: (.invalidResponse, "is not a JSON object")
        case .redirectElsewhere: (.invalidResponse, "answered a redirect (HTTP 302) to attacker.example; a token source's redirects are not followed")
        case .hugeBody: (.invalidResponse, "answered a body larger than the transport accepts")
        case .largeBody: (.invalidResponse, "more than 64 KiB")
        case .serverError: (.httpStatus, "answered HTTP 500")
        case .notJSON: (.invalidResponse, "is not a JSON object")
        case .noField: (.invalidResponse, "has no string member value")
        case .controlCharacters: (.invalidResponse, "did not give one token: it has characters outside visible ASCII")
        case .empty: (.invalidResponse, "gave an empty token")
        }
        #expect(error?.code == code)
        #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "")")
        #expect(server.requests("/token").count == 1, "one GET, no redirect followed")
    }

    @Test("url: not https off loopback is .configuration before any request")
    func urlRules() async throws {
        let error = await Self.refusal(.url("http://ci.example.com/token", environment: [:]))
        #expect(error?.code == .configuration)
    }

    // MARK: Command

    @Test("command: stdout is the token (stderr passed through, not mixed in); run on every call; Google's executable JSON read")
    func command() async throws {
        let source = SubjectTokenSource.command(["/bin/sh", "-c", "echo diagnostics >&2; printf '%s\\n' \"$0\"", Self.valid])
        #expect(try await source.token(Self.context()).reveal() == Self.valid)
        #expect(source.description == "the subject token command /bin/sh")
        let json = #"{"version":1,"success":true,"token_type":"urn:ietf:params:oauth:token-type:jwt","id_token":"\#(Self.valid)","expiration_time":\#(Int(Self.now.timeIntervalSince1970) + 300)}"#
        let google = SubjectTokenSource.command(["/usr/bin/printf", "%s", json])
        #expect(try await google.token(Self.context()).reveal() == Self.valid)
        let onPath = SubjectTokenSource.command(["printf", "%s", Self.valid])
        #expect(try await onPath.token(Self.context()).reveal() == Self.valid, "a bare name is looked up on PATH")
    }

    /// How a hostile or broken command behaves.
    enum HostileCommand: String, CaseIterable, Sendable {
        case hangs, floods, exitsNonZero, controlCharacters, googleFailure, googleExpired, missingProgram, signalled
    }

    @Test("command, hostile: hangs (killed at its timeout), prints 100 MiB (cut at 64 KiB), exits non-zero, prints control characters, reports failure, is not there, dies of a signal",
          arguments: HostileCommand.allCases)
    func hostileCommand(_ behaviour: HostileCommand) async throws {
        let arguments: [String] = switch behaviour {
        case .hangs: ["/bin/sleep", "600"]
        case .floods: ["/usr/bin/head", "-c", "104857600", "/dev/zero"]
        case .exitsNonZero: ["/bin/sh", "-c", "printf token; exit 3"]
        case .controlCharacters: ["/usr/bin/printf", "abc\\033[2Jdef"]
        case .googleFailure: ["/bin/sh", "-c", #"printf '{"version":1,"success":false,"code":"401","message":"no identity"}'; exit 1"#]
        case .googleExpired: ["/usr/bin/printf", #"{"version":1,"success":true,"token_type":"urn:ietf:params:oauth:token-type:jwt","id_token":"x.y.z","expiration_time":1000}"#]
        case .missingProgram: ["/nonexistent/token-helper"]
        case .signalled: ["/bin/sh", "-c", "kill -TERM $$"]
        }
        let source = SubjectTokenSource.command(arguments, timeout: .seconds(1))
        let error = await Self.refusal(source)
        let (code, reason): (OAuthError.Code, String) = switch behaviour {
        case .hangs: (.timedOut, "did not finish within 1 s and was killed")
        case .floods: (.invalidResponse, "printed more than 64 KiB and was killed")
        case .exitsNonZero: (.invalidResponse, "exited with status 3")
        case .controlCharacters: (.invalidResponse, "did not give one token: it has characters outside visible ASCII")
        case .googleFailure: (.invalidResponse, "printed executable-source JSON reporting a failure: 401: no identity")
        case .googleExpired: (.invalidResponse, "with a token whose expiration_time has passed")
        case .missingProgram: (.configuration, "cannot be started: No such file or directory")
        case .signalled: (.invalidResponse, "was killed by signal 15")
        }
        #expect(error?.code == code)
        #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "")")
    }

    @Test("command timeout kills what the command started too: a grandchild holding the output pipe is gone afterwards")
    func killsTheGroup() async throws {
        let scratch = try TemporaryDirectory("token-source")
        defer { scratch.remove() }
        let pidFile = scratch.url.appendingPathComponent("pid").path
        let source = SubjectTokenSource.command(["/bin/sh", "-c", "sleep 600 & echo $! > \"$0\"; wait", pidFile], timeout: .seconds(1))
        let error = await Self.refusal(source)
        #expect(error?.code == .timedOut)
        let text = try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let grandchild = try #require(pid_t(text))
        // Killed by the group kill; reaped by init (it was not our child), which may take a moment.
        // A zombie (killed, not yet reaped by an init that may never reap) counts as gone.
        func isGone() -> Bool {
            guard let stat = try? String(contentsOfFile: "/proc/\(grandchild)/stat", encoding: .utf8) else { return true }
            guard let close = stat.lastIndex(of: ")") else { return false }
            return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
        }
        var gone = false
        for _ in 0..<200 where !gone {
            gone = isGone()
            if !gone { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(gone, "the sleeping grandchild \(grandchild) still exists")
    }

    @Test("command: cancelling the task kills the command at once")
    func cancellation() async throws {
        let task = Task { try await SubjectTokenSource.command(["/bin/sleep", "600"], timeout: .seconds(600)).token(Self.context()) }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        let error = await #expect(throws: OAuthError.self) { _ = try await task.value }
        #expect(error?.code == .cancelled)
    }

    // MARK: Variables and presets

    @Test("gitlab-ci preset: the id_tokens variable's value; unset is .configuration naming it; kubernetes preset: the mounted token path")
    func presets() async throws {
        let gitlab = SubjectTokenSource.gitlabCI(variable: "GITLAB_OIDC_TOKEN", environment: ["GITLAB_OIDC_TOKEN": Self.valid])
        #expect(try await gitlab.token(Self.context()).reveal() == Self.valid)
        #expect(gitlab.description == "the gitlab-ci subject token variable GITLAB_OIDC_TOKEN")
        let legacy = await Self.refusal(.gitlabCI(environment: [:]))
        #expect(legacy?.code == .configuration && legacy?.message == "the gitlab-ci subject token variable CI_JOB_JWT_V2 is not set (or is empty) in the environment")
        #expect(SubjectTokenSource.kubernetes().description == "the kubernetes subject token file /var/run/secrets/kubernetes.io/serviceaccount/token")
    }
}
