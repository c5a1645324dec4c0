// One member of a test fleet: a process with its own AuthFlow and in-memory cache over a shared
// PostgresSecretStore. The PostgresTests start many at once and read what each prints.
//
//   pg-fleet-member --store CONNINFO (--key-file FILE | --plaintext) --token-url URL --provider ID [--service]
//
// Prints `token <access token>` and exits 0, or `error <code> <description>` and exits 1.
import Foundation
import OAuthFlow
import OAuthFlowPostgres

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func fail(_ text: String) -> Never {
    print("error \(text)")
    exit(1)
}

do throws(OAuthError) {
    guard let connection = option("--store"), let tokenURL = option("--token-url").flatMap(URL.init(string:)),
          let id = option("--provider") else { fail("usage usage") }
    let service = CommandLine.arguments.contains("--service")
    let encryption = try option("--key-file").map { path throws(OAuthError) in
        EntryEncryption(key: try StoreKey(contentsOf: URL(fileURLWithPath: path)))
    }
    let store = try PostgresSecretStore(
        connection: connection, encryption: encryption, allowPlaintext: CommandLine.arguments.contains("--plaintext"),
        options: .init(lockTimeout: .seconds(20)))
    let provider = service
        ? Provider(id: id, tokenURL: tokenURL, clientID: "fleet", clientSecret: Secret("fleet-secret"), scopes: ["read"])
        : Provider(id: id, tokenURL: tokenURL, deviceAuthorizationURL: tokenURL.deletingLastPathComponent().appendingPathComponent("device"),
                   clientID: "fleet", scopes: ["read"])
    let flow = try await AuthFlow(providers: [provider], store: store)
    let token = try await flow.accessToken(for: id)
    print("token \(token.reveal())")
    exit(0)
} catch {
    fail("\(error.code) \(error)")
}
