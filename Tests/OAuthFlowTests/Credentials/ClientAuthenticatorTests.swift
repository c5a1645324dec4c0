import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// The client's authentication (Credentials/ClientAuthenticator.swift) is made once per provider
/// and applied by its endpoint client to every request that authenticates the client.
@Suite("Client authentication: one value per provider, applied to every authenticating request", .timeLimit(.minutes(1)))
struct ClientAuthenticatorTests {
    @Test("each method is applied to device authorization, the token endpoint (poll, refresh), introspection and revocation",
          arguments: [Provider.ClientAuthentication.clientSecretBasic, .clientSecretPost, .none])
    func everyEndpoint(method: Provider.ClientAuthentication) async throws {
        let mock = MockProvider()
        let secret: String? = method == .none ? nil : "s3:cret ü"
        let provider = mock.provider(id: "app", clientID: "cli 1", clientSecret: secret, clientAuthentication: method)
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(TestClock()))
        let sent = try await requestEveryAuthenticatingEndpoint(flow, mock: mock, provider: "app")
        #expect(sent.count == 6)
        for request in sent {
            let form = request.form
            switch method {
            case .clientSecretBasic:
                #expect(request.header("Authorization") == "Basic " + Data("cli+1:s3%3Acret+%C3%BC".utf8).base64EncodedString())
                #expect(form["client_id"] == nil && form["client_secret"] == nil)
            case .clientSecretPost:
                #expect(request.header("Authorization") == nil)
                #expect(form["client_id"] == "cli 1" && form["client_secret"] == "s3:cret ü")
            case .none:
                #expect(request.header("Authorization") == nil)
                #expect(form["client_id"] == "cli 1" && form["client_secret"] == nil)
            default:
                Issue.record("not a method of this test: \(method)")  // the assertion methods: Credentials/AssertionWiringTests
            }
        }
    }

    @Test("every configured provider id finds its own provider and client, with few providers (compared) and many (hashed)",
          arguments: [1, 3, 8, 9, 12])
    func lookupByID(count: Int) async throws {
        let mock = MockProvider()
        let ids = (0..<count).map { "p\($0)" }
        let providers = ids.map { mock.provider(id: $0, clientID: "client-\($0)", clientSecret: "secret-\($0)") }
        let flow = try await AuthFlow(providers: providers, transport: mock.transport())
        for id in ids {
            let provider = try flow.provider(id)
            #expect(provider.id == id && provider.clientID == "client-\(id)")
            #expect(flow.client(for: provider) === flow.endpoints[id]?.client)
            #expect(flow.configuredEndpoint(id) === flow.endpoints[id])
        }
        #expect(flow.configuredEndpoint("p") == nil && flow.configuredEndpoint("p\(count)") == nil)
        #expect(throws: OAuthError.self) { try flow.provider("p\(count)") }
        let error = #expect(throws: OAuthError.self) { try flow.provider("unknown") }
        #expect(error?.code == .configuration)
    }

    @Test("the flow makes one endpoint client per configured provider, holding its authentication; another provider value gets its own")
    func oneClientPerProvider() async throws {
        let mock = MockProvider()
        let basic = mock.provider(id: "basic", clientID: "id-b", clientSecret: "sec-b")
        let post = mock.provider(id: "post", clientID: "id-p", clientSecret: "sec-p", clientAuthentication: .clientSecretPost)
        let open = mock.provider(id: "open", clientID: "id-o")
        let flow = try await AuthFlow(providers: [basic, post, open], transport: mock.transport())

        #expect(flow.endpoints.keys.sorted() == ["basic", "open", "post"])
        #expect(flow.client(for: basic) === flow.client(for: basic))
        #expect(flow.client(for: try flow.provider("post")) === flow.endpoints["post"]?.client)
        guard case .secretBasic(let value) = flow.endpoints["basic"]?.client.authenticator else {
            Issue.record("basic: \(String(describing: flow.endpoints["basic"]?.client.authenticator))")
            return
        }
        #expect(value.reveal() == "Basic " + Data("id-b:sec-b".utf8).base64EncodedString())
        guard case .secretPost(let secret) = flow.endpoints["post"]?.client.authenticator else {
            Issue.record("post: \(String(describing: flow.endpoints["post"]?.client.authenticator))")
            return
        }
        #expect(secret.reveal() == "sec-p")
        guard case .publicClient = flow.endpoints["open"]?.client.authenticator else {
            Issue.record("open: \(String(describing: flow.endpoints["open"]?.client.authenticator))")
            return
        }

        // A provider value that is not the configured one (metadata(for:) takes any) gets a client of its own.
        var changed = basic
        changed.clientSecret = Secret("other")
        let other = flow.client(for: changed)
        #expect(other !== flow.endpoints["basic"]?.client)
        guard case .secretBasic(let otherValue) = other.authenticator else {
            Issue.record("changed: \(other.authenticator)")
            return
        }
        #expect(otherValue.reveal() == "Basic " + Data("id-b:other".utf8).base64EncodedString())
    }

    @Test("no client authentication shows its secret in description, debugDescription or dump",
          arguments: [Provider.ClientAuthentication.clientSecretBasic, .clientSecretPost])
    func redacted(method: Provider.ClientAuthentication) throws {
        let provider = Provider(id: "p", tokenURL: URL(string: "https://op.example/token"), clientID: "cid",
                                clientSecret: Secret("very-secret-value"), clientAuthentication: method)
        let authentication = ClientAuthenticator(provider)
        let client = EndpointClient(provider: provider, transport: ScriptedTransport(),
                                    userAgent: "t", log: Logger(sink: nil))
        var dumped = ""
        dump(authentication, to: &dumped)
        dump(client, to: &dumped)
        let basic = Data("cid:very-secret-value".utf8).base64EncodedString()
        for text in [dumped, String(describing: authentication), String(reflecting: authentication), "\(authentication)"] {
            #expect(!text.contains("very-secret-value") && !text.contains(basic), "\(text)")
        }
        #expect(authentication.name == method.rawValue)
    }

    @Test("client_secret_basic: the value AuthFlow makes once per provider is the one made per request, on every fetch")
    func basicCredentialsOnce() async throws {
        let mock = MockProvider()
        mock.script(.token, [.token(access: "at-1"), .token(access: "at-2")])
        let provider = mock.provider(id: "svc", clientID: "client id/1", clientSecret: "top secret:1+ü")
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport())
        _ = try await flow.clientCredentials(provider: "svc")
        _ = try await flow.clientCredentials(provider: "svc")

        let expected = "Basic " + Data("client+id%2F1:top+secret%3A1%2B%C3%BC".utf8).base64EncodedString()
        #expect(ClientAuthenticator.basicAuthorization(clientID: provider.clientID, secret: provider.clientSecret) == expected)
        #expect(mock.requests(.token).map { $0.header("Authorization") } == [expected, expected])
        #expect(mock.requests(.token).map { $0.basicCredentials?.secret } == ["top secret:1+ü", "top secret:1+ü"])
    }
}
