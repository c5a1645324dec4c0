public import Foundation

/// Loads providers from a JSON catalog (stub; the full loader follows).
public enum ProviderCatalog {
    /// Loads and validates the providers in the file at `url`.
    /// - Throws: ``OAuthError`` `.configuration`.
    public static func load(contentsOf url: URL) throws(OAuthError) -> [Provider] {
        throw OAuthError(.configuration, message: "not yet implemented")
    }
}
