import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing
import TestSupport

/// Certificate-bound tokens (RFC 8705 §3): the `cnf` `x5t#S256` of a JWT access token and of an
/// introspection answer against the client certificate, and the certificate presented to
/// resource servers.
@Suite("Certificate-bound tokens (RFC 8705 §3)", .timeLimit(.minutes(1)))
struct CertificateBindingTests {
    let clock = TestClock()

    /// An mTLS provider on as.test, with its key and certificate made by openssl.
    static func mtlsProvider(_ files: KeyFiles) throws -> Provider {
        let keyPath = try files.key(.p256SEC1)
        let certificatePath = try files.certificate(for: keyPath)
        let provider = Provider(id: "mtls", tokenURL: URL(string: "https://as.test/token"), introspectionURL: URL(string: "https://as.test/introspect"),
                                clientID: "cli-1", clientAuthentication: .tlsClientAuth, clientKey: try ClientKey(contentsOfFile: keyPath),
                                clientCertificate: try ClientCertificate(contentsOfFile: certificatePath))
        try provider.validate()
        return provider
    }

    /// A JWT-shaped access token with `claims` (unsigned: the client does not verify access tokens).
    static func jwt(_ claims: String) -> String {
        Base64URL.encode(Array(#"{"alg":"RS256","typ":"at+jwt"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + ".c2ln"
    }

    @Test("The thumbprint is base64url SHA-256 of the certificate's DER, as openssl computes it")
    func thumbprintIsOpenSSLs() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let provider = try Self.mtlsProvider(files)
        let expected = Base64URL.encode(try files.opensslFingerprint(files.path("cert.pem")))
        #expect(provider.clientCertificate?.thumbprint == expected)
    }

    @Test("Token responses: own thumbprint, opaque token, JWT without cnf pass; another thumbprint or a malformed cnf is .invalidResponse and nothing is stored")
    func tokenResponse() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let provider = try Self.mtlsProvider(files)
        let own = try #require(provider.clientCertificate?.thumbprint)
        let cases: [(String, Bool)] = [
            (Self.jwt(#"{"sub":"x","cnf":{"x5t#S256":"\#(own)"}}"#), true),
            ("opaque-token-1", true),
            (Self.jwt(#"{"sub":"x"}"#), true),
            (Self.jwt(#"{"cnf":{"jkt":"abc"}}"#), true),
            (Self.jwt(#"{"cnf":{"x5t#S256":"NMvw5_ovbYkETn_b38c1p5R41a_BJXQj6WHNn6Ro0OU"}}"#), false),
            (Self.jwt(#"{"cnf":{"x5t#S256":"\#(own.dropLast())"}}"#), false),
            (Self.jwt(#"{"cnf":"\#(own)"}"#), false),
            (Self.jwt(#"{"cnf":{"x5t#S256":7}}"#), false),
        ]
        for (token, accepted) in cases {
            let transport = ScriptedTransport()
            transport.script("/token", [.token(token)])
            let flow = try await AuthFlow(providers: [provider], transport: transport, options: options(clock))
            if accepted {
                try await flow.clientCredentials(provider: "mtls")
                #expect(await flow.authorization(for: "mtls") != nil)
            } else {
                let error = await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "mtls") }
                #expect(error?.code == .invalidResponse)
                #expect(error?.endpoint == .token)
                #expect(error?.message?.contains("x5t#S256") == true)
                #expect(error?.message?.contains(token) != true)
                #expect(await flow.authorization(for: "mtls") == nil)
            }
        }
    }

    @Test("A provider without mutual TLS never checks cnf")
    func notMutualTLS() async throws {
        let transport = ScriptedTransport()
        transport.script("/token", [.token(Self.jwt(#"{"cnf":{"x5t#S256":"someone-else"}}"#))])
        let flow = try await AuthFlow(providers: [scriptedProvider(secret: "s")], transport: transport, options: options(clock))
        try await flow.clientCredentials(provider: "app")
    }

    @Test("Introspection: cnf of another certificate is .invalidResponse; the own one is read into certificateThumbprint")
    func introspection() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let provider = try Self.mtlsProvider(files)
        let own = try #require(provider.clientCertificate?.thumbprint)
        let transport = ScriptedTransport()
        transport.script("/token", [.token("opaque-1")])
        transport.script("/introspect", [
            .status(200, json: #"{"active":true,"cnf":{"x5t#S256":"\#(own)"}}"#),
            .status(200, json: #"{"active":true,"cnf":{"x5t#S256":"bm90LW91cnM"}}"#),
        ])
        let flow = try await AuthFlow(providers: [provider], transport: transport, options: options(clock))
        try await flow.clientCredentials(provider: "mtls")
        let answer = try await flow.introspect(provider: "mtls")
        #expect(answer.certificateThumbprint == own)
        let error = await #expect(throws: OAuthError.self) { _ = try await flow.introspect(provider: "mtls") }
        #expect(error?.code == .invalidResponse)
        #expect(error?.endpoint == .introspection)
    }

    @Test("The authorizing transport presents the provider's certificate to resource servers; a plain provider's transport is kept")
    func authorizingTransportPresents() async throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let provider = try Self.mtlsProvider(files)
        let flow = try await AuthFlow(providers: [provider, scriptedProvider(secret: "s")], transport: ScriptedTransport(), options: options(clock))
        let base = CurlTransport(maximumBodySize: 2048, timeout: 9, proxy: .none, caFile: URL(fileURLWithPath: "/etc/rs-ca.pem"))
        let api = AuthorizingTransport(base: base, source: flow.tokenSource(for: "mtls"))
        let presenting = try #require(api.base as? CurlTransport)
        #expect(presenting !== base)
        #expect(presenting.clientIdentity == provider.tlsIdentity)
        #expect(presenting.caFile == base.caFile && presenting.maximumBodySize == 2048 && presenting.timeout == 9)
        let plain = AuthorizingTransport(base: base, source: flow.tokenSource(for: "app"))
        #expect((plain.base as? CurlTransport) === base)
    }

    @Test("Through the authorizing transport a TLS resource server that requires a client certificate sees ours (openssl s_server)")
    func resourceServerSeesCertificate() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let files = try KeyFiles()
        defer { files.remove() }
        let provider = try Self.mtlsProvider(files)
        let server = try await TLSTestServer.start(.openSSLRequiringClientCertificate(clientCA: files.path("cert.pem")), certificates: certificates)
        defer { server.stop() }
        let transport = ScriptedTransport()
        transport.script("/token", [.token("opaque-bound-1")])
        let flow = try await AuthFlow(providers: [provider], transport: transport, options: options(clock))
        try await flow.clientCredentials(provider: "mtls")

        let url = try #require(URL(string: "https://localhost:\(server.port)/"))
        let base = CurlTransport(timeout: 20, proxy: .none, caFile: certificates.caFile)
        // First the same base without the authorizing transport: it presents nothing, and the
        // handshake fails at once. (s_server serves one connection at a time, so asked second this
        // would wait behind the kept-alive connection below and end at its deadline instead.)
        let error = await #expect(throws: OAuthError.self) { _ = try await base.send(HTTPRequest(method: "GET", url: url)) }
        #expect(error?.code == .transport)
        #expect(error?.message.map { !$0.contains("deadline") && !$0.contains("timeout") } == true, "the handshake should fail, not time out: \(error?.message ?? "")")

        let api = AuthorizingTransport(base: base, source: flow.tokenSource(for: "mtls"))
        let response = try await api.send(HTTPRequest(method: "GET", url: url))
        let page = String(decoding: response.body, as: UTF8.self)
        #expect(response.status == 200)
        #expect(page.contains("Subject: CN=oauthflow-client"))
    }
}
