#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A client registered dynamically ([RFC 7591 §3.2.1](https://www.rfc-editor.org/rfc/rfc7591#section-3.2.1))
/// and how to manage it ([RFC 7592](https://www.rfc-editor.org/rfc/rfc7592)): the record the flow
/// keeps in its ``SecretStore`` under the key `<provider>.registration`, beside the tokens and
/// like them sealed with the store key when there is one.
///
/// Get it from ``AuthFlow/registerClient(provider:initialAccessToken:)`` or
/// ``AuthFlow/registration(for:)``. The flow applies it to its provider by itself
/// (``applied(to:)``): `clientID`, the secret or the generated key, the method and the registered
/// redirect URI. ``clientSecret``, ``registrationAccessToken`` and the generated key are secrets:
/// `description` and `dump` never show them.
public struct ClientRegistration: Sendable {
    /// The provider the client is registered for.
    public var providerID: String
    /// The issuer of the authorization server it is registered at.
    public var issuer: String
    /// `client_id`.
    public var clientID: String
    /// `client_secret`, for the methods that use one; nil otherwise (a secret a server sends to a
    /// `none` client anyway is not kept).
    public var clientSecret: Secret?
    /// When the secret expires (`client_secret_expires_at`); nil when it never does (`0`).
    public var clientSecretExpiresAt: Date?
    /// `client_id_issued_at`, when the server says.
    public var clientIDIssuedAt: Date?
    /// `registration_access_token` (RFC 7592 §3): what reads, updates and deletes the registration.
    public var registrationAccessToken: Secret?
    /// `registration_client_uri` (RFC 7592 §3): the client configuration endpoint.
    public var registrationClientURI: URL?
    /// `token_endpoint_auth_method` as registered.
    public var tokenEndpointAuthMethod: Provider.ClientAuthentication
    /// `redirect_uris` as registered.
    public var redirectURIs: [URL]
    /// `grant_types` as registered.
    public var grantTypes: [String]
    /// `scope` as registered; empty when the server did not say.
    public var scope: [String]
    /// `client_name` as registered.
    public var clientName: String?
    /// The key made for `private_key_jwt` (its public half was sent as `jwks`); nil for other methods.
    public var clientKey: ClientKey?
    /// The `kid` of ``clientKey``: its RFC 7638 thumbprint, sent in every assertion's header.
    public var clientKeyID: String?
    /// When the flow registered (or last re-read) the client.
    public var updatedAt: Date

    /// The generated key's PEM, kept for the store only.
    var clientKeyPEM: Secret?

    /// The store key of `provider`'s record: `<provider>.registration`.
    public static func storeKey(for provider: String) -> String { provider + suffix }

    /// What ``storeKey(for:)`` appends to the provider id; a provider id may not end with it.
    public static let suffix = ".registration"

    /// True when the secret has expired at `now` (RFC 7591 §3.2.1: `client_secret_expires_at`).
    public func isSecretExpired(at now: Date) -> Bool {
        guard let expiry = clientSecretExpiresAt else { return false }
        return expiry <= now
    }

    /// `provider` as this registration makes it: its client ID, method, secret or key and the
    /// registered redirect URI (a server compares it exactly, port included).
    public func applied(to provider: Provider) -> Provider {
        var provider = provider
        provider.clientID = clientID
        provider.clientAuthentication = tokenEndpointAuthMethod
        switch tokenEndpointAuthMethod {
        case .clientSecretBasic, .clientSecretPost, .clientSecretJWT: provider.clientSecret = clientSecret
        default: provider.clientSecret = nil
        }
        if let clientKey, tokenEndpointAuthMethod == .privateKeyJWT {
            provider.clientKey = clientKey
            provider.clientKeyID = clientKeyID
        }
        if let redirect = redirectURIs.first { provider.redirectURI = redirect }
        return provider
    }

    // MARK: Reading an answer

    /// The longest `client_id` accepted.
    static let maximumIDLength = 256
    /// The longest secret or registration access token accepted.
    static let maximumSecretLength = 4096

    /// The record a registration answer (RFC 7591 §3.2.1) or a read or update answer (RFC 7592
    /// §2.1, §2.2) makes, on top of `previous` for what a management answer leaves out (the
    /// registration access token and URI, the generated key).
    ///
    /// - Parameters:
    ///   - answer: the answer's JSON object.
    ///   - asked: what was sent: the method and metadata to fall back on where the answer is silent.
    ///   - registrationEndpoint: where the request went; the configuration endpoint must be on its origin,
    ///     since the registration access token goes there.
    /// - Throws: ``OAuthError`` `.invalidResponse` (endpoint `.registration`) naming the member at fault:
    ///   no `client_id`, a value too long or holding characters a header or form cannot carry, an
    ///   unknown method, a secret method without a secret, a configuration endpoint elsewhere.
    init(
        answer json: JSONObject, asked: ClientMetadata, previous: ClientRegistration?, providerID: String, issuer: String,
        registrationEndpoint: URL, key: (key: ClientKey, pem: Secret, id: String)?, now: Date
    ) throws(OAuthError) {
        func token(_ name: String, limit: Int) throws(OAuthError) -> String? {
            guard let text = try json.string(name) else { return nil }
            guard !text.isEmpty, text.utf8.count <= limit, text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw json.fail("\(name) is empty, longer than \(limit) bytes, or holds characters outside visible ASCII")
            }
            return text
        }
        guard let clientID = try token("client_id", limit: Self.maximumIDLength) else {
            throw json.fail("client_id is missing (RFC 7591 §3.2.1)")
        }
        if let previous, previous.clientID != clientID {
            throw json.fail("client_id is not the registered client's (RFC 7592 §2.1)")
        }
        self.providerID = providerID
        self.issuer = issuer
        self.clientID = clientID
        // glewlwyd answers a read with the method as an array; the first entry is the method.
        let methodName: String?
        switch json.value("token_endpoint_auth_method") {
        case .string(let text)?: methodName = text
        case .array(let items)?: methodName = items.first?.stringValue
        default: methodName = nil
        }
        if let methodName {
            // Only the methods a registration can carry out: mutual TLS needs a certificate it never makes.
            guard let method = Provider.ClientAuthentication(rawValue: methodName), !method.isMutualTLS else {
                throw json.fail("token_endpoint_auth_method \"\(TokenRejection.printable(String(methodName.prefix(64))))\" is not a method OAuthFlow uses")
            }
            tokenEndpointAuthMethod = method
        } else {
            tokenEndpointAuthMethod = previous?.tokenEndpointAuthMethod ?? asked.tokenEndpointAuthMethod
        }
        let secret = try token("client_secret", limit: Self.maximumSecretLength).map(Secret.init) ?? previous?.clientSecret
        switch tokenEndpointAuthMethod {
        case .clientSecretBasic, .clientSecretPost, .clientSecretJWT:
            guard secret != nil else { throw json.fail("client_secret is missing for \(tokenEndpointAuthMethod.rawValue) (RFC 7591 §3.2.1)") }
            clientSecret = secret
        default:
            clientSecret = nil
        }
        if let seconds = try json.integer("client_secret_expires_at", in: 0...Int(JSONObject.latestDate)) {
            clientSecretExpiresAt = seconds == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(seconds))
        } else {
            clientSecretExpiresAt = json.contains("client_secret") ? nil : previous?.clientSecretExpiresAt
        }
        clientIDIssuedAt = try json.date("client_id_issued_at") ?? previous?.clientIDIssuedAt
        registrationAccessToken = try token("registration_access_token", limit: Self.maximumSecretLength).map(Secret.init)
            ?? previous?.registrationAccessToken
        if let uri = try json.url("registration_client_uri") {
            if let problem = Provider.endpointProblem(uri) { throw json.fail("registration_client_uri \(problem)") }
            guard ResourceDiscovery.origin(of: uri) == ResourceDiscovery.origin(of: registrationEndpoint) else {
                throw json.fail("registration_client_uri is not on the registration endpoint's origin; the registration access token is not sent there")
            }
            registrationClientURI = uri
        } else {
            registrationClientURI = previous?.registrationClientURI
        }
        if let uris = try json.strings("redirect_uris") {
            redirectURIs = try uris.map { text throws(OAuthError) -> URL in
                guard text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }), let url = URL(string: text, encodingInvalidCharacters: false) else {
                    throw json.fail("redirect_uris holds a value that is not a URI")
                }
                return url
            }
        } else {
            redirectURIs = previous?.redirectURIs ?? asked.redirectURIs
        }
        // What is only shown or sent back is read leniently: glewlwyd's read gives `scope` as an
        // array (its client-credentials scopes), where registration answers give a string.
        grantTypes = (try? json.strings("grant_types")) ?? previous?.grantTypes ?? asked.grantTypes
        switch json.value("scope") {
        case .string(let text)?: scope = text.split(separator: " ").map(String.init).filter(Provider.isValidScopeToken)
        default: scope = previous?.scope ?? asked.scope
        }
        clientName = json.value("client_name")?.stringValue.map { String(DisplayText.escape($0).prefix(256)) }
            ?? previous?.clientName ?? asked.clientName
        if tokenEndpointAuthMethod == .privateKeyJWT {
            if let key {
                clientKey = key.key
                clientKeyPEM = key.pem
                clientKeyID = key.id
            } else if let previous, let previousKey = previous.clientKey {
                clientKey = previousKey
                clientKeyPEM = previous.clientKeyPEM
                clientKeyID = previous.clientKeyID
            } else {
                throw json.fail("token_endpoint_auth_method is private_key_jwt, but no key was registered with it")
            }
        }
        updatedAt = now
    }

    /// A record read back from the store (Storage/RegistrationEntry.swift).
    init(
        providerID: String, issuer: String, clientID: String, clientSecret: Secret?, clientSecretExpiresAt: Date?,
        clientIDIssuedAt: Date?, registrationAccessToken: Secret?, registrationClientURI: URL?,
        tokenEndpointAuthMethod: Provider.ClientAuthentication, redirectURIs: [URL], grantTypes: [String], scope: [String],
        clientName: String?, clientKey: ClientKey?, clientKeyPEM: Secret?, clientKeyID: String?, updatedAt: Date
    ) {
        self.providerID = providerID
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientSecretExpiresAt = clientSecretExpiresAt
        self.clientIDIssuedAt = clientIDIssuedAt
        self.registrationAccessToken = registrationAccessToken
        self.registrationClientURI = registrationClientURI
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.redirectURIs = redirectURIs
        self.grantTypes = grantTypes
        self.scope = scope
        self.clientName = clientName
        self.clientKey = clientKey
        self.clientKeyPEM = clientKeyPEM
        self.clientKeyID = clientKeyID
        self.updatedAt = updatedAt
    }

    /// What was registered, as the metadata of an update (RFC 7592 §2.2: the full set, since a
    /// server may drop what an update leaves out), with the key's `jwks` when there is one.
    /// - Throws: ``OAuthError`` `.crypto` when the key's public half cannot be exported.
    func metadata() throws(OAuthError) -> ClientMetadata {
        var jwks: JSONValue?
        if let clientKey { jwks = try ClientKeyMaker.jwks(clientKey, keyID: clientKeyID) }
        return ClientMetadata(
            redirectURIs: redirectURIs, grantTypes: grantTypes, responseTypes: ["code"], tokenEndpointAuthMethod: tokenEndpointAuthMethod,
            clientName: clientName, scope: scope, jwks: jwks,
            extra: tokenEndpointAuthMethod == .none ? ["client_confidential": .bool(false)] : [:])
    }
}

extension ClientRegistration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The provider, issuer, client ID and method, and which secrets are held; never a secret.
    public var description: String {
        "ClientRegistration(provider: \(providerID), issuer: \(issuer), clientID: \(DisplayText.escape(clientID)), "
            + "method: \(tokenEndpointAuthMethod.rawValue), clientSecret: \(clientSecret == nil ? "none" : "<redacted>"), "
            + "registrationAccessToken: \(registrationAccessToken == nil ? "none" : "<redacted>"), key: \(clientKey == nil ? "none" : "<redacted>"))"
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// The same fields as ``description``; what `dump` shows.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "providerID": providerID, "issuer": issuer, "clientID": clientID, "method": tokenEndpointAuthMethod.rawValue,
            "clientSecret": clientSecret == nil ? "none" : "<redacted>",
            "registrationAccessToken": registrationAccessToken == nil ? "none" : "<redacted>",
            "registrationClientURI": registrationClientURI?.absoluteString as Any,
            "clientSecretExpiresAt": clientSecretExpiresAt as Any, "redirectURIs": redirectURIs.map(\.absoluteString),
        ], displayStyle: .struct)
    }
}

/// The key a `private_key_jwt` registration makes, and its public JWK set.
enum ClientKeyMaker {
    /// A fresh key for `algorithm` (RS256: RSA-2048, ES256: P-256) as a ``ClientKey``, its PEM for
    /// the store, and its `kid` (the RFC 7638 thumbprint).
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL fails.
    static func make(_ algorithm: SigningAlgorithm) throws(OAuthError) -> (key: ClientKey, pem: Secret, id: String) {
        let pair = try PrivateKeyPair.generate(for: algorithm.jws)
        var der = try pair.privateKeyDER()
        defer { wipe(&der) }
        let label = algorithm == .es256 ? "EC PRIVATE KEY" : "RSA PRIVATE KEY"
        let body = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        let pem = Secret("-----BEGIN \(label)-----\n\(body)\n-----END \(label)-----\n")
        let key = try ClientKey(pem: pem.reveal())
        return (key, pem, try key.jwkThumbprint())
    }

    /// `{"keys":[…]}` with the key's public JWK, its `kid`, `alg` and `use` (RFC 7517 §5).
    /// - Throws: ``OAuthError`` `.crypto` when the key cannot be exported.
    static func jwks(_ key: ClientKey, keyID: String?) throws(OAuthError) -> JSONValue {
        let text = try key.publicJWK(keyID: keyID, algorithm: key.defaultAlgorithm)
        return .object(["keys": .array([try JSONValue.parse(Data(text.utf8))])])
    }
}
