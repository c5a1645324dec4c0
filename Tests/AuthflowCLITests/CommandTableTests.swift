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

    @Test("authflow completion and man print the scripts and the page; --provider-ids lists the catalog's ids")
    func commands() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base), catalogEntry(id: "gl", base: h.base))
        for shell in Completion.Shell.allCases {
            #expect(await h.run(["completion", shell.rawValue]).stdout == Completion.script(for: shell))
        }
        #expect(await h.run(["man"]).stdout == ManPage.roff())
        #expect(await h.run(["completion", "--provider-ids"]).stdout == "gh\ngl\n")
        #expect(await h.run(["completion", "tcsh"]).status == .usage)
        #expect(await h.run(["completion"]).status == .usage)
    }
}
