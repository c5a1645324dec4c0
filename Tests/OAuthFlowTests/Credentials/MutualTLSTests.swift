import Foundation
@testable import OAuthFlow
import Testing
import TestSupport

@Suite("Mutual TLS: CurlTransport presents the client certificate (RFC 8705 §2)")
struct MutualTLSTests {
    @Test("With the identity the server sees our certificate; without it the handshake fails (.transport)")
    func presentsCertificate() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let files = try KeyFiles()
        defer { files.remove() }
        let keyPath = try files.key(.p256SEC1)
        let certificatePath = try files.certificate(for: keyPath)
        // Checked as the catalog checks them: the pair matches.
        #expect(try ClientCertificate(contentsOfFile: certificatePath).matches(try ClientKey(contentsOfFile: keyPath)))
        let server = try await TLSTestServer.start(.openSSLRequiringClientCertificate(clientCA: certificatePath), certificates: certificates)
        defer { server.stop() }
        let url = try #require(URL(string: "https://localhost:\(server.port)/"))

        // Without the identity first: the handshake fails at once. (s_server serves one connection
        // at a time, so asked second this would wait behind the kept-alive connection below.)
        let anonymous = CurlTransport(timeout: 20, proxy: .none, caFile: certificates.caFile)
        let error = await #expect(throws: OAuthError.self) { _ = try await anonymous.send(HTTPRequest(method: "GET", url: url)) }
        #expect(error?.code == .transport)
        #expect(error?.message.map { !$0.contains("deadline") && !$0.contains("timeout") } == true, "the handshake should fail, not time out: \(error?.message ?? "")")

        let identity = ClientTLSIdentity(certificateFile: certificatePath, keyFile: keyPath)
        let transport = CurlTransport(timeout: 20, proxy: .none, caFile: certificates.caFile, clientIdentity: identity)
        let response = try await transport.send(HTTPRequest(method: "GET", url: url))
        let page = String(decoding: response.body, as: UTF8.self)
        #expect(response.status == 200)
        #expect(page.contains("Client certificate"))
        #expect(page.contains("Subject: CN=oauthflow-client"))
    }
}
