public import Foundation

/// Loads providers from a JSON catalog and checks every one before returning any.
///
/// A catalog is a JSON array of provider objects, or an object whose `providers` key holds that
/// array. Pass the result to ``AuthFlow/init(providers:store:transport:options:)``, or use
/// ``AuthFlow/init(catalogURL:store:transport:options:)``, which calls
/// ``load(contentsOf:environment:)``. `Documentation/Catalog.md` lists every key, its type,
/// default and alias, and the rules.
///
/// Loading is all or nothing. It stops at the first problem and throws
/// ``OAuthError`` `.configuration`. The message names the catalog file, the provider
/// (`provider #2 ("gitlab")`, counting from 1), the key and the reason. Messages never contain
/// a secret or any other value from the catalog. They contain only the provider's id, key
/// names, environment variable names and file paths.
///
/// Client secrets come from one of three places: `clientSecret` (inline), `clientSecretEnv`
/// (the name of an environment variable) or `clientSecretFile` (a path such as a systemd
/// credential). All three are read when the catalog loads. Catalogs written for OAuthKit
/// load unchanged. Its key names are accepted as aliases, and its trailing commas are
/// allowed.
public enum ProviderCatalog {
    /// Loads and validates the providers in the catalog file at `url`.
    ///
    /// A relative `clientSecretFile` path resolves against the directory that holds the catalog.
    /// Hand the result to ``AuthFlow``. Pass `environment` in tests, and leave the process
    /// environment otherwise.
    ///
    /// - Parameters:
    ///   - url: A `file:` URL. To use a remote catalog, download it yourself and call
    ///     ``load(data:baseDirectory:environment:)``.
    ///   - environment: Where `clientSecretEnv` and `${NAME}` in `clientSecretFile` are looked up.
    /// - Returns: The providers in catalog order, each one already validated with ``Provider/validate()``.
    /// - Throws: ``OAuthError`` `.configuration` when the file cannot be read, is not JSON, or
    ///   any provider is invalid. The message names the file, the provider, the key and the reason.
    public static func load(
        contentsOf url: URL, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) -> [Provider] {
        try decode(
            try readCatalog(url),
            context: Context(source: url.path, baseDirectory: url.deletingLastPathComponent(), environment: environment))
    }

    /// The bytes of a catalog file, bounded in size.
    static func readCatalog(_ url: URL) throws(OAuthError) -> Data {
        guard url.isFileURL else {
            throw OAuthError(
                .configuration,
                message: "the catalog URL must be a file: URL; download a remote catalog yourself and pass its bytes to "
                    + "ProviderCatalog.load(data:baseDirectory:environment:)")
        }
        do {
            return try readFile(at: url, limit: maximumCatalogBytes)
        } catch {
            throw OAuthError(.configuration, message: "catalog \(url.path) \(error.reason)", underlying: error.underlying)
        }
    }

    /// Loads one provider from a catalog file, leaving the other entries' secrets unresolved.
    ///
    /// The whole file must still be valid JSON of the catalog's shape with unique ids, but only
    /// the entry with `id` has its secret resolved and its keys validated. Use it when a process
    /// needs one provider, so another entry's unset `clientSecretEnv` does not stop it (the CLI's
    /// `token`, `login` and `logout` do this).
    /// - Returns: the validated provider, or nil when the catalog has no entry with that exact id.
    /// - Throws: ``OAuthError`` `.configuration` as ``load(contentsOf:environment:)`` does, for the file
    ///   and for that entry.
    public static func load(
        contentsOf url: URL, only id: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) -> Provider? {
        try decode(try readCatalog(url), context: Context(source: url.path, baseDirectory: url.deletingLastPathComponent(),
                                                         environment: environment), only: id).first
    }

    /// Loads and validates the providers in catalog bytes you already hold.
    ///
    /// Use this for a catalog that did not come from a file, such as an embedded string or a
    /// downloaded document. Hand the result to ``AuthFlow``.
    ///
    /// - Parameters:
    ///   - data: UTF-8 JSON. A byte order mark and trailing commas are accepted.
    ///   - baseDirectory: The directory that relative `clientSecretFile` paths resolve against.
    ///     Without it, a relative path is an error.
    ///   - environment: Where `clientSecretEnv` and `${NAME}` in `clientSecretFile` are looked up.
    /// - Returns: The providers in catalog order, each one already validated with ``Provider/validate()``.
    /// - Throws: ``OAuthError`` `.configuration` when the data is not JSON or any provider is
    ///   invalid. The message names the provider, the key and the reason.
    public static func load(
        data: Data, baseDirectory: URL? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) -> [Provider] {
        try decode(data, context: Context(source: nil, baseDirectory: baseDirectory, environment: environment))
    }

    /// Loads and validates the providers in a JSON catalog shipped as a bundle resource.
    ///
    /// This finds `name` (with or without its `.json` extension) in `bundle`, such as
    /// `Bundle.module` or `Bundle.main`, then does what ``load(contentsOf:environment:)`` does.
    /// Relative `clientSecretFile` paths resolve against the resource's directory.
    ///
    /// - Parameters:
    ///   - name: The resource name, such as `providers` or `providers.json`.
    ///   - bundle: The bundle that contains the resource.
    ///   - environment: Where `clientSecretEnv` and `${NAME}` in `clientSecretFile` are looked up.
    /// - Returns: The providers in catalog order, each one already validated.
    /// - Throws: ``OAuthError`` `.configuration` when the resource is missing, or for any reason
    ///   ``load(contentsOf:environment:)`` throws.
    public static func load(
        resource name: String, bundle: Bundle, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) -> [Provider] {
        let base = name.hasSuffix(".json") ? String(name.dropLast(".json".count)) : name
        guard let url = bundle.url(forResource: base, withExtension: "json") else {
            throw OAuthError(
                .configuration, message: "catalog resource \"\(base).json\" is not in the bundle at \(bundle.bundleURL.path)")
        }
        return try load(contentsOf: url, environment: environment)
    }

    /// The largest catalog read, in bytes.
    static let maximumCatalogBytes = 4 << 20
    /// The largest client secret file read, in bytes; a bigger file is almost surely the wrong one.
    static let maximumSecretFileBytes = 64 << 10
}

// MARK: - Decoding

extension ProviderCatalog {
    /// Where a catalog came from and what its secrets resolve against.
    struct Context {
        /// The catalog's path, for messages; nil for bytes given directly.
        var source: String?
        var baseDirectory: URL?
        var environment: [String: String]

        /// Prepended to every message: the catalog's path, when there is one.
        var prefix: String { source.map { "\($0): " } ?? "" }

        func error(_ message: String) -> OAuthError {
            OAuthError(.configuration, message: prefix + message)
        }
    }

    /// Parses and validates the catalog; with `only`, every entry's id is checked but only that
    /// entry is fully read (secrets resolved, keys validated) and returned.
    static func decode(_ data: Data, context: Context, only selected: String? = nil) throws(OAuthError) -> [Provider] {
        let root: JSONValue
        do {
            root = try JSONValue.parse(Array(data))
        } catch {
            throw context.error("catalog is not valid JSON at line \(error.line), column \(error.column): \(error.reason)")
        }
        let entries: [JSONValue]
        switch root {
        case .array(let items):
            entries = items
        case .object(let members):
            guard let list = members["providers"] else {
                throw context.error(
                    "catalog must be a JSON array of providers or an object with a \"providers\" array; this object has no \"providers\" key")
            }
            guard case .array(let items) = list else {
                throw context.error("catalog \"providers\" must be an array of provider objects, found \(list.kind)")
            }
            entries = items
        default:
            throw context.error(
                "catalog must be a JSON array of providers or an object with a \"providers\" array, found \(root.kind)")
        }

        var providers: [Provider] = []
        var seen: [String: (position: Int, id: String)] = [:]
        for (offset, value) in entries.enumerated() {
            let position = offset + 1
            guard case .object(let fields) = value else {
                throw context.error("provider #\(position): must be a JSON object, found \(value.kind)")
            }
            let entry = try Entry(position: position, fields: fields, context: context)
            let id: String
            if let selected, entry.rawID != selected {
                id = entry.rawID
            } else {
                let provider = try entry.provider()
                id = provider.id
                providers.append(provider)
            }
            let key = id.lowercased()
            if let first = seen[key] {
                throw entry.fail("id", "duplicates provider #\(first.position) (\"\(first.id)\"); ids must be unique, ignoring case")
            }
            seen[key] = (position, id)
        }
        return providers
    }
}

// MARK: - One entry

extension ProviderCatalog {
    /// One provider object, read key by key with the key named in every failure.
    struct Entry {
        let position: Int
        let fields: [String: JSONValue]
        let context: Context
        /// The id as written; not shown in messages unless valid.
        private(set) var rawID = ""
        /// The entry's id once known to be valid; shown in messages and set as the error's provider.
        private(set) var id: String?

        init(position: Int, fields: [String: JSONValue], context: Context) throws(OAuthError) {
            self.position = position
            self.fields = fields
            self.context = context
            guard let id = try string("id") else { throw fail("id", "is required") }
            self.rawID = id
            // An invalid id is not echoed; `Provider.validate()` reports it below.
            if Provider.isValidID(id) { self.id = id }
        }

        /// `provider #2 ("gitlab")`, or `provider #2` while the id is unknown or invalid.
        var label: String { id.map { "provider #\(position) (\"\($0)\")" } ?? "provider #\(position)" }

        func fail(_ key: String, _ reason: String, underlying: (any Error)? = nil) -> OAuthError {
            OAuthError(.configuration, providerID: id, message: context.prefix + "\(label): \(key): \(reason)", underlying: underlying)
        }

        func provider() throws(OAuthError) -> Provider {
            let authorizationURL = try endpoint("authorizationURL")
            let tokenURL = try aliased("tokenURL", "accessTokenURL", { key throws(OAuthError) in try endpoint(key) })
            let deviceURL = try aliased(
                "deviceAuthorizationURL", "deviceCodeURL", { key throws(OAuthError) in try endpoint(key) })
            let revocationURL = try endpoint("revocationURL")
            let introspectionURL = try endpoint("introspectionURL")
            let userinfoURL = try endpoint("userinfoURL")
            let issuer = try issuer()
            guard tokenURL != nil || issuer != nil else {
                throw fail("tokenURL", "is required unless issuer is given (OAuthKit's accessTokenURL is accepted too)")
            }
            let jwksURL = try endpoint("jwksURL")
            let endSessionURL = try endpoint("endSessionURL")
            let algorithms = try signingAlgorithms()
            guard let clientID = try string("clientID") else { throw fail("clientID", "is required") }
            let secret = try clientSecret()
            let authentication = try clientAuthentication(hasSecret: secret != nil)
            let redirectURI = try redirectURI()
            let scopes = try aliased("scopes", "scope", { key throws(OAuthError) in try scopeList(key) })
            let parameters = try authorizationParameters()
            let userAgent = try aliased("userAgent", "customUserAgent", { key throws(OAuthError) in try headerValue(key) })
            let debug = try bool("debug")

            let provider = Provider(
                id: rawID, authorizationURL: authorizationURL, tokenURL: tokenURL, deviceAuthorizationURL: deviceURL,
                revocationURL: revocationURL, introspectionURL: introspectionURL, userinfoURL: userinfoURL, issuer: issuer,
                jwksURL: jwksURL, endSessionURL: endSessionURL, idTokenSigningAlgorithms: algorithms, clientID: clientID, clientSecret: secret, clientAuthentication: authentication,
                redirectURI: redirectURI, scopes: scopes ?? [], authorizationParameters: parameters ?? [:],
                userAgent: userAgent, debug: debug ?? false)
            do {
                try provider.validate()
            } catch {
                // `validate()` says `provider "<id>": <key>: <reason>`; keep the key and reason, use our label.
                let theirs = "provider \"\(rawID)\": "
                let detail = error.message.map { $0.hasPrefix(theirs) ? String($0.dropFirst(theirs.count)) : $0 } ?? "is invalid"
                throw OAuthError(.configuration, providerID: id, message: context.prefix + "\(label): \(detail)", underlying: error)
            }
            return provider
        }

        // MARK: Typed keys

        /// The value at `key`; JSON `null` counts as absent.
        func value(_ key: String) -> JSONValue? {
            guard let value = fields[key], value != .null else { return nil }
            return value
        }

        func string(_ key: String) throws(OAuthError) -> String? {
            guard let value = value(key) else { return nil }
            guard case .string(let text) = value else { throw fail(key, "must be a string, found \(value.kind)") }
            return text
        }

        func bool(_ key: String) throws(OAuthError) -> Bool? {
            guard let value = value(key) else { return nil }
            guard case .bool(let flag) = value else { throw fail(key, "must be true or false, found \(value.kind)") }
            return flag
        }

        /// An endpoint URL; the scheme and host rules are ``Provider``'s, reported under the key as written.
        func endpoint(_ key: String) throws(OAuthError) -> URL? {
            guard let text = try string(key) else { return nil }
            guard let url = URL(string: text, encodingInvalidCharacters: false) else {
                throw fail(key, "is not a valid URL")
            }
            if let problem = Provider.endpointProblem(url) { throw fail(key, problem) }
            return url
        }

        /// The issuer identifier: an `https` URL without query or fragment (RFC 8414 §2).
        func issuer() throws(OAuthError) -> String? {
            guard let text = try string("issuer") else { return nil }
            if let problem = Provider.issuerProblem(text) { throw fail("issuer", problem) }
            return text
        }

        /// `idTokenSigningAlgorithms`: a non-empty array of JWS algorithm names, or one string.
        func signingAlgorithms() throws(OAuthError) -> [String]? {
            let key = "idTokenSigningAlgorithms"
            guard let value = value(key) else { return nil }
            let names: [String]
            switch value {
            case .string(let text): names = [text]
            case .array(let items):
                var collected: [String] = []
                for (index, item) in items.enumerated() {
                    guard case .string(let name) = item else { throw fail("\(key)[\(index)]", "must be a string, found \(item.kind)") }
                    collected.append(name)
                }
                names = collected
            default: throw fail(key, "must be an array of algorithm names such as [\"RS256\"], found \(value.kind)")
            }
            guard !names.isEmpty else { throw fail(key, "must name at least one algorithm") }
            for name in names where !Provider.signingAlgorithmNames.contains(name) {
                throw fail(key, name == "none" ? "\"none\" is never accepted (unsigned ID tokens)"
                    : "names an unknown algorithm; use one of \(Provider.signingAlgorithmNames.joined(separator: ", "))")
            }
            return names
        }

        func redirectURI() throws(OAuthError) -> URL? {
            guard let text = try string("redirectURI") else { return nil }
            guard let url = URL(string: text, encodingInvalidCharacters: false) else {
                throw fail("redirectURI", "is not a valid URI")
            }
            return url
        }

        /// An array of scope tokens, or one space-separated string of them (RFC 6749 §3.3).
        func scopeList(_ key: String) throws(OAuthError) -> [String]? {
            guard let value = value(key) else { return nil }
            let reason = "is not a valid scope token (RFC 6749 §3.3 allows printable ASCII except space, '\"' and '\\')"
            switch value {
            case .string(let text):
                let tokens = text.split(separator: " ").map(String.init)
                for (index, token) in tokens.enumerated() where !Self.isScopeToken(token) {
                    throw fail(key, "scope \(index + 1) of the string \(reason)")
                }
                return tokens
            case .array(let items):
                var tokens: [String] = []
                for (index, item) in items.enumerated() {
                    guard case .string(let token) = item else {
                        throw fail("\(key)[\(index)]", "must be a string, found \(item.kind)")
                    }
                    guard Self.isScopeToken(token) else { throw fail("\(key)[\(index)]", reason) }
                    tokens.append(token)
                }
                return tokens
            default:
                throw fail(key, "must be an array of strings or a space-separated string, found \(value.kind)")
            }
        }

        static func isScopeToken(_ token: String) -> Bool {
            !token.isEmpty && token.unicodeScalars.allSatisfy { scalar in
                (0x21...0x7E).contains(scalar.value) && scalar != "\"" && scalar != "\\"
            }
        }

        func authorizationParameters() throws(OAuthError) -> [String: String]? {
            let key = "authorizationParameters"
            guard let value = value(key) else { return nil }
            guard case .object(let members) = value else {
                throw fail(key, "must be an object of string values, found \(value.kind)")
            }
            var parameters: [String: String] = [:]
            for (name, item) in members {
                guard !name.isEmpty else { throw fail(key, "parameter names must not be empty") }
                guard case .string(let text) = item else {
                    throw fail("\(key).\(name)", "must be a string, found \(item.kind)")
                }
                parameters[name] = text
            }
            return parameters
        }

        /// A value sent as an HTTP header: not empty, no control characters.
        func headerValue(_ key: String) throws(OAuthError) -> String? {
            guard let text = try string(key) else { return nil }
            guard !text.isEmpty else { throw fail(key, "must not be empty") }
            guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw fail(key, "must not contain control characters such as line breaks")
            }
            return text
        }

        /// Reads `key` or its OAuthKit `alias`; both may be given only with equal values.
        func aliased<Value: Equatable>(
            _ key: String, _ alias: String, _ read: (String) throws(OAuthError) -> Value?
        ) throws(OAuthError) -> Value? {
            let primary = try read(key)
            let secondary = try read(alias)
            if let primary, let secondary, primary != secondary {
                throw fail("\(key) and \(alias)", "\(alias) is an alias of \(key), and the two are given with different values; keep one")
            }
            return primary ?? secondary
        }

        // MARK: Client authentication

        func clientAuthentication(hasSecret: Bool) throws(OAuthError) -> Provider.ClientAuthentication? {
            let key = "clientAuthentication"
            guard let raw = try string(key) else { return nil }
            guard let method = Provider.ClientAuthentication(rawValue: raw) else {
                throw fail(key, "must be one of client_secret_basic, client_secret_post or none")
            }
            if method == .none, hasSecret {
                throw fail(key, "is none, but a client secret is configured; remove the secret or use client_secret_basic or client_secret_post")
            }
            return method
        }

        /// The client secret from exactly one of `clientSecret`, `clientSecretEnv`, `clientSecretFile`.
        func clientSecret() throws(OAuthError) -> Secret? {
            let inline = try string("clientSecret")
            let variable = try string("clientSecretEnv")
            let file = try string("clientSecretFile")
            let given = [("clientSecret", inline), ("clientSecretEnv", variable), ("clientSecretFile", file)]
                .filter { $0.1 != nil }.map(\.0)
            if given.count > 1 {
                throw fail(
                    given.joined(separator: " and "),
                    "a client secret may come from only one of clientSecret, clientSecretEnv and clientSecretFile; keep one")
            }
            if let inline {
                guard !inline.isEmpty else { throw fail("clientSecret", "must not be empty") }
                return Secret(inline)
            }
            if let variable {
                guard Self.isVariableName(variable) else {
                    throw fail("clientSecretEnv", "must be the name of an environment variable, such as GITHUB_CLIENT_SECRET")
                }
                guard let value = context.environment[variable] else {
                    throw fail("clientSecretEnv", "environment variable \(variable) is not set")
                }
                guard !value.isEmpty else { throw fail("clientSecretEnv", "environment variable \(variable) is empty") }
                return Secret(value)
            }
            if let file { return try secretFile(file) }
            return nil
        }

        func secretFile(_ written: String) throws(OAuthError) -> Secret {
            let key = "clientSecretFile"
            guard !written.isEmpty else { throw fail(key, "must not be empty") }
            guard !written.hasPrefix("~") else { throw fail(key, "\"~\" is not expanded; write ${HOME}/… instead") }
            let path = try expandVariables(written)
            let url: URL
            if path.hasPrefix("/") {
                url = URL(fileURLWithPath: path)
            } else if let base = context.baseDirectory {
                url = base.appendingPathComponent(path).standardizedFileURL
            } else {
                throw fail(key, "\(path) is a relative path, but the catalog has no directory to resolve it against; "
                    + "use an absolute path or pass baseDirectory")
            }
            let data: Data
            do {
                data = try ProviderCatalog.readFile(at: url, limit: ProviderCatalog.maximumSecretFileBytes)
            } catch {
                throw fail(key, "\(url.path) \(error.reason)", underlying: error.underlying)
            }
            guard let text = String(data: data, encoding: .utf8) else { throw fail(key, "\(url.path) is not UTF-8 text") }
            // Drop trailing line breaks (an editor's or `echo`'s); by scalar, since "\r\n" is one Character.
            let scalars = text.unicodeScalars
            var end = scalars.endIndex
            while end > scalars.startIndex, scalars[scalars.index(before: end)] == "\n" || scalars[scalars.index(before: end)] == "\r" {
                end = scalars.index(before: end)
            }
            guard end > scalars.startIndex else { throw fail(key, "\(url.path) is empty") }
            return Secret(String(scalars[..<end]))
        }

        /// Replaces each `${NAME}` with that environment variable, which must be set and non-empty.
        func expandVariables(_ path: String) throws(OAuthError) -> String {
            let key = "clientSecretFile"
            var result = ""
            var rest = Substring(path)
            while let start = rest.range(of: "${") {
                result += rest[..<start.lowerBound]
                guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                    throw fail(key, "has a \"${\" without its closing \"}\"")
                }
                let name = String(rest[start.upperBound..<end])
                guard Self.isVariableName(name) else {
                    throw fail(key, "has an invalid variable reference; write ${NAME} with letters, digits and '_'")
                }
                guard let value = context.environment[name], !value.isEmpty else {
                    let hint = name == "CREDENTIALS_DIRECTORY" ? " (systemd sets it for units with LoadCredential=)" : ""
                    throw fail(key, "environment variable \(name) is not set or is empty\(hint)")
                }
                result += value
                rest = rest[rest.index(after: end)...]
            }
            return result + rest
        }

        static func isVariableName(_ name: String) -> Bool {
            guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else {
                return false
            }
            return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
        }
    }
}

// MARK: - Files

extension ProviderCatalog {
    /// Why a file could not be used, phrased to follow its path.
    struct FileProblem: Error {
        var reason: String
        var underlying: (any Error)?
    }

    /// Reads a regular file of at most `limit` bytes.
    static func readFile(at url: URL, limit: Int) throws(FileProblem) -> Data {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw FileProblem(reason: "does not exist")
        }
        guard !isDirectory.boolValue else { throw FileProblem(reason: "is a directory, not a file") }
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            let denied = (error as NSError).code == CocoaError.fileReadNoPermission.rawValue
            throw FileProblem(reason: denied ? "cannot be read: permission denied" : "cannot be read", underlying: error)
        }
        defer { try? handle.close() }
        let data: Data
        do {
            data = try handle.read(upToCount: limit + 1) ?? Data()
        } catch {
            throw FileProblem(reason: "cannot be read", underlying: error)
        }
        guard data.count <= limit else { throw FileProblem(reason: "is larger than \(limit >> 10) KiB") }
        return data
    }
}
