import Foundation
@testable import OAuthFlow
import Testing

/// A refused grant's recovery fits the grant (`OAuthError.recovery`, `GrantRequest.read`): a
/// person can redo a code, a device login or a refresh; nobody logs in for a grant a program runs
/// with its own credential, whose refusal is fixed in the credential.
@Suite("The recovery of a refused grant fits the grant")
struct GrantRecoveryTests {
    static let refusals: [ErrorResponse.Code] = [.invalidGrant, .invalidToken]

    @Test("invalid_grant and invalid_token: reauthorize where a person takes part, fixConfiguration where no person logs in",
          arguments: GrantType.allCases)
    func refusedGrant(_ grant: GrantType) {
        let unattended: Set<GrantType> = [.clientCredentials, .jwtBearer, .tokenExchange]
        #expect(grant.needsPerson == !unattended.contains(grant))
        for code in Self.refusals {
            var error = OAuthError(.serverRejected, providerID: "p", endpoint: .token, httpStatus: 400, response: ErrorResponse(code: code))
            #expect(error.recovery == .reauthorize, "no grant named: a person's, as before the grant was known")
            error.grant = grant
            #expect(error.recovery == (unattended.contains(grant) ? .fixConfiguration : .reauthorize), "\(code)")
        }
        // Other answers keep their recovery whatever the grant.
        var busy = OAuthError(.serverRejected, endpoint: .token, httpStatus: 503, response: ErrorResponse(code: .temporarilyUnavailable))
        busy.grant = grant
        #expect(busy.recovery == .retryLater)
        var expired = OAuthError(.reauthorizationRequired)
        expired.grant = grant
        #expect(expired.recovery == .reauthorize)
    }

    @Test("the token endpoint's refusal, as a grant reads it, names the grant; a refresh names .refreshToken and stays a person's")
    func readNamesTheGrant() throws {
        let refused = OAuthError(.serverRejected, endpoint: .token, httpStatus: 400, response: ErrorResponse(code: .invalidGrant))
        let provider = Provider(id: "svc", tokenURL: URL(string: "https://as.test/token"), clientID: "c", clientSecret: Secret("s3cret"))
        let fetched = try ClientCredentialsGrant.request(provider, scopes: ["read"]).read(refused)
        #expect(fetched.grant == .clientCredentials)
        #expect(fetched.code == .serverRejected && fetched.recovery == .fixConfiguration)

        let previous = TokenSet(providerID: "svc", accessToken: Secret("at"), refreshToken: Secret("rt"), issuedAt: Date(), grant: .clientCredentials)
        let refreshed = RefreshTokenGrant.request(refreshToken: Secret("rt"), renewing: previous).read(refused)
        #expect(refreshed.grant == .refreshToken)
        #expect(refreshed.code == .reauthorizationRequired && refreshed.recovery == .reauthorize)
        #expect(refused != fetched, "the grant is part of the error's equality")
    }
}
