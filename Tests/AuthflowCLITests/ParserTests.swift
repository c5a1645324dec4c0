import AuthflowCLI
import Testing

@Suite("Command-line parsing")
struct ParserTests {
    @Test("every command parses", arguments: [
        (["providers"], Command.providers(json: false)),
        (["providers", "--json"], .providers(json: true)),
        (["login", "github"], .login(LoginOptions(provider: "github"))),
        (["login", "github", "--device", "--scope", "read:user", "--scope", "repo gist", "--json"],
         .login(LoginOptions(provider: "github", method: .device, scopes: ["read:user", "repo", "gist"], json: true))),
        (["login", "--browser", "google", "--timeout", "90"], .login(LoginOptions(provider: "google", method: .browser, timeout: 90))),
        (["login", "svc", "--client-credentials", "--scope=a"], .login(LoginOptions(provider: "svc", method: .clientCredentials, scopes: ["a"]))),
        (["login", "corp", "--paste", "--timeout", "600"], .login(LoginOptions(provider: "corp", method: .paste, timeout: 600))),
        (["login", "corp", "--listen-port", "8400"], .login(LoginOptions(provider: "corp", method: .browser, listenPort: 8400))),
        (["login", "corp", "--browser", "--listen-port=65535"], .login(LoginOptions(provider: "corp", method: .browser, listenPort: 65535))),
        (["token", "github"], .token(provider: "github", json: false)),
        (["token", "github", "--json"], .token(provider: "github", json: true)),
        (["status"], .status(provider: nil, json: false)),
        (["status", "github", "--json"], .status(provider: "github", json: true)),
        (["logout", "github"], .logout(provider: "github", localOnly: false)),
        (["logout", "github", "--local"], .logout(provider: "github", localOnly: true)),
        (["userinfo", "github"], .userinfo(provider: "github")),
        (["userinfo", "--store", "/s", "github"], .userinfo(provider: "github")),
        (["demo"], .demo),
        (["exec", "github", "--", "env"], .exec(ExecOptions(bindings: [.init(provider: "github", variable: "AUTHFLOW_TOKEN")], command: ["env"]))),
        (["docker-credential", "github", "get"], .dockerCredential(provider: "github", action: "get")),
        (["help"], .help(topic: nil)),
        (["help", "login"], .help(topic: "login")),
        (["--help"], .help(topic: nil)),
        (["-h"], .help(topic: nil)),
        (["token", "--help"], .help(topic: "token")),
        (["--version"], .version),
        (["-V"], .version),
    ] as [([String], Command)])
    func commands(arguments: [String], expected: Command) throws {
        #expect(try Authflow.parse(arguments).command == expected)
    }

    @Test("global options go before or after the command, with or without '='")
    func globalOptions() throws {
        let before = try Authflow.parse(["--config", "/c.json", "--store=/s", "token", "x"])
        #expect(before == Invocation(configPath: "/c.json", storePath: "/s", command: .token(provider: "x", json: false)))
        let after = try Authflow.parse(["token", "x", "--store", "/s", "--config=/c.json"])
        #expect(after == before)
    }

    @Test("--store-key-file and --store-previous-key-file (repeatable) are global options")
    func storeKeyOptions() throws {
        let parsed = try Authflow.parse(["--store-key-file", "/k", "token", "x", "--store-previous-key-file=/old1",
                                         "--store-previous-key-file", "/old2"])
        #expect(parsed == Invocation(storeKeyPath: "/k", previousStoreKeyPaths: ["/old1", "/old2"], command: .token(provider: "x", json: false)))
        #expect(try Authflow.parse(["status"]).storeKeyPath == nil)
        let empty = #expect(throws: UsageError.self) { try Authflow.parse(["--store-key-file=", "status"]) }
        #expect(empty?.message == "--store-key-file needs a file")
        let missing = #expect(throws: UsageError.self) { try Authflow.parse(["status", "--store-previous-key-file"]) }
        #expect(missing?.message == "--store-previous-key-file needs a value")
    }

    @Test("'--' ends options, so a provider id may start with a dash")
    func doubleDash() throws {
        #expect(try Authflow.parse(["token", "--", "-odd"]).command == .token(provider: "-odd", json: false))
    }

    @Test("bad usage is a UsageError naming the problem", arguments: [
        ([], "no command given"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["login"], "missing PROVIDER"),
        (["token"], "missing PROVIDER"),
        (["logout"], "missing PROVIDER"),
        (["userinfo"], "missing PROVIDER"),
        (["userinfo", "a", "b"], "unexpected argument 'b'"),
        (["userinfo", "a", "--json"], "unknown option '--json' for 'userinfo'"),
        (["token", "a", "b"], "unexpected argument 'b'"),
        (["status", "a", "b"], "unexpected argument 'b'"),
        (["providers", "x"], "unexpected argument 'x'"),
        (["demo", "x"], "unexpected argument 'x'"),
        (["token", "a", "--device"], "unknown option '--device' for 'token'"),
        (["providers", "--local"], "unknown option '--local' for 'providers'"),
        (["login", "a", "--device", "--browser"], "choose one of --device, --browser, --paste, --client-credentials, --ciba"),
        (["login", "a", "--paste", "--browser"], "choose one of --device, --browser, --paste, --client-credentials, --ciba"),
        (["login", "a", "--listen-port", "0"], "--listen-port needs a port from 1 to 65535, not '0'"),
        (["login", "a", "--listen-port", "65536"], "--listen-port needs a port from 1 to 65535, not '65536'"),
        (["login", "a", "--listen-port", "http"], "--listen-port needs a port from 1 to 65535, not 'http'"),
        (["login", "a", "--paste", "--listen-port", "8400"],
         "--listen-port is for the browser login (the loopback port its redirect comes back to); drop --paste"),
        (["login", "a", "--device", "--listen-port", "8400"],
         "--listen-port is for the browser login (the loopback port its redirect comes back to); drop --device"),
        (["login", "a", "--scope"], "--scope needs a value"),
        (["login", "a", "--scope", ""], "--scope needs a scope"),
        (["login", "a", "--timeout", "soon"], "--timeout needs a positive number of seconds, not 'soon'"),
        (["login", "a", "--timeout", "0"], "--timeout needs a positive number of seconds, not '0'"),
        (["token", "a", "--json=yes"], "--json takes no value"),
        (["--config"], "--config needs a value"),
        (["--config=", "status"], "--config needs a file"),
        (["help", "nope"], "unknown command 'nope'"),
        (["nope", "--help"], "unknown command 'nope'"),
    ] as [([String], String)])
    func usageErrors(arguments: [String], message: String) {
        let error = #expect(throws: UsageError.self) { try Authflow.parse(arguments) }
        #expect(error?.message == message)
    }

    @Test("bad usage exits 64 with the message and the command's usage on stderr, nothing on stdout")
    func usageExit() async {
        let (output, stdout, stderr) = Output.capture()
        let status = await Authflow.run(arguments: ["token"], output: output, environment: [:])
        #expect(status == .usage)
        #expect(status.rawValue == 64)
        #expect(stdout.text.isEmpty)
        #expect(stderr.text.contains("missing PROVIDER"))
        #expect(stderr.text.contains("usage: authflow [--config FILE] [--store DIR] token PROVIDER [--json]"))
    }

    @Test("--help lists every command, option, environment variable and exit code")
    func help() async {
        let (output, stdout, _) = Output.capture()
        #expect(await Authflow.run(arguments: ["--help"], output: output, environment: [:]) == .success)
        for word in ["providers", "login", "token", "status", "userinfo", "logout", "demo", "--config", "--store", "AUTHFLOW_CONFIG",
                     "AUTHFLOW_STORE", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "NO_COLOR", "DISPLAY"] {
            #expect(stdout.text.contains(word), "missing \(word)")
        }
        for code in ExitCode.allCases { #expect(stdout.text.contains(code.description)) }
        #expect(Set(ExitCode.allCases.map(\.rawValue)) == [0, 1, 64, 65, 69, 75, 77, 126, 127, 130])
    }

    @Test("help COMMAND shows that command's options")
    func commandHelp() async {
        let (output, stdout, _) = Output.capture()
        #expect(await Authflow.run(arguments: ["help", "login"], output: output, environment: [:]) == .success)
        for flag in ["--device", "--browser", "--paste", "--client-credentials", "--scope", "--json", "--timeout", "--listen-port"] {
            #expect(stdout.text.contains(flag))
        }
    }

    @Test("--version prints the version")
    func version() async {
        let (output, stdout, _) = Output.capture()
        #expect(await Authflow.run(arguments: ["--version"], output: output, environment: [:]) == .success)
        #expect(stdout.text == "authflow \(Authflow.version)\n")
    }
}
