import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// The catalog's `registration` and `initialAccessTokenFile` rows (Providers/ProviderCatalog+Registration.swift):
/// an entry of just `resource`, `issuer` and `"registration": "dynamic"` loads without a client ID.
@Suite("Catalog: dynamic registration (RFC 7591)")
struct RegistrationCatalogTests {
    static func load(_ entry: String, base: URL? = nil) throws(OAuthError) -> Provider? {
        try ProviderCatalog.load(data: Data("[\(entry)]".utf8), baseDirectory: base, environment: [:], strict: true).first
    }

    @Test("resource + issuer + registration: dynamic is a whole entry; the scopes, method and id rules apply")
    func minimal() throws {
        let provider = try #require(try Self.load(#"{"id":"api","issuer":"https://as.example","resource":"https://api.example/mcp","registration":"dynamic"}"#))
        #expect(provider.clientID.isEmpty)
        #expect(provider.awaitsRegistration)
        #expect(provider.dynamicRegistration?.authentication == nil, "chosen from the server's metadata")
        #expect(provider.resources == [URL(string: "https://api.example/mcp")!])

        let method = try #require(try Self.load(
            #"{"id":"api","issuer":"https://as.example","registration":"dynamic","clientAuthentication":"client_secret_basic","scopes":"openid api"}"#))
        #expect(method.dynamicRegistration?.authentication == .clientSecretBasic, "the method written is the one registered")
        #expect(method.scopes == ["openid", "api"])
    }

    @Test("the initial access token file is read when the catalog loads, and never shown")
    func tokenFile() throws {
        let directory = try TemporaryDirectory("oauthflow-iat")
        defer { directory.remove() }
        try Data("iat-0123456789\n".utf8).write(to: directory.url.appendingPathComponent("iat"))
        let provider = try #require(try Self.load(
            #"{"id":"api","issuer":"https://as.example","registration":"dynamic","initialAccessTokenFile":"iat"}"#, base: directory.url))
        #expect(provider.dynamicRegistration?.initialAccessToken?.reveal() == "iat-0123456789")
        #expect(!"\(provider)".contains("iat-0123456789"))
    }

    @Test("refused: a clientID beside dynamic, no issuer, an unknown mode, a token file without dynamic, an id ending .registration", arguments: [
        (#"{"id":"api","issuer":"https://as.example","registration":"dynamic","clientID":"c"}"#, "registration"),
        (#"{"id":"api","tokenURL":"https://as.example/token","registration":"dynamic"}"#, "registration"),
        (#"{"id":"api","issuer":"https://as.example","registration":"automatic"}"#, "registration"),
        (#"{"id":"api","issuer":"https://as.example","clientID":"c","initialAccessTokenFile":"x"}"#, "initialAccessTokenFile"),
        (#"{"id":"api.registration","issuer":"https://as.example","clientID":"c"}"#, "id"),
        ("{\"id\":\"" + String(repeating: "a", count: 120) + "\",\"issuer\":\"https://as.example\",\"registration\":\"dynamic\"}", "id"),
    ])
    func refused(entry: String, key: String) {
        let error = #expect(throws: OAuthError.self) { try Self.load(entry) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains("\(key):") == true, "\(error?.message ?? "")")
    }

    @Test("a manual entry still needs its clientID")
    func manualNeedsClientID() {
        let error = #expect(throws: OAuthError.self) { try Self.load(#"{"id":"api","issuer":"https://as.example","registration":"manual"}"#) }
        #expect(error?.message?.contains("clientID") == true)
    }
}
