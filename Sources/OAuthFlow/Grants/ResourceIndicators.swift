#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Resource indicators ([RFC 8707 §2](https://www.rfc-editor.org/rfc/rfc8707#section-2)): one
/// `resource` parameter per target, each an absolute URI without a fragment.
enum ResourceIndicators {
    /// Appends a `resource` field for each of `resources`, in order.
    /// - Throws: ``OAuthError`` `.configuration` naming the problem of a resource that is not an
    ///   absolute URI or has a fragment.
    static func append(_ resources: [URL], to fields: inout [(String, String)], provider: Provider) throws(OAuthError) {
        for resource in resources {
            if let problem = Provider.resourceProblem(resource) {
                throw OAuthError(.configuration, providerID: provider.id, message: "resource \(DisplayText.escape(String(resource.absoluteString.prefix(200)))) \(problem)")
            }
            fields.append(("resource", resource.absoluteString))
        }
    }
}
