#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Provider {
    /// The mutual-TLS identity libcurl presents for this provider: its certificate and key files,
    /// for `tls_client_auth` and `self_signed_tls_client_auth` (RFC 8705 §2); nil otherwise.
    var tlsIdentity: ClientTLSIdentity? {
        guard clientAuthentication.isMutualTLS, let certificate = clientCertificate,
              let keyFile = (clientKey as? ClientKey)?.path else { return nil }
        return ClientTLSIdentity(certificateFile: certificate.path, keyFile: keyFile)
    }

    /// The transport this provider's requests go through: `shared`, or, when the provider has a
    /// `caFile` or a mutual-TLS identity and `shared` is a ``CurlTransport``, a transport with the
    /// same settings plus those. Another transport is returned as it is: it must trust the CA and
    /// present the certificate itself.
    func transport(sharing shared: any HTTPTransport) -> any HTTPTransport {
        let identity = tlsIdentity
        guard caFile != nil || identity != nil, let curl = shared as? CurlTransport else { return shared }
        return CurlTransport(
            maximumBodySize: curl.maximumBodySize, timeout: curl.timeout, connectTimeout: curl.connectTimeout, proxy: curl.proxy,
            caFile: caFile.map { URL(fileURLWithPath: $0) } ?? curl.caFile, clientIdentity: identity ?? curl.clientIdentity)
    }
}
