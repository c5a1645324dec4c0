import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("JWT-bearer grant with a service-account key through the flow (RFC 7523 §2.1)", .timeLimit(.minutes(1)))
struct JWTBearerFlowTests {
    /// A catalog of one provider from a service-account file alone (token_uri: the mock's token endpoint).
    static func provider(_ files: KeyFiles, mock: MockProvider, extra: String = "") throws -> Provider {
        _ = try ServiceAccountKeyTests.accountFile(files, members: ["token_uri": mock.url(.token).absoluteString])
        let text = #"[{"id": "gcp", "serviceAccountFile": "sa.json", "scopes": ["read"]\#(extra)}]"#
        return try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: files.directory, environment: [:], strict: true)[0]
    }

    @Test("serviceAccountFile alone: client id and token URL from the file; jwtBearer sends the grant; accessToken(for:) fetches again when due")
    func grantAndRenewal() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let mock = MockProvider()
        let provider = try Self.provider(files, mock: mock, extra: #", "subject": "alice@demo.example""#)
        #expect(provider.clientID == "svc@demo.iam.gserviceaccount.com")
        #expect(provider.tokenURL == mock.url(.token))
        #expect(provider.serviceAccountSubject == "alice@demo.example")
        let clock = TestClock()
        mock.script(.token, [.token(access: "at-1", expiresIn: 3600, refresh: nil), .token(access: "at-2", expiresIn: 3600, refresh: nil)])
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport(), options: options(clock))

        let first = try await flow.jwtBearer(provider: "gcp")
        #expect(first.grant == .jwtBearer)
        #expect(!first.isRefreshable)
        clock.advance(by: .seconds(3000))
        #expect(try await flow.accessToken(for: "gcp").reveal() == "at-1")
        clock.advance(by: .seconds(600))
        #expect(try await flow.accessToken(for: "gcp").reveal() == "at-2")

        let sent = mock.requests(.token)
        #expect(sent.count == 2)
        var identifiers = Set<String>()
        for request in sent {
            let form = request.form
            #expect(form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer")
            #expect(form["scope"] == "read")
            #expect(request.header("Authorization") == nil && form["client_secret"] == nil && form["client_assertion"] == nil)
            let jws = try JWS(compact: try #require(form["assertion"]))
            #expect(jws.header.algorithm == .rs256 && jws.header.keyID == "0123abcd")
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
            #expect(claims["iss"] as? String == "svc@demo.iam.gserviceaccount.com")
            #expect(claims["sub"] as? String == "alice@demo.example")
            #expect(claims["aud"] as? String == mock.url(.token).absoluteString)
            #expect(claims["scope"] as? String == "read")
            identifiers.insert(try #require(claims["jti"] as? String))
        }
        #expect(identifiers.count == 2)
    }

    @Test("nothing stored: accessToken(for:) fetches the first token on demand")
    func onDemand() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let mock = MockProvider()
        mock.script(.token, [.token(access: "at-1", expiresIn: 3600, refresh: nil)])
        let flow = try await AuthFlow(providers: [try Self.provider(files, mock: mock)], transport: mock.transport(), options: options(TestClock()))
        #expect(try await flow.accessToken(for: "gcp").reveal() == "at-1")
        #expect(mock.requests(.token).first?.form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer")
    }

    @Test("an unsafe service-account file is refused at load naming the key and the file")
    func unsafeFile() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        _ = try ServiceAccountKeyTests.accountFile(files, mode: 0o644)
        let text = #"[{"id": "gcp", "serviceAccountFile": "sa.json"}]"#
        let error = #expect(throws: OAuthError.self) {
            try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: files.directory, environment: [:])
        }
        #expect(error?.message?.contains(#"provider #1 ("gcp"): serviceAccountFile: "# + files.path("sa.json") + " is readable or writable by group or others (mode 0644)") == true,
                "\(error?.message ?? "")")
    }
}
