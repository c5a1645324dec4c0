#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The catalog keys of client authentication without a shared secret (issue 17): `clientKeyFile`,
// `clientKeyID`, `clientCertificateFile`, `clientAssertionAlgorithm`, `clientAssertionAudience`,
// `caFile`. Files are read and checked when the catalog loads; a problem is `.configuration`
// naming the key, the file and what is wrong, never the file's contents.

extension ProviderCatalog.Entry {
    /// What the new keys hold once read and checked.
    struct ClientCredentialKeys {
        var key: ClientKey?
        var keyID: String?
        var certificate: ClientCertificate?
        var algorithm: SigningAlgorithm?
        var audience: ClientAssertionAudience = .endpoint
        var caFile: String?
    }

    /// Reads `clientKeyFile`, `clientKeyID`, `clientCertificateFile`, `clientAssertionAlgorithm`,
    /// `clientAssertionAudience` and `caFile`; `method` is the explicit `clientAuthentication`.
    func clientCredentials(method: Provider.ClientAuthentication?) throws(OAuthError) -> ClientCredentialKeys {
        var keys = ClientCredentialKeys()
        if let written = try string("clientKeyFile") {
            let path = try credentialPath("clientKeyFile", written)
            do {
                keys.key = try ClientKey(contentsOfFile: path)
            } catch {
                throw fail("clientKeyFile", Self.withoutLabel(error.message, path: path, label: "client key file"), underlying: error)
            }
        }
        if let written = try string("clientCertificateFile") {
            let path = try credentialPath("clientCertificateFile", written)
            do {
                keys.certificate = try ClientCertificate(contentsOfFile: path)
            } catch {
                throw fail("clientCertificateFile", Self.withoutLabel(error.message, path: path, label: "client certificate file"), underlying: error)
            }
        }
        if let written = try string("caFile") {
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
            keys.caFile = path
        }
        if let keyID = try string("clientKeyID") {
            guard !keyID.isEmpty, keyID.unicodeScalars.allSatisfy({ !DisplayText.isUnsafe($0) }) else {
                throw fail("clientKeyID", "must be a non-empty string without control characters")
            }
            keys.keyID = keyID
        }
        if let name = try string("clientAssertionAlgorithm") {
            guard let algorithm = SigningAlgorithm(rawValue: name) else {
                throw fail("clientAssertionAlgorithm", "must be one of " + SigningAlgorithm.allCases.map(\.rawValue).joined(separator: ", "))
            }
            keys.algorithm = algorithm
        }
        if let value = try string("clientAssertionAudience") {
            guard let audience = ClientAssertionAudience(catalogValue: value) else {
                throw fail("clientAssertionAudience", "must be \"endpoint\", \"issuer\" or an absolute URI")
            }
            keys.audience = audience
        }
        let usesKey: Set<Provider.ClientAuthentication> = [.privateKeyJWT, .tlsClientAuth, .selfSignedTLSClientAuth]
        if keys.key != nil, let method, !usesKey.contains(method), try catalogGrant() != .jwtBearer {
            throw fail("clientKeyFile", "is used with private_key_jwt, tls_client_auth or self_signed_tls_client_auth, not \(method.rawValue)")
        }
        if keys.certificate != nil, let method, !usesKey.contains(method) {
            throw fail("clientCertificateFile", "is used with private_key_jwt, tls_client_auth or self_signed_tls_client_auth, not \(method.rawValue)")
        }
        return keys
    }

    /// `serviceAccountFile`: a Google-style service-account key, read and checked (``ServiceAccountKey``).
    func serviceAccountKey() throws(OAuthError) -> ServiceAccountKey? {
        guard let written = try string("serviceAccountFile") else { return nil }
        let path = try credentialPath("serviceAccountFile", written)
        do {
            return try ServiceAccountKey(contentsOfFile: path)
        } catch {
            throw fail("serviceAccountFile", Self.withoutLabel(error.message, path: path, label: "service account file"), underlying: error)
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
