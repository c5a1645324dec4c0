@testable import AuthflowCLI
import Foundation
import OAuthFlow
import TestSupport
import Testing

/// One table drives `help`, the parser, the completions and the man page: each lists every
/// command and option of the table, and the parser accepts exactly the table's options.
@Suite("authflow command table, completions and man page", .timeLimit(.minutes(2)))
struct CommandTableTests {
    /// Every (command, option) pair of the table.
    static let pairs: [(command: String, option: String)] = Authflow.commands.flatMap { spec in spec.options.map { (spec.name, $0.name) } }

    static let globalNames = Authflow.globalOptions.map(\.name)

    @Test("help, each command's help, the man page and the three completion scripts name every command and option")
    func everythingEverywhere() {
        let overview = Authflow.helpText(nil)
        let man = ManPage.roff()
        let scripts = Completion.Shell.allCases.map { ($0, Completion.script(for: $0)) }
        for spec in Authflow.commands {
            #expect(overview.contains("  \(spec.synopsis)"), "help does not list \(spec.name)")
            #expect(man.contains(".SS \(ManPage.text(spec.name))\n"), "the man page does not list \(spec.name)")
            let commandHelp = Authflow.helpText(spec.name)
            #expect(commandHelp.hasPrefix("usage: authflow \(spec.usage)\n"))
            for option in spec.options {
                #expect(commandHelp.contains("  \(option.displayLabel)"), "help \(spec.name) does not list \(option.name)")
                #expect(man.contains("\\fB\(ManPage.text(option.name))\\fR"), "the man page does not list \(spec.name) \(option.name)")
                #expect(spec.usage.contains(option.name) || spec.name == "discover" || spec.name == "completion",
                        "the usage line of \(spec.name) lacks \(option.name)")
            }
            for (shell, script) in scripts {
                #expect(script.contains(spec.name), "\(shell) completion lacks \(spec.name)")
                for option in spec.options {
                    let spelled = shell == .fish ? "-l \(option.name.dropFirst(2))" : option.name
                    #expect(script.contains(spelled), "\(shell) completion lacks \(spec.name) \(option.name)")
                }
            }
        }
        for option in Authflow.globalOptions {
            #expect(overview.contains("  \(option.displayLabel)"))
            #expect(man.contains(ManPage.text(option.name)))
            for (shell, script) in scripts {
                #expect(script.contains(shell == .fish ? "-l \(option.name.dropFirst(2))" : option.name), "\(shell) lacks \(option.name)")
            }
        }
        for variable in Authflow.environmentVariables { #expect(man.contains(ManPage.text(variable.name))) }
        for code in ExitCode.allCases { #expect(man.contains(".B \(code.rawValue)\n")) }
    }

    /// A value each option that checks its value accepts.
    static let sampleValues = [
        "--timeout": "5", "--socket": "/run/authflow/agent.sock", "--sink": "gh=/run/gh.token", "--metrics-file": "/run/authflow.prom",
        "--client-timeout": "5",
    ]

    @Test("the parser accepts every option the table gives a command, and refuses it for a command without it")
    func parserFollowsTable() {
        for (command, option) in Self.pairs {
            let spec = Authflow.command(command)!
            var arguments = [command] + Array(repeating: "x", count: spec.positionals.lowerBound)
            if command == "completion" { arguments = option == "--provider-ids" ? [command] : [command, "bash"] }
            if command == "git-credential" { arguments = [command, "gh", "get"] }
            if option == "--dpop-proof" { arguments = [command, "gh", "GET", "https://api.example/"] }
            let value = spec.options.first { $0.name == option }?.value
            arguments += value == nil ? [option] : [option, Self.sampleValues[option] ?? "read"]
            #expect(throws: Never.self, "\(arguments)") { try Authflow.parse(arguments) }
        }
        for spec in Authflow.commands {
            let foreign = Set(Self.pairs.map(\.option)).subtracting(spec.optionNames).sorted()
            for option in foreign {
                let arguments = [spec.name] + Array(repeating: "x", count: spec.positionals.lowerBound) + [option]
                #expect(throws: UsageError.self, "\(arguments)") { try Authflow.parse(arguments) }
            }
        }
    }

    @Test("help keeps its layout: the commands in columns, long synopses on their own line")
    func helpLayout() {
        let overview = Authflow.helpText(nil)
        #expect(overview.contains("\n  providers [--json]                   list configured providers and the grants each supports\n"))
        #expect(overview.contains("\n  login PROVIDER [--device | --browser | --client-credentials] [--scope S]... [--json]\n"
            + String(repeating: " ", count: 39) + "log in and store the tokens\n"))
        #expect(overview.contains("\n  --config FILE    the provider catalog (JSON; see Documentation/Catalog.md)\n"))
        #expect(overview.contains("\n  --store-plaintext\n                   let a database store keep entries unencrypted (no key)\n"))
        #expect(Authflow.helpText("logout").contains("\n  --local   delete the stored tokens without contacting the provider\n"))
    }

    @Test("groff -man -ww renders the man page without a warning")
    func manPageRenders() async throws {
        let groff = try #require(Tool.find("groff"), "groff is not installed (apt-get install groff)")
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let page = directory.url.appendingPathComponent("authflow.1")
        try Data(ManPage.roff().utf8).write(to: page)
        for device in ["utf8", "ps"] {
            let run = try await Tool.run(groff, ["-man", "-ww", "-T\(device)", page.path], environment: ["PATH": "/usr/bin:/bin"])
            #expect(run.status == 0)
            #expect(run.stderr.isEmpty, "groff -T\(device): \(run.stderr)")
            if device == "utf8" {
                #expect(run.stdout.contains("AUTHFLOW(1)"))
                for spec in Authflow.commands { #expect(run.stdout.contains(spec.name)) }
            }
        }
    }

    @Test("bash's completion function, run in a real bash, gives the commands, the options and the catalog's provider ids")
    func bashCompletion() async throws {
        let bash = try #require(Tool.find("bash"))
        let binary = try #require(TestSupportBinary.directory, "authflow not built")
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try directory.writeCatalog([catalogEntry(id: "gh", base: "https://example.com"), catalogEntry(id: "corp.k8s", base: "https://example.com"),
                                    #"{ "id": "unset-secret", "clientID": "c", "tokenURL": "https://example.com/t", "clientSecretEnv": "NOT_SET_ANYWHERE" }"#])
        let script = directory.url.appendingPathComponent("authflow.bash")
        try Data(Completion.bash.utf8).write(to: script)
        let probe = """
        source '\(script.path)'
        t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _authflow; echo "${COMPREPLY[*]}"; }
        complete -p authflow
        t authflow ''
        t authflow lo
        t authflow token ''
        t authflow --config '\(directory.config.path)' git-credential ''
        t authflow git-credential gh ''
        t authflow token gh --
        t authflow login gh --no
        t authflow completion ''
        t authflow help kube
        """
        let run = try await Tool.run(bash, ["--norc", "--noprofile", "-c", probe],
                               environment: ["PATH": "\(binary):/usr/bin:/bin", "AUTHFLOW_CONFIG": directory.config.path, "HOME": directory.url.path])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        try #require(lines.count >= 10, "\(run.stdout)")
        #expect(lines[0] == "complete -F _authflow authflow")
        #expect(lines[1] == Authflow.commands.map(\.name).joined(separator: " "))
        #expect(lines[2] == "login logout")
        #expect(lines[3] == "gh corp.k8s unset-secret", "provider ids from AUTHFLOW_CONFIG, no secret resolved")
        #expect(lines[4] == "gh corp.k8s unset-secret", "provider ids from --config")
        #expect(lines[5] == "get store erase")
        #expect(lines[6] == "--json --header --dpop-proof " + Completion.globalNames.filter { $0.hasPrefix("--") }.joined(separator: " "))
        #expect(lines[7] == "--no-qr")
        #expect(lines[8] == "bash zsh fish")
        #expect(lines[9] == "kube-credential")
    }

    @Test("the zsh and fish scripts parse in their shells", arguments: ["zsh", "fish"])
    func otherShellsParse(shell: String) async throws {
        let program = try #require(Tool.find(shell), "\(shell) is not installed (apt-get install \(shell))")
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let script = directory.url.appendingPathComponent("authflow.\(shell)")
        try Data(Completion.script(for: Completion.Shell(rawValue: shell)!).utf8).write(to: script)
        let run = try await Tool.run(program, shell == "zsh" ? ["-n", script.path] : ["--no-execute", script.path],
                               environment: ["PATH": "/usr/bin:/bin", "HOME": directory.url.path])
        #expect(run.status == 0 && run.stderr.isEmpty, "\(run.stderr)")
    }

    @Test("authflow completion and man print the scripts and the page; --provider-ids lists the catalog's ids")
    func commands() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base), catalogEntry(id: "gl", base: h.base))
        #expect(await h.run(["completion", "bash"]).stdout == Completion.bash)
        #expect(await h.run(["completion", "fish"]).stdout == Completion.fish)
        #expect(await h.run(["man"]).stdout == ManPage.roff())
        #expect(await h.run(["completion", "--provider-ids"]).stdout == "gh\ngl\n")
        #expect(await h.run(["completion", "tcsh"]).status == .usage)
        #expect(await h.run(["completion"]).status == .usage)
    }
}

/// The directory of the built `authflow`, for a shell's PATH.
enum TestSupportBinary {
    static var directory: String? { Binary.url?.deletingLastPathComponent().path }
}
