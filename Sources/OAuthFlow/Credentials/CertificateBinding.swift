#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Certificate-bound access tokens ([RFC 8705 §3](https://www.rfc-editor.org/rfc/rfc8705#section-3)):
/// a server that authenticated the client with mutual TLS may bind the tokens it issues to the
/// client's certificate, and says so with `cnf` `x5t#S256` (the base64url SHA-256 of the
/// certificate's DER) in a JWT access token or an introspection answer.
///
/// For a provider using `tls_client_auth` or `self_signed_tls_client_auth`, that thumbprint must be
/// the one of ``Provider/Settings/clientCertificate``: a token bound to another certificate is useless to
/// this client (and a sign of a mix-up), so it is refused before it is stored. An opaque token, a
/// JWT without `cnf` `x5t#S256`, and every token of a provider that does not use mutual TLS are
/// not checked. The access token's signature is not verified: it is the resource server's to check
/// (RFC 9068 §4), and only its claims are read here.
enum CertificateBinding {
    /// The `cnf` `x5t#S256` of a JWT access token: `.none` when the token is not a JWS (three
    /// base64url parts whose first two are JSON objects) or has no such member; `.malformed`
    /// when `cnf` or `x5t#S256` is there with the wrong type.
    enum Confirmation: Equatable {
        case none
        case thumbprint(String)
        case malformed
    }

    /// Reads the confirmation of `token` (bounded by the token response's own limits).
    static func confirmation(inJWT token: String) -> Confirmation {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = object(parts[0]), header["alg"] != nil, let claims = object(parts[1]) else { return .none }
        return confirmation(in: claims)
    }

    /// The confirmation among the members of a claims set or an introspection answer.
    static func confirmation(in members: [String: JSONValue]) -> Confirmation {
        guard let cnf = members["cnf"], cnf != .null else { return .none }
        guard case .object(let confirmation) = cnf else { return .malformed }
        guard let value = confirmation["x5t#S256"] else { return .none }
        guard case .string(let thumbprint) = value, !thumbprint.isEmpty else { return .malformed }
        return .thumbprint(thumbprint)
    }

    private static func object(_ part: Substring) -> [String: JSONValue]? {
        guard !part.isEmpty, let bytes = Base64URL.decode(String(part)), case .object(let members)? = try? JSONValue.parse(bytes) else {
            return nil
        }
        return members
    }

    /// Checks a token response's access token against `provider`'s client certificate.
    /// - Throws: ``OAuthError`` `.invalidResponse` (recovery: fix the configuration) when the
    ///   token is bound to another certificate or its `cnf` is malformed.
    static func check(accessToken: Secret, provider: Provider, endpoint: OAuthError.Endpoint = .token) throws(OAuthError) {
        guard provider.clientAuthentication.isMutualTLS, let certificate = provider.clientCertificate else { return }
        try check(confirmation(inJWT: accessToken.reveal()), certificate: certificate, provider: provider.id, endpoint: endpoint,
                  what: "the access token")
    }

    /// Checks an introspection answer's `cnf` against `provider`'s client certificate.
    /// - Throws: ``OAuthError`` `.invalidResponse` as ``check(accessToken:provider:endpoint:)``.
    static func check(_ introspection: TokenIntrospection, provider: Provider) throws(OAuthError) {
        guard provider.clientAuthentication.isMutualTLS, let certificate = provider.clientCertificate else { return }
        try check(confirmation(in: introspection.claims), certificate: certificate, provider: provider.id, endpoint: .introspection,
                  what: "the introspection answer")
    }

    private static func check(
        _ confirmation: Confirmation, certificate: ClientCertificate, provider: String, endpoint: OAuthError.Endpoint, what: String
    ) throws(OAuthError) {
        switch confirmation {
        case .none:
            return
        case .malformed:
            throw OAuthError(.invalidResponse, providerID: provider, endpoint: endpoint,
                             message: "\(what): cnf must be an object whose x5t#S256 is a non-empty string (RFC 8705 §3.1)")
        case .thumbprint(let thumbprint):
            guard Array(thumbprint.utf8) == Array(certificate.thumbprint.utf8) else {
                throw OAuthError(.invalidResponse, providerID: provider, endpoint: endpoint,
                                 message: "\(what) is bound to another certificate: its cnf x5t#S256 is not the client certificate's "
                                    + "(\(certificate.thumbprint), RFC 8705 §3.1)")
            }
        }
    }
}
