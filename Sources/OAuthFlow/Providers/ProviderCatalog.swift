#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Glibc

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
        try load(contentsOf: url, environment: environment, strict: false)
    }

    /// Loads the catalog file at `url` as ``load(contentsOf:environment:)`` does; with `strict`, an
    /// unknown key is an error naming it and the closest known key (`clientSecrett` → `clientSecret`).
    ///
    /// The `authflow` CLI loads strictly. Without `strict`, unknown keys are ignored, so catalogs
    /// with extra annotations keep loading.
    /// - Throws: ``OAuthError`` `.configuration` as ``load(contentsOf:environment:)`` does, and for
    ///   an unknown key when `strict`.
    public static func load(
        contentsOf url: URL, environment: [String: String] = ProcessInfo.processInfo.environment, strict: Bool
    ) throws(OAuthError) -> [Provider] {
        try decode(
            try readCatalog(url),
            context: Context(source: url.path, baseDirectory: url.deletingLastPathComponent(), environment: environment,
                             strict: strict))
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
        try load(contentsOf: url, only: id, environment: environment, strict: false)
    }

    /// Loads one provider as ``load(contentsOf:only:environment:)`` does; with `strict`, an unknown
    /// key in that entry (or at the top level) is an error naming the closest known key.
    /// - Throws: ``OAuthError`` `.configuration` as ``load(contentsOf:only:environment:)`` does.
    public static func load(
        contentsOf url: URL, only id: String, environment: [String: String] = ProcessInfo.processInfo.environment, strict: Bool
    ) throws(OAuthError) -> Provider? {
        try decode(try readCatalog(url), context: Context(source: url.path, baseDirectory: url.deletingLastPathComponent(),
                                                         environment: environment, strict: strict), only: id).first
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
        try load(data: data, baseDirectory: baseDirectory, environment: environment, strict: false)
    }

    /// Loads catalog bytes as ``load(data:baseDirectory:environment:)`` does; with `strict`, an
    /// unknown key is an error naming it and the closest known key.
    /// - Throws: ``OAuthError`` `.configuration` as ``load(data:baseDirectory:environment:)`` does.
    public static func load(
        data: Data, baseDirectory: URL? = nil, environment: [String: String] = ProcessInfo.processInfo.environment, strict: Bool
    ) throws(OAuthError) -> [Provider] {
        try decode(data, context: Context(source: nil, baseDirectory: baseDirectory, environment: environment, strict: strict))
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
        /// Unknown keys are errors (see ``ProviderCatalog/knownKeys``) instead of being ignored.
        var strict = false

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
            if context.strict, let unknown = members.keys.sorted().first(where: { $0 != "providers" && $0 != "$schema" }) {
                throw context.error("catalog: \(ProviderCatalog.unknownKey(unknown, known: ["providers", "$schema"]))")
            }
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

// MARK: - Strict mode

extension ProviderCatalog {
    /// Every key a provider entry may have: the documented ones, their OAuthKit aliases, and the
    /// OAuthKit keys that are accepted and ignored (`encodeHttpBody`, `icon`, `authorizationPattern`).
    static let knownKeys: Set<String> = Set<String>([
        "id", "authorizationURL", "tokenURL", "accessTokenURL", "deviceAuthorizationURL", "deviceCodeURL", "revocationURL",
        "introspectionURL", "userinfoURL", "issuer", "jwksURL", "clientID", "clientSecret", "clientSecretEnv",
        "clientSecretFile", "clientAuthentication", "redirectURI", "scopes", "scope", "authorizationParameters", "userAgent",
        "customUserAgent", "debug", "encodeHttpBody", "icon", "authorizationPattern",
        "clientKeyFile", "clientKeyID", "clientCertificateFile", "clientAssertionAlgorithm", "clientAssertionAudience", "caFile",
        "serviceAccountFile", "subject", "dpop", "dpopAlgorithm",
        "pushedAuthorization", "pushedAuthorizationURL", "requestObject",
        "gitUsername",  // read by the authflow CLI (git-credential), not by the library
        "agentAllow",  // read by `authflow agent` (AgentAccess.swift), not by the library
    ]).union(ProviderCatalog.grantKeys)

    /// `"clientSecrett" is not a known key; did you mean "clientSecret"?` The key is shown
    /// escaped and shortened; the suggestion is the known key at the smallest edit distance.
    static func unknownKey(_ key: String, known: Set<String>) -> String {
        let shown = DisplayText.escape(String(key.prefix(64)))
        let scored = known.sorted().map { (key: $0, distance: editDistance(key.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.distance < $1.distance }),
              best.distance <= max(2, best.key.count / 3) else {
            return "\(shown): is not a known key (strict mode; see Documentation/Catalog.md)"
        }
        return "\(shown): is not a known key; did you mean \"\(best.key)\"? (strict mode)"
    }

    /// Levenshtein distance over Unicode scalars; inputs are bounded to 64 scalars by the caller's use.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars.prefix(64)), b = Array(b.unicodeScalars.prefix(64))
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
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
            if context.strict, let unknown = fields.keys.sorted().first(where: { !ProviderCatalog.knownKeys.contains($0) }) {
                throw OAuthError(.configuration, providerID: id, message: context.prefix + "\(label): "
                    + ProviderCatalog.unknownKey(unknown, known: ProviderCatalog.knownKeys))
            }
            let authorizationURL = try endpoint("authorizationURL")
            let tokenURL = try aliased("tokenURL", "accessTokenURL", { key throws(OAuthError) in try endpoint(key) })
            let deviceURL = try aliased(
                "deviceAuthorizationURL", "deviceCodeURL", { key throws(OAuthError) in try endpoint(key) })
            let revocationURL = try endpoint("revocationURL")
            let introspectionURL = try endpoint("introspectionURL")
            let userinfoURL = try endpoint("userinfoURL")
            let issuer = try issuer()
            let serviceAccount = try serviceAccountKey()
            guard tokenURL != nil || issuer != nil || serviceAccount != nil else {
                throw fail("tokenURL", "is required unless issuer is given (OAuthKit's accessTokenURL is accepted too)")
            }
            let jwksURL = try endpoint("jwksURL")
            let endSessionURL = try endpoint("endSessionURL")
            let algorithms = try signingAlgorithms()
            guard let clientID = try string("clientID") ?? serviceAccount?.clientEmail else { throw fail("clientID", "is required") }
            let secret = try clientSecret()
            let grantSettings = try grantSettings()
            let authentication = try clientAuthentication(hasSecret: secret != nil) ?? defaultAuthentication(grantSettings, hasSecret: secret != nil)
            let credentials = try clientCredentials(method: authentication)
            let redirectURI = try redirectURI()
            let scopes = try aliased("scopes", "scope", { key throws(OAuthError) in try scopeList(key) })
            let parameters = try authorizationParameters()
            let userAgent = try aliased("userAgent", "customUserAgent", { key throws(OAuthError) in try headerValue(key) })
            let debug = try bool("debug")

            var provider = Provider(
                id: rawID, authorizationURL: authorizationURL, tokenURL: tokenURL ?? serviceAccount?.tokenURI, deviceAuthorizationURL: deviceURL,
                revocationURL: revocationURL, introspectionURL: introspectionURL, userinfoURL: userinfoURL, issuer: issuer,
                jwksURL: jwksURL, endSessionURL: endSessionURL, idTokenSigningAlgorithms: algorithms, clientID: clientID, clientSecret: secret, clientAuthentication: authentication,
                redirectURI: redirectURI, scopes: scopes ?? [], authorizationParameters: parameters ?? [:],
                userAgent: userAgent, debug: debug ?? false, clientKey: credentials.key, clientKeyID: credentials.keyID,
                clientCertificate: credentials.certificate, clientAssertionAlgorithm: credentials.algorithm,
                clientAssertionAudience: credentials.audience, caFile: credentials.caFile, serviceAccount: serviceAccount,
                serviceAccountSubject: try string("subject"))
            try readDPoP(into: &provider)
            try authorizationRequestOptions(into: &provider)
            provider.grantSettings = grantSettings
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

        static func isScopeToken(_ token: String) -> Bool { Provider.isValidScopeToken(token) }

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
                throw fail(key, "must be one of client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt, "
                    + "tls_client_auth, self_signed_tls_client_auth or none")
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
                // Never the value in a message: it may be a secret pasted here by mistake.
                guard Self.isVariableName(variable) else {
                    throw fail("clientSecretEnv", "must be the name of an environment variable, such as GITHUB_CLIENT_SECRET; "
                        + "the value given (\(Self.shape(variable))) does not look like a variable name")
                }
                guard let value = context.environment[variable] else {
                    throw fail("clientSecretEnv", "the environment variable it names (\(Self.shape(variable))) is not set; "
                        + "the name is not shown in case it is a secret pasted by mistake")
                }
                guard !value.isEmpty else {
                    throw fail("clientSecretEnv", "the environment variable it names (\(Self.shape(variable))) is empty")
                }
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
                throw fail(key, "is a relative path (\(Self.shape(path))), but the catalog has no directory to resolve it "
                    + "against; use an absolute path or pass baseDirectory")
            }
            let data: Data
            do {
                data = try ProviderCatalog.readFile(at: url, limit: ProviderCatalog.maximumSecretFileBytes)
            } catch {
                // The path is not shown: it may be a secret pasted by mistake. Its shape is.
                throw fail(key, "the file it names (\(Self.shape(written))) \(error.reason)", underlying: error.underlying)
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw fail(key, "the file it names (\(Self.shape(written))) is not UTF-8 text")
            }
            // Drop trailing line breaks (an editor's or `echo`'s); by scalar, since "\r\n" is one Character.
            let scalars = text.unicodeScalars
            var end = scalars.endIndex
            while end > scalars.startIndex, scalars[scalars.index(before: end)] == "\n" || scalars[scalars.index(before: end)] == "\r" {
                end = scalars.index(before: end)
            }
            guard end > scalars.startIndex else { throw fail(key, "the file it names (\(Self.shape(written))) is empty") }
            return Secret(String(scalars[..<end]))
        }

        /// Replaces each `${NAME}` with that environment variable, which must be set and non-empty.
        func expandVariables(_ path: String, key: String = "clientSecretFile") throws(OAuthError) -> String {
            var result = ""
            var rest = Substring(path)
            while let start = ASCIIText.firstRange(of: "${", in: rest) {
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

        /// What a value looks like without showing it: its length, and whether it looks like a
        /// path or a variable name (`40 characters, not a path`).
        static func shape(_ value: String) -> String {
            var parts = ["\(value.count) character\(value.count == 1 ? "" : "s")"]
            if value.contains("/") {
                parts.append(value.hasPrefix("/") || value.hasPrefix("${") ? "an absolute path" : "a relative path")
            } else if isVariableName(value) {
                parts.append("letters, digits and '_'")
            } else {
                parts.append("not a path or a variable name")
            }
            return parts.joined(separator: ", ")
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
    ///
    /// The file is opened `O_NONBLOCK | O_CLOEXEC` and `fstat`ed before anything is read: a FIFO,
    /// socket, device or directory is refused at once instead of blocking the open or the read.
    static func readFile(at url: URL, limit: Int) throws(FileProblem) -> Data {
        let file = try openFile(path: url.path)
        var info = stat()
        guard fstat(file.raw, &info) == 0 else { throw FileProblem(reason: "cannot be examined: \(describe(errno))") }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw FileProblem(reason: "is a directory, not a file")
        case S_IFIFO: throw FileProblem(reason: "is a FIFO, not a regular file")
        case S_IFSOCK: throw FileProblem(reason: "is a socket, not a regular file")
        case S_IFCHR, S_IFBLK: throw FileProblem(reason: "is a device, not a regular file")
        default: throw FileProblem(reason: "is not a regular file")
        }
        guard Int(info.st_size) <= limit else { throw FileProblem(reason: "is larger than \(limit >> 10) KiB") }
        // Sized by fstat, not by the limit: zero-filling a limit-sized buffer costs more than
        // reading a small catalog (it is on `authflow token`'s start-up path). One byte more than
        // expected shows a file that grew; the buffer then grows, up to limit + 1.
        var data = [UInt8](repeating: 0, count: min(max(Int(info.st_size), 0), limit) + 1)
        var count = 0
        while count < limit + 1 {
            if count == data.count { data.append(contentsOf: repeatElement(0, count: min(data.count, limit + 1 - data.count))) }
            let read = data.withUnsafeMutableBytes { Glibc.read(file.raw, $0.baseAddress! + count, $0.count - count) }
            if read < 0, errno == EINTR { continue }
            guard read >= 0 else { throw FileProblem(reason: "cannot be read: \(describe(errno))") }
            if read == 0 { break }
            count += read
        }
        // The file may have grown since fstat; keep the bound.
        guard count <= limit else { throw FileProblem(reason: "is larger than \(limit >> 10) KiB") }
        return Data(data[..<count])
    }

    static func describe(_ code: Int32) -> String {
        switch code {
        case EACCES, EPERM: return "permission denied"
        default: return String(cString: strerror(code))
        }
    }

    /// `path` opened for reading (`O_NONBLOCK`: a FIFO without a writer must not hang the open).
    static func openFile(path: String) throws(FileProblem) -> FileDescriptor {
        do throws(SystemError) {
            return try FileDescriptor(opening: path, O_RDONLY | O_NONBLOCK)
        } catch {
            switch error.code {
            case ENOENT: throw FileProblem(reason: "does not exist")
            case ENOTDIR: throw FileProblem(reason: "does not exist (a parent is not a directory)")
            case ENXIO: throw FileProblem(reason: "is not a regular file (a FIFO or socket without a peer)")
            default: throw FileProblem(reason: "cannot be opened: \(ProviderCatalog.describe(error.code))")
            }
        }
    }
}
