import Foundation
@testable import OAuthFlow
import Testing

/// The stored form of a registration (Storage/RegistrationEntry.swift): a round trip keeps every
/// field, and a damaged entry is `.storage` naming the key, never a value or a trap.
@Suite("Stored registrations")
struct RegistrationEntryTests {
    static func record(key: (key: ClientKey, pem: Secret, id: String)? = nil) -> ClientRegistration {
        ClientRegistration(
            providerID: "api", issuer: "https://as.example", clientID: "c1", clientSecret: Secret("sec"),
            clientSecretExpiresAt: Date(timeIntervalSince1970: 1_900_000_000), clientIDIssuedAt: Date(timeIntervalSince1970: 1_800_000_000),
            registrationAccessToken: Secret("rat"), registrationClientURI: URL(string: "https://as.example/register/c1"),
            tokenEndpointAuthMethod: key == nil ? .clientSecretBasic : .privateKeyJWT, redirectURIs: [URL(string: "http://127.0.0.1:5000/callback")!],
            grantTypes: ["authorization_code", "refresh_token"], scope: ["openid", "api"], clientName: "authflow", clientKey: key?.key,
            clientKeyPEM: key?.pem, clientKeyID: key?.id, updatedAt: Date(timeIntervalSince1970: 1_800_000_100))
    }

    @Test("a round trip keeps every field, the generated key included (it signs the same)")
    func roundTrip() throws {
        let key = try ClientKeyMaker.make(.rs256)
        let original = Self.record(key: key)
        let read = try RegistrationEntry.decode(RegistrationEntry.encode(original), key: "api.registration", provider: "api")
        #expect(read.clientID == "c1" && read.issuer == "https://as.example" && read.tokenEndpointAuthMethod == .privateKeyJWT)
        #expect(read.clientSecret?.reveal() == "sec" && read.registrationAccessToken?.reveal() == "rat")
        #expect(read.clientSecretExpiresAt == original.clientSecretExpiresAt && read.clientIDIssuedAt == original.clientIDIssuedAt)
        #expect(read.registrationClientURI == original.registrationClientURI && read.redirectURIs == original.redirectURIs)
        #expect(read.grantTypes == original.grantTypes && read.scope == original.scope && read.clientName == "authflow")
        #expect(read.updatedAt == original.updatedAt)
        #expect(read.clientKeyID == key.id)
        #expect(try read.clientKey?.jwkThumbprint() == key.key.jwkThumbprint())
    }

    @Test("a damaged entry is .storage naming the key and the member, never a value", arguments: [
        ("not json", "not valid JSON"),
        (#"{"registration":{},"version":2}"#, "unknown version 2"),
        (#"{"version":1}"#, "missing registration"),
        (#"{"registration":{"providerID":"other","clientID":"c","method":"none","issuer":"i","updatedAt":1},"version":1}"#, "belongs to another provider"),
        (#"{"registration":{"providerID":"api","clientID":"c\r\nX","method":"none","issuer":"i","updatedAt":1},"version":1}"#, "clientID"),
        (#"{"registration":{"providerID":"api","clientID":"c","method":"magic","issuer":"i","updatedAt":1},"version":1}"#, "method is unknown"),
        (#"{"registration":{"providerID":"api","clientID":"c","method":"none","issuer":"i","updatedAt":1e300},"version":1}"#, "updatedAt"),
        (#"{"registration":{"providerID":"api","clientID":"c","method":"none","issuer":"i","updatedAt":1,"clientKey":"-----BEGIN x"},"version":1}"#, "clientKey"),
        (#"{"registration":{"providerID":"api","clientID":"c","method":"none","issuer":"i","updatedAt":1,"registrationClientURI":"http://evil.example/r"},"version":1}"#, "registrationClientURI"),
    ])
    func damaged(text: String, reason: String) {
        let error = #expect(throws: OAuthError.self) { try RegistrationEntry.decode(Data(text.utf8), key: "api.registration", provider: "api") }
        #expect(error?.code == .storage)
        #expect(error?.message?.contains("api.registration") == true)
        #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "")")
    }
}
