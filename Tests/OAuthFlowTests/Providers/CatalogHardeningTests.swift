import Foundation
import Glibc
import OAuthFlow
import TestSupport
import Testing

/// Catalog files that are not regular files, secrets pasted into the wrong key, typos, ports.
@Suite("Catalog hardening: FIFOs, echoed secrets, strict mode, ports", .timeLimit(.minutes(1)))
struct CatalogHardeningTests {
    static func withDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = try TemporaryDirectory("CatalogHardening")
        defer { directory.remove() }
        return try body(directory.url)
    }

    static let entry = #"{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app""#

    @Test("a catalog that is a FIFO is refused at once instead of blocking the open")
    func catalogFIFO() throws {
        try Self.withDirectory { directory in
            let fifo = directory.appendingPathComponent("providers.json")
            #expect(mkfifo(fifo.path, 0o600) == 0)
            let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: fifo, environment: [:]) }
            #expect(error?.code == .configuration)
            #expect(error?.message?.contains("is a FIFO, not a regular file") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a clientSecretFile that is a FIFO (with or without a writer), a device or a directory is refused without blocking",
          arguments: ["fifo", "fifo-with-writer", "device", "directory"])
    func secretFileNotRegular(kind: String) throws {
        try Self.withDirectory { directory in
            let path: String
            var writer: Int32 = -1
            switch kind {
            case "fifo", "fifo-with-writer":
                path = directory.appendingPathComponent("secret").path
                #expect(mkfifo(path, 0o600) == 0)
                if kind == "fifo-with-writer" {
                    // A reader end opened first so the writer's open succeeds; the loader must still not read.
                    let reader = open(path, O_RDONLY | O_NONBLOCK)
                    writer = open(path, O_WRONLY | O_NONBLOCK)
                    close(reader)
                }
            case "device": path = "/dev/zero"
            default:
                path = directory.appendingPathComponent("dir").path
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            }
            defer { if writer >= 0 { close(writer) } }
            let json = "[\(Self.entry), \"clientSecretFile\": \"\(path)\"}]"
            let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: Data(json.utf8), environment: [:]) }
            #expect(error?.code == .configuration)
            let message = error?.message ?? ""
            #expect(message.contains("clientSecretFile"))
            #expect(message.contains("not a regular file") || message.contains("is a directory") || message.contains("is a device"),
                    "\(message)")
        }
    }

    /// A secret someone pasted where a variable name or a path belongs.
    static let pasted = ["ghp_R2D2c3poSECRET0123456789abcdef", "Sup3r/Secret+Value==", "AKIAIOSFODNN7EXAMPLE", "s3cr3t value!"]

    @Test("a secret pasted into clientSecretEnv is never echoed: the key and the value's shape are named", arguments: pasted)
    func pastedIntoEnv(secret: String) {
        let json = "[\(Self.entry), \"clientSecretEnv\": \"\(secret)\"}]"
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: Data(json.utf8), environment: [:]) }
        #expect(error?.message?.contains("clientSecretEnv") == true)
        #expect(error?.message?.contains("\(secret.count) characters") == true, "\(error?.message ?? "")")
        for text in [error?.message ?? "", error?.description ?? "", String(reflecting: error)] { #expect(!text.contains(secret)) }
    }

    @Test("a secret pasted into clientSecretFile is never echoed", arguments: pasted)
    func pastedIntoFile(secret: String) throws {
        try Self.withDirectory { directory in
            let json = "[\(Self.entry), \"clientSecretFile\": \"\(secret)\"}]"
            for base in [directory, nil] as [URL?] {
                let error = #expect(throws: OAuthError.self) {
                    try ProviderCatalog.load(data: Data(json.utf8), baseDirectory: base, environment: [:])
                }
                #expect(error?.message?.contains("clientSecretFile") == true)
                for text in [error?.message ?? "", error?.description ?? "", String(reflecting: error)] {
                    #expect(!text.contains(secret), "\(text)")
                }
            }
        }
    }

    @Test("strict mode names an unknown key and the closest known one", arguments: [
        ("clientSecrett", "clientSecret"), ("tokenUrl", "tokenURL"), ("scopess", "scopes"), ("redirect_uri", "redirectURI"),
        ("deviceAuthorizationUrl", "deviceAuthorizationURL"), ("clientSecretENV", "clientSecretEnv"),
    ])
    func strictUnknownKey(typo: String, suggestion: String) {
        let json = Data("[\(Self.entry), \"\(typo)\": \"x\"}]".utf8)
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: json, environment: [:], strict: true) }
        #expect(error?.code == .configuration)
        #expect(error?.message == #"provider #1 ("demo"): \#(typo): is not a known key; did you mean "\#(suggestion)"? (strict mode)"#)
        // The library's default stays lenient.
        #expect((try? ProviderCatalog.load(data: json, environment: [:]))?.first?.id == "demo")
    }

    @Test("strict mode loads endSessionURL and idTokenSigningAlgorithms, which Catalog.md documents, with their values")
    func strictDocumentedOIDCKeys() throws {
        let json = Data(#"[\#(Self.entry), "endSessionURL": "https://auth.example.com/logout", "idTokenSigningAlgorithms": ["ES256", "RS256"]}]"#.utf8)
        let provider = try #require(try ProviderCatalog.load(data: json, environment: [:], strict: true).first)
        #expect(provider.endSessionURL?.absoluteString == "https://auth.example.com/logout")
        #expect(provider.idTokenSigningAlgorithms == ["ES256", "RS256"])
        // One name alone is accepted too, and a typo of either is suggested.
        let single = Data(#"[\#(Self.entry), "idTokenSigningAlgorithms": "EdDSA"}]"#.utf8)
        #expect(try ProviderCatalog.load(data: single, environment: [:], strict: true).first?.idTokenSigningAlgorithms == ["EdDSA"])
        let typo = Data(#"[\#(Self.entry), "endSessionUrl": "https://auth.example.com/logout"}]"#.utf8)
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: typo, environment: [:], strict: true) }
        #expect(error?.message == #"provider #1 ("demo"): endSessionUrl: is not a known key; did you mean "endSessionURL"? (strict mode)"#)
    }

    @Test("strict mode: a key with no close match, and an unknown top-level key")
    func strictOther() {
        let far = Data("[\(Self.entry), \"zzzzzzzzzzzzzzzz\": 1}]".utf8)
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: far, environment: [:], strict: true) }
        #expect(error?.message == #"provider #1 ("demo"): zzzzzzzzzzzzzzzz: is not a known key (strict mode; see Documentation/Catalog.md)"#)
        let top = Data("{\"provider\": [], \"providers\": [\(Self.entry)}]}".utf8)
        let topError = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: top, environment: [:], strict: true) }
        #expect(topError?.message?.contains(#"provider: is not a known key; did you mean "providers"?"#) == true)
    }

    @Test("strict mode accepts the shipped catalog and OAuthKit's ignored keys")
    func strictAcceptsKnown() throws {
        let json = Data("[\(Self.entry), \"encodeHttpBody\": true, \"icon\": \"x\", \"accessTokenURL\": \"https://auth.example.com/token\"}]".utf8)
        #expect(try ProviderCatalog.load(data: json, environment: [:], strict: true).count == 1)
        let shipped = CatalogFixture.shippedCatalogURL()
        try #require(FileManager.default.fileExists(atPath: shipped.path), "the shipped catalog is not at \(shipped.path)")
        let environment = ["GOOGLE_CLIENT_SECRET": "g", "AUTH0_CLIENT_SECRET": "a", "OKTA_CLIENT_SECRET": "o",
                           "KEYCLOAK_CLIENT_SECRET": "k", "PHONE_VERIFY_CLIENT_SECRET": "p", "IPIFICATION_CLIENT_SECRET": "i"]
        do {
            _ = try ProviderCatalog.load(contentsOf: shipped, environment: environment, strict: true)
        } catch {
            // Only an unset secret variable is acceptable here, never an unknown key.
            #expect(!(error.message ?? "").contains("not a known key"), "\(error)")
        }
    }

    @Test("a port above 65535 is refused at load, in every URL", arguments: [
        "tokenURL", "authorizationURL", "deviceAuthorizationURL", "revocationURL", "jwksURL", "issuer", "redirectURI",
    ])
    func portAbove65535(key: String) {
        var fields = [#""id": "demo""#, #""clientID": "app""#]
        if key != "tokenURL" { fields.append(#""tokenURL": "https://auth.example.com/token""#) }
        let url = key == "redirectURI" ? "http://127.0.0.1:70000/callback" : "https://auth.example.com:65536/x"
        fields.append(#""\#(key)": "\#(url)""#)
        let json = Data("[{\(fields.joined(separator: ", "))}]".utf8)
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(data: json, environment: [:]) }
        #expect(error?.message?.contains("\(key): has port") == true, "\(error?.message ?? "")")
        #expect(error?.message?.contains("above 65535") == true)
    }

    @Test("scope tokens: the rule the catalog and login --scope share (RFC 6749 §3.3)", arguments: [
        ("read", true), ("openid", true), ("ip:phone_verify", true), ("", false), ("a b", false), ("a\"b", false),
        ("a\\b", false), ("é", false), ("x\u{1B}", false), ("x\r\n", false),
    ])
    func scopeRule(token: String, valid: Bool) {
        #expect(Provider.isValidScopeToken(token) == valid)
    }
}
