import Foundation
@testable import OAuthFlow
import Testing
import TestSupport

@Suite("Mutual TLS: CurlTransport presents the client certificate (RFC 8705 §2)")
struct MutualTLSTests {
    /// `openssl s_server -www` that requires a client certificate issued by (here: equal to) `clientCA`.
    final class RequiringServer: Sendable {
        let port: UInt16
        private let process: ChildProcess

        init(certificates: TestCertificates, clientCA: String) throws {
            port = try LoopbackSocket.closedPort()
            process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificates.certificateFile.path,
                                 "-key", certificates.keyFile.path, "-www", "-quiet", "-Verify", "1", "-CAfile", clientCA]
            do {
                try LoopbackSocket.runServer(process, port: port)
            } catch {
                stop()
                throw error
            }
        }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

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
        let server = try await onOwnThread { try RequiringServer(certificates: certificates, clientCA: certificatePath) }
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
