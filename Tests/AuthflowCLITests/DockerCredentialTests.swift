@testable import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow docker-credential` and `docker-credential-authflow`: Docker's credential-helper
/// protocol in-process, then the built binary under both names fed the exact bytes Docker's
/// helper client writes, then the real `docker` client running the helper itself.
@Suite("authflow docker-credential", .timeLimit(.minutes(3)))
struct DockerCredentialTests {
    /// `reg` (client credentials, two registries, the default username), `gh` (a device login,
    /// a username of its own), `pay` (DPoP-bound), `plain` (no registries).
    static func catalog(_ h: Harness) throws {
        try h.catalog(
            #"{ "id": "reg", "clientID": "c", "clientSecret": "s3cret", "tokenURL": "\#(h.base)/token", "#
                + #""registries": ["registry.example.com", "LOCALHOST:5000"] }"#,
            #"{ "id": "gh", "clientID": "c", "tokenURL": "\#(h.base)/token", "deviceAuthorizationURL": "\#(h.base)/device/code", "#
                + #""registries": ["ghcr.io"], "registryUsername": "x-access-token" }"#,
            #"{ "id": "pay", "clientID": "c", "clientSecret": "s3cret", "tokenURL": "\#(h.base)/token", "dpop": true, "#
                + #""registries": ["pay.example.com"] }"#,
            catalogEntry(id: "plain", base: h.base, device: false, secret: "s3cret"))
    }

    /// One run as Docker makes it: `ACTION` with `stdin`, through `authflow docker-credential
    /// PROVIDER` or, with `provider` nil, as `docker-credential-authflow` (the way `start()` runs it).
    static func run(_ h: Harness, _ provider: String?, _ action: String, stdin: String) async -> (status: ExitCode, stdout: String, stderr: String) {
        guard provider == nil else { return await h.run(["docker-credential", provider!, action], services: h.services(standardInput: stdin)) }
        let (output, stdout, stderr) = Output.capture()
        let invocation = DockerCredential.invocation([action])
        let services = h.services(standardInput: stdin)
        let status = Authflow.answerBeforeRuntime(invocation, output: output, environment: h.environment, services: services)
        if let status { return (status, stdout.text, stderr.text) }
        return (await Authflow.execute(invocation, output: output, environment: h.environment, services: services), stdout.text, stderr.text)
    }

    @Test("get: the server URL as Docker wrote it, the username and a valid token, as one JSON line; under both names; the second from the store")
    func get() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        h.mock.script(.token, [.token(access: "at-reg-1", expiresIn: 3600)])
        for (provider, input) in [("reg", "registry.example.com"), (nil, "registry.example.com"), ("reg", "https://Registry.Example.com/v2/\n"),
                                  (nil, "  localhost:5000\r\n")] as [(String?, String)] {
            let run = await Self.run(h, provider, "get", stdin: input)
            let url = input.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(run.status == .success, "\(run.stderr)")
            #expect(run.stdout == #"{"ServerURL":"\#(url)","Username":"oauth2accesstoken","Secret":"at-reg-1"}"# + "\n")
            #expect(run.stderr.isEmpty)
        }
        #expect(h.mock.requests(.token).count == 1, "fetched once, then answered from the store")
    }

    @Test("a registry no provider lists, or another provider's: exactly the protocol's not-found line, exit 1, nothing on stderr, nothing fetched", arguments: [
        ("reg", "ghcr.io"), ("reg", "other.example.com"), (nil, "other.example.com"), (nil, "registry.example.com:443"),
        ("plain", "registry.example.com"), (nil, "https://index.docker.io/v1/"), ("reg", "registry.example.com.evil.example"),
        ("reg", "user@registry.example.com"),
    ] as [(String?, String)])
    func notFound(provider: String?, input: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        let run = await Self.run(h, provider, "get", stdin: input)
        #expect(run.status == .failure && run.status.rawValue == 1)
        #expect(run.stdout == "credentials not found in native keychain\n")
        #expect(run.stderr.isEmpty)
        #expect(h.mock.requests(.token).isEmpty)
    }

    @Test("hostile input: empty, control characters, oversized — a clear line on stdout, exit 1, the input never echoed", arguments: [
        ("", "no credentials server URL"), (" \n\t", "no credentials server URL"),
        ("registry.example.com\u{1B}]0;owned\u{07}", "the server URL on stdin holds a control character"),
        ("registry.example.com\nusername=evil", "the server URL on stdin holds a control character"),
        ("registry.example.com\u{202E}moc", "the server URL on stdin holds a control character"),
        ("registry.example.com\u{0}", "the server URL on stdin holds a control character"),
        (String(repeating: "a", count: 8193), "the server URL on stdin is longer than 8192 bytes"),
    ])
    func hostile(input: String, line: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        for provider in ["reg", nil] as [String?] {
            for action in ["get", "erase"] {
                let run = await Self.run(h, provider, action, stdin: input)
                #expect(run.status == .failure)
                #expect(run.stdout == line + "\n")
                #expect(run.stderr.isEmpty)
            }
        }
        #expect(h.mock.requests(.token).isEmpty)
    }

    @Test("nothing stored for a provider a person logs in to: 77, the line on stdout for Docker and on stderr for the person")
    func needsPerson() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        for provider in ["gh", nil] as [String?] {
            let run = await Self.run(h, provider, "get", stdin: "ghcr.io")
            #expect(run.status == .denied)
            #expect(run.stdout == "not logged in to gh; run: authflow login gh\n")
            #expect(run.stderr == "authflow: error: not logged in to gh; run: authflow login gh\n")
        }
        #expect(await h.deviceLogin("gh", access: "at-gh-1", refresh: "rt-gh-1") == .success)
        let run = await Self.run(h, nil, "get", stdin: "ghcr.io")
        #expect(run.stdout == #"{"ServerURL":"ghcr.io","Username":"x-access-token","Secret":"at-gh-1"}"# + "\n")
    }

    @Test("a DPoP-bound token is never given to a registry (65)")
    func refusesDPoP() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        h.mock.script(.token, [.token(access: "at-dpop-1", type: "DPoP", expiresIn: 3600)])
        let run = await Self.run(h, nil, "get", stdin: "pay.example.com")
        #expect(run.status == .dataError)
        #expect(run.stdout.hasPrefix("the token of pay is DPoP-bound (RFC 9449): it is useless without its key and a proof made for each "
            + "request, so docker-credential does not give it to a registry"), "\(run.stdout)")
        #expect(run.stderr.hasPrefix("authflow: error: the token of pay is DPoP-bound"))
        #expect(!run.stdout.contains("at-dpop-1") && !run.stderr.contains("at-dpop-1"))
    }

    @Test("list, store, erase, version and unknown actions answer as the protocol's helpers do")
    func otherActions() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try Self.catalog(h)
        let all = await Self.run(h, nil, "list", stdin: "unused")
        #expect(all.status == .success)
        #expect(all.stdout == #"{"ghcr.io":"x-access-token","localhost:5000":"oauth2accesstoken","pay.example.com":"oauth2accesstoken","registry.example.com":"oauth2accesstoken"}"# + "\n")
        #expect(await Self.run(h, "reg", "list", stdin: "unused").stdout == #"{"localhost:5000":"oauth2accesstoken","registry.example.com":"oauth2accesstoken"}"# + "\n")
        #expect(await Self.run(h, "plain", "list", stdin: "").stdout == "{}\n")

        let store = await Self.run(h, nil, "store", stdin: #"{"ServerURL":"registry.example.com","Username":"me","Secret":"typed-password"}"# + "\n")
        #expect(store.status == .failure)
        #expect(store.stdout == "authflow stores no registry password: the token comes from the provider's login (authflow login PROVIDER)\n")
        #expect(!store.stdout.contains("typed-password") && store.stderr.isEmpty)

        let erase = await Self.run(h, "reg", "erase", stdin: "registry.example.com")
        #expect(erase.status == .failure)
        #expect(erase.stdout == "authflow keeps the login of reg: authflow logout reg ends it; docker logout does not\n")
        #expect(await Self.run(h, nil, "erase", stdin: "other.example.com").stdout == "credentials not found in native keychain\n")

        #expect(await Self.run(h, nil, "version", stdin: "").stdout == "docker-credential-authflow (authflow) \(Authflow.version)\n")
        #expect(await Self.run(h, "reg", "version", stdin: "").stdout == "authflow docker-credential (authflow) \(Authflow.version)\n")
        let unknown = await Self.run(h, nil, "frob\u{1B}[2J", stdin: "")
        #expect(unknown.status == .failure)
        #expect(unknown.stdout == "docker-credential-authflow: unknown action: frob\\u{1B}[2J\n")
        #expect(h.mock.requests(.token).isEmpty)
    }

    @Test("registries and registryUsername are checked (65); a registry two providers list is refused; an unknown PROVIDER is a usage error", arguments: [
        (#""registries": "registry.example.com""#, "registries: must be an array of 1 to 256 registries"),
        (#""registries": []"#, "registries: must be an array of 1 to 256 registries"),
        (#""registries": ["https://registry.example.com"]"#, #"registries: "https://registry.example.com" is not a registry"#),
        (#""registries": ["registry.example.com:0"]"#, "is not a registry"),
        (#""registries": ["-bad.example"]"#, "is not a registry"),
        (#""registries": [7]"#, "registries: an item is not a registry"),
        (#""registries": ["registry.example.com"], "registryUsername": "a\nb""#, "registryUsername: must be a string of 1 to 128 characters"),
        (#""registries": ["ghcr.io"]"#, #"registry ghcr.io is listed by providers "gh" and "x""#),
    ])
    func badCatalog(members: String, message: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(#"{ "id": "gh", "clientID": "c", "tokenURL": "\#(h.base)/token", "registries": ["ghcr.io"] }"#,
                      #"{ "id": "x", "clientID": "c", "clientSecret": "s", "tokenURL": "\#(h.base)/token", \#(members) }"#)
        let run = await Self.run(h, nil, "get", stdin: "registry.example.com")
        #expect(run.status == .dataError, "\(run.stdout)")
        #expect(run.stdout.contains(message), "\(run.stdout)")
        #expect(run.stderr.contains("authflow: error:") && run.stderr.contains(message))

        let unknown = await Self.run(h, "nope", "get", stdin: "registry.example.com")
        #expect(unknown.status == .usage && unknown.stdout.contains("no provider 'nope'"))
    }

    @Test("the registry a server URL names, and what a catalog may list", arguments: [
        ("registry.example.com", "registry.example.com"), ("https://Registry.Example.com:5000/v2/", "registry.example.com:5000"),
        ("http://localhost:5000", "localhost:5000"), ("https://index.docker.io/v1/", "index.docker.io"), ("[::1]:5000/x", "[::1]:5000"),
    ])
    func registry(url: String, registry: String) {
        #expect(DockerCredential.registry(of: url) == registry)
        #expect(DockerCredential.isRegistry(registry))
    }

    @Test("what is not a registry", arguments: ["", ".example.com", "example.com.", "-x.example", "a b", "example.com:", "example.com:65536",
                                                 "example.com:x", "[::1", "[]", "[g::1]", "ex_ample.com", "é.example", "a/b"])
    func notRegistry(text: String) {
        #expect(!DockerCredential.isRegistry(text))
    }

    // MARK: The binary under both names, fed Docker's exact bytes

    /// What Docker's helper client (docker-credential-helpers' `client` package) writes: `get` and
    /// `erase` the server URL without a newline, `list` the word `unused`, `store` the JSON its
    /// encoder ends with a newline.
    struct Exchange {
        var action: String
        var stdin: String
        var status: Int32
        var stdout: String
    }

    @Test("the binary as `authflow docker-credential reg` and as the link docker-credential-authflow: Docker's exchanges, byte for byte")
    func binaryBothNames() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        try directory.writeCatalog([#"{ "id": "reg", "clientID": "c", "clientSecret": "s3cret", "tokenURL": "\#(server.baseURL)/token", "#
                                        + #""registries": ["registry.example.com"] }"#])
        server.script("/token", [.token("at-docker-bin", expiresIn: 3600)])
        let link = directory.url.appendingPathComponent("bin/\(DockerCredential.programName)")
        try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: try #require(Binary.url))
        let environment = cleanEnvironment(directory, ["AUTHFLOW_CONFIG": directory.config.path, "AUTHFLOW_STORE": directory.store.path,
                                                       "AUTHFLOW_AGENT": "off"])
        let answer = #"{"ServerURL":"registry.example.com","Username":"oauth2accesstoken","Secret":"at-docker-bin"}"# + "\n"
        let exchanges = [
            Exchange(action: "get", stdin: "registry.example.com", status: 0, stdout: answer),
            Exchange(action: "get", stdin: "other.example.com", status: 1, stdout: "credentials not found in native keychain\n"),
            Exchange(action: "get", stdin: "", status: 1, stdout: "no credentials server URL\n"),
            Exchange(action: "get", stdin: "registry.example.com\u{1B}[2J", status: 1, stdout: "the server URL on stdin holds a control character\n"),
            Exchange(action: "get", stdin: String(repeating: "x", count: 1 << 20), status: 1,
                     stdout: "the server URL on stdin is longer than 8192 bytes\n"),
            Exchange(action: "list", stdin: "unused", status: 0, stdout: #"{"registry.example.com":"oauth2accesstoken"}"# + "\n"),
            Exchange(action: "store", stdin: #"{"ServerURL":"registry.example.com","Username":"me","Secret":"pw"}"# + "\n", status: 1,
                     stdout: "authflow stores no registry password: the token comes from the provider's login (authflow login PROVIDER)\n"),
            Exchange(action: "erase", stdin: "registry.example.com", status: 1,
                     stdout: "authflow keeps the login of reg: authflow logout reg ends it; docker logout does not\n"),
        ]
        for (program, prefix) in [(try #require(Binary.url).path, ["docker-credential", "reg"]), (link.path, [])] {
            for exchange in exchanges {
                let run = try await Tool.run(program, prefix + [exchange.action], environment: environment, stdin: exchange.stdin)
                #expect(run.status == exchange.status, "\(program) \(exchange.action): \(run.stderr)")
                #expect(run.stdout == exchange.stdout, "\(program) \(exchange.action)")
                #expect(run.stderr.isEmpty, "\(program) \(exchange.action): \(run.stderr)")
            }
        }
        #expect(server.requests("/token").count == 1, "the first get fetched the token; every other answer came from the store")

        // The helper's own command line: one action, else its usage line (exit 1); --version and --help exit 0.
        let usage = "Usage: docker-credential-authflow <store|get|erase|list|version>\n"
        for (arguments, status, stdout) in [([], 1, usage), (["get", "extra"], 1, usage), (["--help"], 0, usage),
                                            (["--version"], 0, "docker-credential-authflow (authflow) \(Authflow.version)\n"),
                                            (["-v"], 0, "docker-credential-authflow (authflow) \(Authflow.version)\n")] as [([String], Int32, String)] {
            let run = try await Tool.run(link.path, arguments, environment: environment)
            #expect(run.status == status && run.stdout == stdout, "\(arguments): \(run.stdout) \(run.stderr)")
        }
    }

    // MARK: The real docker client

    /// The docker clients to drive: `AUTHFLOW_TEST_DOCKER`, Debian's (unpacked by .ci/run), `docker` on `PATH`.
    static var dockers: [String] {
        var found: [String] = []
        let candidates = [ProcessInfo.processInfo.environment["AUTHFLOW_TEST_DOCKER"], "/tmp/oauthflow-cli/docker/root/usr/bin/docker",
                          Tool.find("docker")]
        for case let path? in candidates where !path.isEmpty && FileManager.default.isExecutableFile(atPath: path) {
            let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
            if !found.contains(real) { found.append(real) }
        }
        return found
    }

    static var dockerAvailable: Bool {
        let ci = (ProcessInfo.processInfo.environment["CI"] ?? "").lowercased()
        return !dockers.isEmpty || !(ci.isEmpty || ci == "0" || ci == "false")
    }

    /// The `X-Registry-Auth` header Docker sent its daemon, decoded (URL-safe base64 of a JSON object).
    static func registryAuth(_ request: TestHTTPServer.Request) throws -> [String: Any] {
        var text = try #require(request.headers["x-registry-auth"], "no X-Registry-Auth").replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("the real docker runs docker-credential-authflow for the registry credHelpers names and sends its daemon the token; credsStore: other registries get nothing; docker login's store is refused",
          .enabled(if: DockerCredentialTests.dockerAvailable, "no docker client (.ci/run unpacks Debian's docker.io; with CI=true this fails instead)"))
    func realDocker() async throws {
        let dockers = Self.dockers
        try #require(!dockers.isEmpty, "no docker client: .ci/run unpacks Debian's docker.io into /tmp/oauthflow-cli/docker")
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let provider = try TestHTTPServer()
        defer { provider.stop() }
        // The daemon's API as far as the client needs it: the version ping, image creation, login.
        let daemon = try TestHTTPServer()
        defer { daemon.stop() }
        daemon.script("/_ping", [TestHTTPServer.Reply(status: 200, body: "OK", headers: ["Api-Version": "1.41", "Ostype": "linux"])])
        daemon.script("/v1.41/images/create", [.json(#"{"status":"Status: Image is up to date"}"#)])
        daemon.script("/v1.41/auth", [.json(#"{"Status":"Login Succeeded"}"#)])
        try directory.writeCatalog([#"{ "id": "reg", "clientID": "c", "clientSecret": "s3cret", "tokenURL": "\#(provider.baseURL)/token", "#
                                        + #""registries": ["registry.example.com"] }"#])
        provider.script("/token", [.token("at-real-docker", expiresIn: 3600)])
        let bin = directory.url.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: bin.appendingPathComponent(DockerCredential.programName), withDestinationURL: try #require(Binary.url))
        let config = directory.url.appendingPathComponent("docker")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        let environment = cleanEnvironment(directory, [
            "PATH": "\(bin.path):/usr/bin:/bin", "DOCKER_CONFIG": config.path, "DOCKER_HOST": "tcp://127.0.0.1:\(daemon.port)",
            "AUTHFLOW_CONFIG": directory.config.path, "AUTHFLOW_STORE": directory.store.path, "AUTHFLOW_AGENT": "off",
        ])
        func configure(_ json: String) throws { try Data(json.utf8).write(to: config.appendingPathComponent("config.json")) }

        for docker in dockers {
            try configure(#"{"credHelpers": {"registry.example.com": "authflow"}}"#)
            let pulls = daemon.requests("/v1.41/images/create").count
            let pull = try await Tool.run(docker, ["pull", "registry.example.com/team/app:1.0"], environment: environment, timeout: .seconds(90))
            #expect(pull.status == 0, "\(docker): \(pull.stderr)")
            let created = daemon.requests("/v1.41/images/create")
            try #require(created.count == pulls + 1, "\(docker) sent no pull: \(pull.stderr)")
            let auth = try Self.registryAuth(created[created.count - 1])
            #expect(auth["username"] as? String == "oauth2accesstoken", "\(docker): \(auth.keys)")
            #expect(auth["password"] as? String == "at-real-docker", "\(docker)")
            // 20.10 sends no serveraddress (its native store keeps only the username and the secret); 28 sends the one it asked for.
            #expect(auth["serveraddress"] == nil || auth["serveraddress"] as? String == "registry.example.com", "\(docker): \(auth.keys.sorted())")
            #expect(!pull.stdout.contains("at-real-docker") && !pull.stderr.contains("at-real-docker"))

            // The helper as every registry's store: it answers only the registries the catalog lists.
            try configure(#"{"credsStore": "authflow"}"#)
            let other = try await Tool.run(docker, ["pull", "other.example.com/app"], environment: environment, timeout: .seconds(90))
            #expect(other.status == 0, "\(docker): \(other.stderr)")
            let anonymous = try Self.registryAuth(try #require(daemon.requests("/v1.41/images/create").last))
            #expect(anonymous["password"] == nil || anonymous["password"] as? String == "", "\(docker): \(anonymous.keys)")
            #expect(other.stderr.isEmpty || !other.stderr.contains("authflow"), "\(docker): \(other.stderr)")

            // docker login stores what it was given in the helper: refused, and docker says so.
            try configure(#"{"credHelpers": {"registry.example.com": "authflow"}}"#)
            let login = try await Tool.run(docker, ["login", "--username", "me", "--password-stdin", "registry.example.com"],
                                           environment: environment, stdin: "typed-password\n", timeout: .seconds(90))
            #expect(login.status != 0)
            #expect((login.stdout + login.stderr).contains("authflow stores no registry password"), "\(docker): \(login.stdout) \(login.stderr)")
            #expect(!(login.stdout + login.stderr).contains("typed-password"))
        }
        #expect(provider.requests("/token").count == 1, "one token for every run: the store answered the others")
    }
}
