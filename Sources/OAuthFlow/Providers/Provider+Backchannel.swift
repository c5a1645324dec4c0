#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a CIBA login learns that the person answered (OpenID Connect CIBA Core 1.0 §5; catalog
/// `cibaDeliveryMode`). Push mode is not offered: it would hand the tokens to an endpoint of
/// ours, which a command-line client cannot keep listening.
public enum CIBADeliveryMode: String, Sendable, Hashable, CaseIterable {
    /// The client polls the token endpoint every `interval` seconds (CIBA Core §7.3, §10.1).
    case poll
    /// The client sends a `client_notification_token`; the server's ping to the client's
    /// registered notification endpoint (CIBA Core §10.2) wakes the poll at once, which otherwise
    /// goes on at `interval` (a ping may never come: a server may ping only on approval).
    case ping
}

extension ProviderCatalog.Entry {
    /// The `cibaDeliveryMode` key: `"poll"` or `"ping"`; nil when absent.
    func cibaDeliveryMode() throws(OAuthError) -> CIBADeliveryMode? {
        guard let text = try string("cibaDeliveryMode") else { return nil }
        guard let mode = CIBADeliveryMode(rawValue: text) else {
            throw fail("cibaDeliveryMode", "must be \"poll\" or \"ping\", not \"\(DisplayText.escape(String(text.prefix(16))))\"")
        }
        return mode
    }
}
