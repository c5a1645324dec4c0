import Foundation
import Glibc
@testable import AuthflowAgent
import OAuthFlow
import TestSupport
import Testing

extension AgentTests {
    @Test("a provider registered dynamically (\"registration\": \"dynamic\") is served by the agent as the registered client: its refresh authenticates with the stored registration")
    func dynamicRegistration() async throws {
        let rig = try Rig()
        defer { rig.remove() }
        let issuer = rig.server.baseURL
        rig.server.script("/.well-known/openid-configuration", [.json(
            #"{"issuer":"\#(issuer)","authorization_endpoint":"\#(issuer)/authorize","token_endpoint":"\#(issuer)/token","registration_endpoint":"\#(issuer)/register","token_endpoint_auth_methods_supported":["client_secret_basic"]}"#)])
        rig.server.script("/register", [.json(
            #"{"client_id":"reg-1","client_secret":"reg-secret-1","client_secret_expires_at":0,"redirect_uris":["http://127.0.0.1:8765/callback"]}"#, status: 201)])
        rig.server.script("/token", [.token("at-first", expiresIn: 1, refresh: "rt-1"), .token("at-agent", expiresIn: 3600, refresh: "rt-2")])
        try rig.directory.writeCatalog([#"{ "id": "api", "issuer": "\#(issuer)", "registration": "dynamic" }"#])

        // The registration and a first login, by the library over the agent's store (what `authflow login api` does).
        var provider = try #require(try ProviderCatalog.load(contentsOf: rig.directory.config).first)
        provider.redirectURI = URL(string: "http://127.0.0.1:8765/callback")
        let store = try FileSecretStore(directory: rig.directory.store)
        _ = try await AuthFlow(providers: [provider], store: store).registerClient(provider: "api")
        let flow = try await AuthFlow(providers: [provider], store: store)
        let request = try await flow.authorizationRequest(provider: "api")
        let state = try #require(URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?.value)
        try await flow.completeAuthorization(callbackURL: URL(string: "http://127.0.0.1:8765/callback?code=c1&state=\(state)")!)

        // The first token lives one second; past it, the agent must refresh, as the registered client.
        try await Task.sleep(for: .milliseconds(1200))
        let agent = try rig.start()
        #expect(await agent.waitForStderr("ready"), "\(agent.stderr)")
        let answer = try #require(AgentClient.ask(rig.socket, request: #"{"v":1,"token":"api"}"# + "\n"))
        #expect(answer["access_token"]?.stringValue == "at-agent", "\(answer)")
        let refresh = try #require(rig.server.requests("/token").last)
        #expect(refresh.form["grant_type"] == "refresh_token")
        #expect(refresh.headers["authorization"] == "Basic " + Data("reg-1:reg-secret-1".utf8).base64EncodedString())
        agent.signal(SIGTERM)
        #expect(await agent.waitExit() == 0)
        #expect(!agent.stderr.contains("reg-secret-1"))
    }
}
