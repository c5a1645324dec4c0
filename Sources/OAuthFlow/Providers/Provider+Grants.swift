#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What a provider's grant needs beyond its endpoints and client: the grant that runs
/// with no person (catalog `grant`), resource indicators (catalog `resource`, RFC 8707) and the
/// token-exchange settings (catalog `subjectTokenFile` and friends, RFC 8693).
struct GrantSettings: Sendable, Hashable {
    var grant: GrantType?
    var resources: [URL] = []
    var tokenExchange: Provider.TokenExchange?
}

extension Provider {
    /// How a token exchange (RFC 8693) with this provider gets its subject token and what it asks for.
    ///
    /// Set from the catalog's `subjectTokenFile`, `subjectTokenType`, `audience` and
    /// `requestedTokenType`. With it, ``AuthFlow/accessToken(for:)`` exchanges the file's token
    /// whenever a token is due, reading the file again every time (Kubernetes projected tokens and
    /// CI tokens rotate). See [RFC 8693 §2.1](https://www.rfc-editor.org/rfc/rfc8693#section-2.1).
    public struct TokenExchange: Sendable, Hashable {
        /// The file holding the subject token (such as `/var/run/secrets/tokens/token`); read on every exchange.
        public var subjectTokenFile: String
        /// `subject_token_type`: ``TokenType/jwt`` unless set.
        public var subjectTokenType: String
        /// `audience` values: the logical names of the services the token is for (RFC 8693 §2.1).
        public var audience: [String]
        /// `requested_token_type`, or nil to let the server choose (usually an access token).
        public var requestedTokenType: String?

        /// Settings that exchange the token in `subjectTokenFile`; call ``Provider/validate()`` (``AuthFlow`` does).
        public init(subjectTokenFile: String, subjectTokenType: String = TokenType.jwt, audience: [String] = [], requestedTokenType: String? = nil) {
            self.subjectTokenFile = subjectTokenFile
            self.subjectTokenType = subjectTokenType
            self.audience = audience
            self.requestedTokenType = requestedTokenType
        }
    }

    /// The grant that needs no person, as configured (catalog `grant`): `.clientCredentials`,
    /// `.jwtBearer` or `.tokenExchange`; nil to take it from the rest (see ``serviceGrant``).
    public var grant: GrantType? {
        get { self.grantSettings.grant }
        set { self.grantSettings.grant = newValue }
    }

    /// Resource indicators (RFC 8707, catalog `resource`): absolute URIs without a fragment, each
    /// sent as a `resource` parameter with the authorization request, the code exchange, refresh,
    /// client credentials, JWT-bearer and token exchange.
    public var resources: [URL] {
        get { self.grantSettings.resources }
        set { self.grantSettings.resources = newValue }
    }

    /// The token-exchange settings (catalog `subjectTokenFile` and friends); nil when the provider
    /// does not exchange a file's token.
    public var tokenExchange: TokenExchange? {
        get { self.grantSettings.tokenExchange }
        set { self.grantSettings.tokenExchange = newValue }
    }

    /// The grant ``AuthFlow/accessToken(for:)`` runs by itself, with no person, when nothing valid
    /// is stored: ``grant`` when set, else `.jwtBearer` with a ``Settings/serviceAccount``, else
    /// `.tokenExchange` with ``tokenExchange``; nil otherwise (a client-credentials client without
    /// `grant` is still recognised by having no interactive endpoint).
    public var serviceGrant: GrantType? {
        if let grant { return grant }
        if self.serviceAccount != nil { return .jwtBearer }
        if tokenExchange != nil { return .tokenExchange }
        return nil
    }

    /// True when this provider's JWT-bearer grant signs its assertion with ``Settings/clientKey`` (catalog
    /// `grant: "jwt-bearer"` with `clientKeyFile`), not with a service-account key.
    var signsJWTBearerWithClientKey: Bool {
        serviceGrant == .jwtBearer && self.serviceAccount == nil && self.clientKey != nil
    }

    /// The `alg` of a JWT-bearer assertion signed with ``Settings/clientKey``: ``Settings/clientAssertionAlgorithm``,
    /// else the key's default; nil for a custom signer without a configured algorithm.
    var jwtBearerAlgorithm: SigningAlgorithm? {
        self.clientAssertionAlgorithm ?? (self.clientKey as? ClientKey)?.defaultAlgorithm
    }

    /// The rules of ``validate()`` for ``grant``, ``resources`` and ``tokenExchange``.
    func validateGrantSettings(_ fail: (String, String) -> OAuthError) throws(OAuthError) {
        for (index, resource) in resources.enumerated() {
            if let reason = Self.resourceProblem(resource) { throw fail("resource[\(index)]", reason) }
        }
        if let tokenExchange {
            guard !tokenExchange.subjectTokenFile.isEmpty else { throw fail("subjectTokenFile", "must not be empty") }
            guard TokenType.isValid(tokenExchange.subjectTokenType) else {
                throw fail("subjectTokenType", "must be an absolute URI such as \(TokenType.jwt) (RFC 8693 §3)")
            }
            if let requested = tokenExchange.requestedTokenType, !TokenType.isValid(requested) {
                throw fail("requestedTokenType", "must be an absolute URI such as \(TokenType.accessToken) (RFC 8693 §3)")
            }
            for (index, audience) in tokenExchange.audience.enumerated() where !TokenType.isPrintable(audience) {
                throw fail("audience[\(index)]", "must be a non-empty string of printable ASCII")
            }
        }
        if tokenExchange != nil, let grant, grant != .tokenExchange {
            throw fail("subjectTokenFile", "is for the token-exchange grant, and grant is \(grant.catalogName)")
        }
        if self.serviceAccount != nil, let grant, grant != .jwtBearer {
            throw fail("serviceAccountFile", "is for the jwt-bearer grant, and grant is \(grant.catalogName)")
        }
        switch grant {
        case nil:
            break
        case .clientCredentials?:
            guard isConfidential else {
                throw fail("grant", "client-credentials needs a client that authenticates: a secret, a private key or a client certificate")
            }
        case .jwtBearer?:
            guard self.serviceAccount != nil || self.clientKey != nil else {
                throw fail("grant", "jwt-bearer needs a key to sign the assertion: serviceAccountFile, or clientKeyFile with clientID and tokenURL")
            }
            if self.serviceAccount == nil {
                guard let algorithm = jwtBearerAlgorithm else {
                    throw fail("clientAssertionAlgorithm", "is required with a custom signer (it cannot be derived from the key)")
                }
                if algorithm.isHMAC { throw fail("clientAssertionAlgorithm", "\(algorithm.rawValue) cannot sign a JWT-bearer assertion; use RS*, PS*, ES* or EdDSA") }
                if let key = self.clientKey as? ClientKey, !key.supports(algorithm) {
                    throw fail("clientAssertionAlgorithm", "\(algorithm.rawValue) does not fit the \(key.kind) key; use \(key.defaultAlgorithm.rawValue)")
                }
            }
        case .tokenExchange?:
            guard tokenExchange != nil else {
                throw fail("grant", "token-exchange needs the subject token's file (subjectTokenFile)")
            }
        case let other?:
            throw fail("grant", "must be client-credentials, jwt-bearer or token-exchange (a grant that needs no person), not \(other.rawValue)")
        }
    }

    /// Why `url` may not be a resource indicator (RFC 8707 §2: an absolute URI without a
    /// fragment), or nil when it may.
    static func resourceProblem(_ url: URL) -> String? {
        guard let scheme = url.scheme, !scheme.isEmpty else { return "must be an absolute URI (RFC 8707 §2)" }
        if url.fragment != nil || url.absoluteString.contains("#") { return "must not contain a fragment (RFC 8707 §2)" }
        guard TokenType.isPrintable(url.absoluteString) else { return "must be printable ASCII" }
        return nil
    }
}

extension GrantType {
    /// The catalog's name of a grant that needs no person (`grant` key), or the raw value.
    public var catalogName: String {
        switch self {
        case .clientCredentials: return "client-credentials"
        case .jwtBearer: return "jwt-bearer"
        case .tokenExchange: return "token-exchange"
        default: return rawValue
        }
    }

    /// The grant a catalog's `grant` value names: `client-credentials` (or `client_credentials`),
    /// `jwt-bearer`, `token-exchange`, or the grant's URN; nil for anything else.
    init?(catalogName name: String) {
        switch name {
        case "client-credentials", "client_credentials": self = .clientCredentials
        case "jwt-bearer": self = .jwtBearer
        case "token-exchange": self = .tokenExchange
        default:
            guard let grant = GrantType(rawValue: name) else { return nil }
            self = grant
        }
    }

    /// True for the grants that need no person and are run again, not refreshed, when a token is due.
    var needsNoPerson: Bool { self == .clientCredentials || self == .jwtBearer || self == .tokenExchange }

    /// True for the grants whose answer must carry an ID token when `openid` was asked for and
    /// granted: the authorization code (OpenID Connect Core §3.1.3.3) and CIBA (CIBA Core §10.1.1).
    var requiresIDToken: Bool { self == .authorizationCode || self == .ciba }
}
