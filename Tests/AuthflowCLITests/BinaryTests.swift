import TestSupport
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import Testing

/// The built `authflow` binary, run as a process (see `Tests/TestSupport/Binary.swift` for how it is found).
///
/// Commands that need a provider talk to `TestHTTPServer`, a scripted authorization server on
/// 127.0.0.1 inside the test process: the binary cannot reach an in-process `MockProvider`. The
/// catalog points at it with loopback `http://` endpoints, which the library allows.
@Suite("authflow binary", .serialized)
struct BinaryTests {
    @Test("the binary is built beside the tests")
    func located() throws {
        let url = try #require(Binary.url, "authflow not found; set AUTHFLOW_BINARY")
        #expect(FileManager.default.isExecutableFile(atPath: url.path))
    }

    @Test("--version prints the version and exits 0")
    func version() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let run = try await runBinary(["--version"], environment: cleanEnvironment(directory))
        #expect(run.status == 0)
        #expect(run.stdout.hasPrefix("authflow "))
        #expect(run.stderr.isEmpty)
    }

    @Test("bad usage exits 64 with the message and usage on stderr", arguments: [["frobnicate"], ["token"], ["login", "x", "--device", "--browser"], []])
    func badUsage(arguments: [String]) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let run = try await runBinary(arguments, environment: cleanEnvironment(directory))
        #expect(run.status == 64)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("authflow: error:"))
        #expect(run.stderr.contains("usage: authflow"))
    }

    @Test("a bad catalog exits 65 naming the file, provider, key and reason", arguments: [
        (#"[{ "id": "gh", "clientID": "c", "tokenURL": "http://example.com/token" }]"#, "tokenURL"),
        (#"[{ "id": "gh", "tokenURL": "https://example.com/token" }]"#, "clientID"),
        (#"[{ "id": "gh", "clientID": "c", "tokenURL": "https://example.com/token", "clientSecretEnv": "NOT_SET_ANYWHERE" }]"#, "clientSecretEnv"),
        ("this is not json", "JSON"),
    ])
    func badConfig(catalog: String, key: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try Data(catalog.utf8).write(to: directory.config)
        let run = try await runBinary(["--config", directory.config.path, "--store", directory.store.path, "token", "gh"],
                                      environment: cleanEnvironment(directory))
        #expect(run.status == 65)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains(directory.config.path))
        #expect(run.stderr.contains(key), "\(run.stderr)")
    }

    @Test("demo exits 0, shows every state, never a token")
    func demo() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // No wall-clock bound (issue 21): a demo that never ends is killed at the deadline and fails on its status.
        // TMPDIR: the demo's temporary store goes in the test's directory, so even a demo killed at the deadline leaves nothing.
        let run = try await runBinary(["demo"], environment: cleanEnvironment(directory, ["TMPDIR": directory.path]), timeout: .seconds(60))
        #expect(run.status == 0, "\(run.stderr)")
        for state in ["empty", "requestingDeviceCode", "receivedDeviceCode", "requestingAccessToken", "authorized"] {
            #expect(run.stdout.contains(state), "missing \(state)")
        }
        #expect(run.stdout.contains("20× faster"))
        for secret in ["mock_at_", "mock_rt_", "mock_dc_", "demo-secret-"] {
            #expect(!run.stdout.contains(secret) && !run.stderr.contains(secret))
        }
    }

    @Test("device login --json, then token, status and logout, against a loopback server")
    func deviceLoginTokenLogout() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        try directory.writeCatalog([catalogEntry(id: "gh", base: server.baseURL)])
        server.script("/device/code", [.deviceCode(user: "ABCD-EFGH", interval: 1)])
        server.script("/token", [.oauthError("authorization_pending"), .token("at-binary-1", refresh: "rt-binary-1")])
        server.script("/revoke", [.json("")])
        let base = ["--config", directory.config.path, "--store", directory.store.path]
        let environment = cleanEnvironment(directory)

        let login = try await runBinary(base + ["login", "gh", "--json"], environment: environment)
        #expect(login.status == 0, "\(login.stderr)")
        let states = login.stdout.split(separator: "\n").map(record)
        #expect(states.map { $0["state"] as? String } == ["requestingDeviceCode", "receivedDeviceCode", "authorized"])
        #expect(states[1]["user_code"] as? String == "ABCD-EFGH")
        #expect(states[1]["verification_uri_complete"] as? String == "https://example.com/device?user_code=ABCD-EFGH")
        #expect(!login.stdout.contains("at-binary-1") && !login.stderr.contains("at-binary-1"))
        #expect(server.requests("/token").map { $0.form["grant_type"] } == Array(repeating: "urn:ietf:params:oauth:grant-type:device_code", count: 2))
        #expect(directory.storedKeys == ["gh"])

        let token = try await runBinary(base + ["token", "gh"], environment: environment)
        #expect(token.status == 0)
        #expect(token.stdout == "at-binary-1\n")
        #expect(server.requests("/token").count == 2)  // no request: the stored token is valid

        let status = try await runBinary(base + ["status", "gh", "--json"], environment: environment)
        #expect(status.status == 0)
        #expect(record(status.stdout.trimmingCharacters(in: .newlines))["refreshable"] as? Bool == true)
        #expect(!status.stdout.contains("at-binary-1"))

        let logout = try await runBinary(base + ["logout", "gh"], environment: environment)
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(server.requests("/revoke").first?.form["token"] == "rt-binary-1")
        #expect(!logout.stdout.contains("rt-binary-1"))
        #expect(directory.storedKeys.isEmpty)
        #expect(try await runBinary(base + ["token", "gh"], environment: environment).status == 77)
    }

    @Test("--store-key-file: login stores an encrypted entry with no token on disk; token reads it back; a wrong or missing key fails")
    func encryptedStore() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        try directory.writeCatalog([catalogEntry(id: "gh", base: server.baseURL)])
        server.script("/device/code", [.deviceCode(user: "ABCD-EFGH", interval: 1)])
        server.script("/token", [.token("at-sealed-7Qx2", refresh: "rt-sealed-9Vw4")])
        let keyFile = directory.url.appendingPathComponent("store.key")
        let otherKeyFile = directory.url.appendingPathComponent("other.key")
        try Data((String(repeating: "5a", count: 32) + "\n").utf8).write(to: keyFile)
        try Data(String(repeating: "a5", count: 32).utf8).write(to: otherKeyFile)
        #expect(chmod(keyFile.path, 0o600) == 0 && chmod(otherKeyFile.path, 0o600) == 0)
        let base = ["--config", directory.config.path, "--store", directory.store.path]
        let environment = cleanEnvironment(directory)

        let login = try await runBinary(base + ["--store-key-file", keyFile.path, "login", "gh", "--device"], environment: environment)
        #expect(login.status == 0, "\(login.stderr)")
        let onDisk = try Data(contentsOf: directory.store.appendingPathComponent("gh.json"))
        #expect(onDisk.prefix(4) == Data("OAFE".utf8))
        #expect(EntryEncryption.keyID(of: onDisk) == (try StoreKey(contentsOf: keyFile)).id)
        for secret in ["at-sealed-7Qx2", "rt-sealed-9Vw4", "accessToken"] {
            #expect(onDisk.range(of: Data(secret.utf8)) == nil, "\(secret) on disk")
        }

        // The key from the environment variable reads it back, without a request.
        let token = try await runBinary(base + ["token", "gh"], environment: cleanEnvironment(directory, ["AUTHFLOW_STORE_KEY_FILE": keyFile.path]))
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout == "at-sealed-7Qx2\n")
        #expect(server.requests("/token").count == 1)

        // Without the key, or with another one: exit 65, the file untouched, no token printed.
        let noKey = try await runBinary(base + ["token", "gh"], environment: environment)
        #expect(noKey.status == 65)
        #expect(noKey.stderr.contains("encrypted"), "\(noKey.stderr)")
        let wrongKey = try await runBinary(base + ["--store-key-file", otherKeyFile.path, "token", "gh"], environment: environment)
        #expect(wrongKey.status == 65)
        #expect(wrongKey.stderr.contains("not configured"), "\(wrongKey.stderr)")
        for run in [noKey, wrongKey] { #expect(run.stdout.isEmpty && !run.stderr.contains("at-sealed-7Qx2")) }
        #expect(try Data(contentsOf: directory.store.appendingPathComponent("gh.json")) == onDisk)

        // Rotation: the new key reads the old entry when the old key is listed as previous.
        let rotated = try await runBinary(base + ["--store-key-file", otherKeyFile.path, "--store-previous-key-file", keyFile.path, "token", "gh"],
                                          environment: environment)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.stdout == "at-sealed-7Qx2\n")

        // A key file others can read is refused before anything is read, naming the file and never its content.
        #expect(chmod(keyFile.path, 0o644) == 0)
        let wide = try await runBinary(base + ["--store-key-file", keyFile.path, "token", "gh"], environment: environment)
        #expect(wide.status == 65)
        #expect(wide.stderr.contains(keyFile.path) && wide.stderr.contains("mode 0644"), "\(wide.stderr)")
        #expect(!wide.stderr.contains("5a5a5a"))

        // The way out without the key: logout --local removes the entry it cannot open.
        let forget = try await runBinary(base + ["logout", "gh", "--local"], environment: environment)
        #expect(forget.status == 0, "\(forget.stderr)")
        #expect(directory.storedKeys.isEmpty)
    }

    @Test("the default transport takes its proxy from the environment as libcurl reads it", arguments: [
        (["http_proxy": "PROXY", "no_proxy": ""], true),
        (["ALL_PROXY": "PROXY", "no_proxy": ""], true),
        (["http_proxy": "PROXY", "no_proxy": "", "NO_PROXY": "127.0.0.1"], false),
        (["HTTP_PROXY": "PROXY", "no_proxy": ""], false),   // libcurl reads http_proxy in lower case only
    ])
    func proxyFromEnvironment(variables: [String: String], proxied: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let origin = try TestHTTPServer()
        defer { origin.stop() }
        let proxy = try TestHTTPServer()   // answers in the origin's place, as a forwarding proxy would
        defer { proxy.stop() }
        try directory.writeCatalog([catalogEntry(id: "svc", base: origin.baseURL, device: false, secret: "s3cret", revocation: false)])
        origin.script("/token", [.token("at-direct")])
        proxy.script("\(origin.baseURL)/token", [.token("at-proxied")])
        let environment = cleanEnvironment(directory, variables.mapValues { $0 == "PROXY" ? proxy.baseURL : $0 })
        let base = ["--config", directory.config.path, "--store", directory.store.path]

        let login = try await runBinary(base + ["login", "svc", "--json"], environment: environment)
        let token = try await runBinary(base + ["token", "svc"], environment: environment)

        #expect(login.status == 0, "\(login.stderr)")
        #expect(token.stdout == (proxied ? "at-proxied\n" : "at-direct\n"))
        #expect(proxy.requests().count == (proxied ? 1 : 0))
        #expect(origin.requests().count == (proxied ? 0 : 1))
    }

    @Test("a service-account key the server does not know (invalid_grant, \"Invalid JWT Signature.\") exits 65 naming the key file and the account, never advising authflow login")
    func refusedServiceAccountKey() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        let accountPath = try directory.serviceAccountFile(email: "sa-wrong@demo.iam.example", keyID: "k-gone", tokenURI: "\(server.baseURL)/token")
        try directory.writeCatalog([#"{"id": "sa-wrong", "serviceAccountFile": "\#(accountPath)", "scopes": ["read"]}"#])
        server.script("/token", [.json(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#, status: 400)])

        let run = try await runBinary(["--config", directory.config.path, "--store", directory.store.path, "token", "sa-wrong"],
                                      environment: cleanEnvironment(directory))
        #expect(run.status == 65, "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("invalid_grant (Invalid JWT Signature.)"), "\(run.stderr)")
        #expect(run.stderr.contains("The provider refused the service-account key \(accountPath) (sa-wrong@demo.iam.example): "
                                    + "check that it is still valid there"), "\(run.stderr)")
        #expect(!run.stderr.contains("authflow login"), "\(run.stderr)")
        #expect(server.requests("/token").map { $0.form["grant_type"] } == ["urn:ietf:params:oauth:grant-type:jwt-bearer"])
        #expect(directory.storedKeys.isEmpty)
    }

    @Test("token refreshes an expired stored token, stores the new one, and prints only it")
    func tokenRefreshesExpired() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Seed the store the way the library writes it: a device login two hours ago, for one hour.
        let mock = MockProvider()
        let clock = TestClock(start: Date().addingTimeInterval(-7200))
        mock.script(.deviceAuthorization, [.deviceCode()])
        mock.script(.token, [.token(access: "at-expired", expiresIn: 3600, refresh: "rt-seeded")])
        let seeding = try await AuthFlow(providers: [mock.provider(id: "gh")], store: FileSecretStore(directory: directory.store),
                                         transport: mock.transport(), options: clock.options())
        _ = try await seeding.authorizeWithDeviceCode(provider: "gh")

        let server = try TestHTTPServer()
        defer { server.stop() }
        try directory.writeCatalog([catalogEntry(id: "gh", base: server.baseURL)])
        server.script("/token", [.token("at-fresh", refresh: "rt-rotated")])
        let environment = cleanEnvironment(directory, ["AUTHFLOW_CONFIG": directory.config.path, "AUTHFLOW_STORE": directory.store.path])

        let first = try await runBinary(["token", "gh"], environment: environment)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "at-fresh\n")
        let sent = try #require(server.requests("/token").first)
        #expect(sent.form["grant_type"] == "refresh_token")
        #expect(sent.form["refresh_token"] == "rt-seeded")
        #expect(sent.headers["content-type"] == "application/x-www-form-urlencoded")

        let second = try await runBinary(["token", "gh", "--json"], environment: environment)
        #expect(record(second.stdout.trimmingCharacters(in: .newlines))["access_token"] as? String == "at-fresh")
        #expect(server.requests("/token").count == 1)
    }

    @Test("Ctrl-C during device polling exits 130 promptly and stores nothing")
    func interrupt() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        try directory.writeCatalog([catalogEntry(id: "gh", base: server.baseURL)])
        server.script("/device/code", [.deviceCode(interval: 1)])
        server.script("/token", [.oauthError("authorization_pending")])
        let running = try RunningBinary(["--config", directory.config.path, "--store", directory.store.path, "login", "gh", "--device"],
                                        environment: cleanEnvironment(directory))
        #expect(await running.waitForLine(containing: "enter the code") != nil)
        // Interrupt once it has polled (a condition, not a sleep: a busy machine may poll late).
        for _ in 0..<3000 where server.requests("/token").isEmpty { try await Task.sleep(for: .milliseconds(20)) }  // at most 60 s
        #expect(!server.requests("/token").isEmpty, "it never polled")
        let pollsBefore = server.requests("/token").count
        running.interrupt()
        // No wall-clock bound (issue 21): polling that goes on is killed at the wait's deadline (status -1,
        // not 130), and a poll after the interrupt shows in the count (one may be in flight).
        let status = await running.wait(timeout: .seconds(60))
        #expect(status == 130, "\(running.stderr)")
        #expect(server.requests("/token").count <= pollsBefore + 1, "polling went on after the interrupt")
        #expect(running.stderr.contains("interrupted"))
        #expect(directory.storedKeys.isEmpty)
    }

    /// Starts `login gh --browser --json`, waits for the authorization URL, and returns the run,
    /// the redirect URI the binary listens on, and the `state` it sent.
    private func startBrowserLogin(_ directory: TemporaryDirectory, server: TestHTTPServer) async throws -> (RunningBinary, URL, String) {
        try directory.writeCatalog([catalogEntry(id: "gh", base: server.baseURL, device: false, browser: true, redirectURI: "http://127.0.0.1/callback")])
        let running = try RunningBinary(
            ["--config", directory.config.path, "--store", directory.store.path, "login", "gh", "--browser", "--json", "--timeout", "20"],
            environment: cleanEnvironment(directory))
        let line = try #require(await running.waitForLine(containing: "authorization_url"), "no authorizing line: \(running.stderr)")
        let object = record(line)
        let authorizationURL = try #require((object["authorization_url"] as? String).flatMap(URL.init(string:)))
        let redirect = try #require((object["redirect_uri"] as? String).flatMap(URL.init(string:)))
        let state = try #require(URLComponents(url: authorizationURL, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?.value)
        #expect(authorizationURL.absoluteString.hasPrefix("\(server.baseURL)/authorize?"))
        return (running, redirect, state)
    }

    @Test("browser login: a stray request gets 404, the right callback completes the login")
    func browserSuccess() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        server.script("/token", [.token("at-browser-bin", refresh: "rt-browser-bin")])
        let (running, redirect, state) = try await startBrowserLogin(directory, server: server)
        #expect(try await httpGET(URL(string: "http://127.0.0.1:\(redirect.port!)/favicon.ico")!).status == 404)
        let answer = try await httpGET(URL(string: "\(redirect.absoluteString)?code=code-1&state=\(state)")!)
        #expect(answer.status == 200)
        #expect(await running.wait(timeout: .seconds(60)) == 0, "\(running.stderr)")
        let exchange = try #require(server.requests("/token").first)
        #expect(exchange.form["code"] == "code-1")
        #expect(exchange.form["redirect_uri"] == redirect.absoluteString)
        #expect(directory.storedKeys == ["gh"])
        #expect(!running.stdout.contains("at-browser-bin"))
    }

    @Test("browser login: a wrong state gets an error page and exits 77 without an exchange")
    func browserWrongState() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        let (running, redirect, _) = try await startBrowserLogin(directory, server: server)
        let answer = try await httpGET(URL(string: "\(redirect.absoluteString)?code=code-1&state=forged")!)
        #expect(answer.status == 400)
        #expect(answer.body.contains("stateMismatch"))
        #expect(await running.wait(timeout: .seconds(60)) == 77)
        #expect(server.requests("/token").isEmpty)
        #expect(directory.storedKeys.isEmpty)
    }

    @Test("browser login: an error callback exits 77 and the page names the error")
    func browserErrorCallback() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        let (running, redirect, state) = try await startBrowserLogin(directory, server: server)
        let answer = try await httpGET(URL(string: "\(redirect.absoluteString)?error=access_denied&state=\(state)")!)
        #expect(answer.status == 400)
        #expect(answer.body.contains("access_denied"))
        #expect(await running.wait(timeout: .seconds(60)) == 77)
        #expect(record(running.stdout.split(separator: "\n").last ?? "")["error"] as? String == "access_denied")
        #expect(directory.storedKeys.isEmpty)
    }
}
