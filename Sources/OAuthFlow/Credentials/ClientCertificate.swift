#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A client certificate (chain) for mutual TLS (RFC 8705) and the `x5t#S256` header of
/// `private_key_jwt` assertions (RFC 7515 §4.1.8).
///
/// Load it with ``init(contentsOfFile:)`` (the catalog's `clientCertificateFile` does this). The
/// file holds one or more PEM `CERTIFICATE` blocks, the client's own first. A certificate is
/// public, so the file needs no particular mode.
public final class ClientCertificate: Sendable, CustomStringConvertible {
    /// The PEM file, as given.
    public let path: String
    /// `x5t#S256`: the unpadded base64url SHA-256 of the first certificate's DER (RFC 7515 §4.1.8,
    /// RFC 8705 §3.1).
    public let thumbprint: String
    /// The first certificate's DER.
    let der: [UInt8]
    /// How many certificates the file holds.
    public let chainLength: Int

    /// Reads the PEM certificate chain at `path`.
    /// - Throws: ``OAuthError`` `.configuration` naming the file when it is missing, not a regular
    ///   file, holds no PEM certificate or one OpenSSL cannot read; `.crypto` when OpenSSL 3
    ///   cannot be loaded.
    public init(contentsOfFile path: String) throws(OAuthError) {
        let label = "client certificate file \(DisplayText.escape(path))"
        let blocks: [PEMBlock]
        do {
            blocks = try PEMBlock.parse(try CredentialFile.read(path, isPrivate: false))
        } catch {
            throw OAuthError(.configuration, message: "\(label) \(error.reason)")
        }
        let certificates = blocks.filter { $0.label == "CERTIFICATE" }
        guard let first = certificates.first else {
            throw OAuthError(.configuration, message: "\(label) holds no PEM certificate (BEGIN CERTIFICATE)")
        }
        try LibCrypto.require()
        guard Certificate(der: first.der) != nil else {
            throw OAuthError(.configuration, message: "\(label) holds a certificate OpenSSL cannot read")
        }
        self.path = path
        der = first.der
        chainLength = certificates.count
        thumbprint = Base64URL.encode(try Digest.sha256(first.der))
    }

    /// True when this certificate carries `key`'s public half (the pair libcurl presents in
    /// mutual TLS, and the `x5t#S256` a `private_key_jwt` server may check).
    public func matches(_ key: ClientKey) -> Bool { key.matchesCertificate(der: der) }

    /// `ClientCertificate(file: …, x5t#S256: …)`.
    public var description: String {
        "ClientCertificate(file: \(DisplayText.escape(path)), x5t#S256: \(thumbprint))"
    }
}

/// What a client assertion's `aud` claim holds (RFC 7523 §3, OpenID Connect Core §9).
public enum ClientAssertionAudience: Sendable, Hashable, CustomStringConvertible {
    /// The exact URL of the endpoint being called (the default): what OpenID Connect Core §9 and
    /// RFC 7523 §3 describe, and what Entra ID, Okta, Google and Keycloak accept.
    case endpoint
    /// The provider's issuer identifier, as RFC 7523bis and FAPI 2.0 prefer (Auth0 wants it).
    case issuer
    /// This exact value.
    case uri(String)

    /// `"endpoint"`, `"issuer"`, or an absolute URI; nil for anything else.
    public init?(catalogValue value: String) {
        switch value {
        case "endpoint": self = .endpoint
        case "issuer": self = .issuer
        default:
            guard let url = URL(string: value, encodingInvalidCharacters: false), url.scheme != nil, url.host != nil else { return nil }
            self = .uri(value)
        }
    }

    /// `endpoint`, `issuer`, or the URI.
    public var description: String {
        switch self {
        case .endpoint: return "endpoint"
        case .issuer: return "issuer"
        case .uri(let value): return value
        }
    }

    /// The `aud` value for a request to `endpoint`.
    /// - Throws: ``OAuthError`` `.configuration` for `.issuer` when the provider has no issuer.
    func value(endpoint: URL, issuer: String?) throws(OAuthError) -> String {
        switch self {
        case .endpoint: return endpoint.absoluteString
        case .uri(let value): return value
        case .issuer:
            guard let issuer else {
                throw OAuthError(.configuration, message: "clientAssertionAudience is issuer, but the provider has no issuer")
            }
            return issuer
        }
    }
}

/// A client certificate and its private key, as PEM files libcurl reads, for mutual TLS
/// (RFC 8705 §2): give it to ``CurlTransport/init(maximumBodySize:timeout:connectTimeout:proxy:caFile:clientIdentity:)``.
///
/// libcurl presents the certificate when an `https` server asks for one; plain `http` requests
/// never send it. Check the files first with ``ClientKey/init(contentsOfFile:)`` and
/// ``ClientCertificate/matches(_:)`` (the catalog does both when it loads).
public struct ClientTLSIdentity: Sendable, Hashable {
    /// The PEM certificate (chain) file.
    public var certificateFile: String
    /// The PEM private key file (unencrypted).
    public var keyFile: String

    /// An identity from the two files.
    public init(certificateFile: String, keyFile: String) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}
