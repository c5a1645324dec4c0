@testable import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// The device login's QR code: drawn with half blocks from libqrencode (dlopen), decoded back with zbar.
@Suite("authflow login QR code", .timeLimit(.minutes(2)))
struct QRCodeTests {
    static let complete = "https://example.com/device?user_code=WDJB-MJHT"

    /// The QR lines of `text`: ANSI colour removed, only lines made of the four half-block characters.
    static func drawnLines(_ text: String) -> [String] {
        text.replacing(#/\x{1B}\[[0-9;]*m/#, with: "").split(separator: "\n").map(String.init)
            .filter { $0.count >= 21 && $0.allSatisfy { "█▀▄ ".contains($0) } && $0.contains("█") }
    }

    /// Decodes drawn lines with zbarimg: each character is two modules, one above the other; a
    /// light module is white. Written as a PBM at 4 pixels a module.
    static func decode(_ lines: [String]) async throws -> String? {
        let zbarimg = try #require(Tool.find("zbarimg"), "zbarimg is not installed (apt-get install zbar-tools)")
        var rows: [[Bool]] = []  // true: dark
        for line in lines {
            var upper: [Bool] = []
            var lower: [Bool] = []
            for character in line {
                upper.append(character == "▄" || character == " ")
                lower.append(character == "▀" || character == " ")
            }
            rows += [upper, lower]
        }
        let scale = 4
        let width = (rows.first?.count ?? 0) * scale
        var pbm = "P1\n\(width) \(rows.count * scale)\n"
        for row in rows {
            let line = row.flatMap { Array(repeating: $0 ? "1" : "0", count: scale) }.joined(separator: " ") + "\n"
            pbm += String(repeating: line, count: scale)
        }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let image = directory.url.appendingPathComponent("code.pbm")
        try Data(pbm.utf8).write(to: image)
        let run = try await Tool.run(zbarimg, ["--raw", "-q", image.path], environment: ["PATH": "/usr/bin:/bin"])
        return run.status == 0 ? run.stdout.trimmingCharacters(in: .newlines) : nil
    }

    func login(_ arguments: [String], environment: [String: String] = [:], terminal: Bool, complete: String? = QRCodeTests.complete) async throws
        -> (status: ExitCode, stdout: String, stderr: String)
    {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.deviceCode(user: "WDJB-MJHT", complete: complete, interval: 5)])
        h.mock.script(.token, [.token(access: "at-qr", refresh: "rt-qr")])
        return await h.run(["login", "gh", "--device"] + arguments, environment: environment, terminal: terminal)
    }

    @Test("--qr draws the link after the plain URL and code; the drawing decodes back to the exact URL (zbar)")
    func forcedDecodes() async throws {
        let run = try await login(["--qr"], terminal: false)
        #expect(run.status == .success, "\(run.stderr)")
        #expect(run.stdout.contains("WDJB-MJHT") && run.stdout.contains(Self.complete), "the text is still shown")
        let lines = Self.drawnLines(run.stderr)
        try #require(!lines.isEmpty, "no QR code drawn")
        #expect(!run.stderr.contains("\u{1B}"), "no colour on a non-terminal")
        #expect(Set(lines.map(\.count)).count == 1)
        // The quiet zone: 4 light modules on every side (a first line all light on top, 4 columns each side).
        #expect(lines[0].allSatisfy { $0 == "█" } && lines[1].allSatisfy { $0 == "█" })
        #expect(lines.allSatisfy { $0.hasPrefix("████") && $0.hasSuffix("████") })
        #expect(try await Self.decode(lines) == Self.complete)
    }

    @Test("on a terminal wide enough, with colour allowed, it is drawn by default, white on black, and decodes")
    func terminalDefault() async throws {
        let run = try await login([], environment: ["COLUMNS": "200", "TERM": "xterm-256color"], terminal: true)
        #expect(run.status == .success, "\(run.stderr)")
        #expect(run.stderr.contains("\u{1B}[40;97m"))
        let lines = Self.drawnLines(run.stderr)
        try #require(!lines.isEmpty, "no QR code drawn")
        #expect(try await Self.decode(lines) == Self.complete)
    }

    @Test("not drawn: not a terminal, --no-qr, NO_COLOR, TERM=dumb, a terminal narrower than the code, no verification_uri_complete", arguments: [
        ([String](), ["COLUMNS": "200"], false, true),
        (["--no-qr"], ["COLUMNS": "200"], true, true),
        ([], ["COLUMNS": "200", "NO_COLOR": "1"], true, true),
        ([], ["COLUMNS": "200", "TERM": "dumb"], true, true),
        ([], ["COLUMNS": "30"], true, true),
        (["--qr"], ["COLUMNS": "200"], true, false),
    ])
    func notDrawn(arguments: [String], environment: [String: String], terminal: Bool, hasComplete: Bool) async throws {
        let run = try await login(arguments, environment: environment, terminal: terminal, complete: hasComplete ? Self.complete : nil)
        #expect(run.status == .success, "\(run.stderr)")
        #expect(Self.drawnLines(run.stderr).isEmpty)
        #expect(!run.stderr.contains("▀") && !run.stderr.contains("▄"))
    }

    @Test("--qr and --no-qr exclude each other")
    func exclusive() throws {
        #expect(throws: UsageError("choose one of --qr, --no-qr", command: "login")) { try Authflow.parse(["login", "gh", "--qr", "--no-qr"]) }
        #expect(try Authflow.parse(["login", "gh", "--no-qr"]).command == .login(LoginOptions(provider: "gh", qr: false)))
    }

    @Test("without libqrencode: the text, and a note where the code would have been drawn")
    func noLibrary() throws {
        #expect(QREncoder.load(["libqrencode-does-not-exist.so.9"]) == nil)
        #expect(QREncoder.shared != nil, "libqrencode4 is installed here (apt-get install libqrencode4)")
        let note = " no QR code: libqrencode.so.4 could not be loaded (Debian: apt-get install libqrencode4; --no-qr hides this note)\n"
        // (--qr or --no-qr or neither, stderr a terminal, what stderr then shows)
        let cases: [(Bool?, Bool, String)] = [
            (true, false, "note:" + note),
            (nil, true, "\u{1B}[33mnote:\u{1B}[0m" + note),
            (false, true, ""),
            (nil, false, ""),
        ]
        for (forced, terminal, said) in cases {
            let (output, stdout, stderr) = Output.capture(stderrIsTerminal: terminal)
            let context = Context(invocation: Invocation(command: .demo), output: output, environment: ["COLUMNS": "200"], services: .init())
            #expect(context.qrCode(Self.complete, forced: forced, encoder: nil, provider: "gh") == nil)
            #expect(stdout.text.isEmpty)
            #expect(stderr.text == said, "--qr: \(String(describing: forced)), terminal: \(terminal)")
        }
    }
}
