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
