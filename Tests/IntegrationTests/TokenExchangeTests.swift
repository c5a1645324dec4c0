import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// Token exchange made by OAuthFlow, judged by a real RFC 8693 implementation: idpyoidc 5.0.0's
/// `TokenExchangeHelper` (`Server/exchange/exchserver.py`) on 127.0.0.1, started once for this
/// suite. Subject tokens are tokens that server issued (idpyoidc exchanges only its own), minted by
/// its test hook; every exchange goes through the flow and the library's CurlTransport, and the
/// test asserts the server's answer and the exact form fields it received.
@Suite(
    "Integration: token exchange (RFC 8693) and resource indicators (RFC 8707) against idpyoidc on loopback",
    .enabled(if: IntegrationEnvironment.shouldRun, "OAUTHFLOW_SKIP_INTEGRATION=1 (honoured only outside CI)"),
    .exchangeServer,
    .serialized,
    .timeLimit(.minutes(2))
)
struct TokenExchangeIntegration {
    static let secret = "exchanger-secret-0123456789"

    static func provider(_ server: ExchangeServer, secret: String = secret) throws -> Provider {
        let provider = Provider(id: "idpy", tokenURL: server.tokenURL, clientID: "exchanger", clientSecret: Secret(secret), scopes: ["openid"])
        try provider.validate()
        return provider
    }

    @Test("exchangeToken: idpyoidc issues an access token; the wire carries exactly the RFC 8693 §2.1 fields, audience and two resources")
    func exchange() async throws {
        let server = try ExchangeServer.require()
        let subject = try await server.subjectTokens(scope: "openid profile")
        let flow = try await AuthFlow(providers: [try Self.provider(server)])
        let before = try await server.received().count
        let authorization = try await flow.exchangeToken(
            provider: "idpy", subjectToken: Secret(subject.access), subjectTokenType: TokenType.accessToken, audience: ["orders-service"],
            resources: [URL(string: "https://api.example.com/orders")!, URL(string: "https://api.example.com/billing")!])
        #expect(authorization.grant == .tokenExchange)
        #expect(authorization.issuedTokenType == TokenType.accessToken)
        #expect(authorization.tokenType == "Bearer")
        #expect(authorization.scopes == ["openid"])
        #expect(!authorization.isRefreshable)
        let token = try await flow.accessToken(for: "idpy")
        #expect(token.reveal() != subject.access && token.reveal().split(separator: ".").count == 3)

        let sent = Array(try await server.received().dropFirst(before))
        #expect(sent.count == 1)
        let received = try #require(sent.first)
        #expect(Set(received.keys) == ["grant_type", "subject_token", "subject_token_type", "audience", "resource", "scope", "_authorization"])
        #expect(received["grant_type"] == ["urn:ietf:params:oauth:grant-type:token-exchange"])
        #expect(received["subject_token"] == [subject.access])
        #expect(received["subject_token_type"] == ["urn:ietf:params:oauth:token-type:access_token"])
        #expect(received["audience"] == ["orders-service"])
        #expect(received["resource"] == ["https://api.example.com/orders", "https://api.example.com/billing"])
        #expect(received["scope"] == ["openid"])
        let basic = "Basic " + Data("exchanger:\(Self.secret)".utf8).base64EncodedString()
        #expect(received["_authorization"] == [basic])
    }

    @Test("requested_token_type refresh_token: idpyoidc answers token_type N_A with issued_token_type refresh_token, which is accepted and kept")
    func notApplicable() async throws {
        let server = try ExchangeServer.require()
        let subject = try await server.subjectTokens(scope: "openid offline_access")
        let flow = try await AuthFlow(providers: [try Self.provider(server)])
        let authorization = try await flow.exchangeToken(
            provider: "idpy", subjectToken: Secret(subject.access), subjectTokenType: TokenType.accessToken,
            scopes: ["openid", "offline_access"], requestedTokenType: TokenType.refreshToken)
        #expect(authorization.tokenType == "N_A")
        #expect(authorization.issuedTokenType == TokenType.refreshToken)
        let received = try #require(try await server.received().last)
        #expect(received["requested_token_type"] == ["urn:ietf:params:oauth:token-type:refresh_token"])
        #expect(received["scope"] == ["openid offline_access"])
    }

    @Test("Catalog grant token-exchange: accessToken(for:) exchanges the subject token file on demand, single-flight, and reads the file again on the next exchange")
    func catalogOnDemand() async throws {
        let server = try ExchangeServer.require()
        let scratch = try TemporaryDirectory("exchange-it")
        defer { scratch.remove() }
        let directory = scratch.url
        let tokenFile = directory.appendingPathComponent("token")
        let first = try await server.subjectTokens(scope: "openid profile")
        try Data((first.access + "\n").utf8).write(to: tokenFile)
        let catalog = """
            [{"id": "workload", "tokenURL": "\(server.tokenURL.absoluteString)", "clientID": "exchanger",
              "clientSecretEnv": "EXCHANGER_SECRET", "grant": "token-exchange", "subjectTokenFile": "token",
              "subjectTokenType": "urn:ietf:params:oauth:token-type:access_token", "audience": "billing-service",
              "resource": "https://api.example.com/billing", "scopes": ["openid"]}]
            """
        let providers = try ProviderCatalog.load(data: Data(catalog.utf8), baseDirectory: directory,
                                                 environment: ["EXCHANGER_SECRET": Self.secret], strict: true)
        let flow = try await AuthFlow(providers: providers)
        let before = try await server.received().count
        async let a = flow.accessToken(for: "workload")
        async let b = flow.accessToken(for: "workload")
        let (tokenA, tokenB) = try await (a, b)
        #expect(tokenA.reveal() == tokenB.reveal())
        #expect(await flow.authorization(for: "workload")?.grant == .tokenExchange)

        let second = try await server.subjectTokens(scope: "openid profile")
        try Data(second.access.utf8).write(to: tokenFile)
        _ = try await flow.refresh(provider: "workload")

        let sent = Array(try await server.received().dropFirst(before))
        #expect(sent.count == 2)
        #expect(sent.map { $0["subject_token"] ?? [] } == [[first.access], [second.access]])
        for received in sent {
            #expect(Set(received.keys) == ["grant_type", "subject_token", "subject_token_type", "audience", "resource", "scope", "_authorization"])
            #expect(received["audience"] == ["billing-service"] && received["resource"] == ["https://api.example.com/billing"])
            #expect(received["subject_token_type"] == ["urn:ietf:params:oauth:token-type:access_token"])
        }
    }

    @Test("Refusals from idpyoidc: a resource outside its list is invalid_target; a wrong client secret is invalid_client; an actor token is invalid_request")
    func refused() async throws {
        let server = try ExchangeServer.require()
        let subject = try await server.subjectTokens(scope: "openid")
        let flow = try await AuthFlow(providers: [try Self.provider(server)])
        let target = await #expect(throws: OAuthError.self) {
            try await flow.exchangeToken(provider: "idpy", subjectToken: Secret(subject.access), subjectTokenType: TokenType.accessToken,
                                         resources: [URL(string: "https://elsewhere.example.com/")!])
        }
        #expect(target?.code == .serverRejected && target?.response?.code.rawValue == "invalid_target")
        #expect(target.map { !String(describing: $0).contains(subject.access) } == true)

        let actor = await #expect(throws: OAuthError.self) {
            try await flow.exchangeToken(provider: "idpy", subjectToken: Secret(subject.access), subjectTokenType: TokenType.accessToken,
                                         actorToken: Secret(subject.access), actorTokenType: TokenType.accessToken)
        }
        #expect(actor?.response?.code.rawValue == "invalid_request")
        let received = try #require(try await server.received().last)
        #expect(received["actor_token"] == [subject.access] && received["actor_token_type"] == [TokenType.accessToken])

        let wrong = try await AuthFlow(providers: [try Self.provider(server, secret: "not-the-secret-0000")])
        let client = await #expect(throws: OAuthError.self) {
            try await wrong.exchangeToken(provider: "idpy", subjectToken: Secret(subject.access), subjectTokenType: TokenType.accessToken)
        }
        #expect(client?.response?.code == .invalidClient && client?.httpStatus == 401)
    }
}

// MARK: - The server

/// The running exchserver.py of this suite.
struct ExchangeServer: Sendable {
    let port: Int
    var issuer: String { "http://127.0.0.1:\(port)" }
    var tokenURL: URL { URL(string: "\(issuer)/token")! }

    @TaskLocal static var current: ExchangeServer?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> ExchangeServer {
        try #require(current, "run inside the .exchangeServer suite", sourceLocation: sourceLocation)
    }

    func send(_ request: HTTPRequest) async throws -> (status: Int, text: String) {
        let response = try await CurlTransport().send(request)
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    /// A login of user diana at the server's other client: the tokens to exchange.
    func subjectTokens(scope: String) async throws -> (access: String, refresh: String?) {
        let body = try JSONSerialization.data(withJSONObject: ["scope": scope])
        let reply = try await send(HTTPRequest(method: "POST", url: URL(string: "\(issuer)/it/subject-token")!,
                                               headers: [("Content-Type", "application/json")], body: body))
        #expect(reply.status == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(reply.text.utf8)) as? [String: Any])
        return (try #require(json["access_token"] as? String), json["refresh_token"] as? String)
    }

    /// Every token request's form fields, in order (`_authorization`: the Authorization header).
    func received() async throws -> [[String: [String]]] {
        let reply = try await send(HTTPRequest(method: "GET", url: URL(string: "\(issuer)/it/requests")!))
        return (try JSONSerialization.jsonObject(with: Data(reply.text.utf8)) as? [[String: [String]]]) ?? []
    }
}

extension Trait where Self == ScriptedServerTrait {
    /// Runs the suite against one exchserver.py started for it (setup.sh + start.sh on a free port, stop.sh after).
    static var exchangeServer: Self {
        Self(server: ScriptedServer(directory: "exchange", logPrefix: "oauthflow-exchange", portVariable: "OAUTHFLOW_EXCHANGE_PORT")) { port, suite in
            try await ExchangeServer.$current.withValue(ExchangeServer(port: port)) { try await suite() }
        }
    }
}
