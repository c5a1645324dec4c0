#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Provider {
    /// The client-authentication rules of ``validate()``: each method has what it needs
    /// (RFC 6749 §2.3, RFC 7523 §2.2, OpenID Connect Core §9, RFC 8705 §2).
    func validateClientCredentials(_ fail: (String, String) -> OAuthError) throws(OAuthError) {
        let method = self.clientAuthentication
        switch method {
        case .none:
            break
        case .clientSecretBasic, .clientSecretPost:
            guard self.clientSecret != nil else { throw fail("clientAuthentication", "\(method.rawValue) needs a client secret") }
        case .clientSecretJWT:
            guard let clientSecret = self.clientSecret else { throw fail("clientAuthentication", "client_secret_jwt needs a client secret") }
            let algorithm = self.clientAssertionAlgorithm ?? .hs256
            do {
                _ = try ClientSecretSigner(secret: clientSecret, algorithm: algorithm)
            } catch {
                throw fail(self.clientAssertionAlgorithm == nil ? "clientSecret" : "clientAssertionAlgorithm", error.message ?? "is invalid")
            }
        case .privateKeyJWT where self.clientAssertionFile != nil:
            guard self.clientKey == nil else {
                throw fail("clientAssertionFile", "and clientKeyFile both make private_key_jwt assertions; keep one")
            }
            if self.clientAssertionFile?.isEmpty == true { throw fail("clientAssertionFile", "must not be empty") }
        case .privateKeyJWT:
            guard let clientKey = self.clientKey else {
                throw fail("clientAuthentication", "private_key_jwt needs a private key (clientKeyFile, or clientKey in code) or clientAssertionFile")
            }
            guard let algorithm = effectiveClientAssertionAlgorithm else {
                throw fail("clientAssertionAlgorithm", "is required with a custom signer (it cannot be derived from the key)")
            }
            if algorithm.isHMAC {
                throw fail("clientAssertionAlgorithm", "\(algorithm.rawValue) is for client_secret_jwt; private_key_jwt signs with RS*, PS*, ES* or EdDSA")
            }
            if let key = clientKey as? ClientKey {
                guard key.supports(algorithm) else {
                    throw fail("clientAssertionAlgorithm", "\(algorithm.rawValue) does not fit the \(key.kind) key; "
                        + "use \(key.defaultAlgorithm.rawValue)\(key.kind.isRSA ? " or PS256" : "")")
                }
                if let clientCertificate = self.clientCertificate, !clientCertificate.matches(key) {
                    throw fail("clientCertificateFile", "the certificate does not match the client key (its public key is another key's)")
                }
            }
        case .tlsClientAuth, .selfSignedTLSClientAuth:
            guard let clientCertificate = self.clientCertificate else {
                throw fail("clientAuthentication", "\(method.rawValue) needs a client certificate (clientCertificateFile)")
            }
            guard let key = self.clientKey as? ClientKey, key.path != nil else {
                throw fail("clientAuthentication", "\(method.rawValue) needs the certificate's private key in a file (clientKeyFile)")
            }
            guard clientCertificate.matches(key) else {
                throw fail("clientCertificateFile", "the certificate does not match the client key (its public key is another key's)")
            }
            if let tokenURL = self.tokenURL, tokenURL.scheme?.lowercased() != "https" {
                throw fail("tokenURL", "\(method.rawValue) is mutual TLS and needs an https:// token endpoint")
            }
        }
        if self.clientAssertionFile != nil, method != .privateKeyJWT {
            throw fail("clientAssertionFile", "is sent as a private_key_jwt assertion, and clientAuthentication is \(method.rawValue)")
        }
        // A switch, not a Set: a process's first Set of a type looks up its Hashable conformance
        // by scanning every conformance record of the executable (a quarter of a million
        // instructions in `authflow token`, which validates one provider and exits).
        let usesKey: Bool
        switch method {
        case .privateKeyJWT, .tlsClientAuth, .selfSignedTLSClientAuth: usesKey = true
        default: usesKey = false
        }
        if self.clientKey != nil, !usesKey, !signsJWTBearerWithClientKey {
            throw fail("clientKeyFile", "is used with private_key_jwt, tls_client_auth or self_signed_tls_client_auth, not \(method.rawValue)")
        }
        if self.clientCertificate != nil, !usesKey {
            throw fail("clientCertificateFile", "is used with private_key_jwt, tls_client_auth or self_signed_tls_client_auth, not \(method.rawValue)")
        }
        if self.clientAssertionAlgorithm != nil, method != .privateKeyJWT, method != .clientSecretJWT, !signsJWTBearerWithClientKey {
            throw fail("clientAssertionAlgorithm", "is used only with private_key_jwt and client_secret_jwt, not \(method.rawValue)")
        }
        if let clientKeyID = self.clientKeyID, clientKeyID.isEmpty { throw fail("clientKeyID", "must not be empty") }
        if let caFile = self.caFile, caFile.isEmpty { throw fail("caFile", "must not be empty") }
        if case .uri(let value) = self.clientAssertionAudience, ClientAssertionAudience(catalogValue: value) != self.clientAssertionAudience {
            throw fail("clientAssertionAudience", "must be \"endpoint\", \"issuer\" or an absolute URI")
        }
        if self.clientAssertionAudience == .issuer, self.issuer == nil, method == .privateKeyJWT || method == .clientSecretJWT {
            throw fail("clientAssertionAudience", "is issuer, but the provider has no issuer")
        }
    }
}

extension ClientKey.Kind {
    /// True for RSA keys.
    var isRSA: Bool { if case .rsa = self { return true } else { return false } }
}
