#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Provider {
    /// The mutual-TLS identity libcurl presents for this provider: its certificate and key files,
    /// for `tls_client_auth` and `self_signed_tls_client_auth` (RFC 8705 §2); nil otherwise.
    var tlsIdentity: ClientTLSIdentity? {
        guard self.clientAuthentication.isMutualTLS, let certificate = self.clientCertificate,
              let keyFile = (self.clientKey as? ClientKey)?.path else { return nil }
        return ClientTLSIdentity(certificateFile: certificate.path, keyFile: keyFile)
    }

    /// The transport this provider's requests go through: `shared`, or, when the provider has a
    /// `caFile` or a mutual-TLS identity and `shared` is a ``CurlTransport``, a transport with the
    /// same settings plus those. Another transport is returned as it is: it must trust the CA and
    /// present the certificate itself.
    func transport(sharing shared: any HTTPTransport) -> any HTTPTransport {
        let identity = tlsIdentity
        guard self.caFile != nil || identity != nil, let curl = shared as? CurlTransport else { return shared }
        return CurlTransport(
            maximumBodySize: curl.maximumBodySize, timeout: curl.timeout, connectTimeout: curl.connectTimeout, proxy: curl.proxy,
            caFile: self.caFile.map { URL(fileURLWithPath: $0) } ?? curl.caFile, clientIdentity: identity ?? curl.clientIdentity)
    }
}

extension Provider {
    /// `base` presenting this provider's client certificate, for requests to resource servers
    /// (RFC 8705 §3: a certificate-bound token is accepted only over a connection authenticated
    /// with the same certificate). Only for a mutual-TLS provider and a ``CurlTransport`` that
    /// presents no certificate yet; its CA settings are kept (the provider's `caFile` is for its
    /// own endpoints, not for resource servers). Any other transport is returned as it is.
    func presentingCertificate(on base: any HTTPTransport) -> any HTTPTransport {
        guard let identity = tlsIdentity, let curl = base as? CurlTransport, curl.clientIdentity == nil else { return base }
        return CurlTransport(
            maximumBodySize: curl.maximumBodySize, timeout: curl.timeout, connectTimeout: curl.connectTimeout, proxy: curl.proxy,
            caFile: curl.caFile, clientIdentity: identity)
    }
}

extension TokenSource {
    /// `base` presenting the client certificate of this source's provider when it uses mutual
    /// TLS (``Provider/presentingCertificate(on:)``); `base` otherwise.
    func presentingClientCertificate(on base: any HTTPTransport) -> any HTTPTransport {
        guard let provider = flow.providers[providerID] else { return base }
        return provider.presentingCertificate(on: base)
    }
}
