import Foundation
import OAuthFlow
import OAuthFlowPostgres

/// The fleet-store snippets of README.md, Documentation/Storage.md and PostgresSecretStore's doc
/// comment, compiled with the tests so they stay true to the API (never called: they need a real
/// database). Change a snippet here when you change it there.
func fleetDocumentationExamples(providers: [Provider]) async throws {
    // README.md ("One token for a fleet")
    do {
        let store = try PostgresSecretStore(connection: "postgresql://billing@db.internal/app?sslmode=verify-full",
                                            encryption: EntryEncryption(key: try StoreKey(systemdCredential: "store-key")))
        let flow = try await AuthFlow(providers: providers, store: store)
        _ = flow
    }
    // Storage.md ("Fleet store: PostgreSQL")
    do {
        let key = try StoreKey(systemdCredential: "oauthflow-store-key")
        let store = try PostgresSecretStore(connection: "postgresql://billing@db.internal/app?sslmode=verify-full",
                                            encryption: EntryEncryption(key: key))
        let flow = try await AuthFlow(providers: providers, store: store)
        let token = try await flow.accessToken(for: "billing-api")
        _ = token
        _ = PostgresSecretStore.Options(table: "billing_tokens")
        _ = PostgresSecretStore.Options(listensForDeletions: false)
    }
    // PostgresSecretStore's doc comment
    do {
        let key = try StoreKey(contentsOf: URL(fileURLWithPath: "/etc/myapp/store.key"))
        let store = try PostgresSecretStore(connection: "postgresql://app@db.internal/app?sslmode=verify-full",
                                            encryption: EntryEncryption(key: key))
        let flow = try await AuthFlow(providers: providers, store: store)
        _ = flow
    }
}
