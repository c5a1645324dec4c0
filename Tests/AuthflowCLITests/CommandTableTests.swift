@testable import AuthflowCLI
import Foundation
import OAuthFlow
import TestSupport
import Testing

/// One table drives `help`, the parser, the completions and the man page: each lists every
/// command and option of the table, and the parser accepts exactly the table's options.
@Suite("authflow command table, completions and man page", .timeLimit(.minutes(2)))
struct CommandTableTests {
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

    /// Two values each option that takes one accepts (`x` and `y` for those that take anything).
    static let sampleValues: [String: (String, String)] = [
        "--timeout": ("5", "6"), "--client-timeout": ("7", "8"), "--socket": ("/run/a.sock", "/run/b.sock"),
        "--sink": ("gh=/run/gh.token", "gl=/run/gl.token"), "--metrics-file": ("/run/a.prom", "/run/b.prom"),
        "--resource": ("https://api.example/mcp", "https://api.example/other"), "--issuer": ("https://a.example", "https://b.example"),
        "--max-age": ("1", "2"), "--add-header": ("X-A: 1", "X-B: 2"), "--method": ("GET", "PUT"),
        "--requested-expiry": ("60", "120"),
        "--listen-port": ("8400", "8401"), "--ciba-notification-listen": ("127.0.0.1:8443", "[::1]:8444"),
    ]

    /// A command line for `command` that the parser takes, with `extra` (options) after its positionals.
    static func line(_ command: String, _ extra: [String], for option: String = "") -> [String] {
        let spec = Authflow.command(command)!
        switch (command, option) {
        case ("completion", "--provider-ids"): return [command] + extra
        case ("completion", _): return [command, "bash"] + extra
        case ("git-credential", _): return [command, "gh", "get"] + extra
        case ("exec", _): return [command, "gh"] + extra + ["--", "true"]
        case ("token", "--dpop-proof"): return [command, "gh", "GET", "https://api.example/"] + extra
        case ("login", "--issuer"): return [command, "gh", "--resource", "https://api.example/mcp"] + extra
        case ("request", _): return [command, "gh", "https://api.example/x"] + extra
        default: return [command] + Array(repeating: "gh", count: spec.positionals.lowerBound) + extra
        }
    }

    /// `option` with its first (or second) sample value, or alone for a flag.
    static func given(_ option: OptionSpec, second: Bool = false) -> [String] {
        guard option.value != nil else { return [option.name] }
        let values = sampleValues[option.name] ?? ("x", "y")
        return [option.name, second ? values.1 : values.0]
    }

    /// Every word shaped like an option (`--name`, `-x`) in the CLI's sources and its documentation:
    /// the names anyone could think the parser takes.
    static func optionVocabulary() throws -> Set<String> {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources/AuthflowCLI")
        var files = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasSuffix(".swift") }
            .map { sources.appendingPathComponent($0) }
        files.append(root.appendingPathComponent("Documentation/CLI.md"))
        var words: Set<String> = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: /(?:^|[^A-Za-z0-9_-])(--[a-z][a-z0-9-]*[a-z0-9]|-[A-Za-z])(?=[^A-Za-z0-9_-]|$)/) {
                words.insert(String(match.output.1))
            }
        }
        return words
    }

    @Test("the parser takes exactly the table's options: each command's and the global ones, no other option-shaped word of the sources or docs")
    func parserTakesTheTable() throws {
        let globals = Set(Authflow.globalOptions.flatMap { [$0.name] + ($0.short.map { [$0] } ?? []) })
        let vocabulary = try Self.optionVocabulary()
        try #require(vocabulary.count > 40 && vocabulary.isSuperset(of: globals), "\(vocabulary.sorted())")
        for spec in Authflow.commands {
            let table = spec.optionNames.union(globals)
            for word in vocabulary.union(table).sorted() {
                // A value follows every word, so that a value option finds one; the table check comes
                // before the positionals are counted, so an extra positional is no unknown option.
                var unknown = false
                do { _ = try Authflow.parse(Self.line(spec.name, [word, "5"], for: word)) } catch {
                    unknown = error.message.hasPrefix("unknown option")
                }
                #expect(unknown != table.contains(word),
                        "\(spec.name) \(word): the parser \(unknown ? "refuses" : "takes") it, the table \(table.contains(word) ? "lists" : "does not list") it")
            }
        }
    }

    @Test("every option of the table changes what the parser returns; given twice, a repeatable one (help: \"(repeatable)\") keeps both values, any other the last")
    func parserReadsEveryOption() throws {
        for spec in Authflow.commands {
            // `help --help` is `help`, as it should be.
            for option in spec.options + Authflow.globalOptions where !option.isAlternativeForm && !(spec.name == "help" && option.name == "--help") {
                let with = try Authflow.parse(Self.line(spec.name, Self.given(option), for: option.name))
                // Without it, the same positionals (or, where the option needs its own, the usual ones).
                let without = try (try? Authflow.parse(Self.line(spec.name, [], for: option.name))) ?? Authflow.parse(Self.line(spec.name, []))
                #expect(with != without, "\(spec.name) \(option.name) is accepted but read by no one")
                guard option.value != nil else { continue }
                let twice = try Authflow.parse(Self.line(spec.name, Self.given(option) + Self.given(option, second: true), for: option.name))
                let last = try Authflow.parse(Self.line(spec.name, Self.given(option, second: true), for: option.name))
                #expect((twice != last) == option.isRepeatable, "\(spec.name) \(option.name) given twice")
            }
        }
    }

    @Test("help keeps its layout: the commands in columns, long synopses on their own line")
    func helpLayout() {
        let overview = Authflow.helpText(nil)
        #expect(overview.contains("\n  providers [--json]                   list configured providers and the grants each supports\n"))
        #expect(overview.contains("\n  login PROVIDER [--device | --browser | --paste | --client-credentials | --ciba] [--scope S]... [--json]\n"
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
