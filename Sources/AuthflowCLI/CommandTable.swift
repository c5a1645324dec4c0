/// One option of a command, or a global option: what the parser accepts and what `help`, the
/// completions and the man page say about it.
struct OptionSpec: Sendable {
    /// The long name, as typed: `--json`.
    var name: String
    /// The short name, when there is one: `-h`.
    var short: String?
    /// The value's placeholder (`FILE`, `S`); nil for a flag. It also says what the completions offer
    /// for the value: files for `FILE` and `PATH`, directories for `DIR` (``valueCandidates``).
    var value: String?
    /// One line per line of help text. "(repeatable)" in it marks an option that may be given more
    /// than once (``isRepeatable``; a test checks the parser keeps every value of exactly those).
    var help: [String]
    /// What `help` shows in the option column, when not `[short, ]name[ value]` (a second form of an option).
    var label: String?
    /// True for a line that only documents another form of an option already listed (`--store postgresql://…`).
    var isAlternativeForm = false

    init(_ name: String, short: String? = nil, value: String? = nil, label: String? = nil, alternativeForm: Bool = false, _ help: String...) {
        self.name = name
        self.short = short
        self.value = value
        self.label = label
        self.isAlternativeForm = alternativeForm
        self.help = help
    }

    /// `-h, --help`, `--scope S`.
    var displayLabel: String { label ?? ((short.map { "\($0), " } ?? "") + name + (value.map { " \($0)" } ?? "")) }
    /// The help text as one line, for completions and the man page.
    var summary: String { help.joined(separator: " ") }
}

/// One `authflow` command: the single place `help`, the parser (its options and how many
/// positionals), the shell completions (``Completion``) and the man page (``ManPage``) read.
///
/// Adding a command: one entry in ``Authflow/commands``, then its `Command` case, its `case` in
/// ``Authflow/parse(_:)`` and in ``Authflow/execute(_:output:environment:services:)``; help, the man
/// page and the three completion scripts need nothing more. Adding an option: one ``OptionSpec`` in
/// its command's entry, then read it in that command's `case` of ``Authflow/parse(_:)``. The parser
/// refuses an option the entry lacks, and CommandTableTests fails for an option the parse case never
/// reads and for one the parser takes that no entry lists.
struct CommandSpec: Sendable {
    /// The name as typed.
    var name: String
    /// What follows `authflow` in its usage line.
    var usage: String
    /// The command's line in the overview's list: its name and arguments.
    var synopsis: String
    /// The overview's one-line description.
    var summary: String
    /// The positional arguments' names (`PROVIDER`, `ACTION`), in order, for the man page.
    var positionalNames: [String]
    /// How many positionals it takes.
    var positionals: ClosedRange<Int>
    /// True when the first positional is a provider id of the catalog (the completions offer them).
    var takesProvider: Bool
    /// Words the completions offer for the second positional (a git action) or the first when it is no provider (a shell).
    var positionalChoices: [String]
    /// The help text before the options.
    var about: String
    /// Its options, in the order `help` lists them.
    var options: [OptionSpec]
    /// The column where the options' help starts in `help COMMAND` (default: 4 past the widest label, at least 8).
    var optionWidth: Int?
    /// The help text after the options.
    var notes: String?

    init(
        _ name: String, usage: String, synopsis: String, summary: String, positionalNames: [String] = [],
        positionals: ClosedRange<Int> = 0...0, takesProvider: Bool = false, positionalChoices: [String] = [], about: String,
        options: [OptionSpec] = [], optionWidth: Int? = nil, notes: String? = nil
    ) {
        self.name = name
        self.usage = usage
        self.synopsis = synopsis
        self.summary = summary
        self.positionalNames = positionalNames
        self.positionals = positionals
        self.takesProvider = takesProvider
        self.positionalChoices = positionalChoices
        self.about = about
        self.options = options
        self.optionWidth = optionWidth
        self.notes = notes
    }

    /// The names of its options, as the parser accepts them.
    var optionNames: Set<String> { Set(options.map(\.name)) }
}
