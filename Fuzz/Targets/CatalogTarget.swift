// catalog: provider catalog bytes parsed and validated in memory (Providers/ProviderCatalog.swift
// decode, Providers/Provider.swift validate), leniently, strictly, and for one id. No file is read:
// the environment is a fixed dictionary, there is no base directory, and an input naming an
// absolute clientSecretFile is skipped.
import Foundation

enum CatalogTarget {
    /// The value of every secret variable in the fixed environment: it must never appear in a
    /// message or a description (unless the catalog itself spells it).
    static let environmentSecret = "Zq81x-env-secret-value"
    static let environment = ["FUZZ_SECRET": environmentSecret, "GITHUB_CLIENT_SECRET": environmentSecret, "HOME": "home"]
    static let context = ProviderCatalog.Context(source: nil, baseDirectory: nil, environment: environment)

    static func run(_ bytes: [UInt8]) {
        if readsAFile(bytes) { return }
        let spellsSecret = String(decoding: bytes, as: UTF8.self).contains("Zq81x")
        func check(_ error: OAuthError) {
            checkShown(error)
            invariant(error.code == .configuration, "a catalog problem is \(error.code), not .configuration")
            invariant(spellsSecret || !String(reflecting: error).contains(environmentSecret), "a catalog error shows a secret from the environment")
        }
        func load(strict: Bool) -> [Provider]? {
            do {
                return try ProviderCatalog.load(data: Data(bytes), baseDirectory: nil, environment: environment, strict: strict)
            } catch {
                check(error)
                return nil
            }
        }
        let lenient = load(strict: false)
        if let strict = load(strict: true) {
            invariant(lenient != nil, "a catalog loads strictly but not leniently")
            invariant(strict == lenient, "strict and lenient loading give different providers")
        }
        for provider in lenient ?? [] {
            do { try provider.validate() } catch { invariant(false, "a loaded provider fails validate(): \(error)") }
            invariant(spellsSecret || !String(reflecting: provider).contains(environmentSecret), "a provider's description shows its client secret")
            _ = provider.supportedGrants
            do {
                let only = try ProviderCatalog.decode(Data(bytes), context: context, only: provider.id)
                invariant(only == [provider], "loading one id gives another provider")
            } catch {
                invariant(false, "a catalog that loads cannot load its provider alone: \(error)")
            }
        }
        if let lenient { invariant(Set(lenient.map { $0.id.lowercased() }).count == lenient.count, "two providers share an id") }
        // An id that is in no catalog: every entry's id is read, no secret resolved.
        do {
            invariant(try ProviderCatalog.decode(Data(bytes), context: context, only: "no-such-provider").isEmpty, "an absent id was found")
        } catch {
            check(error)
        }
    }

    /// True when some entry names a clientSecretFile that would be opened (an absolute path; the
    /// environment's values are not paths, and relative paths fail without a base directory).
    static func readsAFile(_ bytes: [UInt8]) -> Bool {
        guard let root = try? JSONValue.parse(bytes) else { return false }
        let entries = root.arrayValue ?? root["providers"]?.arrayValue ?? []
        return entries.contains { $0["clientSecretFile"]?.stringValue?.hasPrefix("/") == true }
    }
}
