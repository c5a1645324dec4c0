@testable import AuthflowCLI
import Foundation
import Glibc
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow login --paste`: the real binary on a pseudo-terminal (``TerminalSession``), against a
/// scripted authorization server on 127.0.0.1 (``TestHTTPServer``). What is typed goes through the
/// terminal's line discipline, so Ctrl-C is a real SIGINT and Ctrl-D a real end of input; after
/// each run the store on disk is read back.
@Suite("login --paste on a pseudo-terminal: the authflow binary, a loopback server, the store on disk", .timeLimit(.minutes(3)))
struct PasteLoginTerminalTests {
    static let redirect = "http://127.0.0.1:8911/callback"

    /// A paste-back login waiting at its prompt.
    final class Started {
        let directory: TemporaryDirectory
        let server: TestHTTPServer
        let session: TerminalSession
        /// The authorization URL it printed.
        let url: URL
        /// Its `state`.
        let state: String

        init(directory: TemporaryDirectory, server: TestHTTPServer, session: TerminalSession, url: URL, state: String) {
            self.directory = directory
            self.server = server
            self.session = session
            self.url = url
            self.state = state
        }

        /// The redirect the provider would send for this login, with `query` after the `?`.
        func callback(_ query: String) -> String { "\(PasteLoginTerminalTests.redirect)?\(query)" }

        /// Waits for the exit; then stops the server.
        func finish() async -> Int32 {
            let status = await session.wait(timeout: .seconds(60))
            server.stop()
            return status
        }

        /// The lines `authflow: …` of the run, from there on: after an overlong line the terminal
        /// may drop the echo of its line end, so the message can follow the echo on its line.
        var errorLines: [String] {
            session.output.split(separator: "\n").compactMap { line in line.range(of: "authflow: ").map { String(line[$0.lowerBound...]) } }
        }

        func remove() { directory.remove() }
    }

    /// Starts `authflow login gh --paste` on a terminal and waits for its prompt.
    static func start(_ extra: [String] = [], issuer: Bool = false, prompt: String = "Address or code: ") async throws -> Started {
        let directory = try TemporaryDirectory()
        let server = try TestHTTPServer()
        var entry = #"{ "id": "gh", "clientID": "client-gh", "authorizationURL": "\#(server.baseURL)/authorize", "#
            + #""tokenURL": "\#(server.baseURL)/token", "redirectURI": "\#(redirect)", "scopes": ["read"]"#
        if issuer { entry += #", "issuer": "\#(server.baseURL)""# }
        try directory.writeCatalog([entry + " }"])
        server.script("/token", [.token("at-paste-1", refresh: "rt-paste-1")])
        let binary = try #require(Binary.url, "authflow not found; set AUTHFLOW_BINARY")
        let session = try TerminalSession(
            binary, ["--config", directory.config.path, "--store", directory.store.path, "login", "gh", "--paste"] + extra,
            environment: cleanEnvironment(directory))
        #expect(await session.waitFor(prompt), "no prompt; output: \(session.output)")
        let lines = session.output.split(separator: "\n").map(String.init)
        let urlLine: String
        if let json = lines.first(where: { $0.contains(#""state":"authorizing""#) }) {
            urlLine = try #require(record(json)["authorization_url"] as? String)
        } else {
            let index = try #require(lines.firstIndex { $0.hasSuffix("open this URL in a browser:") }, "\(session.output)")
            urlLine = lines[index + 1]
        }
        let url = try #require(URL(string: urlLine))
        let state = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?.value)
        return Started(directory: directory, server: server, session: session, url: url, state: state)
    }

    @Test("a good URL: exit 0, the exact token request (PKCE S256, the catalog's redirect_uri), tokens stored, never printed")
    func goodURL() async throws {
        let login = try await Self.start()
        defer { login.remove() }
        let items = URLComponents(url: login.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.first { $0.name == "redirect_uri" }?.value == Self.redirect)
        #expect(items.first { $0.name == "code_challenge_method" }?.value == "S256")
        #expect(login.session.output.contains("may fail to load, which is expected"))
        login.session.type(login.callback("code=the-code&state=\(login.state)") + "\n")
        #expect(await login.finish() == 0, "\(login.session.output)")
        let sent = try #require(login.server.requests("/token").first)
        #expect(login.server.requests("/token").count == 1)
        let verifier = try #require(sent.form["code_verifier"])
        #expect(sent.form == ["grant_type": "authorization_code", "code": "the-code", "redirect_uri": Self.redirect,
                              "code_verifier": verifier, "client_id": "client-gh"])
        #expect(items.first { $0.name == "code_challenge" }?.value == (try PKCE(verifier: Secret(verifier))).challenge)
        #expect(login.directory.storedKeys == ["gh"])
        #expect(login.session.output.contains("Logged in to gh"))
        #expect(!login.session.output.contains("at-paste-1") && !login.session.output.contains("rt-paste-1"))
    }

    @Test("a bare code, as a provider's page shows it: exchanged, stored")
    func bareCode() async throws {
        let login = try await Self.start()
        defer { login.remove() }
        login.session.type("4/0AdQt8qh-bare.code~\n")
        #expect(await login.finish() == 0, "\(login.session.output)")
        #expect(login.server.requests("/token").first?.form["code"] == "4/0AdQt8qh-bare.code~")
        #expect(login.directory.storedKeys == ["gh"])
    }

    /// A malformed line: its name, the line made from the login, the exit status, the error code printed.
    struct Malformed: Sendable, CustomTestStringConvertible {
        let name: String
        let issuer: Bool
        let line: @Sendable (Started) -> String
        let status: Int32
        let code: String
        var testDescription: String { name }
    }

    static let malformed: [Malformed] = [
        Malformed(name: "wrong state", issuer: false, line: { $0.callback("code=c1&state=forged") }, status: 77, code: "stateMismatch"),
        Malformed(name: "missing state", issuer: false, line: { $0.callback("code=c1") }, status: 77, code: "stateMismatch"),
        Malformed(name: "error answer", issuer: false, line: { $0.callback("error=access_denied&error_description=no&state=\($0.state)") },
                  status: 77, code: "accessDenied"),
        Malformed(name: "mismatched iss", issuer: true, line: { $0.callback("code=c1&state=\($0.state)&iss=https%3A%2F%2Fevil.example") },
                  status: 77, code: "invalidCallback"),
        Malformed(name: "a second code", issuer: false, line: { $0.callback("code=c1&state=\($0.state)&code=c2") }, status: 77,
                  code: "invalidCallback"),
        Malformed(name: "another redirect URI", issuer: false, line: { "http://127.0.0.1:8912/callback?code=c1&state=\($0.state)" },
                  status: 77, code: "invalidCallback"),
        Malformed(name: "a terminal escape", issuer: false, line: { "\u{1B}[31m" + $0.callback("code=c1&state=\($0.state)") },
                  status: 77, code: "invalidCallback"),
        Malformed(name: "a bell and a C1 control", issuer: false, line: { $0.callback("code=c1\u{07}&state=\($0.state)\u{9B}") },
                  status: 77, code: "invalidCallback"),
        // The terminal passes 4095 bytes of a line and drops the rest; authflow refuses a line that fills it.
        Malformed(name: "an overlong line", issuer: false,
                  line: { $0.callback("code=c1&state=\($0.state)&pad=" + String(repeating: "p", count: 20_000)) }, status: 77,
                  code: "invalidCallback"),
    ]

    @Test("each malformed line is a typed error: its exit status and code, no token request, nothing on disk", arguments: malformed)
    func refused(_ malformed: Malformed) async throws {
        let login = try await Self.start(issuer: malformed.issuer)
        defer { login.remove() }
        login.session.type(malformed.line(login) + "\n")
        #expect(await login.finish() == malformed.status, "\(login.session.output)")
        let errors = login.errorLines
        #expect(errors.first?.hasSuffix("[\(malformed.code)]") == true, "\(errors)")
        #expect(errors.allSatisfy { !$0.contains(login.state) && !$0.contains("c1") }, "no secret in the error: \(errors)")
        #expect(login.server.requests("/token").isEmpty)
        #expect(login.directory.storedKeys.isEmpty)
    }

    @Test("Ctrl-C at the prompt: exit 130 at once, nothing stored, no token request")
    func interrupt() async throws {
        let login = try await Self.start()
        defer { login.remove() }
        login.session.type("http://127.0.0.1:8911/call")   // half a line, then Ctrl-C
        login.session.type("\u{03}")
        #expect(await login.finish() == 130, "\(login.session.output)")
        #expect(login.session.output.contains("authflow: interrupted; nothing was stored."))
        #expect(login.server.requests("/token").isEmpty)
        #expect(login.directory.storedKeys.isEmpty)
    }

    @Test("end of input (Ctrl-D) at the prompt: exit 65, nothing stored, no token request")
    func endOfInput() async throws {
        let login = try await Self.start()
        defer { login.remove() }
        login.session.type("\u{04}")
        #expect(await login.finish() == 65, "\(login.session.output)")
        #expect(login.session.output.contains("the input ended before an address or a code was pasted; nothing was stored"))
        #expect(login.server.requests("/token").isEmpty)
        #expect(login.directory.storedKeys.isEmpty)
    }

    @Test("--json on the terminal: the authorizing line names the catalog's redirect_uri; the states end authorized")
    func json() async throws {
        let login = try await Self.start(["--json"], prompt: #""state":"authorizing""#)
        defer { login.remove() }
        login.session.type(login.callback("code=the-code&state=\(login.state)") + "\n")
        #expect(await login.finish() == 0, "\(login.session.output)")
        let records = login.session.output.split(separator: "\n").map(record).filter { $0["state"] != nil }
        #expect(records.map { $0["state"] as? String } == ["authorizing", "requestingAccessToken", "authorized"])
        #expect(records.first?["redirect_uri"] as? String == Self.redirect)
        #expect(!login.session.output.contains("Address or code:"), "no prompt in JSON mode")
        #expect(login.directory.storedKeys == ["gh"])
    }

    @Test("--qr draws the authorization URL; the drawing decodes back to it (zbar)")
    func qrCode() async throws {
        let login = try await Self.start(["--qr"])
        defer { login.remove() }
        let lines = QRCodeTests.drawnLines(login.session.output)
        login.session.type("\u{04}")
        _ = await login.finish()
        try #require(!lines.isEmpty, "no QR code drawn: \(login.session.output)")
        #expect(try await QRCodeTests.decode(lines) == login.url.absoluteString)
    }
}

/// `login --paste` with standard input that is no terminal, and the parts it is made of.
@Suite("login --paste from a pipe, the line reader, --listen-port, the note without a display", .timeLimit(.minutes(2)))
struct PasteLoginTests {
    @Test("from a pipe: the end of input exits 65 and a line that is no URL 77, each after the JSON authorizing line; nothing stored",
          arguments: [("", Int32(65)), ("not a url\n", Int32(77))])
    func pipe(input: String, status: Int32) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try TestHTTPServer()
        defer { server.stop() }
        try directory.writeCatalog([catalogEntry(id: "gh", base: server.baseURL, device: false, browser: true,
                                                 redirectURI: PasteLoginTerminalTests.redirect)])
        let arguments = ["--config", directory.config.path, "--store", directory.store.path, "login", "gh", "--paste", "--json"]
        let run = try await Tool.authflow(arguments, environment: cleanEnvironment(directory), stdin: input)
        #expect(run.status == status, "\(run.stderr)")
        let states = run.stdout.split(separator: "\n").map { record($0)["state"] as? String }
        #expect(states.first == "authorizing")
        if status == 77 { #expect(states.last == "error") }
        #expect(directory.storedKeys.isEmpty)
        #expect(server.requests("/token").isEmpty)
    }

    @Test("--paste without the catalog's redirectURI exits 65 naming it, before anything is sent")
    func needsRedirectURI() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base, device: false, browser: true))
        let run = await h.run(["login", "gh", "--paste"])
        #expect(run.status == .dataError)
        #expect(run.stderr.contains("--paste needs gh's redirectURI in the catalog"))
        #expect(h.mock.requests().isEmpty)
    }

    // MARK: The line reader

    /// A pipe with `text` written to it; its write end closed when `close` says.
    static func pipe(_ text: String, close: Bool) throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        try #require(Glibc.pipe(&ends) == 0)
        let bytes = Array(text.utf8)
        if !bytes.isEmpty { try #require(bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) } == bytes.count) }
        if close { Glibc.close(ends[1]) }
        return (ends[0], close ? -1 : ends[1])
    }

    @Test("a line, a last line without its end, and the end of input", arguments: [
        ("http://x/?a=1\nrest\n", "http://x/?a=1"), ("code-1", "code-1"), ("\r\n", "\r"), ("", nil),
    ] as [(String, String?)])
    func reads(input: String, expected: String?) async throws {
        let fds = try Self.pipe(input, close: true)
        defer { close(fds.read) }
        switch await PastedLine.read(from: fds.read, timeout: .seconds(60)) {
        case .line(let line): #expect(line == expected)
        case .endOfInput: #expect(expected == nil)
        case .failure(let error): Issue.record("\(error)")
        }
    }

    @Test("a line longer than the limit is refused without reading on; one at the limit is read", arguments: [(16, true), (17, false)])
    func limit(length: Int, accepted: Bool) async throws {
        let fds = try Self.pipe(String(repeating: "a", count: length) + "\n", close: false)
        defer { close(fds.read); close(fds.write) }
        let outcome = await PastedLine.read(from: fds.read, timeout: .seconds(60), limit: 16)
        switch outcome {
        case .line(let line): #expect(accepted && line.count == 16)
        case .failure(let error): #expect(!accepted && error.code == .invalidCallback)
        case .endOfInput: Issue.record("end of input")
        }
    }

    @Test("cancelling the task ends the wait with .cancelled; nothing typed, the pipe still open")
    func cancelled() async throws {
        let fds = try Self.pipe("", close: false)
        defer { close(fds.read); close(fds.write) }
        let task = Task { await PastedLine.read(from: fds.read, timeout: .seconds(600)) }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        guard case .failure(let error) = await task.value else { Issue.record("not a failure"); return }
        #expect(error.code == .cancelled)
    }

    @Test("the deadline ends the wait with .timedOut")
    func timedOut() async throws {
        let fds = try Self.pipe("partial", close: false)
        defer { close(fds.read); close(fds.write) }
        guard case .failure(let error) = await PastedLine.read(from: fds.read, timeout: .milliseconds(50)) else {
            Issue.record("not a failure")
            return
        }
        #expect(error.code == .timedOut)
        #expect(ExitCode(error) == .temporaryFailure)
    }

    // MARK: --listen-port and the note

    @Test("--listen-port PORT: the catalog's loopback host and path at PORT, else 127.0.0.1 and /callback", arguments: [
        ("http://127.0.0.1/callback", "http://127.0.0.1:8400/callback"),
        ("http://localhost:8911/cb", "http://localhost:8400/cb"),
        ("https://app.example/cb", "http://127.0.0.1:8400/callback"),
        (nil, "http://127.0.0.1:8400/callback"),
    ] as [(String?, String)])
    func listenRedirect(configured: String?, expected: String) {
        #expect(Context.loopbackRedirect(configured.flatMap(URL.init(string:)), port: 8400)?.absoluteString == expected)
        #expect(Context.loopbackRedirect(configured.flatMap(URL.init(string:)), port: nil)?.absoluteString == configured)
    }

    @Test("--listen-port: the receiver listens on that port, the authorization URL and the exchange name it, and a GET there completes")
    func listenPort() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base, device: false, browser: true, redirectURI: "http://127.0.0.1/callback"))
        h.mock.script(.token, [.token(access: "at-forwarded", refresh: "rt-forwarded")])
        let port = try Self.freePort()
        let (output, stdout, stderr) = Output.capture()
        let task = Task {
            await Authflow.run(arguments: ["login", "gh", "--listen-port", String(port), "--json"], output: output,
                               environment: h.environment, services: h.services())
        }
        var line: [String: Any] = [:]
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, line.isEmpty {
            if let found = stdout.text.split(separator: "\n").first(where: { $0.contains("\"authorizing\"") }) { line = record(found) }
            try await Task.sleep(for: .milliseconds(10))
        }
        let redirect = "http://127.0.0.1:\(port)/callback"
        #expect(line["redirect_uri"] as? String == redirect)
        let url = try #require((line["authorization_url"] as? String).flatMap(URL.init(string:)))
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.first { $0.name == "redirect_uri" }?.value == redirect)
        let state = try #require(items.first { $0.name == "state" }?.value)
        // What the browser on the other machine does through `ssh -L PORT:127.0.0.1:PORT`: a GET of 127.0.0.1:PORT.
        #expect(try await httpGET(try #require(URL(string: "\(redirect)?code=fwd&state=\(state)"))).status == 200)
        #expect(await task.value == .success, "\(stderr.text)")
        #expect(h.mock.requests(.token).map { $0.form["redirect_uri"] } == [redirect])
        #expect(h.directory.storedKeys == ["gh"])
    }

    @Test("the browser login chosen with no display says --paste or a forwarded --listen-port fits; not when asked for or with a display",
          arguments: [([String](), [String: String](), true), (["--browser"], [:], false), ([], ["DISPLAY": ":0"], false)])
    func elsewhereNote(arguments: [String], environment: [String: String], noted: Bool) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let port = try Self.freePort()
        try h.catalog(catalogEntry(id: "gh", base: h.base, device: false, browser: true, redirectURI: "http://127.0.0.1:\(port)/callback"))
        let run = await h.run(["login", "gh", "--timeout", "1"] + arguments, environment: environment)
        #expect(run.status == .temporaryFailure)
        let note = "note: there is no display here (DISPLAY and WAYLAND_DISPLAY are unset), and gh has no device endpoint for --device. "
            + "If your browser runs on another machine, its redirect to http://127.0.0.1:\(port)/callback cannot reach this one: press "
            + "Ctrl-C and run 'authflow login gh --paste' to paste the address back instead, or forward the port from that machine "
            + "(ssh -L \(port):127.0.0.1:\(port) THIS-HOST) and run 'authflow login gh --listen-port \(port)'.\n"
        #expect(run.stderr.contains(note) == noted, "\(run.stderr)")
    }

    @Test("the note without a catalog redirectURI names what --paste needs, and PORT for an ephemeral port")
    func elsewhereNoteWithoutRedirect() {
        let provider = Provider(id: "gl", authorizationURL: URL(string: "https://gl.example/authorize"),
                                tokenURL: URL(string: "https://gl.example/token"), clientID: "c")
        let note = Context.elsewhereNote(provider, listeningOn: URL(string: "http://127.0.0.1:41237/callback")!, fixedPort: false)
        #expect(note.contains("add the redirectURI registered with gl to the catalog to log in with --paste"))
        #expect(note.contains("ssh -L PORT:127.0.0.1:PORT THIS-HOST") && note.contains("--listen-port PORT"))
    }

    /// A port that was free on 127.0.0.1 a moment ago.
    static func freePort() throws -> Int {
        let (fd, port) = try LoopbackSocket.bind(backlog: 1, reuseAddress: true)
        close(fd)
        return Int(port)
    }
}
