import Foundation
@testable import OAuthFlow
import Testing

@Suite("Service-account keys and the JWT-bearer assertion (RFC 7523 §2.1)")
struct ServiceAccountKeyTests {
    /// A Google-style key file around an openssl-made RSA key, mode 0600.
    static func accountFile(_ files: KeyFiles, members: [String: Any]? = nil, recipe: KeyFiles.Recipe = .rsa2048PKCS8,
                            mode: Int = 0o600) throws -> String {
        try files.key(recipe, name: "sa-key.pem")
        var object: [String: Any] = [
            "type": "service_account", "project_id": "demo", "private_key_id": "0123abcd", "private_key": try files.read("sa-key.pem"),
            "client_email": "svc@demo.iam.gserviceaccount.com", "client_id": "1234", "token_uri": "https://oauth2.googleapis.com/token",
        ]
        for (name, value) in members ?? [:] { object[name] = value is NSNull ? nil : value }
        let data = try JSONSerialization.data(withJSONObject: object)
        return try files.write("sa.json", String(decoding: data, as: UTF8.self), mode: mode)
    }

    @Test("A service-account file loads; its assertion has Google's claims and verifies with openssl")
    func assertion() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let account = try ServiceAccountKey(contentsOfFile: try Self.accountFile(files))
        #expect(account.clientEmail == "svc@demo.iam.gserviceaccount.com")
        #expect(account.privateKeyID == "0123abcd")
        #expect(account.tokenURI.absoluteString == "https://oauth2.googleapis.com/token")
        #expect("\(account)" == "ServiceAccountKey(svc@demo.iam.gserviceaccount.com, kid: 0123abcd, RSA-2048)")

        let now = Date(timeIntervalSince1970: 1_850_000_000)
        let fields = try await account.grantFields(scopes: ["https://www.googleapis.com/auth/cloud-platform", "email"], subject: nil, now: now)
        #expect(fields.map(\.0) == ["grant_type", "assertion", "scope"])
        #expect(fields[0].1 == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        #expect(fields[2].1 == "https://www.googleapis.com/auth/cloud-platform email")
        let jws = try JWS(compact: fields[1].1)
        #expect(jws.header.algorithm == .rs256 && jws.header.keyID == "0123abcd")
        #expect(try files.opensslVerifies(keyPath: files.path("sa-key.pem"), algorithm: .rs256, input: jws.signingInput, signature: jws.signature))
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
        #expect(claims["iss"] as? String == "svc@demo.iam.gserviceaccount.com")
        #expect(claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/cloud-platform email")
        #expect(claims["sub"] == nil)
        #expect(claims["iat"] as? Int == 1_850_000_000 && claims["exp"] as? Int == 1_850_003_600)

        let delegated = try await account.grantFields(scopes: [], subject: "alice@demo.example", now: now)
        #expect(delegated.map(\.0) == ["grant_type", "assertion"])
        let delegatedClaims = try #require(try JSONSerialization.jsonObject(with: Data(try JWS(compact: delegated[1].1).payload)) as? [String: Any])
        #expect(delegatedClaims["sub"] as? String == "alice@demo.example")
        #expect(delegatedClaims["scope"] == nil)
    }

    @Test("Lifetimes outside 1…3600 s are refused")
    func lifetime() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let key = try ClientKey(contentsOfFile: try files.key(.p256SEC1))
        for lifetime in [0, 3601] {
            let parameters = JWTBearerAssertion.Parameters(issuer: "c", audience: "https://as.example/token", scopes: [], algorithm: .es256,
                                                           keyID: nil, lifetime: lifetime)
            let error = await #expect(throws: OAuthError.self) { _ = try await JWTBearerAssertion.make(parameters, signer: key, now: Date()) }
            #expect(error?.code == .configuration)
        }
    }

    /// A bad service-account file and the words of its error.
    struct Case: Sendable, CustomStringConvertible {
        let description: String
        let members: [String: String]
        let recipe: KeyFiles.Recipe
        let mode: Int
        let expected: String
    }

    static let cases: [Case] = [
        Case(description: "mode 0644", members: [:], recipe: .rsa2048PKCS8, mode: 0o644, expected: "(mode 0644)"),
        Case(description: "another type", members: ["type": "authorized_user"], recipe: .rsa2048PKCS8, mode: 0o600,
             expected: #"type is not "service_account""#),
        Case(description: "no client_email", members: ["client_email": ""], recipe: .rsa2048PKCS8, mode: 0o600, expected: "has no client_email string"),
        Case(description: "an http token_uri", members: ["token_uri": "http://oauth2.example/token"], recipe: .rsa2048PKCS8, mode: 0o600,
             expected: "token_uri must be an https:// URL"),
        Case(description: "an EC key", members: [:], recipe: .p256PKCS8, mode: 0o600, expected: "private_key is EC P-256; a service account key is RSA"),
        Case(description: "a key that is not PEM", members: ["private_key": "MIIEvAIBADANBgkqhkiG9w0BAQEFAASC"], recipe: .rsa2048PKCS8, mode: 0o600,
             expected: "private_key holds no PEM private key"),
    ]

    @Test("A bad service-account file is refused naming the file and the member, never the key", arguments: cases)
    func refused(_ badCase: Case) throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let path = try Self.accountFile(files, members: badCase.members, recipe: badCase.recipe, mode: badCase.mode)
        let error = #expect(throws: OAuthError.self) { try ServiceAccountKey(contentsOfFile: path) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains("service account file \(path)") == true)
        #expect(error?.message?.contains(badCase.expected) == true, "\(error?.message ?? "")")
        let pem = try files.read("sa-key.pem")
        for line in pem.split(separator: "\n") where !line.hasPrefix("-----") {
            #expect(!(error?.message?.contains(line.prefix(20)) ?? false))
        }
        #expect(!(error?.message?.contains("MIIEvAIBADANBgkqhkiG9w0BAQEFAASC") ?? false))
    }
}
