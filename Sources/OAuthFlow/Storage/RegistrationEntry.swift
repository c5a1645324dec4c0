#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The stored form of a ``ClientRegistration``: versioned JSON under the key
/// `<provider>.registration`, written through the one JSON writer and read through the one parser.
///
/// ```json
/// {"registration":{"clientID":"…","clientSecret":"…","issuer":"https://as.example","method":"client_secret_basic",
///  "providerID":"api","redirectURIs":["http://127.0.0.1:53123/callback"],"registrationAccessToken":"…",
///  "registrationClientURI":"https://as.example/register/…","updatedAt":1767225600,…},"version":1}
/// ```
///
/// It holds secrets (the client secret, the registration access token, the generated key's PEM),
/// so it goes through the store as tokens do: sealed with the store key when there is one, in a
/// 0600 file or the fleet database. Reading range-checks every number and checks every value that
/// reaches a header, so a damaged entry is a `.storage` error, never a trap.
enum RegistrationEntry {
    static let version = 1

    /// The entry's bytes.
    static func encode(_ registration: ClientRegistration) -> Data {
        var members: [String: JSONValue] = [
            "providerID": .string(registration.providerID),
            "issuer": .string(registration.issuer),
            "clientID": .string(registration.clientID),
            "method": .string(registration.tokenEndpointAuthMethod.rawValue),
            "redirectURIs": .array(registration.redirectURIs.map { .string($0.absoluteString) }),
            "grantTypes": .array(registration.grantTypes.map(JSONValue.string)),
            "scope": .array(registration.scope.map(JSONValue.string)),
            "updatedAt": JSONValue.number(registration.updatedAt.timeIntervalSince1970.rounded()),
        ]
        if let secret = registration.clientSecret { members["clientSecret"] = .string(secret.reveal()) }
        if let expiry = registration.clientSecretExpiresAt { members["clientSecretExpiresAt"] = JSONValue.number(expiry.timeIntervalSince1970) }
        if let issued = registration.clientIDIssuedAt { members["clientIDIssuedAt"] = JSONValue.number(issued.timeIntervalSince1970) }
        if let token = registration.registrationAccessToken { members["registrationAccessToken"] = .string(token.reveal()) }
        if let uri = registration.registrationClientURI { members["registrationClientURI"] = .string(uri.absoluteString) }
        if let name = registration.clientName { members["clientName"] = .string(name) }
        if let pem = registration.clientKeyPEM { members["clientKey"] = .string(pem.reveal()) }
        if let keyID = registration.clientKeyID { members["clientKeyID"] = .string(keyID) }
        let root = JSONValue.object(["registration": .object(members), "version": JSONValue.number(version)])
        return Data(root.jsonText.utf8)
    }

    /// Reads the entry stored under `key` for `provider`.
    /// - Throws: ``OAuthError`` `.storage` naming the key and the member at fault, never a value.
    static func decode(_ data: Data, key: String, provider: String) throws(OAuthError) -> ClientRegistration {
        let corrupted: (String) -> OAuthError = { reason in
            OAuthError(.storage, providerID: provider, message: "the stored registration \"\(key)\" is corrupted (\(reason))")
        }
        let root: JSONValue
        do { root = try JSONValue.parse(Array(data)) } catch { throw corrupted("not valid JSON") }
        let envelope = try JSONObject(root, what: "the entry", failure: corrupted)
        guard let version = try envelope.integer("version", in: Int.min...Int.max) else { throw corrupted("missing version") }
        guard version == Self.version else {
            throw OAuthError(.storage, providerID: provider, message: "the stored registration \"\(key)\" has unknown version \(version)")
        }
        guard let fields = try envelope.object("registration") else { throw corrupted("missing registration") }
        func visible(_ name: String, limit: Int = ClientRegistration.maximumSecretLength) throws(OAuthError) -> String? {
            guard let text = try fields.string(name) else { return nil }
            guard !text.isEmpty, text.utf8.count <= limit, text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw fields.fail("\(name) holds characters a header cannot carry")
            }
            return text
        }
        guard try fields.requiredString("providerID") == provider else {
            throw OAuthError(.storage, providerID: provider, message: "the stored registration \"\(key)\" belongs to another provider")
        }
        guard let clientID = try visible("clientID", limit: ClientRegistration.maximumIDLength) else { throw fields.fail("clientID is missing") }
        guard let method = Provider.ClientAuthentication(rawValue: try fields.requiredString("method")) else {
            throw fields.fail("method is unknown")
        }
        func urls(_ name: String) throws(OAuthError) -> [URL] {
            try (fields.strings(name) ?? []).map { text throws(OAuthError) -> URL in
                guard let url = URL(string: text, encodingInvalidCharacters: false) else { throw fields.fail("\(name) holds a value that is not a URI") }
                return url
            }
        }
        var clientKey: ClientKey?
        let pem = try fields.string("clientKey")
        if let pem {
            do { clientKey = try ClientKey(pem: pem) } catch { throw corrupted("clientKey is not a private key") }
        }
        let uri = try fields.url("registrationClientURI")
        if let uri, Provider.endpointProblem(uri) != nil { throw fields.fail("registrationClientURI is not an https:// or loopback URL") }
        guard let updatedAt = try fields.date("updatedAt") else { throw fields.fail("updatedAt is missing") }
        return ClientRegistration(
            providerID: provider, issuer: try fields.requiredString("issuer"), clientID: clientID,
            clientSecret: try visible("clientSecret").map(Secret.init), clientSecretExpiresAt: try fields.date("clientSecretExpiresAt"),
            clientIDIssuedAt: try fields.date("clientIDIssuedAt"), registrationAccessToken: try visible("registrationAccessToken").map(Secret.init),
            registrationClientURI: uri, tokenEndpointAuthMethod: method, redirectURIs: try urls("redirectURIs"),
            grantTypes: try fields.strings("grantTypes") ?? [], scope: try fields.strings("scope") ?? [],
            clientName: try fields.string("clientName"), clientKey: clientKey, clientKeyPEM: pem.map(Secret.init),
            clientKeyID: try visible("clientKeyID", limit: 256), updatedAt: updatedAt)
    }
}
