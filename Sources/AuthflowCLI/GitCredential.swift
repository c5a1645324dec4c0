#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow

/// git's credential-helper protocol (gitcredentials(7), git-credential(1)): `key=value` lines on
/// stdin, ended by a blank line or the end of input; the answer in the same form on stdout.
struct GitCredentialRequest: Equatable {
    /// The attributes git sent; the first of a repeated key wins (git sends each once, except `url`).
    var attributes: [String: String] = [:]

    /// The largest input read: git's attributes are a URL's parts, a username and a token.
    static let maximumInput = 64 * 1024

    /// Parses git's input; lines without `=` and keys after the blank line are ignored.
    init(parsing text: String) {
        // "\r\n" is one Character: split on either, so a CRLF line ends where an LF line does.
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            if line.isEmpty { break }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<equals])
            if attributes[key] == nil { attributes[key] = String(line[line.index(after: equals)...]) }
        }
    }

    /// True when a token may be answered for this request: `https`, or `http` to a loopback host
    /// (`localhost`, `*.localhost`, `127.0.0.1`, `[::1]`, with any port), as the catalog's endpoints
    /// allow. Never a token for a clear-text connection over the network, whatever git is configured to ask.
    var allowsToken: Bool {
        switch attributes["protocol"] {
        case "https"?: return true
        case "http"?:
            var host = (attributes["host"] ?? "").lowercased()
            if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
                host = String(host[...close])
            } else if let colon = host.lastIndex(of: ":") {
                host = String(host[..<colon])
            }
            return host == "localhost" || host.hasSuffix(".localhost") || host == "127.0.0.1" || host == "[::1]"
        default: return false
        }
    }
}

extension Context {
    /// `authflow git-credential PROVIDER ACTION`: git's credential helper.
    ///
    /// - `get`: answers `username` (the catalog's `gitUsername`, default `oauth2`) and `password`, a
    ///   valid access token (refreshed when due, as `token` does), and `password_expiry_utc`
    ///   when the token has an expiry. Nothing (exit 0) for a URL that is neither https nor
    ///   loopback http. With nothing stored: a device or browser login on the terminal when
    ///   stderr is one (and `GIT_TERMINAL_PROMPT` is not 0), else one line naming `authflow login`.
    /// - `erase` (git sends it after the server refused the password): when the password is the
    ///   stored access token, the tokens are renewed now (refresh, or a new client-credentials
    ///   token), so the next `get` answers the new one; the login is never deleted.
    /// - `store` and any other action: accepted and ignored, as gitcredentials(7) asks.
    func gitCredential(_ id: String, action: String) async throws(CLIError) -> ExitCode {
        guard action == "get" || action == "erase" else { return .success }
        let request = GitCredentialRequest(parsing: services.standardInput())
        let provider = try provider(id)
        let username = try gitUsername(of: id)
        let store = try store()
        let flow = try await flow([provider], store: store)
        if action == "erase" {
            guard let rejected = request.attributes["password"], !rejected.isEmpty,
                  request.attributes["username"].map({ $0 == username }) ?? true
            else { return .success }
            do {
                _ = try await flow.tokenSource(for: id).renew(rejecting: Secret(rejected))
            } catch {
                throw .oauth(error, provider: id)
            }
            return .success
        }
        guard request.allowsToken else { return .success }
        guard let set = try await validTokenSet(provider, flow: flow, store: store) else { return .denied }
        var answer = "username=\(username)\npassword=\(set.accessToken.reveal())\n"
        if let expiry = set.expiresAt { answer += "password_expiry_utc=\(Int(expiry.timeIntervalSince1970))\n" }
        out.write(answer)
        return .success
    }

    /// A valid, header-safe token set for a credential helper (git, kubectl), whose stdout belongs
    /// to the tool that runs it. With nothing stored for a grant a person logs in to: a login on
    /// the terminal when `interactive` (its instructions on stderr); else nil, after one line on
    /// stderr that names `authflow login` (the caller exits 77). A grant no person logs in to
    /// fetches its token on demand, as `authflow token` does: no login can help there.
    func validTokenSet(_ provider: Provider, flow: AuthFlow, store: any SecretStore, interactive: Bool? = nil) async throws(CLIError)
        -> TokenSet?
    {
        let id = provider.id
        if Self.onDemandGrant(provider) == nil, await flow.authorization(for: id) == nil {
            let prompts = interactive ?? (output.stderrIsTerminal && environment["GIT_TERMINAL_PROMPT"] != "0")
            guard prompts, Self.defaultMethod(provider, environment: environment) != nil else {
                err.write("\(errStyle.red("authflow: error:")) \(Self.notLoggedIn(id))\n")
                return nil
            }
            // The login's instructions go to the terminal on stderr: stdout is the calling tool's.
            let terminal = Output(stdout: output.stderr, stderr: output.stderr, stdoutIsTerminal: output.stderrIsTerminal,
                                  stderrIsTerminal: output.stderrIsTerminal)
            let login = Context(invocation: invocation, output: terminal, environment: environment, services: services)
            _ = try await login.login(LoginOptions(provider: id))
            return try await login.validTokenSet(provider, flow: login.flow([provider], store: store), store: store, interactive: false)
        }
        return try await checkedTokenSet(id, flow: flow)
    }

    /// The catalog entry's `gitUsername` (git's username for the token), default `oauth2`.
    func gitUsername(of id: String) throws(CLIError) -> String {
        try catalogUsername("gitUsername", of: id, default: "oauth2")
    }

    /// A username the catalog entry of `id` gives a tool with its token (`gitUsername`,
    /// `registryUsername`), or `defaultName` without one.
    ///
    /// Read from the catalog file, where the library accepts the key and leaves it to the CLI: 1 to
    /// 128 characters, none that ``DisplayText/isUnsafe(_:)`` flags (a line break would end git's answer).
    /// - Throws: ``CLIError/data(_:)`` (exit 65) for any other value.
    func catalogUsername(_ key: String, of id: String, default defaultName: String) throws(CLIError) -> String {
        let url = try catalogFile()
        guard let entry = try catalogEntries().first(where: { $0["id"]?.stringValue == id }), let value = entry[key], value != .null else {
            return defaultName
        }
        guard let name = value.stringValue, (1...128).contains(name.unicodeScalars.count),
              !name.unicodeScalars.contains(where: DisplayText.isUnsafe)
        else {
            throw .data("\(url.path): provider \"\(id)\": \(key): must be a string of 1 to 128 characters without control characters")
        }
        return name
    }

    /// `not logged in to PROVIDER; run: authflow login PROVIDER`, escaped: what a helper says when a
    /// person must log in first.
    static func notLoggedIn(_ id: String) -> String {
        "not logged in to \(escaped(id)); run: authflow login \(escaped(id))"
    }
}

extension Context {
    /// The catalog file's provider entries as JSON, read without resolving anything (a top-level
    /// array, or the `providers` member of an object, as ``ProviderCatalog`` reads it).
    func catalogEntries() throws(CLIError) -> [JSONValue] {
        let url = try catalogFile()
        let document: JSONValue
        do {
            document = try JSONValue.parse(try Data(contentsOf: url))
        } catch {
            throw .data("cannot read the catalog \(url.path) (run authflow providers for the reason)")
        }
        switch document {
        case .array(let items): return items
        case .object:
            guard case .array(let items)? = document["providers"] else { return [] }
            return items
        default: return []
        }
    }
}

extension Authflow {
    /// Reads standard input to its end, or to 64 KiB (``GitCredentialRequest/maximumInput``); invalid UTF-8 is repaired.
    @Sendable public static func readStandardInput() -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < GitCredentialRequest.maximumInput {
            let count = read(0, &chunk, min(chunk.count, GitCredentialRequest.maximumInput - bytes.count))
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
