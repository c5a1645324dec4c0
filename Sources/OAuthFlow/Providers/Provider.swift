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
        /// A JWT signed with the client's private key (``Provider/Settings/clientKey``) in the form body
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
    ///
    /// Its equality, and so the provider's, is the compiler's, derived from these declarations:
    /// a setting added here is compared without being listed again. The few settings whose type is
    /// not `Equatable` say how they compare with a wrapper: ``ComparedInConstantTime`` for the
    /// secret, ``ComparedByIdentity`` for keys, certificates and signers.
    public struct Settings: Sendable, Equatable {
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
        @ComparedInConstantTime public var clientSecret: Secret?

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
        @ComparedByIdentity public var clientKey: (any ClientAssertionSigner)?

        /// The `kid` header of client assertions (catalog `clientKeyID`).
        public var clientKeyID: String?

        /// The client certificate: presented in mutual TLS, and the `x5t#S256` header of
        /// `private_key_jwt` assertions (catalog `clientCertificateFile`).
        @ComparedByIdentity public var clientCertificate: ClientCertificate?

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
        @ComparedByIdentity public var serviceAccount: ServiceAccountKey?

        /// The user a service account acts for (`sub` of its JWT-bearer assertions: Google's
        /// domain-wide delegation; catalog `subject`); nil for the account itself.
        public var serviceAccountSubject: String?

        /// Whether tokens are bound to a key with DPoP (RFC 9449; catalog `dpop`); see `Documentation/TokenSource.md`.
        public var dpop: DPoPMode = .off

        /// The DPoP proofs' `alg` (catalog `dpopAlgorithm`); nil for ES256, or the key's default with a ``ClientKey`` as ``dpopKey``.
        public var dpopAlgorithm: SigningAlgorithm?

        /// The DPoP key: a ``ClientKey`` or your own ``DPoPSigner``; nil to have the flow make one
        /// on first use and keep it in the store with the tokens.
        @ComparedByIdentity public var dpopKey: (any DPoPSigner)? = nil

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

        /// The backchannel authentication endpoint (OpenID Connect CIBA Core 1.0 §7; catalog
        /// `backchannelAuthenticationURL`); nil to take discovery's `backchannel_authentication_endpoint`.
        public var backchannelAuthenticationURL: URL?

        /// How a CIBA login learns that the person answered (catalog `cibaDeliveryMode`): by polling
        /// the token endpoint, or woken by the server's ping (CIBA Core §5).
        public var cibaDeliveryMode: CIBADeliveryMode = .poll

        /// The `login_hint` a CIBA login sends when the call names no one (catalog `cibaLoginHint`);
        /// with it, `authflow agent` re-authorizes the provider through CIBA.
        public var cibaLoginHint: String?

        /// A file holding a client assertion made elsewhere, read on every request that
        /// authenticates the client and sent as `client_assertion` (`private_key_jwt`, RFC 7523
        /// §2.2): a federated credential such as Entra ID's workload identity token
        /// (`AZURE_FEDERATED_TOKEN_FILE`), in place of ``clientKey`` (catalog `clientAssertionFile`).
        public var clientAssertionFile: String?

        /// Dynamic client registration (RFC 7591; catalog `registration`): nil for a client registered
        /// by hand (Providers/Provider+Registration.swift).
        public var dynamicRegistration: DynamicRegistration? = nil

        /// The grant, resource indicators and token-exchange settings (Providers/Provider+Grants.swift).
        var grantSettings = GrantSettings()
    }

    /// The settings behind one reference (``CopyOnWrite``).
    @usableFromInline var storage: CopyOnWrite<Settings>

    /// A setting of ``Settings``, read and written on the provider: `provider.scopes`, `provider.tokenURL = url`.
    @inlinable
    public subscript<Value>(dynamicMember setting: WritableKeyPath<Settings, Value>) -> Value {
        _read { yield storage[setting] }
        _modify { yield &storage[setting] }
    }

    /// The algorithm assertions are signed with: ``Settings/clientAssertionAlgorithm``, else the key's
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
    /// with a `clientKey` and no secret, and `none` otherwise. The parameters are the settings
    /// this initializer has always taken, kept so that code calling it compiles; every other
    /// setting (DPoP, pushed authorization, request objects, ``grant``, ``resources``,
    /// ``tokenExchange``) keeps its default here and is set on the provider afterwards, as a new
    /// setting will be.
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
    /// a private key, a client assertion file or a client certificate.
    public var isConfidential: Bool {
        switch self.clientAuthentication {
        case .none: return false
        case .clientSecretBasic, .clientSecretPost, .clientSecretJWT: return self.clientSecret != nil
        case .privateKeyJWT: return self.clientKey != nil || self.clientAssertionFile != nil
        case .tlsClientAuth, .selfSignedTLSClientAuth: return self.clientCertificate != nil && self.clientKey != nil
        }
    }

    /// The grants this provider's configuration supports, from the endpoints written in it
    /// (endpoints discovery would add are not counted).
    public var supportedGrants: [GrantType] {
        var grants: [GrantType] = []
        if self.authorizationURL != nil, self.redirectURI != nil { grants.append(.authorizationCode) }
        if self.deviceAuthorizationURL != nil { grants.append(.deviceCode) }
        if self.backchannelAuthenticationURL != nil, isConfidential { grants.append(.ciba) }
        if isConfidential { grants.append(.clientCredentials) }
        grants.append(.refreshToken)
        return grants
    }

    /// The provider's id and endpoints; the secret shows as `<redacted>`.
    public var description: String {
        "Provider(id: \(self.id), \(self.tokenURL.map { "token: \($0.absoluteString)" } ?? "issuer: \(self.issuer ?? "none")"), clientID: \(self.clientID), "
            + "clientSecret: \(self.clientSecret == nil ? "none" : "<redacted>"), auth: \(self.clientAuthentication.rawValue))"
    }

    /// Equal when every setting of ``Settings`` is (the secret compared in constant time; keys,
    /// certificates and signers by identity).
    public static func == (lhs: Provider, rhs: Provider) -> Bool {
        // Sharing one box: copies of one provider, unchanged since.
        lhs.storage.isIdentical(to: rhs.storage) || lhs.storage.fields == rhs.storage.fields
    }

    /// Hashes the id and client id.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.id)
        hasher.combine(self.clientID)
    }
}

extension Provider {
    /// How ``Settings`` compares the client secret: in constant time
    /// (``Secret/constantTimeEquals(_:)``), as `Secret` is deliberately not `Equatable`.
    ///
    /// You never name it: read and set ``Settings/clientSecret`` on the provider
    /// (`provider.clientSecret`). It lets the compiler derive the settings' equality.
    @propertyWrapper
    public struct ComparedInConstantTime: Sendable, Equatable {
        /// The secret.
        public var wrappedValue: Secret?

        /// Wraps a secret.
        public init(wrappedValue: Secret?) { self.wrappedValue = wrappedValue }

        /// Equal when neither has a secret, or both have one and they are equal in constant time.
        public static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs.wrappedValue, rhs.wrappedValue) {
            case (nil, nil): return true
            case (let a?, let b?): return a.constantTimeEquals(b)
            default: return false
            }
        }
    }

    /// How ``Settings`` compares a key, a certificate or a signer: by identity, the same object,
    /// since these are objects (a key in an HSM, a signer of your own) with no value to compare.
    ///
    /// You never name it: read and set the setting on the provider (`provider.clientKey`). It
    /// lets the compiler derive the settings' equality. `Object` is a class or a protocol only
    /// classes adopt.
    @propertyWrapper
    public struct ComparedByIdentity<Object: Sendable>: Sendable, Equatable {
        /// The object.
        public var wrappedValue: Object?

        /// Wraps an object.
        public init(wrappedValue: Object?) { self.wrappedValue = wrappedValue }

        /// Equal when neither has an object, or both hold the same one.
        public static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs.wrappedValue, rhs.wrappedValue) {
            case (nil, nil): return true
            case (let a?, let b?): return (a as AnyObject) === (b as AnyObject)
            default: return false
            }
        }
    }
}
