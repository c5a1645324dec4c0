import Foundation
@testable import OAuthFlow
import Testing

@Suite("RP-initiated logout URL (OpenID Connect RP-Initiated Logout 1.0 §2)")
struct EndSessionTests {
    @Test("id_token_hint, client_id, post_logout_redirect_uri and state, in that order, percent-encoded; the endpoint's query kept")
    func parameters() throws {
        let endpoint = try #require(URL(string: "https://op.example/logout?tenant=a%20b"))
        let url = try EndSession.url(
            endpoint: endpoint, providerID: "app", clientID: "cli 1", idTokenHint: Secret("h.p.s"),
            postLogoutRedirectURI: URL(string: "https://rp.example/bye?x=1"), state: "st+/=")
        #expect(url.absoluteString == "https://op.example/logout?tenant=a%20b&id_token_hint=h.p.s&client_id=cli%201"
            + "&post_logout_redirect_uri=https%3A%2F%2Frp.example%2Fbye%3Fx%3D1&state=st%2B%2F%3D")
        let items = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems)
        #expect(items.map(\.name) == ["tenant", "id_token_hint", "client_id", "post_logout_redirect_uri", "state"])
        #expect(items.first { $0.name == "post_logout_redirect_uri" }?.value == "https://rp.example/bye?x=1")
        #expect(items.first { $0.name == "state" }?.value == "st+/=")
    }

    @Test("without an ID token, redirect or state only client_id is sent")
    func minimal() throws {
        let url = try EndSession.url(endpoint: try #require(URL(string: "https://op.example/logout")), providerID: "app",
                                     clientID: "cli", idTokenHint: nil, postLogoutRedirectURI: nil, state: nil)
        #expect(url.absoluteString == "https://op.example/logout?client_id=cli")
    }

    @Test("a post-logout redirect with a fragment or without a scheme is .configuration", arguments: [
        "https://rp.example/bye#frag", "/relative/bye",
    ])
    func badRedirect(redirect: String) throws {
        let error = #expect(throws: OAuthError.self) {
            try EndSession.url(endpoint: URL(string: "https://op.example/logout")!, providerID: "app", clientID: "cli",
                               idTokenHint: nil, postLogoutRedirectURI: URL(string: redirect), state: nil)
        }
        #expect(error?.code == .configuration)
    }
}
