#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One key of a catalog's provider entry: what it holds, its default, its OAuthKit aliases, who
/// reads it and how the library decodes it.
///
/// ``ProviderCatalog/settings`` lists every key once. Decoding, the strict known-key check, the
/// typo suggestion and `authflow discover`'s endpoint rows all read that list, and a test holds
/// `Documentation/Catalog.md`'s key table to it, cell by cell.
package struct CatalogSetting: Sendable {
    /// Who reads a key.
    package enum Reader: String, Sendable {
        /// Decoded into ``Provider`` by ``ProviderCatalog``.
        case library
        /// Read from the catalog by the `authflow` CLI; the library only accepts it.
        case cli = "CLI"
        /// Read from the catalog by `authflow agent`; the library only accepts it.
        case agent
        /// Accepted and ignored, so that OAuthKit catalogs load in strict mode.
        case ignored
    }

    /// How the library reads a key.
    enum Decode: Sendable {
        /// Read by itself, in table order, into the provider being built.
        case read(@Sendable (ProviderCatalog.Entry, inout Provider) throws(OAuthError) -> Void)
        /// Read together with the named key, by that key's reader (the keys depend on each other).
        case with(String)
        /// Not read by the library.
        case none
    }

    /// The key as written in the catalog.
    package let key: String
    /// The JSON type, as `Documentation/Catalog.md` writes it.
    package let type: String
    /// The value when the key is left out, as `Documentation/Catalog.md` writes it.
    package let defaultValue: String
    /// OAuthKit's names for the same key: accepted, and equal to the key when both are given.
    package let aliases: [String]
    /// Who reads it.
    package let reader: Reader
    /// One line saying what it is.
    package let doc: String
    /// The discovery document's member (RFC 8414 §2) that supplies it when it is left out.
    package let discovered: String?
    let decode: Decode

    init(
        _ key: String, type: String, default defaultValue: String = "none", aliases: [String] = [], reader: Reader = .library,
        discovered: String? = nil, doc: String, decode: Decode
    ) {
        self.key = key
        self.type = type
        self.defaultValue = defaultValue
        self.aliases = aliases
        self.reader = reader
        self.doc = doc
        self.discovered = discovered
        self.decode = decode
    }
}

// MARK: - Rows by JSON type

extension CatalogSetting {
    /// A row read by `read` into the provider.
    static func custom(
        _ key: String, type: String, default defaultValue: String = "none", aliases: [String] = [], doc: String,
        read: @escaping @Sendable (ProviderCatalog.Entry, inout Provider) throws(OAuthError) -> Void
    ) -> Self {
        Self(key, type: type, default: defaultValue, aliases: aliases, doc: doc, decode: .read(read))
    }

    /// A row read by the reader of `owner`, together with it.
    static func read(
        _ key: String, with owner: String, type: String, default defaultValue: String = "none", doc: String
    ) -> Self {
        Self(key, type: type, default: defaultValue, doc: doc, decode: .with(owner))
    }

    // A row names its setting by a key path into ``Provider/Settings``, taken as an autoclosure and
    // made only when an entry has the key. Key paths are objects the runtime builds from a pattern
    // (demangling their types); made when the table is, the rows' key paths were most of the work of
    // `authflow token` on a cached token (PerformanceLog.md, "2026-12-06: the settings table's key
    // paths and `authflow token`").

    /// An endpoint: a URL string that follows the endpoint rules; discovered from `discovered` when left out.
    static func endpoint(
        _ key: String, _ setting: @autoclosure @escaping @Sendable () -> WritableKeyPath<Provider.Settings, URL?>, type: String = "URL string",
        aliases: [String] = [], discovered: String? = nil, doc: String
    ) -> Self {
        Self(key, type: type, default: discovered.map { "discovered `\($0)`" } ?? "none", aliases: aliases, discovered: discovered,
             doc: doc, decode: .read { entry, provider throws(OAuthError) in
                 if let url = try entry.aliased(key, aliases, { key throws(OAuthError) in try entry.endpoint(key) }) {
                     provider[dynamicMember: setting()] = url
                 }
             })
    }

    /// `true` or `false`.
    static func flag(
        _ key: String, _ setting: @autoclosure @escaping @Sendable () -> WritableKeyPath<Provider.Settings, Bool>, default defaultValue: String = "`false`",
        doc: String
    ) -> Self {
        Self(key, type: "`true` or `false`", default: defaultValue, doc: doc, decode: .read { entry, provider throws(OAuthError) in
            if let flag = try entry.bool(key) { provider[dynamicMember: setting()] = flag }
        })
    }

    /// A string taken as it is.
    static func text(
        _ key: String, _ setting: @autoclosure @escaping @Sendable () -> WritableKeyPath<Provider.Settings, String?>, type: String, doc: String
    ) -> Self {
        Self(key, type: type, doc: doc, decode: .read { entry, provider throws(OAuthError) in
            if let text = try entry.string(key) { provider[dynamicMember: setting()] = text }
        })
    }

    /// A key the library accepts and leaves to someone else (`reader`).
    static func foreign(
        _ key: String, reader: Reader, type: String, default defaultValue: String = "—", doc: String
    ) -> Self {
        Self(key, type: type, default: defaultValue, reader: reader, doc: doc, decode: .none)
    }
}

// MARK: - Derived: the strict check and its suggestion

extension ProviderCatalog {
    /// Every key a provider entry may have: each setting's key and aliases.
    static let knownKeys: Set<String> = Set(settings.flatMap { [$0.key] + $0.aliases })

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
