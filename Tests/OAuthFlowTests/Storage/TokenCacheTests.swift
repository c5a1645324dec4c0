import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// The flow's token cache (Storage/TokenCache.swift): each provider's slot, found by a scan with few
/// providers and by a table with many.
@Suite("Token cache: one slot per provider", .timeLimit(.minutes(1)))
struct TokenCacheTests {
    @Test("tokens come from the right provider's slot with few providers (a scan) and many (a table)", arguments: [3, 12])
    func slots(count: Int) async throws {
        let mock = MockProvider()
        let providers = (0..<count).map { mock.provider(id: "p\($0)", clientSecret: "s") }
        var entries: [String: Data] = [:]
        for index in 0..<count where index % 2 == 0 {
            entries["p\(index)"] = StoredEntry.encode(TokenSet(
                providerID: "p\(index)", accessToken: Secret("at-\(index)"), issuedAt: Date(),
                expiresAt: Date().addingTimeInterval(3600), grant: .authorizationCode))
        }
        let flow = try await AuthFlow(providers: providers, store: MemorySecretStore(entries), transport: mock.transport())
        for index in 0..<count {
            let source = flow.tokenSource(for: "p\(index)")
            if index % 2 == 0 {
                #expect(try await source.token().reveal() == "at-\(index)")
                #expect(try await flow.accessToken(for: "p\(index)").reveal() == "at-\(index)")
                #expect(try await flow.tokenSet(for: "p\(index)").accessToken.reveal() == "at-\(index)")
            } else {
                let error = await #expect(throws: OAuthError.self) { try await source.token() }
                #expect(error?.code == .reauthorizationRequired)
            }
        }
        let unknown = await #expect(throws: OAuthError.self) { try await flow.tokenSource(for: "p\(count)").token() }
        #expect(unknown?.code == .configuration)
        #expect(mock.requests().isEmpty, "every answer came from memory or the store")
    }
}
