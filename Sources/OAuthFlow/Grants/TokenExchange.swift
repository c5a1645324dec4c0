#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The token type identifiers of [RFC 8693 §3](https://www.rfc-editor.org/rfc/rfc8693#section-3):
/// what a token exchange's `subject_token_type`, `actor_token_type`, `requested_token_type` and
/// `issued_token_type` hold. Pass them to ``AuthFlow/exchangeToken(provider:subjectToken:subjectTokenType:actorToken:actorTokenType:audience:resources:scopes:requestedTokenType:)``;
/// compare ``Authorization/issuedTokenType`` with them. It throws nothing.
public enum TokenType {
    /// An OAuth 2.0 access token.
    public static let accessToken = "urn:ietf:params:oauth:token-type:access_token"
    /// An OAuth 2.0 refresh token.
    public static let refreshToken = "urn:ietf:params:oauth:token-type:refresh_token"
    /// An OpenID Connect ID token.
    public static let idToken = "urn:ietf:params:oauth:token-type:id_token"
    /// A JWT (RFC 7519), such as a Kubernetes service-account token or a CI's OIDC token: the default subject token type.
    public static let jwt = "urn:ietf:params:oauth:token-type:jwt"
    /// A base64url-encoded SAML 1.1 assertion.
    public static let saml1 = "urn:ietf:params:oauth:token-type:saml1"
    /// A base64url-encoded SAML 2.0 assertion.
    public static let saml2 = "urn:ietf:params:oauth:token-type:saml2"

    /// `token_type` `N_A`: what was issued is not an access token (RFC 8693 §2.2.1).
    static let notApplicable = "N_A"

    /// True for an absolute URI (a scheme, then `:`) of printable ASCII without spaces, as every
    /// token type identifier is.
    static func isValid(_ type: String) -> Bool {
        guard isPrintable(type), let colon = type.firstIndex(of: ":"), colon != type.startIndex else { return false }
        let scheme = type[..<colon]
        return scheme.utf8.allSatisfy { ASCIIText.isAlphanumeric($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }

    /// True for a non-empty string of visible ASCII (0x21–0x7E).
    static func isPrintable(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}

/// The token exchange grant ([RFC 8693 §2.1](https://www.rfc-editor.org/rfc/rfc8693#section-2.1)):
/// a subject token (and optionally an actor token) for a token of this provider.
enum TokenExchangeGrant {
    /// What one exchange sends.
    struct Parameters {
        var subjectToken: Secret
        var subjectTokenType: String
        var actorToken: Secret?
        var actorTokenType: String?
        var audience: [String]
        var resources: [URL]
        var scopes: [String]
        var requestedTokenType: String?
        /// Google STS's `options` (JSON text), from an `external_account` file.
        var options: String? = nil
        /// Google's service-account impersonation, run on the exchange's answer before it is checked.
        var impersonation: ServiceAccountImpersonation? = nil
    }

    /// The request: `grant_type`, `subject_token`, `subject_token_type`, then `actor_token` and
    /// `actor_token_type`, `requested_token_type`, each `audience`, each `resource`, `scope` and
    /// Google's `options` when given. Retried only when it cannot have reached the server: a
    /// subject token may be single use at the server. With an impersonation, the answer is
    /// exchanged again for the service account's token (``ServiceAccountImpersonation``) before
    /// the checks.
    /// - Throws: ``OAuthError`` `.configuration` for a type that is not an absolute URI, an
    ///   actor token without its type (or a type without a token, §2.1), or an invalid resource.
    static func request(_ parameters: Parameters, provider: Provider) throws(OAuthError) -> GrantRequest {
        func fail(_ message: String) -> OAuthError {
            OAuthError(.configuration, providerID: provider.id, message: "token exchange: \(message)")
        }
        guard TokenType.isPrintable(parameters.subjectToken.reveal()) else {
            throw fail("the subject token is empty or holds characters outside visible ASCII")
        }
        guard TokenType.isValid(parameters.subjectTokenType) else {
            throw fail("subject_token_type must be an absolute URI such as \(TokenType.jwt) (RFC 8693 §3)")
        }
        var fields: [(String, String)] = [
            ("grant_type", GrantType.tokenExchange.rawValue), ("subject_token", parameters.subjectToken.reveal()),
            ("subject_token_type", parameters.subjectTokenType),
        ]
        switch (parameters.actorToken, parameters.actorTokenType) {
        case (nil, nil):
            break
        case (let token?, let type?):
            guard TokenType.isPrintable(token.reveal()) else { throw fail("the actor token is empty or holds characters outside visible ASCII") }
            guard TokenType.isValid(type) else { throw fail("actor_token_type must be an absolute URI (RFC 8693 §3)") }
            fields += [("actor_token", token.reveal()), ("actor_token_type", type)]
        case (_?, nil):
            throw fail("an actor token needs its actor_token_type (RFC 8693 §2.1)")
        case (nil, _?):
            throw fail("actor_token_type is given without an actor token (RFC 8693 §2.1)")
        }
        if let requested = parameters.requestedTokenType {
            guard TokenType.isValid(requested) else { throw fail("requested_token_type must be an absolute URI (RFC 8693 §3)") }
            fields.append(("requested_token_type", requested))
        }
        for audience in parameters.audience {
            guard TokenType.isPrintable(audience) else { throw fail("an audience must be a non-empty string of visible ASCII") }
            fields.append(("audience", audience))
        }
        try ResourceIndicators.append(parameters.resources, to: &fields, provider: provider)
        if !parameters.scopes.isEmpty { fields.append(("scope", parameters.scopes.joined(separator: " "))) }
        if let options = parameters.options { fields.append(("options", options)) }
        var followUp: GrantRequest.FollowUp?
        if let impersonation = parameters.impersonation {
            let scopes = parameters.scopes
            followUp = { response, client, now throws(OAuthError) in
                try await impersonation.exchange(response, scopes: scopes, client: client, now: now)
            }
        }
        return GrantRequest(.post(fields, retrying: .beforeResponse), grant: .tokenExchange, requestedScopes: parameters.scopes,
                            followUp: followUp)
    }
}
