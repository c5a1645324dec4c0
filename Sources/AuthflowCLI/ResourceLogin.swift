#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// `authflow login URL` and `login PROVIDER --resource URL`: from a protected resource's URL to a
/// catalog entry and a registered client (RFC 9728, RFC 8414, RFC 7591); the registration of any
/// provider with `"registration": "dynamic"` before its login; and the step-up options
/// (`--acr-values`, `--max-age`, RFC 9470).
enum ResourceLogin {
    /// Reads login's resource, registration and step-up options into `login`. A URL in place of
    /// PROVIDER is the resource, and the entry's id is then its host.
    /// - Throws: ``UsageError`` for a resource URL that is not https:// (or loopback http://), a
    ///   `--max-age` that is not a whole number, or an `--acr-values` outside visible ASCII.
    static func parse(_ options: [(name: String, value: String?)], into login: inout LoginOptions) throws(UsageError) {
        func last(_ name: String) -> String? { options.last { $0.name == name }?.value }
        var resource = last("--resource")
        if resource == nil, login.provider.hasPrefix("https://") || login.provider.hasPrefix("http://") {
            resource = login.provider
            login.provider = Context.entryID(forIssuer: login.provider)
        }
        if let resource {
            guard let url = URL(string: resource, encodingInvalidCharacters: false), url.scheme != nil, url.host != nil,
                  url.fragment == nil, resource.hasPrefix("https://") || resource.hasPrefix("http://")
            else { throw UsageError("the resource '\(DisplayText.escape(resource))' is not an absolute http(s) URL", command: "login") }
        }
        login.resource = resource
        login.issuer = last("--issuer")
        login.initialAccessTokenFile = last("--initial-access-token-file")
        if let values = last("--acr-values") {
            guard !values.isEmpty, values.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
                throw UsageError("--acr-values needs space-separated values of visible ASCII", command: "login")
            }
            login.acrValues = values
        }
        if let text = last("--max-age") {
            guard let seconds = Int(text), seconds >= 0 else { throw UsageError("--max-age needs a whole number of seconds, not '\(DisplayText.escape(text))'", command: "login") }
            login.maxAge = seconds
        }
        if login.resource == nil, login.issuer != nil { throw UsageError("--issuer goes with a resource URL", command: "login") }
    }

    /// The authorization parameters of `--acr-values` and `--max-age` (RFC 9470 §4).
    static func stepUpParameters(_ login: LoginOptions) -> [String: String] {
        var parameters: [String: String] = [:]
        if let values = login.acrValues { parameters["acr_values"] = values }
        if let maxAge = login.maxAge { parameters["max_age"] = String(maxAge) }
        return parameters
    }

    /// The `authflow login` line that answers a resource's step-up challenge: the scopes the
    /// token had plus those asked (``ResourceChallenge/scopes(adding:)``), and its `acr_values`
    /// and `max_age`. Every value was checked to be visible ASCII without quotes.
    static func loginLine(provider: String, challenge: ResourceChallenge, held: [String]) -> String {
        var line = "authflow login \(provider) --browser"
        let scopes = challenge.scopes(adding: held)
        if !scopes.isEmpty { line += " --scope '\(scopes.joined(separator: " "))'" }
        if !challenge.acrValues.isEmpty { line += " --acr-values '\(challenge.acrValues.joined(separator: " "))'" }
        if let maxAge = challenge.maxAge { line += " --max-age \(maxAge)" }
        return line
    }
}

extension Context {
    /// `login URL`: the resource's metadata and its server's, then a catalog entry for it
    /// (`{"id", "issuer", "resource", "registration": "dynamic", "scopes"}`) added to the catalog file,
    /// whose path is printed. The login that follows registers the client.
    /// - Returns: the login options for the entry.
    func prepareResourceLogin(_ options: LoginOptions, resource: String) async throws(CLIError) -> LoginOptions {
        guard let url = URL(string: resource) else { throw .usage(UsageError("bad resource URL", command: "login")) }
        let store = try store()
        let flow = try await flow([], store: store)
        let metadata: ProtectedResourceMetadata
        let server: ProviderMetadata
        do {
            metadata = try await flow.resourceMetadata(for: url)
            server = try await flow.authorizationServer(for: metadata, issuer: options.issuer)
        } catch {
            throw .oauth(error, provider: nil)
        }
        err.write(errStyle.dim("Resource \(escaped(metadata.resource.absoluteString)) names \(escaped(server.issuer)) "
            + "(metadata from \(escaped(metadata.metadataURL.absoluteString)))") + "\n")
        guard server.registrationEndpoint != nil else {
            throw .data("\(server.issuer) does not register clients dynamically (no registration_endpoint, RFC 7591); register one by hand "
                + "and add {\"id\": \"\(options.provider)\", \"issuer\": \"\(server.issuer)\", \"resource\": \"\(metadata.resource.absoluteString)\", "
                + "\"clientID\": …} to the catalog")
        }
        // The first login asks for what the resource's challenge named, else what it supports.
        let scopes = options.scopes.isEmpty ? (metadata.challengeScopes.isEmpty ? metadata.scopesSupported ?? [] : metadata.challengeScopes) : options.scopes
        var entry: [(String, JSONValue)] = [
            ("id", .string(options.provider)), ("issuer", .string(server.issuer)), ("resource", .string(metadata.resource.absoluteString)),
            ("registration", .string("dynamic")),
        ]
        if !scopes.isEmpty { entry.append(("scopes", .array(scopes.map(JSONValue.string)))) }
        if metadata.dpopBoundAccessTokensRequired { entry.append(("dpop", .string("required"))) }
        // No initialAccessTokenFile in the entry: such tokens are often good for one registration,
        // and a file gone later would stop the catalog from loading. --initial-access-token-file gives it again.
        let catalog = try configURL()
        let added = try CatalogFile.add(entry, id: options.provider, to: catalog)
        err.write(added ? "Added provider \(escaped(options.provider)) to \(escaped(catalog.path)).\n"
                        : "Provider \(escaped(options.provider)) is in \(escaped(catalog.path)) already.\n")
        var login = options
        login.resource = nil
        login.method = login.method ?? .browser
        return login
    }

    /// `provider` with its registration applied: for a provider with `"registration": "dynamic"`,
    /// the stored registration checked with the server, or a new one (an expired secret registers
    /// again); any other provider as it is. A provider registered for the first time gets a
    /// loopback redirect URI on a free port, which later logins listen on.
    func registered(_ provider: Provider, initialAccessTokenFile: String?) async throws(CLIError) -> Provider {
        guard provider.dynamicRegistration != nil else { return provider }
        var provider = provider
        if provider.redirectURI == nil || provider.awaitsRegistration {
            // A port free now: the registration names it, and every later login listens on it.
            do {
                let probe = try LoopbackReceiver(redirectURI: provider.awaitsRegistration ? nil : provider.redirectURI)
                provider.redirectURI = probe.redirectURI
                probe.close()
            } catch {
                throw .oauth(error, provider: provider.id)
            }
        }
        var token: Secret?
        if let file = initialAccessTokenFile {
            guard let text = try? String(contentsOf: URL(fileURLWithPath: file), encoding: .utf8),
                  case let trimmed = ASCIIText.trimmingBlanksAndNewlines(text), !trimmed.isEmpty else {
                throw .data("cannot read an initial access token from \(file)")
            }
            token = Secret(trimmed)
        }
        let store = try store()
        do {
            let flow = try await AuthFlow(providers: [provider], store: store, transport: transport, options: flowOptions(providers: [provider]))
            let before = try await flow.registration(for: provider.id)
            let registration = try await flow.currentRegistration(provider: provider.id, initialAccessToken: token)
            if before?.clientID != registration.clientID {
                err.write("Registered client \(escaped(registration.clientID)) at \(escaped(registration.issuer)) "
                    + "(\(registration.tokenEndpointAuthMethod.rawValue)).\n")
            }
            var applied = registration.applied(to: provider)
            applied.dynamicRegistration = provider.dynamicRegistration
            return applied
        } catch {
            throw .oauth(error, provider: provider.id)
        }
    }

    /// `logout PROVIDER --unregister`: the logout, then the client deleted at the server (RFC 7592
    /// §2.3) and its stored registration forgotten.
    func logoutUnregistering(_ id: String, localOnly: Bool) async throws(CLIError) -> ExitCode {
        let status = try await logout(id, localOnly: localOnly)
        let provider = try provider(id)
        guard provider.dynamicRegistration != nil else {
            out.write("\(escaped(id)) is not registered dynamically; nothing to unregister.\n")
            return status
        }
        let store = try store()
        do {
            let flow = try await AuthFlow(providers: [provider], store: store, transport: transport, options: flowOptions(providers: [provider]))
            guard let stored = try await flow.registration(for: id) else {
                out.write("No registration is stored for \(escaped(id)).\n")
                return status
            }
            if try await flow.deleteRegistration(provider: id) {
                out.write("Deleted client \(escaped(stored.clientID)) at \(escaped(stored.issuer)) and forgot its registration.\n")
            } else {
                out.write("Forgot the registration of client \(escaped(stored.clientID)); \(escaped(stored.issuer)) offers no way to delete it (RFC 7592).\n")
            }
        } catch {
            throw .oauth(error, provider: id)
        }
        return status
    }
}

/// Adding an entry to a catalog file without rewriting the others: the entry's text is put before
/// the providers array's closing bracket, the result is parsed again to check it, and the file
/// is replaced atomically with its mode kept.
enum CatalogFile {
    /// Adds `entry` to the catalog at `url` (made, with mode 0600, when there is none).
    /// - Returns: false when an entry with `id` and the same resource is there already.
    /// - Throws: ``CLIError`` `.data` when another entry has `id`, or the file's shape leaves no
    ///   safe place to add it (then the entry to add by hand is in the message).
    static func add(_ entry: [(String, JSONValue)], id: String, to url: URL) throws(CLIError) -> Bool {
        let text = JSONValue.text(orderedMembers: entry)
        let manager = FileManager.default
        guard manager.fileExists(atPath: url.path) else {
            do {
                try manager.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
                                            attributes: [.posixPermissions: 0o700])
                try Data("[\n  \(text)\n]\n".utf8).write(to: url, options: .atomic)
                try manager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
            } catch {
                throw .data("cannot write the catalog \(url.path); add this entry to a catalog yourself: \(text)")
            }
            return true
        }
        let original: String
        do { original = try String(contentsOf: url, encoding: .utf8) } catch { throw .data("cannot read the catalog \(url.path)") }
        let existing = entries(original)
        if let same = existing.first(where: { $0["id"]?.stringValue == id }) {
            let resource = entry.first { $0.0 == "resource" }?.1
            guard same["resource"] == resource else {
                throw .data("the catalog \(url.path) has a provider \"\(id)\" already; choose another id: authflow login ID --resource URL")
            }
            return false
        }
        guard let updated = inserted(text, into: original), entries(updated).count == existing.count + 1,
              entries(updated).contains(where: { $0["id"]?.stringValue == id })
        else {
            throw .data("cannot add to the catalog \(url.path) safely; add this entry to its providers yourself: \(text)")
        }
        do {
            let mode = (try? manager.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int) ?? 0o600
            try Data(updated.utf8).write(to: url, options: .atomic)
            try manager.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
        } catch {
            throw .data("cannot write the catalog \(url.path); add this entry yourself: \(text)")
        }
        return true
    }

    /// The provider objects of a catalog's text (an array, or an object's `providers`); empty when it cannot be read.
    static func entries(_ text: String) -> [[String: JSONValue]] {
        guard let document = try? JSONValue.parse(Data(text.utf8)) else { return [] }
        let list = document.arrayValue ?? document["providers"]?.arrayValue ?? []
        return list.compactMap(\.objectValue)
    }

    /// `original` with `entry` before the last `]` (the providers array's end in both catalog shapes),
    /// after a comma when the array holds something; nil when there is no `]` followed only by
    /// blanks and one `}`.
    static func inserted(_ entry: String, into original: String) -> String? {
        guard let close = original.lastIndex(of: "]") else { return nil }
        let after = original[original.index(after: close)...].filter { !$0.isWhitespace }
        guard after.isEmpty || after == "}" else { return nil }
        let before = original[..<close]
        guard let last = before.last(where: { !$0.isWhitespace }) else { return nil }
        let separator = last == "[" || last == "," ? "" : ","
        let trimmed = before.reversed().drop(while: \.isWhitespace).reversed()
        return String(trimmed) + separator + "\n  " + entry + "\n" + original[close...]
    }
}
