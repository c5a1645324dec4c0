#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The assertion of the JWT-bearer authorization grant (RFC 7523 §2.1 and §3), as Google's
/// service accounts and any RFC 7523 server take it.
///
/// Claims: `iss` (the client, or a service account's `client_email`), `sub` when a subject is
/// given (the user to act for), `aud` (the token endpoint), `scope` when given (Google reads
/// scopes here), `jti` (128 random bits), `iat`, and `exp` at most one hour after `iat`.
enum JWTBearerAssertion {
    /// `grant_type` (RFC 7523 §2.1).
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// The longest lifetime (Google's limit, and what issue 17 allows).
    static let maximumLifetime = 3600

    /// What goes into one assertion.
    struct Parameters: Sendable {
        var issuer: String
        var subject: String?
        var audience: String
        var scopes: [String]
        var algorithm: SigningAlgorithm
        var keyID: String?
        /// Seconds from `iat` to `exp`, 1 to 3600.
        var lifetime: Int = 3600
    }

    /// A fresh signed assertion.
    /// - Throws: ``OAuthError`` `.configuration` for a lifetime outside 1…3600 s; as the signer throws.
    static func make(_ parameters: Parameters, signer: any ClientAssertionSigner, now: Date) async throws(OAuthError) -> Secret {
        guard (1...maximumLifetime).contains(parameters.lifetime) else {
            throw OAuthError(.configuration, message: "a JWT-bearer assertion lives 1 to \(maximumLifetime) seconds, not \(parameters.lifetime)")
        }
        var header: [(String, JSONValue)] = [("alg", .string(parameters.algorithm.rawValue)), ("typ", .string("JWT"))]
        if let keyID = parameters.keyID { header.append(("kid", .string(keyID))) }
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        var claims: [(String, JSONValue)] = [("iss", .string(parameters.issuer))]
        if let subject = parameters.subject { claims.append(("sub", .string(subject))) }
        claims.append(("aud", .string(parameters.audience)))
        if !parameters.scopes.isEmpty { claims.append(("scope", .string(parameters.scopes.joined(separator: " ")))) }
        claims += [
            ("jti", .string(Base64URL.encode(try SecureRandom.bytes(ClientAssertion.jtiBytes)))),
            ("iat", JSONValue.number(issuedAt)),
            ("exp", JSONValue.number(issuedAt + parameters.lifetime)),
        ]
        let signingInput = Base64URL.encode(Array(JSONValue.text(orderedMembers: header).utf8)) + "."
            + Base64URL.encode(Array(JSONValue.text(orderedMembers: claims).utf8))
        let signature = try await signer.sign(Array(signingInput.utf8), algorithm: parameters.algorithm)
        return Secret(signingInput + "." + Base64URL.encode(signature))
    }

    /// The token request's fields: `grant_type`, `assertion`, and `scope` when scopes are given (RFC 7523 §2.1).
    static func fields(assertion: Secret, scopes: [String]) -> [(String, String)] {
        var fields = [("grant_type", grantType), ("assertion", assertion.reveal())]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        return fields
    }
}

/// A Google-style service-account key file: a JSON object with `type: "service_account"`,
/// `client_email`, `private_key` (PEM), `private_key_id` and `token_uri`.
///
/// Load it with ``init(contentsOfFile:)``. The file gets the checks of a client key file (a regular
/// file with no group or other permission bits, at most 256 KiB), and the key those of
/// ``ClientKey``. `description` shows the account's email and key id, never the key.
public final class ServiceAccountKey: Sendable, CustomStringConvertible {
    /// `client_email`: the assertion's `iss`.
    public let clientEmail: String
    /// `private_key_id`: the assertion's `kid`.
    public let privateKeyID: String?
    /// `token_uri`: where the assertion is exchanged, and its `aud`.
    public let tokenURI: URL
    /// The key, loaded into OpenSSL.
    public let key: ClientKey
    /// The file, as given.
    public let path: String

    /// Reads and checks the service-account key file at `path`.
    /// - Throws: ``OAuthError`` `.configuration` naming the file and what is wrong (unsafe
    ///   permissions, not JSON, a missing or wrong member, a key ``ClientKey`` refuses); never the
    ///   file's contents. `.crypto` when OpenSSL 3 cannot be loaded.
    public init(contentsOfFile path: String) throws(OAuthError) {
        let label = "service account file \(DisplayText.escape(path))"
        let object = try CredentialFile.jsonObject(path, isPrivate: true, label: label) { reason in
            OAuthError(.configuration, message: "\(label): \(reason)")
        }
        func member(_ name: String) throws(OAuthError) -> String {
            guard let value = try? object.string(name), !value.isEmpty else {
                throw OAuthError(.configuration, message: "\(label) has no \(name) string")
            }
            return value
        }
        guard try member("type") == "service_account" else {
            throw OAuthError(.configuration, message: "\(label): type is not \"service_account\"")
        }
        clientEmail = try member("client_email")
        privateKeyID = try? member("private_key_id")
        let uri = try member("token_uri")
        guard let url = URL(string: uri, encodingInvalidCharacters: false), Provider.endpointProblem(url) == nil else {
            throw OAuthError(.configuration, message: "\(label): token_uri must be an https:// URL (http:// only on loopback)")
        }
        tokenURI = url
        do {
            key = try ClientKey(pem: try member("private_key"))
        } catch {
            let reason = error.message.map { $0.hasPrefix("the client key ") ? String($0.dropFirst("the client key ".count)) : $0 }
            throw OAuthError(.configuration, message: "\(label): private_key \(reason ?? "cannot be used")")
        }
        guard key.kind.isRSA else {
            throw OAuthError(.configuration, message: "\(label): private_key is \(key.kind); a service account key is RSA (RS256)")
        }
        self.path = path
    }

    /// `ServiceAccountKey(svc@project.iam.gserviceaccount.com, kid: …, RSA-2048)`.
    public var description: String {
        "ServiceAccountKey(\(DisplayText.escape(clientEmail))\(privateKeyID.map { ", kid: \(DisplayText.escape($0))" } ?? ""), \(key.kind))"
    }

    /// A fresh JWT-bearer assertion for this account (RS256, `kid` = `private_key_id`, `iss` =
    /// `client_email`, `aud` = `token_uri`, RFC 7523 §2.1), and the grant's form fields.
    /// - Parameters:
    ///   - scopes: put in the `scope` claim and the form.
    ///   - subject: the user to act for (domain-wide delegation), or nil.
    /// - Throws: ``OAuthError`` `.crypto` when signing fails.
    func grantFields(scopes: [String], subject: String?, now: Date) async throws(OAuthError) -> [(String, String)] {
        let parameters = JWTBearerAssertion.Parameters(
            issuer: clientEmail, subject: subject, audience: tokenURI.absoluteString, scopes: scopes, algorithm: .rs256, keyID: privateKeyID)
        return JWTBearerAssertion.fields(assertion: try await JWTBearerAssertion.make(parameters, signer: key, now: now), scopes: scopes)
    }
}
