import Foundation
import OAuthFlow
import TestSupport

/// The CLI tests' directory (`authflow-tests-<UUID>`), with a catalog and a store in it.
extension TemporaryDirectory {
    /// A new `authflow-tests-<UUID>` (0700).
    convenience init() throws { try self.init("authflow-tests") }

    var store: URL { url.appendingPathComponent("store", isDirectory: true) }
    var config: URL { url.appendingPathComponent("providers.json") }

    /// Writes `providers` (JSON objects as text) as the catalog.
    func writeCatalog(_ providers: [String]) throws {
        try Data(("[\n" + providers.joined(separator: ",\n") + "\n]\n").utf8).write(to: config)
    }

    /// The store's entries (file names without `.json`).
    var storedKeys: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: store.path)) ?? [])
            .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }
}

extension TemporaryDirectory {
    /// Writes a service-account key file (a Google-style JSON document around a fresh
    /// openssl-made RSA key) for `email`, whose token endpoint is `tokenURI`; returns its path (mode 0600).
    func serviceAccountFile(email: String, keyID: String = "k1", tokenURI: String) throws -> String {
        let keyPath = url.appendingPathComponent("sa-\(UUID().uuidString).pem").path
        let keygen = ChildProcess()
        keygen.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        keygen.arguments = ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", keyPath]
        try keygen.run()
        keygen.waitUntilExit()
        let account: [String: Any] = ["type": "service_account", "client_email": email, "private_key_id": keyID,
                                      "private_key": try String(contentsOfFile: keyPath, encoding: .utf8), "token_uri": tokenURI]
        let accountPath = url.appendingPathComponent("\(email.prefix { $0 != "@" }).json").path
        try JSONSerialization.data(withJSONObject: account).write(to: URL(fileURLWithPath: accountPath))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: accountPath)
        return accountPath
    }
}

/// A catalog entry as JSON text.
func catalogEntry(
    id: String, base: String, device: Bool = true, browser: Bool = false, secret: String? = nil,
    redirectURI: String? = nil, revocation: Bool = true, userinfo: Bool = false, scopes: [String] = ["read"]
) -> String {
    var fields = [#""id": "\#(id)""#, #""clientID": "client-\#(id)""#, #""tokenURL": "\#(base)/token""#]
    if device { fields.append(#""deviceAuthorizationURL": "\#(base)/device/code""#) }
    if browser { fields.append(#""authorizationURL": "\#(base)/authorize""#) }
    if let secret { fields.append(#""clientSecret": "\#(secret)""#) }
    if let redirectURI { fields.append(#""redirectURI": "\#(redirectURI)""#) }
    if revocation { fields.append(#""revocationURL": "\#(base)/revoke""#) }
    if userinfo { fields.append(#""userinfoURL": "\#(base)/userinfo""#) }
    fields.append(#""scopes": [\#(scopes.map { "\"\($0)\"" }.joined(separator: ", "))]"#)
    return "{ " + fields.joined(separator: ", ") + " }"
}

/// An environment with nothing from the developer's: no display, no colour, no inherited config.
func cleanEnvironment(_ directory: TemporaryDirectory, _ extra: [String: String] = [:]) -> [String: String] {
    var environment = [
        "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        "HOME": directory.url.appendingPathComponent("home").path,
        "NO_COLOR": "1",
        "no_proxy": "127.0.0.1,localhost",
    ]
    environment.merge(extra) { _, new in new }
    return environment
}

/// A JSON Lines record parsed into a dictionary.
func record(_ line: some StringProtocol) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? [:]
}
