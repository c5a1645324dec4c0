#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The browser path's options: pushed authorization requests (RFC 9126) and signed request
// objects (RFC 9101), which keep the request's parameters out of the browser's hands.
extension Provider {
    /// The algorithm request objects are signed with: ``Settings/clientAssertionAlgorithm`` when it is an
    /// asymmetric one, else the ``ClientKey``'s default; nil without a key to sign with.
    var requestObjectAlgorithm: SigningAlgorithm? {
        guard self.clientKey != nil else { return nil }
        if let clientAssertionAlgorithm = self.clientAssertionAlgorithm, !clientAssertionAlgorithm.isHMAC { return clientAssertionAlgorithm }
        return (self.clientKey as? ClientKey)?.defaultAlgorithm
    }

    /// The rules of ``validate()`` for `pushedAuthorization` and `requestObject`: a request object
    /// needs a key to sign with (the client key of `private_key_jwt` or of a mutual-TLS method)
    /// and an issuer (its `aud`, RFC 9101 §4).
    func validateAuthorizationRequestOptions(_ fail: (String, String) -> OAuthError) throws(OAuthError) {
        guard self.requestObject else { return }
        guard self.clientKey != nil else {
            throw fail("requestObject", "needs a client key to sign with (clientKeyFile, with private_key_jwt, tls_client_auth or "
                + "self_signed_tls_client_auth)")
        }
        guard requestObjectAlgorithm != nil else {
            throw fail("clientAssertionAlgorithm", "is required to sign request objects with a custom signer")
        }
        guard self.issuer != nil else { throw fail("requestObject", "needs the provider's issuer (the request object's aud, RFC 9101 §4)") }
    }
}
