@testable import AuthflowCLI
import TestSupport
import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

/// Debug logging in the CLI: `AUTHFLOW_DEBUG=1` or `"debug": true` in the catalog sends the
/// library's log lines to stderr; they show shapes, never a secret value.
@Suite("Debug logging", .serialized, .timeLimit(.minutes(3)))
struct DebugLogTests {
    /// Every secret value the scripted server and the catalog use; none may be printed.
    static let fixed = [
        "cs-dev-Q7f3k", "cs-web-M2p9x", "cs-svc-T4n8w",            // client secrets
        "dc-secret-R5v1",                                           // the device code
        "at-dev-1-A9s", "rt-dev-1-B8d", "at-dev-2-C7f", "rt-dev-2-D6g",
        "at-web-E5h", "rt-web-F4j", "at-svc-G3k",                   // tokens
        "code-web-H2l",                                             // the authorization code
    ]

    @Test("every command with debug on: debug lines on stderr, and no secret (tokens, codes, client secret, verifier, device code, state) anywhere")
    func everyCommandLeaksNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        let base = server.baseURL
        try directory.writeCatalog([
            catalogEntry(id: "dev", base: base, secret: "cs-dev-Q7f3k"),
            catalogEntry(id: "web", base: base, device: false, browser: true, secret: "cs-web-M2p9x",
                         redirectURI: "http://127.0.0.1/callback", userinfo: true),
            // No AUTHFLOW_DEBUG for this one: the catalog's flag alone turns its lines on.
            #"{ "id": "svc", "clientID": "client-svc", "clientSecret": "cs-svc-T4n8w", "tokenURL": "\#(base)/token", "debug": true, "#
                + #""registries": ["registry.example.com"] }"#,
        ])
        let arguments = ["--config", directory.config.path, "--store", directory.store.path]
        let debug = cleanEnvironment(directory, ["AUTHFLOW_DEBUG": "1"])
        let quiet = cleanEnvironment(directory)
        var runs: [(name: String, status: Int32, stdout: String, stderr: String)] = []
        func run(_ name: String, _ command: [String], _ environment: [String: String]) async throws {
            let result = try await runBinary(arguments + command, environment: environment)
            runs.append((name, result.status, result.stdout, result.stderr))
            #expect(result.status == 0, "\(name): \(result.stderr)")
        }

        // Device grant; the token expires at once, so `token` refreshes it below.
        server.script("/device/code", [.json(#"{"device_code":"dc-secret-R5v1","user_code":"WDJB-MJHT","verification_uri":"https://example.com/device","expires_in":600,"interval":1}"#)])
        server.script("/token", [.token("at-dev-1-A9s", expiresIn: 0, refresh: "rt-dev-1-B8d")])
        try await run("device login", ["login", "dev", "--device"], debug)

        // Browser grant through the loopback receiver, the "browser" being this test.
        server.script("/token", [.token("at-web-E5h", refresh: "rt-web-F4j")])
        let browser = try RunningBinary(arguments + ["login", "web", "--browser", "--json"], environment: debug)
        let authorizing = try #require(await browser.waitForLine(containing: #""authorizing""#, timeout: .seconds(60)))
        let line = record(authorizing)
        let authorizationURL = try #require((line["authorization_url"] as? String).flatMap(URL.init(string:)))
        let redirectURI = try #require((line["redirect_uri"] as? String).flatMap(URL.init(string:)))
        let state = try #require(URLComponents(url: authorizationURL, resolvingAgainstBaseURL: false)?.queryItems?
            .first { $0.name == "state" }?.value)
        let answer = try await httpGET(URL(string: "\(redirectURI.absoluteString)?code=code-web-H2l&state=\(state)")!)
        #expect(answer.status == 200)
        let browserStatus = await browser.wait()
        runs.append(("browser login", browserStatus, browser.stdout, browser.stderr))
        #expect(browserStatus == 0, "\(browser.stderr)")
        let exchange = try #require(server.requests("/token").last)
        #expect(exchange.form["code"] == "code-web-H2l")
        let verifier = try #require(exchange.form["code_verifier"])
        #expect(verifier.count >= 43)

        server.script("/token", [.token("at-svc-G3k")])
        try await run("client credentials (catalog debug)", ["login", "svc", "--client-credentials"], quiet)

        server.script("/token", [.token("at-dev-2-C7f", refresh: "rt-dev-2-D6g")])
        try await run("token (refresh)", ["token", "dev"], debug)
        #expect(server.requests("/token").last?.form["refresh_token"] == "rt-dev-1-B8d")
        try await run("token (fresh)", ["token", "web"], debug)
        try await run("token, no debug", ["token", "web"], quiet)
        // The helpers that hand the token on: exec puts it in COMMAND's environment, docker-credential
        // answers it to Docker on stdout; neither shows it anywhere else.
        try await run("exec", ["exec", "svc", "--", "sh", "-c", "exit 0"], debug)
        let docker = try await Tool.run(try #require(Binary.url).path, arguments + ["docker-credential", "svc", "get"], environment: debug,
                                        stdin: "registry.example.com")
        runs.append(("docker-credential", docker.status, docker.stdout, docker.stderr))
        #expect(docker.status == 0, "\(docker.stderr)")
        try await run("status", ["status"], debug)
        server.script("/userinfo", [.json(#"{"sub":"user-1","name":"Ada"}"#)])
        try await run("userinfo", ["userinfo", "web"], debug)
        server.script("/revoke", [.json("")])
        try await run("logout dev", ["logout", "dev"], debug)
        try await run("logout web", ["logout", "web"], debug)
        try await run("logout svc", ["logout", "svc"], debug)

        // What each run may show by design: `token` prints the token it was asked for, and the
        // browser login prints the authorization URL (which carries `state`) for the user to open.
        func shown(_ run: (name: String, status: Int32, stdout: String, stderr: String)) -> String {
            switch run.name {
            case "token (refresh)":
                #expect(run.stdout == "at-dev-2-C7f\n")
                return run.stderr
            case "token (fresh)", "token, no debug":
                #expect(run.stdout == "at-web-E5h\n")
                return run.stderr
            case "docker-credential":
                #expect(run.stdout == #"{"ServerURL":"registry.example.com","Username":"oauth2accesstoken","Secret":"at-svc-G3k"}"# + "\n")
                return run.stderr
            case "browser login":
                let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false)
                #expect(lines.filter { $0.contains(state) }.count == 1)
                return lines.filter { !$0.contains(#""authorizing""#) }.joined(separator: "\n") + run.stderr
            default:
                return run.stdout + run.stderr
            }
        }
        let secrets = Self.fixed + [verifier, state]
        for run in runs {
            let text = shown(run)
            for secret in secrets { #expect(!text.contains(secret), "\(run.name) printed a secret") }
        }
        // The authorization URL line carries `state` (it must) and nothing else secret.
        for secret in Self.fixed + [verifier] { #expect(!authorizing.contains(secret)) }

        // The debug lines did appear (so the scan above scanned them), in every run that sent a request.
        let stderr = Dictionary(uniqueKeysWithValues: runs.map { ($0.name, $0.stderr) })
        for name in ["device login", "browser login", "client credentials (catalog debug)", "token (refresh)", "userinfo",
                     "logout dev", "logout web"] {
            #expect(stderr[name]?.contains("authflow debug: ") == true, "no debug line in \(name): \(stderr[name] ?? "")")
        }
        #expect(stderr["device login"]?.contains("authflow debug: dev: POST deviceAuthorization 127.0.0.1/device/code fields=") == true)
        #expect(stderr["device login"]?.contains("authflow debug: dev: token answered 200") == true)
        #expect(stderr["browser login"]?.contains("authflow debug: web: authorization request built") == true)
        #expect(stderr["client credentials (catalog debug)"]?.contains("authflow debug: svc: POST token") == true)
        #expect(stderr["token (refresh)"]?.contains("authflow info: dev: refreshed; refresh token rotated") == true)
        #expect(stderr["userinfo"]?.contains("authflow debug: web: GET userinfo") == true)
        #expect(stderr["logout dev"]?.contains("authflow debug: dev: POST revocation") == true)
        // Off unless asked for: no AUTHFLOW_DEBUG and no catalog flag, no line.
        #expect(stderr["token, no debug"] == "")
        #expect(directory.storedKeys.isEmpty)
    }

    @Test("AUTHFLOW_DEBUG: empty or 0 is off, anything else on")
    func environmentSwitch() throws {
        for (value, on) in [("1", true), ("yes", true), ("0", false), ("", false)] {
            let context = Context(invocation: Invocation(command: .version), output: Output.capture().output,
                                  environment: ["AUTHFLOW_DEBUG": value], services: Authflow.Services())
            #expect(context.debugFromEnvironment == on, "AUTHFLOW_DEBUG=\(value)")
        }
    }

    @Test("a debug line is escaped by the one display function: a server's control characters cannot reach the terminal")
    func linesAreEscaped() {
        let line = Context.debugLine(level: "warning", provider: "p", message: "serverRejected: bad\u{1B}[2J\r\nfake line")
        #expect(line == "authflow warning: p: serverRejected: bad\\u{1B}[2J\\u{D}\\u{A}fake line\n")
        #expect(!line.dropLast().unicodeScalars.contains { DisplayText.isUnsafe($0) })
    }
}
