import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// From nothing but a resource's URL (issue 32), against real servers on loopback: the resource's
/// metadata (RFC 9728) from our small resource server in front of them (Server/resource/), the
/// server it names, a client registered dynamically (RFC 7591), a login with it, a token the
/// resource accepts, a step-up answered by a second login with the scope asked (RFC 6750 §3.1), and
/// the registration managed and deleted (RFC 7592) until the server no longer knows the client.
/// Every request goes through the library's CurlTransport.
enum RegistrationIntegration {
    /// A store and the flows made over it, with the transport of the server.
    struct Rig {
        let store = MemorySecretStore()
        let transport: any HTTPTransport

        func flow(_ providers: [Provider] = []) async throws -> AuthFlow {
            try await AuthFlow(providers: providers, store: store, transport: transport, options: AuthFlow.Options(userAgent: "oauthflow-it"))
        }
    }

    /// The provider a resource login makes (what `authflow login URL` writes): the server's issuer,
    /// the resource, the scopes its challenge asked, registration dynamic with those it supports,
    /// and a loopback redirect URI on a port free now.
    static func provider(
        _ metadata: ProtectedResourceMetadata, issuer: String, authentication: Provider.ClientAuthentication? = nil
    ) throws -> Provider {
        var provider = Provider(id: "mcp", issuer: issuer, clientID: "", redirectURI: URL(string: "http://127.0.0.1:\(try ServerLauncher.freePort())/callback"),
                                scopes: metadata.challengeScopes)
        provider.resources = [metadata.resource]
        provider.dynamicRegistration = Provider.DynamicRegistration(authentication: authentication, scopes: metadata.scopesSupported ?? [],
                                                                    clientName: "oauthflow integration")
        try provider.validate()
        return provider
    }

    /// Our resource started in front of a server, the resource's metadata read from its URL, and
    /// the provider that metadata makes (what `authflow login URL` does first).
    struct Scene {
        let resource: ResourceServer
        let metadata: ProtectedResourceMetadata
        let provider: Provider
    }

    static func scene(
        _ kind: ResourceServer.Kind, issuer: String, caFile: String? = nil, rig: Rig, authentication: Provider.ClientAuthentication? = nil
    ) async throws -> Scene {
        let resource = try await ResourceServer(kind: kind, issuer: issuer, caFile: caFile)
        let metadata = try await rig.flow().resourceMetadata(for: resource.url)
        return Scene(resource: resource, metadata: metadata, provider: try provider(metadata, issuer: issuer, authentication: authentication))
    }

    /// Logs in with the browser: the authorization request, `approve` (the person), the callback.
    static func login(_ flow: AuthFlow, request: AuthorizationRequest, approve: (URL) async throws -> URL) async throws {
        let callback = try await approve(request.url)
        try await flow.completeAuthorization(callbackURL: callback)
    }
}

extension RegistrationIntegration {
    @Suite(
        "Integration: from a resource URL to a registered client, a token and a step-up, against glewlwyd (RFC 9728, 7591, 7592, 6750 §3)",
        .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
        .registrationGlewlwyd,
        .serialized,
        .timeLimit(.minutes(4))
    )
    struct Glewlwyd {
        func rig(_ server: GlewlwydServer) -> Rig {
            Rig(transport: CurlTransport(timeout: 30, proxy: .none, caFile: URL(fileURLWithPath: server.pki("ca.crt"))))
        }

        func scene(_ server: GlewlwydServer, _ rig: Rig, _ authentication: Provider.ClientAuthentication? = nil) async throws -> Scene {
            try await RegistrationIntegration.scene(.glewlwyd, issuer: server.issuer, caFile: server.pki("ca.crt"), rig: rig,
                                                    authentication: authentication)
        }

        /// A browser login at glewlwyd with the provider's registered client.
        func login(_ flow: AuthFlow, _ server: GlewlwydServer) async throws {
            try await RegistrationIntegration.login(flow, request: try await flow.authorizationRequest(provider: "mcp")) { url in
                try await RegistrationGlewlwyd.approve(server, url)
            }
        }

        @Test("end to end: resource metadata → glewlwyd's metadata → private_key_jwt registration → login → resource 200 → step-up → login with api → 200 → unregistered")
        func endToEnd() async throws {
            let server = try RegistrationGlewlwyd.require()
            let resource = try await ResourceServer(kind: .glewlwyd, issuer: server.issuer, caFile: server.pki("ca.crt"))
            defer { resource.stop() }
            let rig = rig(server)

            // 1–3: the resource's metadata from its challenge, and the server it names, whose metadata agrees.
            let discovery = try await rig.flow()
            let metadata = try await discovery.resourceMetadata(for: resource.url)
            #expect(metadata.source == .challenge)
            #expect(metadata.authorizationServers == [server.issuer])
            #expect(metadata.challengeScopes == ["openid"])
            let serverMetadata = try await discovery.authorizationServer(for: metadata)
            #expect(serverMetadata.issuer == server.issuer)
            #expect(serverMetadata.registrationEndpoint?.absoluteString == "\(server.issuer)/register")

            // 4: registration; glewlwyd lists private_key_jwt (and no `none`), so a key is made and registered with its kid.
            let provider = try RegistrationIntegration.provider(metadata, issuer: serverMetadata.issuer)
            let registration = try await rig.flow([provider]).registerClient(provider: "mcp")
            #expect(registration.tokenEndpointAuthMethod == .privateKeyJWT)
            #expect(registration.clientKeyID != nil)
            #expect(registration.registrationClientURI?.absoluteString == "\(server.issuer)/register/\(registration.clientID)")
            #expect(registration.clientSecretExpiresAt == nil, "glewlwyd: client_secret_expires_at 0")

            // 5: a login with the registered client (the flow applies the stored registration).
            let flow = try await rig.flow([provider])
            #expect(try flow.provider("mcp").clientID == registration.clientID)
            try await login(flow, server)
            #expect(await flow.authorization(for: "mcp")?.scopes == ["openid"])

            // A token the resource accepts.
            let api = AuthorizingTransport(base: rig.transport, source: flow.tokenSource(for: "mcp"))
            let ok = try await api.send(HTTPRequest(method: "GET", url: resource.url))
            #expect(ok.status == 200, "\(String(decoding: ok.body, as: UTF8.self))")

            // 6: the admin tools want api: a typed step-up error, then a second login with the scope asked.
            let refused = await #expect(throws: OAuthError.self) { try await api.send(HTTPRequest(method: "GET", url: resource.url("/admin"))) }
            #expect(refused?.code == .stepUpRequired)
            #expect(refused?.httpStatus == 403)
            let challenge = try #require(refused?.challenge)
            #expect(challenge.scope == ["openid", "api"])
            try await RegistrationIntegration.login(flow, request: try await flow.stepUpRequest(provider: "mcp", challenge: challenge)) { url in
                #expect(query(url)["scope"] == "openid api")
                return try await RegistrationGlewlwyd.approve(server, url)
            }
            #expect(Set(await flow.authorization(for: "mcp")?.scopes ?? []) == ["openid", "api"])
            let admin = try await api.send(HTTPRequest(method: "GET", url: resource.url("/admin")))
            #expect(admin.status == 200)
            #expect(String(decoding: admin.body, as: UTF8.self).contains("openid api"))

            // RFC 7592: read back, then deleted; glewlwyd then refuses the registration token and the refresh token.
            let read = try await flow.readRegistration(provider: "mcp")
            #expect(read.clientID == registration.clientID)
            #expect(read.registrationAccessToken != nil, "kept: glewlwyd's read answer leaves it out")
            #expect(try await flow.deleteRegistration(provider: "mcp"))
            #expect(try await flow.registration(for: "mcp") == nil)
            let uri = try #require(read.registrationClientURI)
            let registrationToken = try #require(read.registrationAccessToken)
            let gone = await #expect(throws: OAuthError.self) {
                try await RegistrationEndpoint.read(uri, token: registrationToken, client: flow.client(for: try flow.provider("mcp")))
            }
            #expect(gone?.httpStatus == 401)
            let refresh = await #expect(throws: OAuthError.self) { try await flow.refresh(provider: "mcp") }
            #expect(refresh != nil, "the deleted client's refresh token no longer works")
        }

        @Test("client_secret_basic asked for: glewlwyd issues a new secret at every update (RFC 7592 §2.2); the stored one follows, the old one stops working")
        func secretRotatesOnUpdate() async throws {
            let server = try RegistrationGlewlwyd.require()
            let rig = rig(server)
            let scene = try await scene(server, rig, .clientSecretBasic)
            defer { scene.resource.stop() }
            let provider = scene.provider
            let first = try await rig.flow([provider]).registerClient(provider: "mcp")
            #expect(first.tokenEndpointAuthMethod == .clientSecretBasic)
            let flow = try await rig.flow([provider])
            try await login(flow, server)
            let oldProvider = try flow.provider("mcp")

            let updated = try await flow.updateRegistration(provider: "mcp")
            #expect(updated.clientID == first.clientID)
            #expect(updated.clientSecret?.reveal() != first.clientSecret?.reveal(), "glewlwyd: a new secret at every update")
            #expect(updated.registrationAccessToken?.reveal() == first.registrationAccessToken?.reveal(), "the old token keeps working")

            // A flow on the stored registration refreshes with the new secret; one still holding the old secret is refused.
            let fresh = try await rig.flow([provider])
            try await fresh.refresh(provider: "mcp")
            var old = oldProvider
            old.dynamicRegistration = nil   // as registered by hand: the stored registration is not applied
            let stale = try await AuthFlow(providers: [old], store: rig.store, transport: rig.transport)
            let error = await #expect(throws: OAuthError.self) { try await stale.refresh(provider: "mcp") }
            #expect(error != nil && error?.code != .transport, "the old secret is refused: \(error.map { "\($0)" } ?? "")")
            _ = try await fresh.deleteRegistration(provider: "mcp")
        }

        @Test("none with client_confidential false is a real public client at glewlwyd: a login without any secret")
        func publicClient() async throws {
            let server = try RegistrationGlewlwyd.require()
            let rig = rig(server)
            let scene = try await scene(server, rig, Provider.ClientAuthentication.none)
            defer { scene.resource.stop() }
            let registration = try await rig.flow([scene.provider]).registerClient(provider: "mcp")
            #expect(registration.tokenEndpointAuthMethod == .none)
            #expect(registration.clientSecret == nil)
            let flow = try await rig.flow([scene.provider])
            try await login(flow, server)
            let ok = try await AuthorizingTransport(base: rig.transport, source: flow.tokenSource(for: "mcp"))
                .send(HTTPRequest(method: "GET", url: scene.resource.url))
            #expect(ok.status == 200)
            #expect(try await flow.deleteRegistration(provider: "mcp"))
        }

        @Test("glewlwyd compares a loopback redirect URI exactly, port included (RFC 8252 §7.3 says any port): the registered port is the one to listen on")
        func loopbackPortIsExact() async throws {
            let server = try RegistrationGlewlwyd.require()
            let rig = rig(server)
            let scene = try await scene(server, rig, .clientSecretBasic)
            defer { scene.resource.stop() }
            let provider = scene.provider
            let registration = try await rig.flow([provider]).registerClient(provider: "mcp")
            var moved = registration.applied(to: provider)
            moved.dynamicRegistration = nil
            moved.redirectURI = URL(string: "http://127.0.0.1:\(try ServerLauncher.freePort())/callback")
            let (browser, cookie) = try await server.loggedInBrowser()
            let grant = try await browser.send(HTTPRequest(
                method: "PUT", url: URL(string: "\(server.base)/api/auth/grant/\(registration.clientID)")!,
                headers: [("Content-Type", "application/json"), ("Cookie", cookie)], body: Data(#"{"scope":"openid"}"#.utf8)))
            try #require(grant.status == 200)
            // The same consent, the same client: the registered port gets the code, another port does not.
            for (candidate, expected) in [(registration.applied(to: provider), true), (moved, false)] {
                var candidate = candidate
                candidate.dynamicRegistration = nil
                let flow = try await AuthFlow(providers: [candidate], store: MemorySecretStore(), transport: rig.transport)
                let request = try await flow.authorizationRequest(provider: "mcp")
                let answer = try await browser.send(HTTPRequest(method: "GET", url: URL(string: request.url.absoluteString + "&g_continue")!,
                                                                headers: [("Cookie", cookie)]))
                let location = answer.headers["location"] ?? ""
                #expect(location.hasPrefix(try #require(candidate.redirectURI).absoluteString) == expected, "\(candidate.redirectURI!): \(location)")
            }
            #expect(try await rig.flow([provider]).deleteRegistration(provider: "mcp"))
        }

        @Test("an initial access token (RFC 7591 §3): the dcr instance refuses a registration without one, registers with one")
        func initialAccessToken() async throws {
            let server = try RegistrationGlewlwyd.require()
            let rig = rig(server)
            let issuer = "\(server.base)/api/dcr"
            // dcr-issuer's client credentials at the same instance mint the token (scope api).
            let minter = Provider(id: "minter", issuer: issuer, clientID: "dcr-issuer",
                                  clientSecret: Secret("dcr-issuer-value-0123456789abcdef"), scopes: ["api"])
            let minting = try await rig.flow([minter])
            try await minting.clientCredentials(provider: "minter")
            let token = try await minting.accessToken(for: "minter")

            var provider = Provider(id: "dcr", issuer: issuer, clientID: "", redirectURI: URL(string: "http://127.0.0.1:\(try ServerLauncher.freePort())/callback"),
                                    scopes: ["openid"])
            provider.dynamicRegistration = Provider.DynamicRegistration(authentication: .clientSecretBasic)
            let flow = try await rig.flow([provider])
            let refused = await #expect(throws: OAuthError.self) { try await flow.registerClient(provider: "dcr") }
            #expect(refused?.httpStatus == 401)
            #expect(try await flow.registration(for: "dcr") == nil)
            let registration = try await flow.registerClient(provider: "dcr", initialAccessToken: token)
            #expect(!registration.clientID.isEmpty)
            #expect(try await flow.deleteRegistration(provider: "dcr"))
        }
    }
}

extension RegistrationIntegration {
    @Suite(
        "Integration: from a resource URL to a registered client, a token and a step-up, against Authlib (RFC 9728, 7591, 7592, 6750 §3)",
        .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
        .registrationServer,
        .serialized,
        .timeLimit(.minutes(3))
    )
    struct Authlib {
        let rig = Rig(transport: CurlTransport(timeout: 30, proxy: .none))

        @Test("end to end: a public client (Authlib lists none) → login → resource 200 → step-up → login with api → 200 → deleted, gone from the server")
        func endToEnd() async throws {
            let server = try RegistrationServer.require()
            let resource = try await ResourceServer(kind: .authlib, issuer: server.issuer)
            defer { resource.stop() }
            let metadata = try await rig.flow().resourceMetadata(for: resource.url)
            let serverMetadata = try await rig.flow().authorizationServer(for: metadata)
            #expect(serverMetadata.issuer == server.issuer)
            let provider = try RegistrationIntegration.provider(metadata, issuer: server.issuer)
            let registration = try await rig.flow([provider]).registerClient(provider: "mcp")
            #expect(registration.tokenEndpointAuthMethod == .none)
            #expect(registration.clientSecret == nil, "Authlib sends a secret to a none client anyway; it is not kept")
            #expect(try await server.clients().contains(registration.clientID))

            let flow = try await rig.flow([provider])
            try await RegistrationIntegration.login(flow, request: try await flow.authorizationRequest(provider: "mcp"), approve: server.approve)
            let api = AuthorizingTransport(base: rig.transport, source: flow.tokenSource(for: "mcp"))
            #expect(try await api.send(HTTPRequest(method: "GET", url: resource.url)).status == 200)

            let refused = await #expect(throws: OAuthError.self) { try await api.send(HTTPRequest(method: "POST", url: resource.url("/admin"), body: Data("{}".utf8))) }
            let challenge = try #require(refused?.challenge)
            #expect(refused?.code == .stepUpRequired)
            try await RegistrationIntegration.login(flow, request: try await flow.stepUpRequest(provider: "mcp", challenge: challenge), approve: server.approve)
            let admin = try await api.send(HTTPRequest(method: "POST", url: resource.url("/admin"), body: Data(#"{"x":1}"#.utf8)))
            #expect(admin.status == 200)
            #expect(String(decoding: admin.body, as: UTF8.self).contains(#"{\"x\":1}"#), "the body reached the resource")

            #expect(try await flow.deleteRegistration(provider: "mcp"))
            #expect(try await !server.clients().contains(registration.clientID), "the server no longer knows the client")
            let gone = await #expect(throws: OAuthError.self) { try await api.send(HTTPRequest(method: "GET", url: resource.url)) }
            #expect(gone != nil, "the resource refuses the deleted client's token, and its refresh fails")
        }

        @Test("an expired client secret is registered again at the next check, not reported as a failed login; the old client is deleted")
        func expiredSecret() async throws {
            let server = try RegistrationServer.require()
            let scene = try await RegistrationIntegration.scene(.authlib, issuer: server.issuer, rig: rig, authentication: .clientSecretBasic)
            defer { scene.resource.stop() }
            let provider = scene.provider
            let flow = try await rig.flow([provider])
            let first = try await flow.currentRegistration(provider: "mcp")
            #expect(first.tokenEndpointAuthMethod == .clientSecretBasic)
            try await server.expireSecret(of: first.clientID)

            let second = try await flow.currentRegistration(provider: "mcp")
            #expect(second.clientID != first.clientID)
            let clients = try await server.clients()
            #expect(clients.contains(second.clientID) && !clients.contains(first.clientID))
            let next = try await rig.flow([provider])
            try await RegistrationIntegration.login(next, request: try await next.authorizationRequest(provider: "mcp"), approve: server.approve)
            #expect(await next.authorization(for: "mcp") != nil)
            #expect(try await next.deleteRegistration(provider: "mcp"))
        }

        @Test("the CLI from a URL: discover, login URL (registers, adds the catalog entry), request, the step-up line, login --scope, logout --unregister")
        func commandLine() async throws {
            let server = try RegistrationServer.require()
            let resource = try await ResourceServer(kind: .authlib, issuer: server.issuer)
            defer { resource.stop() }
            let scratch = try TemporaryDirectory("authflow-dcr")
            defer { scratch.remove() }
            let catalog = scratch.url.appendingPathComponent("config/providers.json")
            let store = scratch.url.appendingPathComponent("store")
            let environment = ["PATH": "/usr/bin:/bin", "HOME": scratch.url.path, "NO_COLOR": "1"]
            let common = ["--config", catalog.path, "--store", store.path]
            let id = "127.0.0.1-\(resource.port)"

            // discover: each step, nothing registered.
            let clientsBefore = Set(try await server.clients())
            let discover = try await runBinary(common + ["discover", resource.url.absoluteString], environment: environment)
            #expect(discover.status == 0, "\(discover.stderr)")
            #expect(discover.stdout.contains("1. Resource \(resource.url.absoluteString)"))
            #expect(discover.stdout.contains("the resource's 401 challenge"))
            #expect(discover.stdout.contains("2. Authorization server \(server.issuer)"))
            #expect(discover.stdout.contains(#""registration":"dynamic""#))
            #expect(Set(try await server.clients()) == clientsBefore, "discover registers nothing")

            // login URL: the resource's and the server's metadata, the registration, the catalog entry, the browser login.
            let login = try RunningBinary(common + ["login", resource.url.absoluteString], environment: environment)
            let line = try #require(await login.waitForLine(containing: "\(server.issuer)/authorize", timeout: .seconds(30)),
                                    "no authorization URL; stderr: \(login.stderr)")
            let callback = try await server.approve(try #require(URL(string: line.trimmingCharacters(in: .whitespaces))))
            _ = try await CurlTransport(timeout: 10, proxy: .none).send(HTTPRequest(method: "GET", url: callback))
            #expect(await login.wait(timeout: .seconds(30)) == 0, "stderr: \(login.stderr)")
            #expect(login.stderr.contains("Added provider \(id) to \(catalog.path)"))
            let clientID = try #require(Set(try await server.clients()).subtracting(clientsBefore).first)
            #expect(login.stderr.contains("Registered client \(clientID)"))
            let entry = try String(contentsOf: catalog, encoding: .utf8)
            #expect(entry.contains(#""registration":"dynamic""#) && entry.contains(resource.url.absoluteString) && !entry.contains(clientID),
                    "the catalog names the resource, the issuer and dynamic registration; the client ID is in the store")

            // token serves the new provider like any other: the stored registration is applied.
            let token = try await runBinary(common + ["token", id], environment: environment)
            #expect(token.status == 0, "\(token.stderr)")
            #expect(token.stdout.split(separator: "\n").count == 1)

            // request: the token the resource accepts; then the admin tools' step-up, named with the login line that answers it.
            let first = try await runBinary(common + ["request", id, resource.url.absoluteString], environment: environment)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.contains(#""path": "/mcp""#))
            let bodyFile = scratch.url.appendingPathComponent("body.json")
            try Data(#"{"tool":"reindex"}"#.utf8).write(to: bodyFile)
            let stepUp = try await runBinary(common + ["request", "--data", "@\(bodyFile.path)", id, resource.url("/admin").absoluteString],
                                             environment: environment)
            #expect(stepUp.status == 77)
            #expect(stepUp.stderr.contains(#"the resource asks for: scope="read api""#), "\(stepUp.stderr)")
            #expect(stepUp.stderr.contains("Log in again with what it asked for: authflow login \(id) --browser --scope 'read api'"))

            let again = try RunningBinary(common + ["login", id, "--browser", "--scope", "read api"], environment: environment)
            let second = try #require(await again.waitForLine(containing: "\(server.issuer)/authorize", timeout: .seconds(30)), "\(again.stderr)")
            _ = try await CurlTransport(timeout: 10, proxy: .none).send(HTTPRequest(
                method: "GET", url: try await server.approve(try #require(URL(string: second.trimmingCharacters(in: .whitespaces))))))
            #expect(await again.wait(timeout: .seconds(30)) == 0, "stderr: \(again.stderr)")
            #expect(Set(try await server.clients()).subtracting(clientsBefore) == [clientID], "the stored registration is used again")
            let admin = try await runBinary(common + ["request", "--data", "@\(bodyFile.path)", id, resource.url("/admin").absoluteString],
                                            environment: environment)
            #expect(admin.status == 0, "\(admin.stderr)")
            #expect(admin.stdout.contains(#""method": "POST""#) && admin.stdout.contains("reindex"))

            // No registration secret in any output.
            let record = try JSONValue.parse(try Data(contentsOf: store.appendingPathComponent("\(id).registration.json")))
            let registrationToken = try #require(record["registration"]?["registrationAccessToken"]?.stringValue)
            for text in [discover.stdout, discover.stderr, login.stdout, login.stderr, token.stdout, token.stderr, first.stdout, first.stderr,
                         stepUp.stderr, again.stdout, again.stderr, admin.stdout, admin.stderr] {
                #expect(!text.contains(registrationToken))
            }

            // logout --unregister: the client is deleted at the server.
            let logout = try await runBinary(common + ["logout", id, "--unregister"], environment: environment)
            #expect(logout.status == 0, "\(logout.stderr)")
            #expect(logout.stdout.contains("Deleted client \(clientID) at \(server.issuer)"))
            #expect(try await !server.clients().contains(clientID))
            #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("\(id).registration.json").path))
        }

        @Test("update (RFC 7592 §2.2): Authlib merges and keeps the secret; a read shows the new name")
        func update() async throws {
            let server = try RegistrationServer.require()
            let scene = try await RegistrationIntegration.scene(.authlib, issuer: server.issuer, rig: rig, authentication: .clientSecretBasic)
            defer { scene.resource.stop() }
            let provider = scene.provider
            let flow = try await rig.flow([provider])
            let first = try await flow.registerClient(provider: "mcp")
            var changed = try first.metadata()
            changed.clientName = "renamed by the test"
            let updated = try await flow.updateRegistration(provider: "mcp", metadata: changed)
            #expect(updated.clientSecret?.reveal() == first.clientSecret?.reveal())
            #expect(try await flow.readRegistration(provider: "mcp").clientName == "renamed by the test")
            #expect(try await flow.deleteRegistration(provider: "mcp"))
        }
    }
}

/// The decoded query of `url` keyed by name (first value wins).
private func query(_ url: URL) -> [String: String] {
    var result: [String: String] = [:]
    for item in URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? [] where result[item.name] == nil {
        result[item.name] = item.value ?? ""
    }
    return result
}
