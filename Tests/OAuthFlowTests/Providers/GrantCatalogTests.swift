import Foundation
@testable import OAuthFlow
import Testing

@Suite("Catalog grant jwt-bearer with clientKeyFile (RFC 7523 §2.1)")
struct GrantCatalogTests {
    static func load(_ files: KeyFiles, _ members: String) throws -> Provider {
        let text = #"[{"id": "jb", "tokenURL": "https://as.example/token", "clientID": "jb-client", "grant": "jwt-bearer"\#(members)}]"#
        return try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: files.directory, environment: [:], strict: true)[0]
    }

    @Test("clientKeyFile alone: client authentication none, the key signs the grant's assertion with its default algorithm")
    func clientKey() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.p256PKCS8)
        let provider = try Self.load(files, #", "clientKeyFile": "key.pem""#)
        #expect(provider.clientAuthentication == .none && provider.serviceGrant == .jwtBearer)
        #expect(provider.signsJWTBearerWithClientKey && provider.jwtBearerAlgorithm == .es256)
        let explicit = try Self.load(files, #", "clientKeyFile": "key.pem", "clientAuthentication": "none", "clientAssertionAlgorithm": "ES256""#)
        #expect(explicit.clientAuthentication == .none)
        let both = try Self.load(files, #", "clientKeyFile": "key.pem", "clientAuthentication": "private_key_jwt""#)
        #expect(both.clientAuthentication == .privateKeyJWT && both.signsJWTBearerWithClientKey)
    }

    @Test("refused: no key, an HMAC algorithm, an algorithm that does not fit the key", arguments: [
        ("", "grant: jwt-bearer needs a key to sign the assertion"),
        (#", "clientKeyFile": "key.pem", "clientAssertionAlgorithm": "HS256""#, "clientAssertionAlgorithm: HS256 cannot sign a JWT-bearer assertion"),
        (#", "clientKeyFile": "key.pem", "clientAssertionAlgorithm": "RS256""#, "clientAssertionAlgorithm: RS256 does not fit the EC P-256 key"),
    ])
    func refused(members: String, expected: String) throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.p256PKCS8)
        let error = #expect(throws: OAuthError.self) { try Self.load(files, members) }
        #expect(error?.message?.contains(#"provider #1 ("jb"): "# + expected) == true, "\(error?.message ?? "")")
    }
}
