import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("A provider's transport: its CA file and mutual-TLS identity (RFC 8705)")
struct ProviderTransportTests {
    @Test("mTLS and caFile make a CurlTransport with the shared settings plus the provider's files; others share the transport")
    func transports() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        let keyPath = try files.key(.p256SEC1)
        let certificatePath = try files.certificate(for: keyPath)
        let url = URL(string: "https://as.example/token")
        let shared = CurlTransport(maximumBodySize: 4096, timeout: 12, connectTimeout: 3, proxy: .none)
        let mtls = Provider(id: "m", tokenURL: url, clientID: "c", clientAuthentication: .tlsClientAuth,
                            clientKey: try ClientKey(contentsOfFile: keyPath), clientCertificate: try ClientCertificate(contentsOfFile: certificatePath),
                            caFile: "/etc/corp-ca.pem")
        try mtls.validate()
        let made = try #require(mtls.transport(sharing: shared) as? CurlTransport)
        #expect(made !== shared)
        #expect(made.clientIdentity == ClientTLSIdentity(certificateFile: certificatePath, keyFile: keyPath))
        #expect(made.caFile?.path == "/etc/corp-ca.pem")
        #expect(made.maximumBodySize == 4096 && made.timeout == 12 && made.connectTimeout == 3 && made.proxy == .none)

        let plain = Provider(id: "p", tokenURL: url, clientID: "c", clientSecret: Secret("s"))
        #expect((plain.transport(sharing: shared) as? CurlTransport) === shared)
        // private_key_jwt with a certificate (for x5t#S256) presents no TLS identity.
        let jwt = Provider(id: "j", tokenURL: url, clientID: "c", clientKey: try ClientKey(contentsOfFile: keyPath),
                           clientCertificate: try ClientCertificate(contentsOfFile: certificatePath))
        #expect(jwt.tlsIdentity == nil)
        #expect((jwt.transport(sharing: shared) as? CurlTransport) === shared)
        // Another transport is kept as it is.
        let mock = MockProvider().transport()
        #expect(mtls.transport(sharing: mock) as AnyObject === mock as AnyObject)
    }
}
