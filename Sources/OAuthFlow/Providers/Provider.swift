#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// One authorization server and this client's registration at it.
///
/// Load providers from a JSON catalog with ``ProviderCatalog``, or build one in code; both paths
/// run ``validate()``. Hand them to ``AuthFlow``. Each grant uses the endpoint it needs and
/// throws ``OAuthError`` `.configuration` when that endpoint is missing.
///
/// Its settings are declared once, in ``Settings``, and read and set on the provider itself
/// (`provider.tokenURL`). With an ``Settings/issuer``, endpoints left out are discovered (OpenID
/// Connect Discovery 1.0, RFC 8414) the first time a grant needs one; endpoints written here
/// always win over discovered ones. See ``AuthFlow/metadata(for:)``.
@dynamicMemberLookup
public struct Provider: Sendable, Hashable, CustomStringConvertible {
    /// How the client authenticates at the token endpoint (RFC 6749 §2.3).
    public enum ClientAuthentication: String, Sendable, Hashable, Codable, CaseIterable {
        /// HTTP Basic with the form-encoded id and secret (RFC 6749 §2.3.1); the default with a secret.
        case clientSecretBasic = "client_secret_basic"
        /// `client_id` and `client_secret` in the form body (RFC 6749 §2.3.1).
        case clientSecretPost = "client_secret_post"
        /// A public client: `client_id` in the body, no secret (RFC 6749 §2.1).
        case none = "none"
        /// A JWT signed with the client's private key (``Provider/clientKey``) in the form body
        /// (RFC 7523 §2.2, OpenID Connect Core §9).
        case privateKeyJWT = "private_key_jwt"
        /// A JWT signed with HMAC under the client secret in the form body (OpenID Connect Core §9).
        case clientSecretJWT = "client_secret_jwt"
        /// Mutual TLS with a certificate from a CA the server trusts (RFC 8705 §2.1); `client_id` in the body.
        case tlsClientAuth = "tls_client_auth"
        /// Mutual TLS with a self-signed certificate registered at the server (RFC 8705 §2.2);
        /// `client_id` in the body.
        case selfSignedTLSClientAuth = "self_signed_tls_client_auth"

        /// True for the two mutual-TLS methods (RFC 8705 §2).
        public var isMutualTLS: Bool { self == .tlsClientAuth || self == .selfSignedTLSClientAuth }
    }

    /// What a provider is made of. Read and set each setting on the provider itself
    /// (`provider.tokenURL`, `provider.scopes = ["openid"]`).
    public struct Settings: Sendable {
        /// A unique, stable name such as `github`; also the store key.
        public var id: String

        /// The authorization endpoint (RFC 6749 §3.1); needed for the browser grant.
        public var authorizationURL: URL?

        /// The token endpoint (RFC 6749 §3.2); nil to take it from discovery (then ``issuer`` is required).
        public var tokenURL: URL?

        /// The device authorization endpoint (RFC 8628 §3.1).
        public var deviceAuthorizationURL: URL?

        /// The revocation endpoint (RFC 7009).
        public var revocationURL: URL?

        /// The introspection endpoint (RFC 7662).
        public var introspectionURL: URL?

        /// The OpenID Connect userinfo endpoint.
        public var userinfoURL: URL?

        /// The issuer identifier (RFC 8414 §2): where discovery starts, what ID tokens' `iss` and a
        /// callback's `iss` (RFC 9207) must equal exactly.
        public var issuer: String?

        /// The JWKS URL for ID token signatures; nil to take `jwks_uri` from discovery.
        public var jwksURL: URL?

        /// The RP-initiated logout endpoint (OpenID Connect RP-Initiated Logout 1.0); nil to take
        /// `end_session_endpoint` from discovery.
        public var endSessionURL: URL?

        /// The JWS algorithms accepted for ID tokens, such as `["RS256", "ES256"]`; nil for the
        /// default (see `Documentation/OIDC.md`). `HS256`/`384`/`512` only when named here.
        public var idTokenSigningAlgorithms: [String]?

        /// The `client_id`.
        public var clientID: String

        /// The client secret, resolved at load time (inline, `clientSecretEnv` or `clientSecretFile`).
        public var clientSecret: Secret?

        /// How to authenticate at the token endpoint.
        public var clientAuthentication: ClientAuthentication

        /// The registered redirect URI for the authorization code grant.
        public var redirectURI: URL?

        /// The default scopes to request.
        public var scopes: [String]

        /// Extra authorization request parameters, such as `login_hint` or `prompt`.
        public var authorizationParameters: [String: String]

        /// A `User-Agent` to send instead of the default.
        public var userAgent: String?

        /// Emit debug log events (shapes, never values) for this provider.
        public var debug: Bool

        /// What signs `private_key_jwt` assertions: a ``ClientKey`` (the catalog's `clientKeyFile`)
        /// or your own ``ClientAssertionSigner`` (an HSM or KMS). For the mutual-TLS methods, the
        /// ``ClientKey`` whose file libcurl presents with ``clientCertificate``.
        public var clientKey: (any ClientAssertionSigner)?

        /// The `kid` header of client assertions (catalog `clientKeyID`).
        public var clientKeyID: String?

        /// The client certificate: presented in mutual TLS, and the `x5t#S256` header of
        /// `private_key_jwt` assertions (catalog `clientCertificateFile`).
        public var clientCertificate: ClientCertificate?

        /// The assertion's `alg`; nil for the key's default (``ClientKey/defaultAlgorithm``) or HS256
        /// for `client_secret_jwt` (catalog `clientAssertionAlgorithm`).
        public var clientAssertionAlgorithm: SigningAlgorithm?

        /// The assertion's `aud` (catalog `clientAssertionAudience`); the endpoint's URL by default.
        public var clientAssertionAudience: ClientAssertionAudience

        /// A PEM bundle of CA certificates to trust for this provider's endpoints instead of the
        /// system's (catalog `caFile`).
        public var caFile: String?

        /// A service-account key (catalog `serviceAccountFile`): the provider's grant is then the
        /// JWT-bearer grant (RFC 7523 §2.1), signed with this key, fetched again when due.
        public var serviceAccount: ServiceAccountKey?

        /// The user a service account acts for (`sub` of its JWT-bearer assertions: Google's
        /// domain-wide delegation; catalog `subject`); nil for the account itself.
        public var serviceAccountSubject: String?

        /// Whether tokens are bound to a key with DPoP (RFC 9449; catalog `dpop`); see `Documentation/TokenSource.md`.
        public var dpop: DPoPMode = .off

        /// The DPoP proofs' `alg` (catalog `dpopAlgorithm`); nil for ES256, or the key's default with a ``ClientKey`` as ``dpopKey``.
        public var dpopAlgorithm: SigningAlgorithm?

        /// The DPoP key: a ``ClientKey`` or your own ``DPoPSigner``; nil to have the flow make one
        /// on first use and keep it in the store with the tokens.
        public var dpopKey: (any DPoPSigner)?

        /// Push the authorization request's parameters to the server before sending the browser
        /// there (RFC 9126; catalog `pushedAuthorization`). Also done when discovery says
        /// `require_pushed_authorization_requests`.
        public var pushedAuthorization: Bool = false

        /// The pushed authorization request endpoint (RFC 9126 §2; catalog `pushedAuthorizationURL`);
        /// nil to take discovery's `pushed_authorization_request_endpoint`.
        public var pushedAuthorizationURL: URL?

        /// Sign the authorization request's parameters with ``clientKey`` into a request object
        /// (RFC 9101; catalog `requestObject`).
        public var requestObject: Bool = false

        /// Dynamic client registration (RFC 7591; catalog `registration`): nil for a client registered
        /// by hand (Providers/Provider+Registration.swift).
        public var dynamicRegistration: DynamicRegistration? = nil

        /// The grant, resource indicators and token-exchange settings (Providers/Provider+Grants.swift).
        var grantSettings = GrantSettings()
    }

    /// The settings behind one reference (``CopyOnWrite``).
    private var storage: CopyOnWrite<Settings>

    /// A setting of ``Settings``, read and written on the provider: `provider.scopes`, `provider.tokenURL = url`.
    public subscript<Value>(dynamicMember setting: WritableKeyPath<Settings, Value>) -> Value {
        _read { yield storage[setting] }
        _modify { yield &storage[setting] }
    }

    /// The algorithm assertions are signed with: ``clientAssertionAlgorithm``, else the key's
    /// default, else HS256 for `client_secret_jwt`; nil for other methods or a custom signer
    /// without a configured algorithm.
    public var effectiveClientAssertionAlgorithm: SigningAlgorithm? {
        if let clientAssertionAlgorithm = self.clientAssertionAlgorithm { return clientAssertionAlgorithm }
        switch self.clientAuthentication {
        case .clientSecretJWT: return .hs256
        case .privateKeyJWT: return (self.clientKey as? ClientKey)?.defaultAlgorithm
        default: return nil
        }
    }

    /// Creates a provider; call ``validate()`` (``AuthFlow`` does) before use.
    ///
    /// `clientAuthentication` defaults to `client_secret_basic` with a secret, `private_key_jwt`
    /// with a `clientKey` and no secret, and `none` otherwise.
    public init(
        id: String, authorizationURL: URL? = nil, tokenURL: URL? = nil, deviceAuthorizationURL: URL? = nil,
        revocationURL: URL? = nil, introspectionURL: URL? = nil, userinfoURL: URL? = nil, issuer: String? = nil,
        jwksURL: URL? = nil, endSessionURL: URL? = nil, idTokenSigningAlgorithms: [String]? = nil,
        clientID: String, clientSecret: Secret? = nil,
        clientAuthentication: ClientAuthentication? = nil, redirectURI: URL? = nil, scopes: [String] = [],
        authorizationParameters: [String: String] = [:], userAgent: String? = nil, debug: Bool = false,
        clientKey: (any ClientAssertionSigner)? = nil, clientKeyID: String? = nil, clientCertificate: ClientCertificate? = nil,
        clientAssertionAlgorithm: SigningAlgorithm? = nil, clientAssertionAudience: ClientAssertionAudience = .endpoint,
        caFile: String? = nil, serviceAccount: ServiceAccountKey? = nil, serviceAccountSubject: String? = nil
    ) {
        storage = CopyOnWrite(Settings(
            id: id, authorizationURL: authorizationURL, tokenURL: tokenURL, deviceAuthorizationURL: deviceAuthorizationURL,
            revocationURL: revocationURL, introspectionURL: introspectionURL, userinfoURL: userinfoURL, issuer: issuer,
            jwksURL: jwksURL, endSessionURL: endSessionURL, idTokenSigningAlgorithms: idTokenSigningAlgorithms,
            clientID: clientID, clientSecret: clientSecret,
            clientAuthentication: clientAuthentication ?? Self.defaultClientAuthentication(secret: clientSecret, key: clientKey),
            redirectURI: redirectURI, scopes: scopes, authorizationParameters: authorizationParameters, userAgent: userAgent,
            debug: debug, clientKey: clientKey, clientKeyID: clientKeyID, clientCertificate: clientCertificate,
            clientAssertionAlgorithm: clientAssertionAlgorithm, clientAssertionAudience: clientAssertionAudience, caFile: caFile,
            serviceAccount: serviceAccount, serviceAccountSubject: serviceAccountSubject))
    }

    /// `client_secret_basic` with a secret, `private_key_jwt` with a key and no secret, `none` otherwise.
    static func defaultClientAuthentication(secret: Secret?, key: (any ClientAssertionSigner)?) -> ClientAuthentication {
        secret != nil ? .clientSecretBasic : key != nil ? .privateKeyJWT : .none
    }

    /// True for a client that authenticates (a confidential client, RFC 6749 §2.1): with a secret,
    /// a private key or a client certificate.
    public var isConfidential: Bool {
        switch self.clientAuthentication {
        case .none: return false
        case .clientSecretBasic, .clientSecretPost, .clientSecretJWT: return self.clientSecret != nil
        case .privateKeyJWT: return self.clientKey != nil
        case .tlsClientAuth, .selfSignedTLSClientAuth: return self.clientCertificate != nil && self.clientKey != nil
        }
    }

    /// The grants this provider's configuration supports, from the endpoints written in it
    /// (endpoints discovery would add are not counted).
    public var supportedGrants: [GrantType] {
        var grants: [GrantType] = []
        if self.authorizationURL != nil, self.redirectURI != nil { grants.append(.authorizationCode) }
        if self.deviceAuthorizationURL != nil { grants.append(.deviceCode) }
        if isConfidential { grants.append(.clientCredentials) }
        grants.append(.refreshToken)
        return grants
    }

    /// The provider's id and endpoints; the secret shows as `<redacted>`.
    public var description: String {
        "Provider(id: \(self.id), \(self.tokenURL.map { "token: \($0.absoluteString)" } ?? "issuer: \(self.issuer ?? "none")"), clientID: \(self.clientID), "
            + "clientSecret: \(self.clientSecret == nil ? "none" : "<redacted>"), auth: \(self.clientAuthentication.rawValue))"
    }

    /// Equal when every field but the secret matches and both secrets are equal in constant time.
    public static func == (lhs: Provider, rhs: Provider) -> Bool {
        if lhs.storage.isIdentical(to: rhs.storage) { return true }   // copies of one provider
        let secretsEqual: Bool
        switch (lhs.clientSecret, rhs.clientSecret) {
        case (nil, nil): secretsEqual = true
        case (let a?, let b?): secretsEqual = a.constantTimeEquals(b)
        default: secretsEqual = false
        }
        return secretsEqual && lhs.id == rhs.id && lhs.authorizationURL == rhs.authorizationURL
            && lhs.tokenURL == rhs.tokenURL && lhs.deviceAuthorizationURL == rhs.deviceAuthorizationURL
            && lhs.revocationURL == rhs.revocationURL && lhs.introspectionURL == rhs.introspectionURL
            && lhs.userinfoURL == rhs.userinfoURL && lhs.issuer == rhs.issuer && lhs.jwksURL == rhs.jwksURL
            && lhs.endSessionURL == rhs.endSessionURL && lhs.idTokenSigningAlgorithms == rhs.idTokenSigningAlgorithms
            && lhs.clientID == rhs.clientID && lhs.clientAuthentication == rhs.clientAuthentication
            && lhs.redirectURI == rhs.redirectURI && lhs.scopes == rhs.scopes
            && lhs.authorizationParameters == rhs.authorizationParameters && lhs.userAgent == rhs.userAgent
            && lhs.debug == rhs.debug && lhs.clientKey === rhs.clientKey && lhs.clientKeyID == rhs.clientKeyID
            && lhs.clientCertificate === rhs.clientCertificate && lhs.clientAssertionAlgorithm == rhs.clientAssertionAlgorithm
            && lhs.clientAssertionAudience == rhs.clientAssertionAudience && lhs.caFile == rhs.caFile
            && lhs.serviceAccount === rhs.serviceAccount && lhs.serviceAccountSubject == rhs.serviceAccountSubject
            && lhs.dpop == rhs.dpop && lhs.dpopAlgorithm == rhs.dpopAlgorithm && lhs.dpopKey === rhs.dpopKey
            && lhs.pushedAuthorization == rhs.pushedAuthorization && lhs.pushedAuthorizationURL == rhs.pushedAuthorizationURL
            && lhs.requestObject == rhs.requestObject
            && lhs.grantSettings == rhs.grantSettings
            && Self.sameRegistration(lhs.dynamicRegistration, rhs.dynamicRegistration)
    }

    private static func sameRegistration(_ lhs: DynamicRegistration?, _ rhs: DynamicRegistration?) -> Bool {
        switch (lhs, rhs) {
        case (nil, nil): return true
        case (let a?, let b?): return a.isEqual(to: b)
        default: return false
        }
    }

    /// Hashes the id and client id.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.id)
        hasher.combine(self.clientID)
    }
}
