@testable import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow git-credential`: the protocol in-process, then the real git against a loopback git server.
@Suite("authflow git-credential", .timeLimit(.minutes(3)))
struct GitCredentialTests {
    static let https = "protocol=https\nhost=git.example.com\npath=org/repo.git\n\n"

    @Test("the input is key=value lines up to a blank line; the first of a repeated key wins")
    func parsing() {
        let request = GitCredentialRequest(parsing: "protocol=https\r\nhost=h:8443\nhost=other\nnoequals\npassword=a=b\n\nusername=late\n")
        #expect(request.attributes == ["protocol": "https", "host": "h:8443", "password": "a=b"])
    }

    @Test("a token only for https, or http to a loopback host", arguments: [
        ("https", "git.example.com", true), ("http", "127.0.0.1:8080", true), ("http", "localhost", true), ("http", "[::1]:80", true),
        ("http", "repo.localhost:9", true), ("http", "git.example.com", false), ("http", "127.0.0.1.evil.example", false),
        ("http", "localhost.evil.example", false), ("ftp", "localhost", false), ("", "git.example.com", false),
    ])
    func onlySafeURLs(scheme: String, host: String, allowed: Bool) {
        #expect(GitCredentialRequest(parsing: "protocol=\(scheme)\nhost=\(host)\n").allowsToken == allowed)
    }

    @Test("get answers username oauth2 (or the catalog's gitUsername), the token and its expiry; nothing else on stdout")
    func get() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base), #"{ "id": "gl", "clientID": "c", "tokenURL": "\#(h.base)/token", "#
                      + #""deviceAuthorizationURL": "\#(h.base)/device/code", "gitUsername": "x-access-token" }"#)
        #expect(await h.deviceLogin("gh", access: "at-git-1", refresh: "rt-git-1") == .success)
        let expiry = Int(h.clock.date.timeIntervalSince1970) + 3600  // the device login's tokens arrive at the clock's time
        #expect(await h.deviceLogin("gl", access: "at-gl-1", refresh: "rt-gl-1") == .success)
        let tokenRequests = h.mock.requests(.token).count

        let gh = await h.run(["git-credential", "gh", "get"], services: h.services(standardInput: Self.https))
        #expect(gh.status == .success, "\(gh.stderr)")
        #expect(gh.stdout == "username=oauth2\npassword=at-git-1\npassword_expiry_utc=\(expiry)\n")
        #expect(gh.stderr.isEmpty)
        let gl = await h.run(["git-credential", "gl", "get"], services: h.services(standardInput: Self.https))
        #expect(gl.stdout.hasPrefix("username=x-access-token\npassword=at-gl-1\n"))
        #expect(h.mock.requests(.token).count == tokenRequests, "a valid token is answered without a request")
    }

    @Test("get refreshes a token that is due, and stores the new one")
    func getRefreshes() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-old", refresh: "rt-old", expiresIn: 600) == .success)
        h.clock.advance(by: .seconds(700))
        h.mock.script(.token, [.token(access: "at-new", refresh: "rt-new")])
        let run = await h.run(["git-credential", "gh", "get"], services: h.services(standardInput: Self.https))
        #expect(run.stdout.hasPrefix("username=oauth2\npassword=at-new\n"), "\(run.stderr)")
        #expect(h.mock.requests(.token).last?.form["refresh_token"] == "rt-old")
        #expect(await h.run(["token", "gh"]).stdout == "at-new\n")
    }

    @Test("erase of the stored token renews it now and keeps the login; the next get answers the new token")
    func eraseRenews() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-refused", refresh: "rt-1") == .success)
        let before = h.mock.requests(.token).count

        // Another token than the stored one: nothing to renew.
        let other = await h.run(["git-credential", "gh", "erase"], services: h.services(standardInput: Self.https + "username=oauth2\npassword=at-unknown\n"))
        #expect(other.status == .success && other.stdout.isEmpty)
        #expect(h.mock.requests(.token).count == before)

        h.mock.script(.token, [.token(access: "at-renewed", refresh: "rt-2")])
        let erase = await h.run(["git-credential", "gh", "erase"],
                                services: h.services(standardInput: "protocol=https\nhost=git.example.com\nusername=oauth2\npassword=at-refused\n\n"))
        #expect(erase.status == .success, "\(erase.stderr)")
        #expect(erase.stdout.isEmpty)
        #expect(h.mock.requests(.token).count == before + 1)
        #expect(h.mock.requests(.token).last?.form["grant_type"] == "refresh_token")
        #expect(h.mock.requests(.token).last?.form["refresh_token"] == "rt-1")
        #expect(h.directory.storedKeys == ["gh"], "erase never logs out")

        let get = await h.run(["git-credential", "gh", "get"], services: h.services(standardInput: Self.https))
        #expect(get.stdout.hasPrefix("username=oauth2\npassword=at-renewed\n"))
        #expect(h.mock.requests(.token).count == before + 1)
    }

    @Test("store and unknown actions are accepted and ignored: exit 0, no output, no request, nothing read", arguments: ["store", "capability", "frobnicate"])
    func ignored(action: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        let run = await h.run(["git-credential", "gh", action],
                              services: h.services(standardInput: "protocol=https\nhost=h\nusername=oauth2\npassword=pw\n\n"))
        #expect(run.status == .success && run.stdout.isEmpty && run.stderr.isEmpty)
        #expect(h.mock.requests().isEmpty)
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("get for a clear-text URL to another host answers nothing (git then asks elsewhere)")
    func clearTextRefused() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-1", refresh: "rt-1") == .success)
        let run = await h.run(["git-credential", "gh", "get"], services: h.services(standardInput: "protocol=http\nhost=git.example.com\n\n"))
        #expect(run.status == .success && run.stdout.isEmpty)
    }

    @Test("get with no login and no terminal: one line naming authflow login, exit 77, nothing on stdout, no request")
    func notLoggedIn() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        for terminal in [false, true] {
            // A terminal with GIT_TERMINAL_PROMPT=0 does not prompt either.
            let run = await h.run(["git-credential", "gh", "get"], environment: terminal ? ["GIT_TERMINAL_PROMPT": "0", "NO_COLOR": "1"] : [:], terminal: terminal,
                                  services: h.services(standardInput: Self.https))
            #expect(run.status == .denied)
            #expect(run.stdout.isEmpty)
            #expect(run.stderr == "authflow: error: not logged in to gh; run: authflow login gh\n")
        }
        #expect(h.mock.requests().isEmpty)
    }

    @Test("get for a grant no person logs in to, with nothing stored and no terminal: fetched on demand, never 'not logged in'; a refused secret names it")
    func unattendedFetchedOnDemand() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "svc", base: h.base, device: false, secret: "s3cret"))
        h.mock.script(.token, [.token(access: "at-svc", refresh: nil), .oauthError("invalid_client", status: 401)])
        let run = await h.run(["git-credential", "svc", "get"], services: h.services(standardInput: Self.https))
        #expect(run.status == .success, "\(run.stderr)")
        #expect(run.stdout.contains("password=at-svc\n"))
        #expect(h.mock.requests(.token).map { $0.form["grant_type"] } == ["client_credentials"])

        try FileManager.default.removeItem(at: h.directory.store)
        let refused = await h.run(["git-credential", "svc", "get"], services: h.services(standardInput: Self.https))
        #expect(refused.status == .dataError && refused.stdout.isEmpty, "\(refused.stderr)")
        #expect(refused.stderr.contains("The provider refused the client secret of client ID client-svc"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("authflow login"))
    }

    @Test("get with no login on a terminal logs in first (its instructions on stderr, stdout left to git), then answers")
    func logsInOnTerminal() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.deviceCode(user: "WDJB-MJHT", interval: 5)])
        h.mock.script(.token, [.oauthError("authorization_pending"), .token(access: "at-prompted", refresh: "rt-prompted")])
        let run = await h.run(["git-credential", "gh", "get"], environment: ["NO_COLOR": "1"], terminal: true,
                              services: h.services(standardInput: Self.https))
        #expect(run.status == .success, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("username=oauth2\npassword=at-prompted\n"))
        #expect(run.stdout.split(separator: "\n").count == 3, "only git's answer on stdout")
        #expect(run.stderr.contains("WDJB-MJHT") && run.stderr.contains("https://example.com/device"))
        #expect(h.directory.storedKeys == ["gh"])
    }

    @Test("git-credential needs PROVIDER and ACTION; gitUsername with a line break is refused with exit 65")
    func usageAndBadUsername() async throws {
        #expect(throws: UsageError("missing ACTION", command: "git-credential")) { try Authflow.parse(["git-credential", "gh"]) }
        #expect(throws: UsageError("missing PROVIDER", command: "git-credential")) { try Authflow.parse(["git-credential"]) }
        #expect(try Authflow.parse(["git-credential", "gh", "get"]).command == .gitCredential(provider: "gh", action: "get"))
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(#"{ "id": "gh", "clientID": "c", "tokenURL": "\#(h.base)/token", "gitUsername": "a\nusername=evil" }"#)
        let run = await h.run(["git-credential", "gh", "get"], services: h.services(standardInput: Self.https))
        #expect(run.status == .dataError)
        #expect(run.stdout.isEmpty && run.stderr.contains("gitUsername"))
    }
}

// MARK: - The real git

/// A loopback git smart-HTTP server: git's own `git http-backend` as CGI behind Python's
/// `http.server`, answering only Basic credentials whose user is `oauth2` and whose password is
/// listed in `TOKENS` (re-read on every request, so a test can rotate it). Every request is logged
/// as `METHOD PATH none|valid|refused` in `LOG`. Prints its port, then serves until killed.
private let gitServerScript = #"""
import base64, http.server, os, subprocess, sys
root, tokens_file, log_file = sys.argv[1:4]

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self):
        data = self.body()
        user = password = None
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        valid = open(tokens_file).read().split()
        verdict = "none" if password is None else ("valid" if password in valid else "refused")
        with open(log_file, "a") as log:
            log.write("%s %s %s\n" % (self.command, self.path.partition("?")[0], verdict))
        if user != "oauth2" or verdict != "valid":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = {"GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": self.command, "PATH_INFO": path,
               "QUERY_STRING": query, "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(data)),
               "REMOTE_USER": user, "REMOTE_ADDR": "127.0.0.1", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": root, "GIT_CONFIG_NOSYSTEM": "1"}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=data, env=env, capture_output=True, timeout=60).stdout
        separator = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, payload = out.partition(separator)
        status, headers = 200, []
        for line in head.replace(b"\r\n", b"\n").split(b"\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = answer
    do_POST = answer

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""#

extension GitCredentialTests {
    @Test("the real git clones and pushes with the token as password; a refused token leads to erase, a refresh, then success; no token in git's trace")
    func realGit() async throws {
        let gitProgram = try #require(Tool.find("git"), "git is not installed (apt-get install git)")
        let python = try #require(Tool.find("python3"), "python3 is not installed")
        let binary = try #require(Binary.url, "authflow not built")
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let home = directory.url.appendingPathComponent("home")
        let root = directory.url.appendingPathComponent("repos")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let tokens = directory.url.appendingPathComponent("tokens")
        let log = directory.url.appendingPathComponent("requests.log")
        try Data().write(to: log)

        // The provider: a device login, then one refresh.
        let provider = try TestHTTPServer()
        defer { provider.stop() }
        try directory.writeCatalog([catalogEntry(id: "gh", base: provider.baseURL)])
        provider.script("/device/code", [.deviceCode(user: "ABCD-EFGH", interval: 1)])
        provider.script("/token", [.token("at-git-first-7Kq2", refresh: "rt-git-first-3Vd8"), .token("at-git-second-9Wm4", refresh: "rt-git-second-5Xa1")])
        let base = ["--config", directory.config.path, "--store", directory.store.path]
        let login = try await runBinary(base + ["login", "gh", "--device"], environment: cleanEnvironment(directory))
        #expect(login.status == 0, "\(login.stderr)")

        // The git environment: nothing from the developer's configuration, no prompt.
        var environment = cleanEnvironment(directory)
        environment["HOME"] = home.path
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["GIT_AUTHOR_NAME"] = "T"
        environment["GIT_AUTHOR_EMAIL"] = "t@example.com"
        environment["GIT_COMMITTER_NAME"] = "T"
        environment["GIT_COMMITTER_EMAIL"] = "t@example.com"
        func git(_ arguments: [String], in directory: URL? = nil, trace: Bool = false) async throws -> Tool.Run {
            var environment = environment
            if trace {
                environment["GIT_TRACE"] = "1"
                environment["GIT_TRACE_CURL"] = "1"
            }
            return try await Tool.run(gitProgram, arguments, environment: environment, directory: directory)
        }

        // A bare repository with one commit, served over HTTP.
        let seed = directory.url.appendingPathComponent("seed")
        #expect(try await git(["init", "-q", "--bare", "-b", "main", root.appendingPathComponent("repo.git").path]).status == 0)
        #expect(try await git(["init", "-q", "-b", "main", seed.path]).status == 0)
        try Data("one\n".utf8).write(to: seed.appendingPathComponent("file"))
        #expect(try await git(["add", "file"], in: seed).status == 0)
        #expect(try await git(["commit", "-q", "-m", "one"], in: seed).status == 0)
        #expect(try await git(["push", "-q", root.appendingPathComponent("repo.git").path, "main"], in: seed).status == 0)

        try Data("at-git-first-7Kq2\n".utf8).write(to: tokens)
        let server = try await BackgroundServer(python, ["-c", gitServerScript, root.path, tokens.path, log.path], environment: ["PATH": environment["PATH"] ?? "/usr/bin:/bin"])
        defer { server.stop() }
        let url = "http://127.0.0.1:\(server.port)"
        // The README's line, for this host.
        let helper = "!'\(binary.path)' --config '\(directory.config.path)' --store '\(directory.store.path)' git-credential gh"
        #expect(try await git(["config", "--global", "credential.\(url).helper", helper]).status == 0)

        var traces = ""
        let work = directory.url.appendingPathComponent("work")
        let clone = try await git(["clone", "-q", "\(url)/repo.git", work.path], trace: true)
        traces += clone.stderr
        #expect(clone.status == 0, "\(clone.stderr.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: work.appendingPathComponent("file").path))

        try Data("two\n".utf8).write(to: work.appendingPathComponent("file"))
        #expect(try await git(["commit", "-q", "-am", "two"], in: work).status == 0)
        let push = try await git(["push", "-q", "origin", "main"], in: work, trace: true)
        traces += push.stderr
        #expect(push.status == 0, "\(push.stderr.suffix(2000))")
        #expect(try await git(["--git-dir", root.appendingPathComponent("repo.git").path, "log", "--format=%s", "main"]).stdout == "two\none\n")
        #expect(provider.requests("/token").count == 1, "no refresh while the token is valid")

        // The server now refuses the first token: git erases it, authflow refreshes, the next git run succeeds.
        try Data("at-git-second-9Wm4\n".utf8).write(to: tokens)
        try Data("three\n".utf8).write(to: work.appendingPathComponent("file"))
        #expect(try await git(["commit", "-q", "-am", "three"], in: work).status == 0)
        let refused = try await git(["push", "-q", "origin", "main"], in: work, trace: true)
        traces += refused.stderr
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("git-credential gh erase"), "git ran the helper's erase")
        #expect(provider.requests("/token").count == 2)
        #expect(provider.requests("/token").last?.form["grant_type"] == "refresh_token")
        #expect(provider.requests("/token").last?.form["refresh_token"] == "rt-git-first-3Vd8")
        let retried = try await git(["push", "-q", "origin", "main"], in: work, trace: true)
        traces += retried.stderr
        #expect(retried.status == 0, "\(retried.stderr.suffix(2000))")
        #expect(try await git(["--git-dir", root.appendingPathComponent("repo.git").path, "log", "-1", "--format=%s", "main"]).stdout == "three\n")
        #expect(provider.requests("/token").count == 2, "one refresh for the refusal, none after")
        #expect(directory.storedKeys == ["gh"])

        let verdicts = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ").last.map(String.init) ?? "" }
        #expect(verdicts.contains("refused") && verdicts.contains("valid") && verdicts.contains("none"))
        // GIT_TRACE shows the helper's command lines and GIT_TRACE_CURL the HTTP exchange: never a token.
        #expect(traces.contains("git-credential gh get"))
        for secret in ["at-git-first-7Kq2", "at-git-second-9Wm4", "rt-git-first-3Vd8", "rt-git-second-5Xa1",
                       Data("oauth2:at-git-first-7Kq2".utf8).base64EncodedString(), Data("oauth2:at-git-second-9Wm4".utf8).base64EncodedString()] {
            #expect(!traces.contains(secret), "a token in git's trace")
        }
    }
}
