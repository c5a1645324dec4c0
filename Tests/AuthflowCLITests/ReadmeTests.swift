@testable import AuthflowCLI
import Foundation
import OAuthFlow
import Testing

/// README.md's code blocks against the code: every Swift line is one the tests compile, every
/// `authflow` command line is one the CLI's parser accepts, the install and test commands are the
/// script's and `.ci/run`'s, and the catalog parses. A README edit that the code does not back fails here.
@Suite("README.md matches the CLI and the API")
struct ReadmeTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// One fenced block: its language and its lines.
    struct Block {
        var language: String
        var lines: [String]
    }

    /// The fenced blocks of a Markdown text (```lang … ```), in order.
    static func blocks(_ markdown: String) -> [Block] {
        var blocks: [Block] = []
        var current: Block?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("```") {
                if let block = current {
                    blocks.append(block)
                    current = nil
                } else {
                    current = Block(language: String(trimmed.dropFirst(3)), lines: [])
                }
            } else {
                current?.lines.append(String(line))
            }
        }
        return blocks
    }

    /// `line` without a `//` comment that starts outside a string literal.
    static func withoutComment(_ line: String) -> String {
        var inString = false
        var escaped = false
        var previous: Character?
        var index = line.startIndex
        while index < line.endIndex {
            let character = line[index]
            if inString {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { inString = false }
            } else if character == "\"" {
                inString = true
            } else if character == "/", previous == "/" {
                return String(line[..<line.index(before: index)])
            }
            previous = character
            index = line.index(after: index)
        }
        return line
    }

    static func squeezed(_ line: String) -> String {
        String(line.filter { !$0.isWhitespace })
    }

    /// The code lines of the compiled documentation examples, comments and whitespace removed.
    static func compiledLines() throws -> Set<String> {
        let directory = packageRoot.appendingPathComponent("Tests/OAuthFlowTests/Documentation")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".swift") }.sorted()
        var lines: Set<String> = []
        for file in files {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") { lines.insert(squeezed(withoutComment(String(line)))) }
        }
        lines.remove("")
        return lines
    }

    /// The `authflow` command lines of the README's shell blocks, as argument lists after the
    /// program name: lines that start with `authflow`, `swift run authflow` or (in `console`
    /// blocks) `$ authflow`, and every `$(authflow …)`. A trailing `# comment` is dropped.
    static func commands(_ blocks: [Block]) -> [[String]] {
        var commands: [[String]] = []
        for block in blocks where ["sh", "console"].contains(block.language) {
            for raw in block.lines {
                var line = raw.trimmingCharacters(in: .whitespaces)
                if block.language == "console" {
                    guard line.hasPrefix("$ ") else { continue }
                    line.removeFirst(2)
                }
                if let hash = line.range(of: " #") { line = String(line[..<hash.lowerBound]) }
                if let pipe = line.range(of: " | ") { line = String(line[..<pipe.lowerBound]) }  // authflow … | curl -H @- …
                var words = line.split(separator: " ").map(String.init)
                if words.starts(with: ["swift", "run"]) { words.removeFirst(2) }
                if words.first == "authflow" { commands.append(Array(words.dropFirst())) }
                var rest = Substring(line)
                while let start = rest.range(of: "$(authflow ") {
                    let after = rest[start.upperBound...]
                    guard let end = after.firstIndex(of: ")") else { break }
                    commands.append(after[..<end].split(separator: " ").map(String.init))
                    rest = after[end...]
                }
            }
        }
        return commands
    }

    @Test("every Swift line of README.md is compiled by Tests/OAuthFlowTests/Documentation")
    func swiftBlocksAreCompiled() throws {
        let blocks = Self.blocks(try Self.text("README.md")).filter { $0.language == "swift" }
        let compiled = try Self.compiledLines()
        let manifest = try Self.text("Package.swift")
        var checked = 0
        for block in blocks {
            if block.lines.first?.trimmingCharacters(in: .whitespaces) == "// Package.swift" {
                // A dependent's manifest, not our API: each product it names must be one we declare.
                for line in block.lines {
                    for part in line.components(separatedBy: ".product(name: \"").dropFirst() {
                        let product = String(part.prefix { $0 != "\"" })
                        #expect(manifest.contains(".library(name: \"\(product)\""), "README names product \(product), which Package.swift lacks")
                        checked += 1
                    }
                }
                continue
            }
            for line in block.lines {
                let code = Self.squeezed(Self.withoutComment(line))
                guard !code.isEmpty else { continue }
                checked += 1
                #expect(compiled.contains { $0.contains(code) },
                        "README.md's line is not in Tests/OAuthFlowTests/Documentation/*.swift, so no build checks it: \(line)")
            }
        }
        #expect(checked >= 10, "found only \(checked) Swift lines in README.md")
    }

    @Test("every authflow command in README.md's shell blocks parses")
    func commandsParse() throws {
        let commands = Self.commands(Self.blocks(try Self.text("README.md")))
        #expect(commands.count >= 4, "found only \(commands.count) authflow commands in README.md")
        for arguments in commands {
            do {
                _ = try Authflow.parse(arguments)
            } catch {
                Issue.record("README.md: authflow \(arguments.joined(separator: " ")): \(error.message)")
            }
        }
    }

    @Test("the parser check fails for a command or an option the CLI lacks")
    func commandCheckCanFail() throws {
        let markdown = "```sh\nauthflow login github --devise\nauthflow tokens github\n```\n```console\n$ authflow status --all\n```\n"
        let commands = Self.commands(Self.blocks(markdown))
        #expect(commands == [["login", "github", "--devise"], ["tokens", "github"], ["status", "--all"]])
        for arguments in commands {
            #expect(throws: UsageError.self) { try Authflow.parse(arguments) }
        }
        #expect(Self.commands(Self.blocks("```sh\ncurl -H \"Bearer $(authflow token gh)\" x   # note\n```\n")) == [["token", "gh"]])
        #expect(Self.withoutComment(#"let u = "https://x" // c"#) == #"let u = "https://x" "#)
    }

    @Test("README.md's install command uses options scripts/release-build.sh has, and its test command is .ci/run's")
    func scriptsMatch() throws {
        let blocks = Self.blocks(try Self.text("README.md")).filter { $0.language == "sh" }
        let lines = blocks.flatMap(\.lines).map { line in
            (line.range(of: " #").map { String(line[..<$0.lowerBound]) } ?? line).trimmingCharacters(in: .whitespaces)
        }
        let script = try Self.text("scripts/release-build.sh")
        let installs = lines.filter { $0.hasPrefix("scripts/release-build.sh") }
        #expect(installs.contains { $0.contains("--install") }, "README.md shows no scripts/release-build.sh --install")
        for line in installs {
            for option in line.split(separator: " ").dropFirst() where option.hasPrefix("-") {
                #expect(script.contains("    \(option))") || script.contains("|\(option))"),
                        "README.md: scripts/release-build.sh has no option \(option)")
            }
        }
        let ci = try Self.text(".ci/run").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let testCommands = lines.filter { $0.hasPrefix("swift test") }
        #expect(testCommands == ["swift test"], "README.md's test command must be exactly `swift test`")
        #expect(ci.contains("swift test"), ".ci/run no longer runs `swift test`")
    }

    @Test("README.md's catalog loads, strictly, and logs in with the device grant even with a display")
    func catalogLoads() throws {
        let catalogs = Self.blocks(try Self.text("README.md")).filter { $0.language == "json" }
        #expect(catalogs.count == 1)
        for block in catalogs {
            let providers = try ProviderCatalog.load(data: Data(block.lines.joined(separator: "\n").utf8), environment: [:], strict: true)
            #expect(!providers.isEmpty)
            for provider in providers {
                #expect(Context.defaultMethod(provider, environment: ["DISPLAY": ":0"]) == .device)
            }
        }
    }

    @Test("`authflow --help` and CLI.md's table name every AUTHFLOW_ variable the CLI reads")
    func environmentVariablesDocumented() throws {
        let directory = Self.packageRoot.appendingPathComponent("Sources/AuthflowCLI")
        var names: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasSuffix(".swift") {
            let source = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for match in source.matches(of: try Regex("AUTHFLOW_[A-Z_]+")) { names.insert(String(source[match.range])) }
        }
        #expect(names.isSuperset(of: ["AUTHFLOW_CONFIG", "AUTHFLOW_STORE", "AUTHFLOW_DEBUG", "AUTHFLOW_CATALOG_STRICT"]))
        let help = Authflow.helpText(nil)
        let cliDocument = try Self.text("Documentation/CLI.md")
        for name in names.sorted() {
            #expect(help.contains("  \(name) ") || help.contains("  \(name)\n"), "authflow --help does not list \(name)")
            #expect(cliDocument.contains("| `\(name)` |"), "CLI.md's environment table does not list \(name)")
        }
    }
}
