#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The catalog keys of client authentication: `clientAuthentication`, and the keys of
// authentication without a shared secret (`clientKeyFile`, `clientKeyID`, `clientCertificateFile`,
// `clientAssertionAlgorithm`, `clientAssertionAudience`, `caFile`, `serviceAccountFile`). Files are
// read and checked when the catalog loads; a problem is `.configuration` naming the key, the file
// and what is wrong, never the file's contents. Whether the method and the keys fit together is
// ``Provider/validate()``'s to say.

extension ProviderCatalog.Entry {
    /// `clientAuthentication`; nil when absent (``defaultAuthentication(_:)`` then chooses).
    func clientAuthentication(hasSecret: Bool) throws(OAuthError) -> Provider.ClientAuthentication? {
        let key = "clientAuthentication"
        guard let raw = try string(key) else { return nil }
        guard let method = Provider.ClientAuthentication(rawValue: raw) else {
            throw fail(key, "must be one of client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt, "
                + "tls_client_auth, self_signed_tls_client_auth or none")
        }
        if method == .none, hasSecret {
            throw fail(key, "is none, but a client secret is configured; remove the secret or use client_secret_basic or client_secret_post")
        }
        return method
    }

    /// The client authentication of an entry that names none: `none` for a JWT-bearer grant
    /// signed with `clientKeyFile` and no secret (the assertion is the credential, RFC 7523
    /// §2.1); `private_key_jwt` with a `clientAssertionFile` and no secret; else
    /// `client_secret_basic` with a secret, `private_key_jwt` with a key, `none`.
    func defaultAuthentication(_ provider: Provider) -> Provider.ClientAuthentication {
        if provider.signsJWTBearerWithClientKey, provider.clientSecret == nil { return .none }
        if provider.clientAssertionFile != nil, provider.clientSecret == nil { return .privateKeyJWT }
        return Provider.defaultClientAuthentication(secret: provider.clientSecret, key: provider.clientKey)
    }

    /// `clientAssertionFile`: the path of the file holding a client assertion made elsewhere.
    /// Only named here: it is read on every request, since the platform rewrites it.
    func clientAssertionFile() throws(OAuthError) -> String? {
        guard let written = try string("clientAssertionFile") else { return nil }
        return try credentialPath("clientAssertionFile", written)
    }

    /// `clientKeyFile`: the private key, read and checked (``ClientKey``).
    func clientKey() throws(OAuthError) -> ClientKey? {
        try credentialFile("clientKeyFile", label: "client key file") { path throws(OAuthError) in try ClientKey(contentsOfFile: path) }
    }

    /// `clientCertificateFile`: the certificate chain, read and checked (``ClientCertificate``).
    func clientCertificate() throws(OAuthError) -> ClientCertificate? {
        try credentialFile("clientCertificateFile", label: "client certificate file") { path throws(OAuthError) in
            try ClientCertificate(contentsOfFile: path)
        }
    }

    /// `caFile`: the path of a file holding at least one PEM certificate.
    func caFile() throws(OAuthError) -> String? {
        guard let written = try string("caFile") else { return nil }
        let path = try credentialPath("caFile", written)
        let blocks: [PEMBlock]
        do {
            blocks = try PEMBlock.parse(try CredentialFile.read(path, isPrivate: false))
        } catch {
            throw fail("caFile", "\(DisplayText.escape(path)) \(error.reason)")
        }
        guard blocks.contains(where: { $0.label == "CERTIFICATE" }) else {
            throw fail("caFile", "\(DisplayText.escape(path)) holds no PEM certificate (BEGIN CERTIFICATE)")
        }
        return path
    }

    /// `clientKeyID`: a non-empty string without control characters.
    func clientKeyID() throws(OAuthError) -> String? {
        guard let keyID = try string("clientKeyID") else { return nil }
        guard !keyID.isEmpty, keyID.unicodeScalars.allSatisfy({ !DisplayText.isUnsafe($0) }) else {
            throw fail("clientKeyID", "must be a non-empty string without control characters")
        }
        return keyID
    }

    /// `clientAssertionAlgorithm`: a JWS algorithm this library signs with.
    func clientAssertionAlgorithm() throws(OAuthError) -> SigningAlgorithm? {
        guard let name = try string("clientAssertionAlgorithm") else { return nil }
        guard let algorithm = SigningAlgorithm(rawValue: name) else {
            throw fail("clientAssertionAlgorithm", "must be one of " + SigningAlgorithm.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return algorithm
    }

    /// `clientAssertionAudience`: `endpoint`, `issuer` or an absolute URI.
    func clientAssertionAudience() throws(OAuthError) -> ClientAssertionAudience? {
        guard let value = try string("clientAssertionAudience") else { return nil }
        guard let audience = ClientAssertionAudience(catalogValue: value) else {
            throw fail("clientAssertionAudience", "must be \"endpoint\", \"issuer\" or an absolute URI")
        }
        return audience
    }

    /// `serviceAccountFile`: a Google-style service-account key, read and checked (``ServiceAccountKey``).
    func serviceAccountKey() throws(OAuthError) -> ServiceAccountKey? {
        try credentialFile("serviceAccountFile", label: "service account file") { path throws(OAuthError) in
            try ServiceAccountKey(contentsOfFile: path)
        }
    }

    /// The file named at `key`, made into a value by `load`; `load`'s failure is reported under
    /// the key, with the path but without `label` (the loader's own name for the file).
    func credentialFile<Value>(
        _ key: String, label: String, _ load: (String) throws(OAuthError) -> Value
    ) throws(OAuthError) -> Value? {
        guard let written = try string(key) else { return nil }
        let path = try credentialPath(key, written)
        do {
            return try load(path)
        } catch {
            throw fail(key, Self.withoutLabel(error.message, path: path, label: label), underlying: error)
        }
    }

    /// `written` with `${NAME}` expanded and, when relative, resolved against the catalog's
    /// directory (as `clientSecretFile` is).
    func credentialPath(_ key: String, _ written: String) throws(OAuthError) -> String {
        guard !written.isEmpty else { throw fail(key, "must not be empty") }
        guard !written.hasPrefix("~") else { throw fail(key, "\"~\" is not expanded; write ${HOME}/… instead") }
        let path = try expandVariables(written, key: key)
        if path.hasPrefix("/") { return path }
        guard let base = context.baseDirectory else {
            throw fail(key, "is a relative path (\(DisplayText.escape(path))), but the catalog has no directory to resolve it "
                + "against; use an absolute path or pass baseDirectory")
        }
        return base.appendingPathComponent(path).standardizedFileURL.path
    }

    /// `/etc/key.pem is readable …` from `client key file /etc/key.pem is readable …`: the
    /// catalog's message names the key, then the path.
    static func withoutLabel(_ message: String?, path: String, label: String) -> String {
        guard let message else { return "\(DisplayText.escape(path)) cannot be used" }
        let prefix = label + " "
        return message.hasPrefix(prefix) ? String(message.dropFirst(prefix.count)) : message
    }
}
