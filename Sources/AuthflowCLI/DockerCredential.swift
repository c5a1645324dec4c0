#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// Docker's credential-helper protocol, as docker/docker-credential-helpers defines it (its
/// `credentials` package serves it, its `client` package is what `docker` runs): the action is
/// the one argument; `get` and `erase` read a server URL on stdin, `store` a JSON
/// `{"ServerURL","Username","Secret"}`; `get` answers that JSON on stdout, `list` an object of
/// server URL → username. A failure is one line on stdout and a non-zero exit: the client reads
/// stdout, and takes exactly `credentials not found in native keychain` to mean "no credentials
/// here" (Docker then goes on without any), and `no credentials server URL` for an empty input.
/// `docker` passes the helper's stderr through to the person who ran it.
enum DockerCredential {
    /// The name `authflow` answers to as a helper (argv[0]): `"credHelpers": {"HOST": "authflow"}`
    /// in `~/.docker/config.json` makes `docker` run `docker-credential-authflow get`.
    static let programName = "docker-credential-authflow"
    /// The protocol's answer for a server it has no credentials for.
    static let notFound = "credentials not found in native keychain"
    /// The protocol's answer for an empty server URL.
    static let missingServerURL = "no credentials server URL"
    /// The largest server URL read: Docker writes a registry's host or URL, far shorter.
    static let maximumServerURL = 8 * 1024
    /// The username answered without `registryUsername`: what Google's registries and others that
    /// take an OAuth access token as the password expect.
    static let defaultUsername = "oauth2accesstoken"

    /// The invocation of `docker-credential-authflow ARGUMENTS`: the helper takes exactly one
    /// argument, its action; anything else is answered with the usage line (exit 1).
    static func invocation(_ arguments: [String]) -> Invocation {
        Invocation(command: .dockerCredential(provider: nil, action: arguments.count == 1 ? arguments[0] : ""))
    }

    /// The server URL Docker wrote on stdin, trimmed of surrounding white space as the protocol's
    /// helpers trim it.
    /// - Returns: the URL, or the protocol line to answer: `no credentials server URL` when
    ///   nothing is left, a sentence for input that is too long or holds a control character.
    static func serverURL(_ input: String) -> Result<String, DockerRefusal> {
        guard input.utf8.count <= maximumServerURL else {
            return .failure(DockerRefusal("the server URL on stdin is longer than \(maximumServerURL) bytes"))
        }
        var trimmed = Substring(input)
        while let first = trimmed.first, first.isWhitespace { trimmed.removeFirst() }
        while let last = trimmed.last, last.isWhitespace { trimmed.removeLast() }
        let text = String(trimmed)
        guard !text.isEmpty else { return .failure(DockerRefusal(missingServerURL)) }
        guard !text.unicodeScalars.contains(where: DisplayText.isUnsafe) else {
            return .failure(DockerRefusal("the server URL on stdin holds a control character"))
        }
        return .success(text)
    }

    /// The registry a server URL names, as the catalog's `registries` lists it: `HOST` or
    /// `HOST:PORT` in lower case, without an `https://` or `http://` prefix or a path (Docker
    /// writes `registry.example.com`, or `https://index.docker.io/v1/` for Docker Hub).
    static func registry(of serverURL: String) -> String {
        var text = Substring(serverURL.lowercased())
        for scheme in ["https://", "http://"] where text.hasPrefix(scheme) {
            text = text.dropFirst(scheme.count)
            break
        }
        return String(text.prefix { $0 != "/" })
    }

    /// True for `HOST` or `HOST:PORT` in lower case: a host of letters, digits, `.` and `-` that
    /// neither starts nor ends with `.` or `-`, or `[IPv6]`; a port from 1 to 65535.
    static func isRegistry(_ text: String) -> Bool {
        var host = Substring(text)
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let inside = host[host.index(after: host.startIndex)..<close]
            guard !inside.isEmpty, inside.allSatisfy({ $0.isHexDigit && !$0.isUppercase || $0 == ":" || $0 == "." }) else { return false }
            host = host[host.index(after: close)...]
            guard host.isEmpty || host.hasPrefix(":") else { return false }
            return host.isEmpty || isPort(host.dropFirst())
        }
        if let colon = host.firstIndex(of: ":") {
            guard isPort(host[host.index(after: colon)...]) else { return false }
            host = host[..<colon]
        }
        guard let first = host.first, let last = host.last, first != "." && first != "-", last != "." && last != "-" else { return false }
        return host.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-" }
    }

    private static func isPort(_ text: Substring) -> Bool {
        guard (1...5).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }), let port = Int(text) else { return false }
        return (1...65535).contains(port)
    }
}

/// A line the protocol answers on stdout, with exit 1.
struct DockerRefusal: Error {
    var line: String
    init(_ line: String) { self.line = line }
}

extension Context {
    /// One catalog entry's Docker registries (`registries`).
    struct DockerRegistration {
        var provider: String
        var registries: [String]
    }

    /// `authflow docker-credential PROVIDER ACTION`, or `docker-credential-authflow ACTION`
    /// (`named` nil: the provider is the one whose `registries` list the server).
    ///
    /// - `get`: `{"ServerURL","Username","Secret"}` for a registry the provider lists: the
    ///   catalog's `registryUsername` (default `oauth2accesstoken`) and a valid access token,
    ///   got as `authflow token` gets it. Any other server: `credentials not found in native keychain`.
    /// - `list`: the registries and their usernames.
    /// - `store`, `erase`: refused (exit 1): the token comes from the provider, and the login is
    ///   `authflow login`'s and `authflow logout`'s to change.
    /// - `version`: the helper's name and version.
    func dockerCredential(_ named: String?, action: String) async -> ExitCode {
        let name = named == nil ? DockerCredential.programName : "authflow docker-credential"
        switch action {
        case "get":
            switch dockerTarget(named) {
            case .answered(let status): return status
            case .found(let target):
                do throws(CLIError) {
                    guard let tokens = try await helperTokens([target.provider]), let token = tokens[target.provider] else {
                        out.write(Self.notLoggedIn(target.provider) + "\n")
                        return .denied
                    }
                    return dockerAnswer(target, token)
                } catch {
                    return dockerFailure(error)
                }
            }
        case "erase":
            switch dockerTarget(named) {
            case .answered(let status): return status
            case .found(let target):
                return dockerRefusal("authflow keeps the login of \(escaped(target.provider)): authflow logout \(escaped(target.provider)) "
                    + "ends it; docker logout does not")
            }
        case "store":
            _ = services.standardInput()  // read, so that Docker's write never meets a closed pipe
            return dockerRefusal("authflow stores no registry password: the token comes from the provider's login (authflow login PROVIDER)")
        case "list":
            do throws(CLIError) {
                var members: [(String, JSONValue)] = []
                for registration in try dockerRegistrations(named) {
                    let username = try catalogUsername("registryUsername", of: registration.provider, default: DockerCredential.defaultUsername)
                    members += registration.registries.map { ($0, JSONValue.string(username)) }
                }
                out.write(JSONValue.text(orderedMembers: members.sorted { $0.0 < $1.0 }) + "\n")
                return .success
            } catch {
                return dockerFailure(error)
            }
        case "version", "--version", "-v":
            out.write("\(name) (authflow) \(Authflow.version)\n")
            return .success
        case "--help", "-h":
            out.write(dockerUsage(name) + "\n")
            return .success
        case "":
            return dockerRefusal(dockerUsage(name))
        default:
            return dockerRefusal("\(name): unknown action: \(escaped(String(action.prefix(80))))")
        }
    }

    private func dockerUsage(_ name: String) -> String { "Usage: \(name) <store|get|erase|list|version>" }

    /// What `get` and `erase` answer for: the server URL Docker wrote, the provider, its username.
    struct DockerTarget {
        var serverURL: String
        var provider: String
        var username: String
    }

    /// The target of `get` or `erase`, or the status of the answer already written.
    enum DockerLookup {
        case found(DockerTarget)
        case answered(ExitCode)
    }

    /// Reads the server URL on stdin and finds the provider that answers for it.
    /// - Returns: the target; or the status after answering a refusal (`credentials not found in
    ///   native keychain` for a registry no provider lists, a bad input, a bad catalog).
    func dockerTarget(_ named: String?) -> DockerLookup {
        let serverURL: String
        switch DockerCredential.serverURL(services.standardInput()) {
        case .success(let url): serverURL = url
        case .failure(let refusal): return .answered(dockerRefusal(refusal.line))
        }
        let registry = DockerCredential.registry(of: serverURL)
        do throws(CLIError) {
            let listing = try dockerRegistrations(named).filter { $0.registries.contains(registry) }
            guard let provider = listing.first?.provider else { return .answered(dockerRefusal(DockerCredential.notFound)) }
            let username = try catalogUsername("registryUsername", of: provider, default: DockerCredential.defaultUsername)
            return .found(DockerTarget(serverURL: serverURL, provider: provider, username: username))
        } catch {
            return .answered(dockerFailure(error))
        }
    }

    /// The answer to `get`: the protocol's JSON on stdout.
    func dockerAnswer(_ target: DockerTarget, _ token: HelperToken) -> ExitCode {
        do throws(CLIError) {
            let secret = try token.bearer(of: target.provider, refusing: "docker-credential does not give it to a registry")
            out.write(JSONValue.line([("ServerURL", .string(target.serverURL)), ("Username", .string(target.username)),
                                      ("Secret", .string(secret.reveal()))]))
            return .success
        } catch {
            return dockerFailure(error)
        }
    }

    /// The registrations `docker-credential` answers from: `named`'s alone (the provider must be
    /// in the catalog; without `registries` it answers for none), or every entry's.
    /// - Throws: ``CLIError`` for an unknown `named` (64), a `registries` that is not an array of
    ///   registries, or a registry two providers list (65).
    func dockerRegistrations(_ named: String?) throws(CLIError) -> [DockerRegistration] {
        if let named { _ = try provider(named) }
        let url = try catalogFile()
        var registrations: [DockerRegistration] = []
        var owners: [String: String] = [:]
        for entry in try catalogEntries() {
            guard let id = entry["id"]?.stringValue, named == nil || named == id, let value = entry["registries"], value != .null else { continue }
            guard let items = value.arrayValue, !items.isEmpty, items.count <= 256 else {
                throw .data("\(url.path): provider \"\(id)\": registries: must be an array of 1 to 256 registries (HOST or HOST:PORT)")
            }
            var registries: [String] = []
            for item in items {
                guard let text = item.stringValue?.lowercased(), DockerCredential.isRegistry(text) else {
                    throw .data("\(url.path): provider \"\(id)\": registries: \(item.stringValue.map { "\"\(String($0.prefix(80)))\"" } ?? "an item") "
                        + "is not a registry (HOST or HOST:PORT, such as ghcr.io or registry.example.com:5000)")
                }
                if let owner = owners[text], owner != id {
                    throw .data("\(url.path): registry \(text) is listed by providers \"\(owner)\" and \"\(id)\"; list it under one")
                }
                owners[text] = id
                registries.append(text)
            }
            registrations.append(DockerRegistration(provider: id, registries: registries))
        }
        return registrations
    }

    /// A protocol refusal: `line` on stdout (what Docker reads and shows), exit 1.
    func dockerRefusal(_ line: String) -> ExitCode {
        out.write(line + "\n")
        return .failure
    }

    /// A failure of the token or the catalog: its sentence on stdout for Docker, the report with
    /// its advice on stderr for the person (`docker pull` shows only that), and its status.
    func dockerFailure(_ error: CLIError) -> ExitCode {
        switch error {
        case .oauth(let error, _): out.write(Self.explain(error) + "\n")
        case .data(let message): out.write(escaped(message) + "\n")
        case .usage(let usage): out.write(escaped(usage.message) + "\n")
        }
        return report(error)
    }
}

extension Authflow {
    /// `docker-credential … get` before the concurrency runtime starts: when the token comes from
    /// the agent or fresh from the store (``quickTokens(_:invocation:output:environment:services:)``)
    /// the answer is written here.
    /// - Returns: nil, with nothing printed, when the full path must get the token; otherwise the status.
    static func dockerGetBeforeRuntime(
        _ named: String?, invocation: Invocation, output: Output, environment: [String: String], services: Services
    ) -> ExitCode? {
        let context = Context(invocation: invocation, output: output, environment: environment, services: services)
        let target: Context.DockerTarget
        switch context.dockerTarget(named) {
        case .answered(let status): return status
        case .found(let found): target = found
        }
        switch quickTokens([target.provider], invocation: invocation, output: output, environment: environment, services: services) {
        case nil:
            return nil
        case .failure(let refusal)?:
            output.stdout.write(refusal.message + "\n")
            output.stderr.write("\(context.errStyle.red("authflow: error:")) \(refusal.message)\n")
            return refusal.status
        case .success(let tokens)?:
            guard let token = tokens[target.provider] else { return nil }
            return context.dockerAnswer(target, token)
        }
    }
}
