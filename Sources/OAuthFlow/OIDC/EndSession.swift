#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The logout request of OpenID Connect RP-Initiated Logout 1.0 §2; no state.
enum EndSession {
    /// `endpoint` with `id_token_hint`, `client_id`, `post_logout_redirect_uri` and `state` appended
    /// to any query it already has, values percent-encoded (a space as `%20`).
    /// - Throws: ``OAuthError`` `.configuration` for a `postLogoutRedirectURI` that is not absolute
    ///   or has a fragment, or an endpoint that cannot be extended.
    static func url(
        endpoint: URL, providerID: String, clientID: String, idTokenHint: Secret?, postLogoutRedirectURI: URL?, state: String?
    ) throws(OAuthError) -> URL {
        var query: [(String, String)] = []
        if let idTokenHint { query.append(("id_token_hint", idTokenHint.reveal())) }
        query.append(("client_id", clientID))
        if let postLogoutRedirectURI {
            guard postLogoutRedirectURI.scheme != nil, postLogoutRedirectURI.fragment == nil else {
                throw OAuthError(.configuration, providerID: providerID,
                                 message: "postLogoutRedirectURI must be an absolute URL without a fragment")
            }
            query.append(("post_logout_redirect_uri", postLogoutRedirectURI.absoluteString))
        }
        if let state { query.append(("state", state)) }
        guard var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false) else {
            throw OAuthError(.configuration, providerID: providerID, message: "the end-session endpoint URL cannot be parsed")
        }
        let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
        components.percentEncodedQuery = existing + FormEncoding.encodeQuery(query)
        guard let url = components.url else {
            throw OAuthError(.configuration, providerID: providerID, message: "could not build the end-session URL")
        }
        return url
    }
}
