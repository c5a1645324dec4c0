#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The parameters of an authorization response, parsed from the redirect URL (RFC 6749 §4.1.2).
///
/// The first value of each parameter wins; ``duplicates`` names those that came more than once,
/// which ``AuthFlow`` logs as suspicious. Secrets in it (`code`, `state`) never print.
public struct AuthorizationResponse: Sendable, CustomStringConvertible {
    /// The `code`, when the user approved.
    public let code: Secret?
    /// The `state` echoed back.
    public let state: Secret?
    /// The `iss` (RFC 9207), when the server sends it.
    public let issuer: String?
    /// The error, when the server sent `error` (RFC 6749 §4.1.2.1).
    public let error: ErrorResponse?
    /// Parameter names that appeared more than once.
    public let duplicates: [String]

    /// Parses the query of `callbackURL`.
    /// - Throws: ``OAuthError`` `.invalidCallback` when the URL has no query at all.
    public init(callbackURL: URL) throws(OAuthError) {
        guard let components = URLComponents(url: callbackURL, resolvingAgainstBaseURL: false),
              let query = components.percentEncodedQuery, !query.isEmpty
        else {
            throw OAuthError(.invalidCallback, endpoint: .authorization, message: "the callback URL has no query parameters")
        }
        var first: [String: String] = [:]
        var duplicates: [String] = []
        for (name, value) in FormEncoding.decode(query) {
            if first[name] == nil {
                first[name] = value
            } else if !duplicates.contains(name) {
                duplicates.append(name)
            }
        }
        code = first["code"].flatMap { $0.isEmpty ? nil : Secret($0) }
        state = first["state"].map(Secret.init)
        issuer = first["iss"]
        error = first["error"].flatMap {
            $0.isEmpty ? nil : ErrorResponse(code: .init(rawValue: $0), errorDescription: first["error_description"], errorURI: first["error_uri"])
        }
        self.duplicates = duplicates
    }

    /// A response that is only a `code`: what a provider's page shows for a person to copy (a
    /// paste-back login, ``AuthFlow/completeAuthorization(pasted:request:)``). It has no `state`,
    /// `iss` or error to check.
    init(code: Secret) {
        self.code = code
        state = nil
        issuer = nil
        error = nil
        duplicates = []
    }

    /// The shape of the response; never the code or state.
    public var description: String {
        "AuthorizationResponse(code: \(code == nil ? "none" : "<redacted>"), state: \(state == nil ? "none" : "<redacted>"), "
            + "iss: \(issuer ?? "none"), error: \(error?.code.rawValue ?? "none"), duplicates: \(duplicates))"
    }
}
