import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import TestSupport
import Testing

/// `Authflow.run(arguments:output:environment:services:)` in-process against `MockProvider`.
@Suite("authflow commands, in-process")
struct RunTests {
    @Test("providers lists ids, login methods and the default method")
    func providers() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(
            catalogEntry(id: "gh", base: h.base, device: true, browser: true, redirectURI: "http://127.0.0.1/callback"),
            catalogEntry(id: "svc", base: h.base, device: false, secret: "s3cret-value"))
        let human = await h.run(["providers"])
        #expect(human.status == .success)
        #expect(human.stdout.contains("gh"))
        #expect(human.stdout.contains("device, browser"))
        #expect(!human.stdout.contains("s3cret-value"))

        // The default login method follows the display: device without one, browser with one.
        let headless = await h.run(["providers", "--json"])
        #expect(headless.stdout.split(separator: "\n").map { record($0)["login"] as? String } == ["device", "client-credentials"])
        let desktop = await h.run(["providers", "--json"], environment: ["DISPLAY": ":0"])
        #expect(desktop.stdout.split(separator: "\n").map { record($0)["login"] as? String } == ["browser", "client-credentials"])
        let wayland = await h.run(["providers", "--json"], environment: ["WAYLAND_DISPLAY": "wayland-0"])
        #expect(record(wayland.stdout.split(separator: "\n")[0])["login"] as? String == "browser")
        #expect(record(headless.stdout.split(separator: "\n")[0])["grants"] as? [String] == ["device", "browser"])
    }

    @Test("login --device --json: one JSON line per transition, slow_down as a raised interval, never a token")
    func deviceLoginJSON() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.deviceCode(
            user: "WDJB-MJHT", verificationURI: "https://example.com/device", complete: "https://example.com/device?user_code=WDJB-MJHT",
            expiresIn: 900, interval: 5)])
        h.mock.script(.token, [.oauthError("authorization_pending"), .oauthError("slow_down"),
                               .token(access: "at-secret-1", refresh: "rt-secret-1", scope: "read write")])
        let result = await h.run(["login", "gh", "--json"])
        #expect(result.status == .success)
        let lines = result.stdout.split(separator: "\n").map(record)
        #expect(lines.map { $0["state"] as? String } == ["requestingDeviceCode", "receivedDeviceCode", "receivedDeviceCode", "authorized"])
        #expect(lines.allSatisfy { $0["provider"] as? String == "gh" })
        #expect(lines[1]["user_code"] as? String == "WDJB-MJHT")
        #expect(lines[1]["verification_uri"] as? String == "https://example.com/device")
        #expect(lines[1]["verification_uri_complete"] as? String == "https://example.com/device?user_code=WDJB-MJHT")
        #expect(lines[1]["expires_in"] as? Int == 900)
        #expect(lines[1]["interval"] as? Int == 5)
        #expect(lines[2]["interval"] as? Int == 10)
        #expect(lines[3]["scopes"] as? [String] == ["read", "write"])
        let expiresAt = try #require(lines[3]["expires_at"] as? String)
        #expect(ISO8601DateFormatter().date(from: expiresAt) != nil)
        for secret in ["at-secret-1", "rt-secret-1", "mock-device-code"] {
            #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
        }
        #expect(h.directory.storedKeys == ["gh"])
        #expect(h.clock.sleeps == [.seconds(5), .seconds(5), .seconds(10)])
    }

    @Test("login (device, people): URI and code on their own lines, slow_down as a note, plain countdown off a terminal")
    func deviceLoginHuman() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.deviceCode(user: "WDJB-MJHT", verificationURI: "https://example.com/device", expiresIn: 900)])
        h.mock.script(.token, [.oauthError("slow_down"), .token(access: "at-secret-2", refresh: "rt-secret-2")])
        let result = await h.run(["login", "gh"])
        #expect(result.status == .success)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("https://example.com/device"))
        #expect(lines.contains("WDJB-MJHT"))
        #expect(result.stderr.contains("note: gh asked to slow down (slow_down); polling every 10 s now."))
        // Off a terminal the countdown is a plain line (its value depends on how far the test clock has run).
        #expect(result.stderr.contains("Waiting for approval; the code expires in 1"))
        #expect(!result.stderr.contains("\u{1B}"))
        #expect(result.stdout.contains("Logged in to gh"))
        #expect(!result.stdout.contains("at-secret-2") && !result.stderr.contains("at-secret-2"))
    }

    @Test("on a terminal the countdown updates in place and notes are coloured, unless NO_COLOR is set")
    func terminalAndNoColor() async throws {
        for noColor in [false, true] {
            let h = try Harness()
            defer { h.directory.remove() }
            try h.catalog(catalogEntry(id: "gh", base: h.base))
            h.mock.script(.deviceAuthorization, [.deviceCode()])
            h.mock.script(.token, [.oauthError("slow_down"), .token(access: "at")])
            let result = await h.run(["login", "gh"], environment: noColor ? ["NO_COLOR": "1"] : [:], terminal: true)
            #expect(result.status == .success)
            #expect(result.stderr.contains("\r\u{1B}[2K"))  // redrawn in place
            #expect(result.stderr.contains("\u{1B}[33mnote:") == !noColor)
            #expect(result.stderr.contains("\u{1B}[2m") == !noColor)
        }
    }

    @Test("a denied device login exits 77 with an error line and stores nothing", arguments: [
        ("access_denied", "accessDenied", ExitCode.denied), ("expired_token", "expired", .denied),
        ("invalid_client", "serverRejected", .dataError), ("temporarily_unavailable", "serverRejected", .temporaryFailure),
    ])
    func deviceFailures(error: String, code: String, exit: ExitCode) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.deviceCode()])
        h.mock.script(.token, [.oauthError("authorization_pending"), .oauthError(error, description: "said \(error)")])
        let result = await h.run(["login", "gh", "--json"])
        #expect(result.status == exit)
        let last = record(try #require(result.stdout.split(separator: "\n").last))
        #expect(last["state"] as? String == "error")
        #expect(last["code"] as? String == code)
        #expect(last["error"] as? String == error)
        #expect(last["exit_code"] as? Int == Int(exit.rawValue))
        #expect((last["description"] as? String)?.contains("said \(error)") == true)
        #expect(result.stderr.contains("authflow: error:"))
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("cancelling a device login (Ctrl-C) stops polling promptly, stores nothing, exits 130")
    func interrupt() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        h.mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
        h.mock.script(.token, [.oauthError("authorization_pending")])  // repeats forever
        let (output, stdout, stderr) = Output.capture()
        let services = h.services(clock: ContinuousClock())
        let environment = h.environment
        let task = Task { await Authflow.run(arguments: ["login", "gh", "--device"], output: output, environment: environment, services: services) }
        let deadline = ContinuousClock.now + .seconds(60)
        while !stdout.text.contains("enter the code"), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(300))
        let pollsBefore = h.mock.requests(.token).count
        task.cancel()
        let status = await task.value
        // No wall-clock bound (the machine may be busy): a lost cancellation would hang here until the
        // suite's time limit, or back off and poll again, which the count below catches.
        #expect(status == .interrupted)
        #expect(h.mock.requests(.token).count <= pollsBefore + 1, "polling went on after the cancellation")
        #expect(stderr.text.contains("interrupted; nothing was stored"))
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("a provider with a secret and neither redirectURI nor device endpoint logs in with client credentials")
    func clientCredentialsByDefault() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "svc", base: h.base, device: false, secret: "s3cret-value", scopes: ["billing"]))
        h.mock.script(.token, [.token(access: "at-svc", expiresIn: 600, scope: "billing")])
        let result = await h.run(["login", "svc", "--json"])
        #expect(result.status == .success)
        #expect(result.stdout.split(separator: "\n").map { record($0)["state"] as? String } == ["requestingAccessToken", "authorized"])
        let sent = try #require(h.mock.requests(.token).first)
        #expect(sent.form["grant_type"] == "client_credentials")
        #expect(sent.basicCredentials?.secret == "s3cret-value")
        #expect(!result.stdout.contains("at-svc") && !result.stdout.contains("s3cret"))
    }

    @Test("--client-credentials forces that grant; a forced grant the provider lacks exits 65")
    func forcedGrants() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "both", base: h.base, device: true, secret: "s3cret"), catalogEntry(id: "pub", base: h.base, device: false))
        h.mock.script(.token, [.token(access: "at-cc")])
        #expect(await h.run(["login", "both", "--client-credentials"]).status == .success)
        #expect(h.mock.requests(.token).first?.form["grant_type"] == "client_credentials")
        let noDevice = await h.run(["login", "pub", "--device"])
        #expect(noDevice.status == .dataError)
        #expect(noDevice.stderr.contains("deviceAuthorizationURL"))
        let nothing = await h.run(["login", "pub"])
        #expect(nothing.status == .dataError)
        #expect(nothing.stderr.contains("nothing to log in with"))
    }

    @Test("token prints only the token and a newline; --json one object; an expired token is refreshed and stored")
    func token() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-first", refresh: "rt-first") == .success)
        h.mock.clearRequests()

        let plain = await h.run(["token", "gh"])
        #expect(plain.status == .success)
        #expect(plain.stdout == "at-first\n")
        #expect(plain.stderr.isEmpty)
        #expect(h.mock.requests().isEmpty)  // answered from the store

        let json = await h.run(["token", "gh", "--json"])
        let object = record(json.stdout.trimmingCharacters(in: .newlines))
        #expect(json.stdout.split(separator: "\n").count == 1)
        #expect(object["access_token"] as? String == "at-first")
        #expect(object["token_type"] as? String == "Bearer")
        #expect(object["scopes"] as? [String] == ["read"])
        #expect(object["expires_at"] as? String != nil)

        h.clock.advance(by: .seconds(3600))
        h.mock.script(.token, [.token(access: "at-second", expiresIn: 3600)])
        let refreshed = await h.run(["token", "gh"])
        #expect(refreshed.stdout == "at-second\n")
        let sent = try #require(h.mock.requests(.token).first)
        #expect(sent.form["grant_type"] == "refresh_token")
        #expect(sent.form["refresh_token"] == "rt-first")
        // Stored: another run answers without a request.
        #expect(await h.run(["token", "gh"]).stdout == "at-second\n")
        #expect(h.mock.requests(.token).count == 1)
    }

    @Test("another provider's unset clientSecretEnv does not stop token, login or status for this one")
    func otherProvidersSecretMissing() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let service = #"{ "id": "svc", "clientID": "client-svc", "tokenURL": "\#(h.base)/token", "clientSecretEnv": "SVC_SECRET" }"#
        try h.catalog(catalogEntry(id: "gh", base: h.base), service)

        #expect(await h.deviceLogin("gh", access: "at-gh", refresh: "rt-gh") == .success)
        let token = await h.run(["token", "gh"])
        #expect(token.status == .success)
        #expect(token.stdout == "at-gh\n")
        #expect(await h.run(["status", "gh"]).status == .success)

        // The provider whose secret is missing still says exactly what is wrong.
        let broken = await h.run(["token", "svc"])
        #expect(broken.status == .dataError)
        #expect(broken.stderr.contains("clientSecretEnv: the environment variable it names (10 characters"))
        // Commands over the whole catalog stay strict.
        #expect(await h.run(["providers"]).status == .dataError)
    }

    @Test("token failures map to exit codes", arguments: [
        ("nothing stored", ExitCode.denied), ("invalid_grant", .denied), ("unreachable", .unavailable),
        ("503", .temporaryFailure), ("unknown provider", .usage),
    ])
    func tokenFailures(case name: String, exit: ExitCode) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        var services: Authflow.Services?
        var provider = "gh"
        switch name {
        case "nothing stored": break
        case "unknown provider": provider = "gl"
        default:
            #expect(await h.deviceLogin("gh", access: "at-old", refresh: "rt-old") == .success)
            h.clock.advance(by: .seconds(7200))
            if name == "invalid_grant" { h.mock.script(.token, [.oauthError("invalid_grant")]) }
            if name == "503" { h.mock.script(.token, [.html(status: 503)]) }
            if name == "unreachable" { services = h.services(transport: UnreachableTransport()) }
        }
        let result = await h.run(["token", provider], services: services)
        #expect(result.status == exit)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("authflow: error:"))
        #expect(!result.stderr.contains("at-old") && !result.stderr.contains("rt-old"))
        if name == "invalid_grant" {
            #expect(result.stderr.contains("authflow login gh"))
            let status = await h.run(["status", "gh", "--json"])
            #expect(status.status == .denied)
            #expect(record(status.stdout.trimmingCharacters(in: .newlines))["needs_reauthorization"] as? Bool == true)
        }
    }

    @Test("status: a table and JSON lines with expiry, scopes, refreshable, needs login; never a token")
    func status() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base), catalogEntry(id: "gl", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-status", refresh: "rt-status") == .success)
        let human = await h.run(["status"])
        #expect(human.status == .success)
        let rows = human.stdout.split(separator: "\n")
        #expect(rows[0].hasPrefix("PROVIDER"))
        #expect(rows[1].hasPrefix("gh") && rows[1].contains("valid") && rows[1].contains("device") && rows[1].contains("(in 1h)"))
        #expect(rows[2].hasPrefix("gl") && rows[2].contains("not logged in"))
        let json = await h.run(["status", "--json"])
        let objects = json.stdout.split(separator: "\n").map(record)
        #expect(objects[0]["provider"] as? String == "gh")
        #expect(objects[0]["logged_in"] as? Bool == true)
        #expect(objects[0]["refreshable"] as? Bool == true)
        #expect(objects[0]["needs_reauthorization"] as? Bool == false)
        #expect(objects[0]["scopes"] as? [String] == ["read"])
        #expect(objects[0]["expired"] as? Bool == false)
        #expect(objects[1]["logged_in"] as? Bool == false)
        #expect(await h.run(["status", "gh"]).status == .success)
        #expect(await h.run(["status", "gl"]).status == .denied)
        h.clock.advance(by: .seconds(7200))
        let expired = await h.run(["status", "gh"])
        #expect(expired.stdout.contains("expired (refreshed on use)"))
        #expect(expired.status == .success)
        for output in [human.stdout, json.stdout, expired.stdout] {
            #expect(!output.contains("at-status") && !output.contains("rt-status"))
        }
    }

    @Test("status reports an unreadable entry and keeps the others")
    func statusCorrupted() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base), catalogEntry(id: "gl", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at", refresh: "rt") == .success)
        let path = h.directory.store.appendingPathComponent("gl.json").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("{not json".utf8), attributes: [.posixPermissions: 0o600]))
        let result = await h.run(["status", "--json"])
        let objects = result.stdout.split(separator: "\n").map(record)
        #expect(objects[0]["logged_in"] as? Bool == true)
        #expect(objects[1]["logged_in"] as? Bool == false)
        #expect((objects[1]["error"] as? String)?.contains("corrupted") == true)
    }

    @Test("logout revokes the refresh token, then the access token (RFC 7009), and forgets; --local skips the provider")
    func logout() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base), catalogEntry(id: "norevoke", base: h.base, revocation: false))
        #expect(await h.deviceLogin("gh", access: "at-lo", refresh: "rt-lo") == .success)
        h.mock.script(.revocation, [MockResponse(status: 200)])
        let result = await h.run(["logout", "gh"])
        #expect(result.status == .success)
        #expect(result.stdout == "Revoked the tokens of gh at the provider and forgot them.\n")
        let sent = h.mock.requests(.revocation)
        #expect(sent.map { $0.form["token"] } == ["rt-lo", "at-lo"])
        #expect(sent.map { $0.form["token_type_hint"] } == ["refresh_token", "access_token"])
        #expect(h.directory.storedKeys.isEmpty)
        #expect(!result.stdout.contains("rt-lo") && !result.stderr.contains("rt-lo"))

        #expect(await h.deviceLogin("gh", access: "at-lo2", refresh: "rt-lo2") == .success)
        h.mock.clearRequests()
        #expect(await h.run(["logout", "gh", "--local"]).status == .success)
        #expect(h.mock.requests().isEmpty)
        #expect(h.directory.storedKeys.isEmpty)

        #expect(await h.deviceLogin("norevoke", access: "at-n", refresh: "rt-n") == .success)
        let noEndpoint = await h.run(["logout", "norevoke"])
        #expect(noEndpoint.stdout.contains("no revocation endpoint"))
        #expect(h.directory.storedKeys.isEmpty)
        #expect(await h.run(["logout", "gh"]).stdout.contains("Nothing was stored"))
    }

    @Test("a refused revocation still forgets the tokens, says which token the provider did not confirm, and exits with its status")
    func logoutFailure() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-f", refresh: "rt-f") == .success)
        h.mock.script(.revocation, [.html(status: 503), MockResponse(status: 200)])
        let result = await h.run(["logout", "gh"])
        #expect(result.status == .temporaryFailure)
        #expect(result.stdout == "Forgot the tokens of gh locally.\nThe provider confirmed revoking the access token.\n")
        #expect(result.stderr.contains("did not confirm revoking the refresh token"))
        #expect(result.stderr.contains("HTTP 503"))
        #expect(!result.stderr.contains("rt-f") && !result.stderr.contains("at-f"))
        #expect(h.directory.storedKeys.isEmpty)
    }

    @Test("userinfo prints the claims as one escaped JSON object (OpenID Connect Core §5.3)")
    func userinfo() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "gh", base: h.base, userinfo: true), catalogEntry(id: "plain", base: h.base))
        #expect(await h.deviceLogin("gh", access: "at-u", refresh: "rt-u") == .success)
        h.mock.script(.userinfo, [.json(#"{"sub":"user-1","name":"Eve\u001b[31m\nLine","n":12}"#)])
        let result = await h.run(["userinfo", "gh"])
        #expect(result.status == .success)
        #expect(result.stdout == #"{"n":12,"name":"Eve\u001b[31m\nLine","sub":"user-1"}"# + "\n")
        #expect(!result.stdout.contains("\u{1B}"))
        #expect(h.mock.requests(.userinfo).count == 1)
        #expect(h.mock.requests(.userinfo).first?.header("Authorization") == "Bearer at-u")

        // A rejected token: 77 with the next step; no endpoint: 65; not logged in: 77.
        h.mock.script(.userinfo, [MockResponse(status: 401, headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])])
        let rejected = await h.run(["userinfo", "gh"])
        #expect(rejected.status == .denied)
        #expect(rejected.stderr.contains("invalid_token"))
        #expect(rejected.stdout.isEmpty)
        #expect(await h.deviceLogin("plain", access: "at-p", refresh: nil) == .success)
        let noEndpoint = await h.run(["userinfo", "plain"])
        #expect(noEndpoint.status == .dataError)
        #expect(noEndpoint.stderr.contains("userinfoURL"))
        #expect(await h.run(["logout", "gh", "--local"]).status == .success)
        #expect(await h.run(["userinfo", "gh"]).status == .denied)
        #expect(await h.run(["userinfo"]).status == .usage)
    }

    @Test("the catalog comes from --config, then AUTHFLOW_CONFIG, then XDG_CONFIG_HOME, then ~/.config")
    func configResolution() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let root = h.directory.url
        func write(_ path: String, id: String) throws {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data("[\(catalogEntry(id: id, base: h.base))]".utf8).write(to: url)
        }
        try write("flag.json", id: "from-flag")
        try write("env.json", id: "from-env")
        try write("xdg/authflow/providers.json", id: "from-xdg")
        try write("home/.config/authflow/providers.json", id: "from-home")
        let home = root.appendingPathComponent("home").path
        func first(_ arguments: [String], _ environment: [String: String]) async -> String? {
            let (output, stdout, _) = Output.capture()
            _ = await Authflow.run(arguments: arguments + ["providers", "--json"], output: output, environment: environment)
            return record(stdout.text.split(separator: "\n").first ?? "")["id"] as? String
        }
        let all = ["HOME": home, "AUTHFLOW_CONFIG": root.appendingPathComponent("env.json").path, "XDG_CONFIG_HOME": root.appendingPathComponent("xdg").path]
        #expect(await first(["--config", root.appendingPathComponent("flag.json").path], all) == "from-flag")
        #expect(await first([], all) == "from-env")
        #expect(await first([], all.filter { $0.key != "AUTHFLOW_CONFIG" }) == "from-xdg")
        #expect(await first([], ["HOME": home]) == "from-home")
        #expect(await first([], ["HOME": home, "XDG_CONFIG_HOME": "relative/ignored"]) == "from-home")
    }

    @Test("the store is --store, then AUTHFLOW_STORE, then XDG_STATE_HOME/authflow, then ~/.local/state/authflow")
    func storeResolution() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "svc", base: h.base, device: false, secret: "s"))
        h.mock.script(.token, [.token(access: "at")])
        let root = h.directory.url
        let config = h.directory.config.path
        func login(_ arguments: [String], _ environment: [String: String]) async -> ExitCode {
            await Authflow.run(arguments: ["--config", config] + arguments + ["login", "svc"], output: Output.capture().output,
                               environment: environment, services: h.services())
        }
        let home = root.appendingPathComponent("home").path
        let cases: [([String], [String: String], String)] = [
            (["--store", root.appendingPathComponent("flag").path], ["AUTHFLOW_STORE": root.appendingPathComponent("env").path], "flag"),
            ([], ["AUTHFLOW_STORE": root.appendingPathComponent("env").path, "XDG_STATE_HOME": root.appendingPathComponent("xdg").path], "env"),
            ([], ["XDG_STATE_HOME": root.appendingPathComponent("xdg").path, "HOME": home], "xdg/authflow"),
            ([], ["HOME": home], "home/.local/state/authflow"),
        ]
        for (arguments, environment, place) in cases {
            #expect(await login(arguments, environment) == .success)
            let entry = root.appendingPathComponent(place).appendingPathComponent("svc.json").path
            #expect(FileManager.default.fileExists(atPath: entry), "expected the entry in \(place)")
        }
    }

    @Test("the store key is --store-key-file, then AUTHFLOW_STORE_KEY_FILE; a previous key without a current one is a usage error")
    func storeKeyResolution() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "svc", base: h.base, device: false, secret: "s"))
        h.mock.script(.token, [.token(access: "at-run-key")])
        func writeKey(_ name: String) throws -> String {
            let url = h.directory.url.appendingPathComponent(name)
            try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: url)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
            return url.path
        }
        let flagPath = try writeKey("flag.key")
        let environmentPath = try writeKey("env.key")
        let flagID = try StoreKey(contentsOf: URL(fileURLWithPath: flagPath)).id
        let environmentID = try StoreKey(contentsOf: URL(fileURLWithPath: environmentPath)).id
        let entry = h.directory.store.appendingPathComponent("svc.json")

        #expect(await h.run(["--store-key-file", flagPath, "login", "svc"], environment: ["AUTHFLOW_STORE_KEY_FILE": environmentPath]).status == .success)
        #expect(EntryEncryption.keyID(of: try Data(contentsOf: entry)) == flagID)
        #expect(await h.run(["login", "svc"], environment: ["AUTHFLOW_STORE_KEY_FILE": environmentPath]).status == .success)
        #expect(EntryEncryption.keyID(of: try Data(contentsOf: entry)) == environmentID)
        #expect(await h.run(["login", "svc"], environment: ["AUTHFLOW_STORE_KEY_FILE": ""]).status == .success)
        #expect(!EntryEncryption.isSealed(try Data(contentsOf: entry)))

        let orphan = await h.run(["--store-previous-key-file", flagPath, "status"])
        #expect(orphan.status == .usage)
        #expect(orphan.stderr.contains("--store-previous-key-file needs --store-key-file or AUTHFLOW_STORE_KEY_FILE"))
    }

    @Test("a missing or invalid catalog exits 65 and says which file, provider, key and reason")
    func badCatalog() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        let missing = await h.run(["providers"])
        #expect(missing.status == .dataError)
        #expect(missing.stderr.contains("no provider catalog at \(h.directory.config.path)"))
        try h.catalog(#"{ "id": "gh", "clientID": "c", "tokenURL": "http://example.com/token" }"#)
        let insecure = await h.run(["token", "gh"])
        #expect(insecure.status == .dataError)
        #expect(insecure.stderr.contains("tokenURL"))
        #expect(insecure.stderr.contains("https"))
        #expect(insecure.stderr.contains(h.directory.config.path))
    }

    @Test("the demo runs offline, prints every state and never a token, and removes its store")
    func demo() async throws {
        let (output, stdout, stderr) = Output.capture()
        let status = await Authflow.run(arguments: ["demo"], output: output, environment: [:])
        #expect(status == .success, "\(stderr.text)")
        let text = stdout.text
        for state in ["empty", "requestingDeviceCode", "receivedDeviceCode", "requestingAccessToken", "authorized"] {
            #expect(text.contains(state), "missing \(state)")
        }
        #expect(text.contains("20× faster"))
        // Demo time moves only by the flow's waits (5 s, 5 s, then 10 s after slow_down), never by
        // how long the work between them took: the same stamps on a quiet machine and a busy one.
        let stamped = text.split(separator: "\n").filter { $0.hasPrefix("[") }.map { String($0.prefix(9)) + " " + $0.dropFirst(9).split(separator: " ").prefix(2).joined(separator: " ") }
        #expect(Array(stamped.prefix(12)) == [
            "[   0.0s] empty nothing", "[   0.0s] requestingDeviceCode demo-device", "[   0.0s] → POST", "[   0.0s] ← 200",
            "[   0.0s] receivedDeviceCode demo-device:", "[   5.0s] → POST", "[   5.0s] ← 400", "[  10.0s] → POST", "[  10.0s] ← 400",
            "[  10.0s] receivedDeviceCode demo-device:", "[  20.0s] → POST", "[  20.0s] ← 400",
        ])
        #expect(text.contains("[  30.0s] authorized             demo-device"))
        #expect(text.contains("authorization_pending"))
        #expect(text.contains("slow_down"))
        for secret in ["mock_at_", "mock_rt_", "mock_dc_", "demo-secret-"] { #expect(!text.contains(secret)) }
        let storeLine = try #require(text.split(separator: "\n").first { $0.contains("temporary store") })
        let path = try #require(storeLine.split(separator: " ").first { $0.hasPrefix("/") }).trimmingCharacters(in: CharacterSet(charactersIn: ","))
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

@Suite("Exit codes")
struct ExitCodeTests {
    @Test("OAuthError maps to sysexits by code, then recovery", arguments: [
        (OAuthError(.cancelled), ExitCode.interrupted),
        (OAuthError(.transport), .unavailable),
        (OAuthError(.timedOut), .temporaryFailure),
        (OAuthError(.httpStatus, httpStatus: 503), .temporaryFailure),
        (OAuthError(.httpStatus, httpStatus: 404), .dataError),
        (OAuthError(.configuration), .dataError),
        (OAuthError(.storage), .dataError),
        (OAuthError(.invalidResponse), .dataError),
        (OAuthError(.accessDenied), .denied),
        (OAuthError(.reauthorizationRequired), .denied),
        (OAuthError(.expired), .denied),
        (OAuthError(.stateMismatch), .denied),
        (OAuthError(.serverRejected, response: ErrorResponse(code: .invalidGrant)), .denied),
        (OAuthError(.serverRejected, response: ErrorResponse(code: .invalidClient)), .dataError),
        (OAuthError(.serverRejected, response: ErrorResponse(code: .temporarilyUnavailable)), .temporaryFailure),
    ])
    func mapping(error: OAuthError, expected: ExitCode) {
        #expect(ExitCode(error) == expected)
    }
}
