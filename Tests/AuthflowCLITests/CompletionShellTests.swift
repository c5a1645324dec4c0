@testable import AuthflowCLI
import Foundation
import TestSupport
import Testing

/// The completion scripts the built `authflow` prints, run in the shells they are for: bash's
/// completion function called with `COMP_WORDS`/`COMP_CWORD` set, an interactive zsh (`compinit`,
/// the script installed as `_authflow` in `$fpath`) driven through `zsh/zpty` with a Tab after each
/// line, and fish's `complete -C` with the script on `fish_complete_path`. For every command of the
/// table, each shell must offer exactly the command's options and the global ones before its
/// arguments and after each of them, and the provider ids of the catalog the line names.
/// Documentation/Testing.md, "Completions in real shells", says how the shells are driven.
@Suite("completions in real shells: bash's function, zsh under zpty with compinit, fish's complete -C", .timeLimit(.minutes(3)))
struct CompletionShellTests {
    @Test("bash offers every option of every command before and after its arguments, and the named catalog's ids",
          .enabled(if: ShellRig.available("bash"), "bash is not installed (with CI=true this fails instead)"))
    func bash() async throws { try await check(.bash) }

    @Test("zsh (compinit, _authflow in $fpath) offers every option of every command before and after its arguments, and the named catalog's ids",
          .enabled(if: ShellRig.available("zsh"), "zsh is not installed (with CI=true this fails instead)"))
    func zsh() async throws { try await check(.zsh) }

    @Test("fish offers every option of every command before and after its arguments, and the named catalog's ids",
          .enabled(if: ShellRig.available("fish"), "fish is not installed (with CI=true this fails instead)"))
    func fish() async throws { try await check(.fish) }

    private func check(_ shell: Completion.Shell) async throws {
        let rig = try await ShellRig(shell)
        defer { rig.directory.remove() }
        let tabs = Tab.all(rig)
        let offered = try await rig.complete(tabs)
        for (tab, offered) in zip(tabs, offered) {
            let missing = tab.required.subtracting(offered).sorted()
            let extra = offered.subtracting(tab.required).subtracting(tab.allowed).sorted()
            #expect(missing.isEmpty && extra.isEmpty, "\(shell): \(tab): missing \(missing), unexpected \(extra)")
        }
    }

    @Test("zsh: the script loaded with source <(authflow completion zsh) after compinit completes as the installed one does",
          .enabled(if: ShellRig.available("zsh"), "zsh is not installed (with CI=true this fails instead)"))
    func zshSourced() async throws {
        let rig = try await ShellRig(.zsh)
        defer { rig.directory.remove() }
        let tabs = [
            Tab(["login", "--d"], ["--device"]),
            Tab(["lo"], ["login", "logout"]),
            Tab(["--config", rig.namedCatalog, "token", ""], Set(ShellRig.namedIDs)),
        ]
        let offered = try await rig.complete(tabs, zshSourced: true)
        for (tab, offered) in zip(tabs, offered) { #expect(offered == tab.required, "\(tab)") }
    }

    @Test("help COMMAND lists exactly the table's options, and help the global ones (the tabs above come from the table)")
    func helpMatchesTable() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let environment = ["PATH": "/usr/bin:/bin", "HOME": directory.path]
        /// The option names of the option lines (`  --name …`, `  -h, --help …`) of a help text.
        func listed(_ text: String) -> Set<String> {
            Set(text.split(separator: "\n").compactMap { line -> String? in
                guard line.hasPrefix("  -") else { return nil }
                return line.split(separator: " ").first { $0.hasPrefix("--") }.map { String($0.split(separator: "=")[0]) }
            })
        }
        let overview = try await Tool.authflow(["help"], environment: environment)
        let options = try #require(overview.stdout.components(separatedBy: "\nOptions:\n").last?.components(separatedBy: "\n\n").first)
        #expect(listed(options) == Set(Authflow.globalOptions.map(\.name)))
        for spec in Authflow.commands {
            let help = try await Tool.authflow(["help", spec.name], environment: environment)
            #expect(help.status == 0)
            #expect(listed(help.stdout) == spec.optionNames, "help \(spec.name)")
        }
    }
}

/// One Tab press: the words after `authflow` (the last one is being completed), what must be
/// offered, and what may be offered besides.
struct Tab: CustomStringConvertible, Sendable {
    var words: [String]
    var required: Set<String>
    var allowed: Set<String> = []

    init(_ words: [String], _ required: Set<String>, allowed: Set<String> = []) {
        self.words = words
        self.required = required
        self.allowed = allowed
    }

    var description: String { "authflow " + words.map { $0.isEmpty ? "''" : $0 }.joined(separator: " ") + "<Tab>" }

    /// The long names a shell offers for `--` after `command`: its options and the global ones.
    static func options(_ spec: CommandSpec?) -> Set<String> {
        Set((Completion.globals + (spec?.options ?? [])).filter { !$0.isAlternativeForm }.map(\.name))
    }

    /// A word for each positional of `spec`: a provider id, the first choice, a command, or a URL
    /// (which bash splits at its colons).
    static func sample(_ spec: CommandSpec) -> [String] {
        (0..<spec.positionals.upperBound).map { index in
            switch Completion.positional(spec, index) {
            case .providers: return "gh"
            case .words(let words): return words[0]
            case .commands: return "login"
            case .none, .files, .directories: return "https://issuer.example:8443/p"
            }
        }
    }

    /// What must be offered at positional `index` of `spec`, provider ids from a catalog of `ids`.
    static func positional(_ spec: CommandSpec, _ index: Int, catalog ids: [String]) -> Set<String> {
        switch Completion.positional(spec, index) {
        case .providers: return Set(ids)
        case .words(let words): return Set(words)
        case .commands: return Set(Authflow.commands.map(\.name))
        case .none, .files, .directories: return []
        }
    }

    /// Every Tab the shells are tested with, made from the command table.
    static func all(_ rig: ShellRig) -> [Tab] {
        let globals = options(nil)
        var tabs = [
            Tab([""], Set(Authflow.commands.map(\.name))),
            Tab(["-"], Set(Completion.globalNames)),
            Tab(["--"], globals),
            Tab(["--config", rig.namedCatalog, "lo"], ["login", "logout"]),
            // The issue's lines.
            Tab(["login", "--d"], ["--device"]),
            Tab(["token", "--h"], ["--header", "--help"]),
            Tab(["agent", "--so"], ["--socket"]),
            // zsh offers an option again only when it is repeatable; the others offer any option again.
            Tab(["login", "--scope", "read", "gh", "--"], options(Authflow.command("login"))),
            Tab(["--config", rig.namedCatalog, "login", "--"], options(Authflow.command("login")).subtracting(["--config"]),
                allowed: ["--config"]),
            // The catalog named on the line, however it is spelled and wherever it stands.
            Tab(["--config=\(rig.namedCatalog)", "token", ""], Set(ShellRig.namedIDs)),
            Tab(["token", "--config", rig.namedCatalog, ""], Set(ShellRig.namedIDs)),
            Tab(["--config", "~/named.json", "token", ""], Set(ShellRig.namedIDs)),
            Tab(["--config", "'\(rig.directory.path)/named copy.json'", "token", ""], Set(ShellRig.namedIDs)),
            // Values are not positionals: not a provider id for --scope, but one after it (bash splits at '=' and ':').
            Tab(["login", "--scope", ""], []),
            Tab(["login", "--scope", "repo:status", ""], Set(ShellRig.defaultIDs)),
            Tab(["login", "--scope=read", ""], Set(ShellRig.defaultIDs)),
        ]
        for spec in Authflow.commands {
            let sample = sample(spec)
            // Its options before its arguments, after each of them, and after a global option.
            for count in 0...sample.count {
                tabs.append(Tab([spec.name] + sample.prefix(count) + ["--"], options(spec)))
            }
            // What each positional takes; provider ids from the default catalog, then from the one named.
            for index in sample.indices {
                let before = [spec.name] + sample.prefix(index) + [""]
                tabs.append(Tab(before, positional(spec, index, catalog: ShellRig.defaultIDs)))
                if Completion.positional(spec, index) == .providers {
                    tabs.append(Tab(["--config", rig.namedCatalog] + before, positional(spec, index, catalog: ShellRig.namedIDs)))
                }
            }
            for option in spec.options where option.value != nil { tabs.append(value(of: option, after: [spec.name], rig)) }
        }
        for option in Completion.globals where option.value != nil {
            tabs.append(value(of: option, after: [], rig))
            tabs.append(value(of: option, after: ["token", "gh"], rig))
        }
        return tabs
    }

    /// The Tab for `option`'s value: files or directories under the rig's `pick` directory, or nothing.
    static func value(of option: OptionSpec, after words: [String], _ rig: ShellRig) -> Tab {
        switch option.valueCandidates {
        case .files: return Tab(words + [option.name, rig.pick + "/a"], ["a-file.json", "a-dir"])
        case .directories: return Tab(words + [option.name, rig.pick + "/a"], ["a-dir"])
        default: return Tab(words + [option.name, ""], [])
        }
    }
}

/// A private directory for one shell: a home, XDG and zsh dot directories, two catalogs (the default
/// one, `AUTHFLOW_CONFIG`, and one the lines name with `--config`), a `pick` directory with a file and
/// a directory for the value Tabs, and the script the built `authflow` prints.
struct ShellRig {
    static let defaultIDs = ["home-a", "home.b"]
    static let namedIDs = ["gh", "corp.k8s", "unset-secret"]

    /// True when `shell` is on PATH; in CI (`CI` set, not `0`/`false`) always, so a missing shell fails there.
    static func available(_ shell: String) -> Bool {
        let ci = (ProcessInfo.processInfo.environment["CI"] ?? "").lowercased()
        return Tool.find(shell) != nil || !(ci.isEmpty || ci == "0" || ci == "false")
    }

    let shell: Completion.Shell
    let program: String
    let directory: TemporaryDirectory
    let script: URL

    var home: String { directory.path + "/home" }
    var namedCatalog: String { directory.path + "/named.json" }
    var pick: String { directory.path + "/pick" }

    init(_ shell: Completion.Shell) async throws {
        self.shell = shell
        program = try #require(Tool.find(shell.rawValue), "\(shell.rawValue) is not installed: .ci/run installs it (apt-get install \(shell.rawValue))")
        let directory = try TemporaryDirectory("authflow-completion")
        self.directory = directory
        let home = directory.path + "/home", pick = directory.path + "/pick", namedCatalog = directory.path + "/named.json"
        let files = FileManager.default
        for sub in ["home", "xdg-config", "xdg-data", "xdg-cache", "xdg-state", "zdotdir", "fpath", "pick/a-dir"] {
            try files.createDirectory(atPath: directory.path + "/" + sub, withIntermediateDirectories: true)
        }
        try Data("{}\n".utf8).write(to: URL(fileURLWithPath: pick + "/a-file.json"))
        func catalog(_ ids: [String]) -> Data {
            // The last entry's secret names a variable nobody sets: listing ids must not resolve it.
            Data(("[" + ids.enumerated().map { index, id in
                #"{"id": "\#(id)", "clientID": "c", "tokenURL": "https://example.com/token""#
                    + (index == ids.count - 1 ? #", "clientSecretEnv": "AUTHFLOW_TEST_NOT_SET""# : "") + "}"
            }.joined(separator: ",\n") + "]\n").utf8)
        }
        try catalog(Self.namedIDs).write(to: URL(fileURLWithPath: namedCatalog))
        try catalog(Self.namedIDs).write(to: URL(fileURLWithPath: home + "/named.json"))
        try catalog(Self.namedIDs).write(to: URL(fileURLWithPath: directory.path + "/named copy.json"))
        try catalog(Self.defaultIDs).write(to: URL(fileURLWithPath: directory.path + "/default.json"))
        // The script as the built binary prints it (what users install).
        let printed = try await Tool.run(try #require(Binary.url, "authflow is not built").path, ["completion", shell.rawValue],
                                         environment: ["PATH": "/usr/bin:/bin", "HOME": home], timeout: .seconds(60))
        #expect(printed.status == 0 && printed.stdout == Completion.script(for: shell))
        let location: String
        switch shell {
        case .bash: location = "authflow.bash"
        case .zsh: location = "fpath/_authflow"
        case .fish: location = "fpath/authflow.fish"
        }
        script = directory.url.appendingPathComponent(location)
        try Data(printed.stdout.utf8).write(to: script)
    }

    /// The shell's environment: nothing of the developer's; `authflow` (the built one) first on PATH.
    var environment: [String: String] {
        let binary = Binary.url?.deletingLastPathComponent().path ?? "/nonexistent"
        return [
            "PATH": "\(binary):/usr/bin:/bin", "HOME": home, "ZDOTDIR": directory.path + "/zdotdir",
            "XDG_CONFIG_HOME": directory.path + "/xdg-config", "XDG_DATA_HOME": directory.path + "/xdg-data",
            "XDG_CACHE_HOME": directory.path + "/xdg-cache", "XDG_STATE_HOME": directory.path + "/xdg-state",
            "AUTHFLOW_CONFIG": directory.path + "/default.json", "AUTHFLOW_STORE": directory.path + "/store",
            "TERM": "dumb", "LC_ALL": "C.UTF-8",
        ]
    }

    /// What the shell offers at each Tab, in order (each candidate's last path component, so that a
    /// file is named the same in every shell); one shell process for all of them.
    func complete(_ tabs: [Tab], zshSourced: Bool = false) async throws -> [Set<String>] {
        let output: String
        switch shell {
        case .bash: output = try await runBash(tabs)
        case .zsh: output = try await runZsh(tabs, sourced: zshSourced)
        case .fish: output = try await runFish(tabs)
        }
        // Sections: "<<TAB n>>", the candidates one a line, "<<END n>>".
        var answers = [Set<String>?](repeating: nil, count: tabs.count)
        var current: Int?
        var candidates: Set<String> = []
        for line in output.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("<<TAB "), let n = Int(line.dropFirst(6).dropLast(2)) {
                current = n
                candidates = []
            } else if line.hasPrefix("<<END "), let n = current, tabs.indices.contains(n) {
                answers[n] = candidates
                current = nil
            } else if current != nil {
                let word = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)[0]
                let name = word.split(separator: "/").last.map(String.init) ?? String(word)
                if !name.isEmpty { candidates.insert(name) }
            }
        }
        let unanswered = answers.indices.filter { answers[$0] == nil }
        try #require(unanswered.isEmpty, "\(shell) answered no Tab \(unanswered.prefix(5).map { tabs[$0].description }); output:\n\(output.suffix(2000))")
        return answers.map { $0 ?? [] }
    }

    /// Single quotes for bash, zsh and fish (a `'` closed, escaped, reopened in bash and zsh; escaped in fish).
    private func quoted(_ word: String) -> String {
        shell == .fish ? "'" + word.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
            : "'" + word.replacing("'", with: "'\\''") + "'"
    }

    private func run(_ arguments: [String]) async throws -> String {
        let run = try await Tool.run(program, arguments, environment: environment, directory: URL(fileURLWithPath: home), timeout: .seconds(120))
        try #require(run.status == 0, "\(shell) exited \(run.status) (-1: killed after 120 s): \(run.stderr)\n\(run.stdout.suffix(2000))")
        #expect(run.stderr.isEmpty, "\(shell) wrote to stderr: \(run.stderr)")
        return run.stdout
    }

    /// bash: the words split as readline splits them (at `=` and `:`, each its own word), then
    /// `_authflow authflow CUR PREV` with `COMP_WORDS`, `COMP_CWORD`, `COMP_LINE` and `COMP_POINT` set.
    private func runBash(_ tabs: [Tab]) async throws -> String {
        var probe = """
        source \(quoted(script.path))
        complete -p authflow >/dev/null || exit 3
        t() {
            local n=$1; shift
            COMP_WORDS=(authflow "$@"); COMP_CWORD=$#; COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
            _authflow authflow "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            echo "<<TAB $n>>"; (( ${#COMPREPLY[@]} )) && printf '%s\\n' "${COMPREPLY[@]}"; echo "<<END $n>>"
        }

        """
        for (n, tab) in tabs.enumerated() {
            let words = tab.words.enumerated().flatMap { index, word in Self.readlineWords(word, last: index == tab.words.count - 1) }
            probe += "t \(n) " + words.map(quoted).joined(separator: " ") + "\n"
        }
        return try await run(["--norc", "--noprofile", "-c", probe])
    }

    /// How readline splits `word` at the word-break characters `=` and `:`: each its own word
    /// (`--config=F` is `--config`, `=`, `F`); the word being completed keeps a trailing break as itself.
    static func readlineWords(_ word: String, last: Bool) -> [String] {
        var words: [String] = []
        var current = ""
        for character in word {
            if character == "=" || character == ":" {
                if !current.isEmpty { words.append(current) }
                words.append(String(character))
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty || words.isEmpty || (last && word.isEmpty) { words.append(current) }
        return words
    }

    /// fish: the script on `fish_complete_path` (where fish autoloads it, as from
    /// ~/.config/fish/completions), then `complete -C LINE` for each Tab.
    private func runFish(_ tabs: [Tab]) async throws -> String {
        var probe = """
        set -p fish_complete_path \(quoted(script.deletingLastPathComponent().path))
        function t
            echo "<<TAB $argv[1]>>"
            complete -C $argv[2]
            echo "<<END $argv[1]>>"
        end

        """
        for (n, tab) in tabs.enumerated() { probe += "t \(n) \(quoted("authflow " + tab.words.joined(separator: " ")))\n" }
        return try await run(["--no-config", "-c", probe])
    }

    /// zsh: a driver zsh starts an interactive `zsh -f -i` on a pseudo-terminal (`zsh/zpty`), which
    /// sources an rc that runs `compinit` with the script's directory first in `$fpath` (or sources
    /// the script after `compinit`), wraps `compadd` so that every match it adds is also written to a
    /// file, and binds Tab to a widget that runs `complete-word` between two markers and clears the
    /// line. The driver types each line and a Tab and waits (at most 20 s) for the widget's marker.
    private func runZsh(_ tabs: [Tab], sourced: Bool) async throws -> String {
        let hits = directory.path + "/zsh-hits"
        let errors = directory.path + "/zsh-errors"
        let load = sourced
            ? "autoload -Uz compinit && compinit -u -d $ZDOTDIR/.zcompdump\nsource \(quoted(script.path))"
            : "fpath=(\(quoted(script.deletingLastPathComponent().path)) $fpath)\nautoload -Uz compinit && compinit -u -d $ZDOTDIR/.zcompdump"
        let rc = """
        PS1='%% ' RPS1='' PS2=''
        zle_bracketed_paste=()
        # No listing on the terminal and no question asked: the matches go to the file.
        unsetopt autolist listbeep beep
        \(load)
        compadd() {
            # Calls that only ask for the matches (-O, -A, -D) are the completion system's own.
            if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd "$@"; return; fi
            local -a hits
            builtin compadd -A hits "$@"
            (( $#hits )) && print -rl -- ${hits/#/HIT:} >> \(quoted(hits))
            builtin compadd "$@"
        }
        integer probes=-1
        probe() {
            (( ++probes ))
            print -r -- "<<TAB $probes>>" >> \(quoted(hits))
            zle complete-word 2>> \(quoted(errors))
            print -r -- "<<END $probes>>" >> \(quoted(hits))
            BUFFER='' CURSOR=0
            print -n -- "<<DONE $probes>>"
        }
        zle -N probe
        bindkey '^I' probe
        print -r -- '<<READY>>'

        """
        let driver = """
        zmodload zsh/zpty zsh/system || exit 3
        zpty z zsh -f -i || exit 3
        integer fd=$REPLY n=-1
        seen=''
        # Reads the terminal until its output holds $1, for at most 20 s.
        await() {
            local chunk
            integer deadline=$(( SECONDS + 20 )) code
            while [[ $seen != *"$1"* ]]; do
                if (( SECONDS >= deadline )); then print -r -- "zsh did not print $1 within 20 s; its terminal: ${seen[-2000,-1]}"; exit 4; fi
                sysread -t 1 -i $fd chunk
                code=$?
                (( code == 0 )) && seen+=$chunk
                if (( code == 5 )); then print -r -- "zsh exited; its terminal: ${seen[-2000,-1]}"; exit 5; fi
            done
            seen=${seen#*"$1"}
        }
        zpty -w z "source \(quoted(directory.path + "/zsh-rc"))"
        await '<<READY>>'
        for line in "${(@f)$(<\(quoted(directory.path + "/zsh-lines")))}"; do
            zpty -w -n z "$line"$'\\t'
            await "<<DONE $(( ++n ))>>"
        done
        zpty -d z

        """
        try Data(rc.utf8).write(to: URL(fileURLWithPath: directory.path + "/zsh-rc"))
        try Data(tabs.map { "authflow " + $0.words.joined(separator: " ") + "\n" }.joined().utf8)
            .write(to: URL(fileURLWithPath: directory.path + "/zsh-lines"))
        try Data().write(to: URL(fileURLWithPath: hits))
        try Data().write(to: URL(fileURLWithPath: errors))
        let transcript = try await run(["-f", "-c", driver])
        let errorText = try String(contentsOfFile: errors, encoding: .utf8)
        #expect(errorText.isEmpty, "zsh's completion wrote errors: \(errorText)")
        let found = try String(contentsOfFile: hits, encoding: .utf8)
        try #require(!found.isEmpty, "zsh recorded nothing; its driver printed: \(transcript.suffix(2000))")
        return found.split(separator: "\n").map { $0.hasPrefix("HIT:") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
    }
}
