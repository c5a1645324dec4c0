import Foundation
@testable import OAuthFlow
import Testing

@Suite("Client key files: what is refused, and what is never shown")
struct ClientKeyRefusalTests {
    /// A bad key file and the words its error must hold.
    struct Case: Sendable, CustomStringConvertible {
        let description: String
        let make: @Sendable (KeyFiles) throws -> String
        let expected: String
    }

    /// A `make` that writes key.pem with `openssl arguments(path)` and gives it mode 0600.
    static func generated(_ arguments: @escaping @Sendable (String) -> [String]) -> @Sendable (KeyFiles) throws -> String {
        { files in
            let path = files.path("key.pem")
            try KeyFiles.openssl(arguments(path))
            try files.chmod("key.pem", 0o600)
            return path
        }
    }

    static let cases: [Case] = [
        Case(description: "mode 0644", make: { files in
            let path = try files.key(.p256SEC1)
            try files.chmod("key.pem", 0o644)
            return path
        }, expected: "is readable or writable by group or others (mode 0644)"),
        Case(description: "mode 0640", make: { files in
            let path = try files.key(.ed25519PKCS8)
            try files.chmod("key.pem", 0o640)
            return path
        }, expected: "(mode 0640)"),
        Case(description: "encrypted PKCS#8", make: generated { path in
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes-256-cbc", "-pass", "pass:test", "-out", path]
        }, expected: "holds an encrypted private key, which OAuthFlow does not decrypt"),
        Case(description: "encrypted PKCS#1 (Proc-Type: 4,ENCRYPTED)", make: generated { path in
            ["genrsa", "-traditional", "-aes256", "-passout", "pass:test", "-out", path, "2048"]
        }, expected: "holds an encrypted private key"),
        Case(description: "RSA 1024", make: generated { path in
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", path]
        }, expected: "is an RSA-1024 key; RSA keys must have at least 2048 bits"),
        Case(description: "secp256k1", make: generated { path in
            ["ecparam", "-name", "secp256k1", "-genkey", "-noout", "-out", path]
        }, expected: "is an EC key on secp256k1; use P-256, P-384 or P-521"),
        Case(description: "missing", make: { files in files.path("absent.pem") }, expected: "does not exist"),
        Case(description: "a directory", make: { files in files.directory.path }, expected: "is not a regular file"),
        Case(description: "a certificate, not a key", make: { files in
            let cert = try files.certificate(for: try files.key(.p256SEC1, name: "real.pem"))
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: cert)
            return cert
        }, expected: "holds no PEM private key"),
        Case(description: "an empty file", make: { files in try files.write("key.pem", "") }, expected: "is empty"),
        Case(description: "a key block of garbage", make: { files in
            try files.write("key.pem", "-----BEGIN PRIVATE KEY-----\nTUlJQ2Rnc2VjcmV0bm90YWtleWF0YWxs\n-----END PRIVATE KEY-----\n")
        }, expected: "is not a private key OpenSSL can read"),
        Case(description: "a block without its END line", make: { files in
            try files.write("key.pem", "-----BEGIN PRIVATE KEY-----\nTUlJQ2Rnc2VjcmV0bm90YWtleWF0YWxs\n")
        }, expected: "has a PEM block (PRIVATE KEY) without its END line"),
        Case(description: "two keys", make: { files in
            try files.key(.p256SEC1, name: "a.pem")
            try files.key(.p256SEC1, name: "b.pem")
            return try files.write("key.pem", try files.read("a.pem") + files.read("b.pem"))
        }, expected: "holds 2 private keys; keep one"),
    ]

    @Test("A bad key file is a .configuration error naming the file and the problem, never its contents", arguments: cases)
    func refused(_ badCase: Case) throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let path = try badCase.make(files)
        let error = #expect(throws: OAuthError.self) { try ClientKey(contentsOfFile: path) }
        #expect(error?.code == .configuration)
        #expect(error?.recovery == .fixConfiguration)
        let message = error?.message ?? ""
        #expect(message.contains(badCase.expected), "\(message)")
        #expect(message.contains("client key file \(path)"), "\(message)")
        // No line of the file (a PEM body line is a piece of the key) appears in the error.
        if let contents = try? String(contentsOfFile: path, encoding: .utf8) {
            for line in contents.split(separator: "\n") where line.count >= 16 && !line.hasPrefix("-----") {
                #expect(!message.contains(line))
                #expect(!(error?.description.contains(line) ?? true))
            }
        }
    }

    @Test("A PEM given as text loads as the file would, and its errors name no file")
    func pemText() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.key(.p384SEC1)
        let key = try ClientKey(pem: try files.read("key.pem"))
        #expect(key.kind == .ec(curve: "P-384"))
        #expect(key.path == nil)
        let error = #expect(throws: OAuthError.self) { try ClientKey(pem: "not a key") }
        #expect(error?.message == "the client key holds no PEM private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)")
    }

    @Test("description, debugDescription, dump and reflection show the key's type and file only", arguments: [
        KeyFiles.Recipe.rsa2048PKCS1, .p256SEC1, .ed25519PKCS8,
    ])
    func redacted(recipe: KeyFiles.Recipe) async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let path = try files.key(recipe)
        let key = try ClientKey(contentsOfFile: path)
        let pem = try files.read("key.pem")
        // The DER of the key, in the hex and base64 forms a careless dump would show.
        let der = try #require(Data(base64Encoded: pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()))
        var dumped = ""
        dump(key, to: &dumped)
        let provider = Provider(id: "svc", tokenURL: URL(string: "https://as.example/token"), clientID: "c", clientKey: key)
        var dumpedProvider = ""
        dump(provider, to: &dumpedProvider)
        let shown = ["\(key)", String(reflecting: key), dumped, "\(provider)", String(reflecting: provider), dumpedProvider]
        for text in shown {
            for line in pem.split(separator: "\n") where !line.hasPrefix("-----") {
                #expect(!text.contains(line.prefix(24)))
            }
            #expect(!text.contains("PRIVATE KEY"))
            #expect(!text.contains(der.prefix(12).map { String(format: "%02x", $0) }.joined()))
        }
        #expect("\(key)" == "ClientKey(\(key.kind), file: \(path))")
        #expect(dumped.contains(key.kind.description))

        let parameters = ClientAssertion.Parameters(clientID: "c", audience: "https://as.example/token", algorithm: key.defaultAlgorithm,
                                                    keyID: nil, certificateThumbprint: nil)
        let assertion = try await ClientAssertion.make(parameters, signer: key, now: Date())
        var dumpedAssertion = ""
        dump(assertion, to: &dumpedAssertion)
        for text in ["\(assertion)", String(reflecting: assertion), dumpedAssertion] {
            #expect(!text.contains(assertion.reveal().prefix(20)))
            #expect(!text.contains(String(assertion.reveal().split(separator: ".").last ?? "")))
        }
    }
}
