#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

extension Context {
    /// `authflow discover URL` for a protected resource: each step of RFC 9728 §5 and what it
    /// found — how the resource's metadata was found and what it lists, then the metadata of the
    /// first authorization server it names — and a catalog entry. Registers nothing.
    ///
    /// Reached when URL has no issuer metadata (`issuerError`, a 4xx); when it has no resource
    /// metadata either, the issuer's failure is the one reported, since that is what was asked first.
    func discoverResource(_ options: DiscoverOptions, issuerError: OAuthError) async throws(CLIError) -> ExitCode {
        guard let url = URL(string: options.issuer) else { throw .oauth(issuerError, provider: nil) }
        let flow = try await flow([], store: MemorySecretStore())
        let resource: ProtectedResourceMetadata
        do {
            resource = try await flow.resourceMetadata(for: url)
        } catch where error.code == .httpStatus {
            throw .oauth(issuerError, provider: nil)
        } catch {
            throw .oauth(error, provider: nil)
        }
        let server: ProviderMetadata
        do { server = try await flow.authorizationServer(for: resource) } catch { throw .oauth(error, provider: nil) }
        let id = options.id ?? Self.entryID(forIssuer: options.issuer)
        var entry: [(String, JSONValue)] = [("id", .string(id)), ("issuer", .string(server.issuer)),
                                            ("resource", .string(resource.resource.absoluteString))]
        if server.registrationEndpoint != nil {
            entry.append(("registration", .string("dynamic")))
        } else {
            entry.append(("clientID", .string(options.clientID ?? "YOUR-CLIENT-ID")))
        }
        if options.json {
            out.write(JSONValue.text(orderedMembers: [
                ("resource", .string(resource.resource.absoluteString)),
                ("resource_metadata_url", .string(resource.metadataURL.absoluteString)),
                ("found_by", .string(resource.source == .challenge ? "challenge" : "well-known")),
                ("resource_metadata", .object(resource.document)),
                ("issuer", .string(server.issuer)),
                ("metadata", .object(server.document)),
                ("catalog_entry", .object(Dictionary(entry, uniquingKeysWith: { first, _ in first }))),
            ]) + "\n")
            return .success
        }
        let foundBy = resource.source == .challenge
            ? "the resource's 401 challenge (resource_metadata, RFC 9728 §5.1)" : "the well-known URL (RFC 9728 §3.1)"
        out.write("1. Resource \(Self.printable(resource.resource.absoluteString))\n")
        out.write(Table.render(header: ["RESOURCE METADATA", "VALUE"], rows: [
            ["found by", foundBy],
            ["metadata URL", Self.printable(resource.metadataURL.absoluteString)],
            ["authorization servers", Self.list(resource.authorizationServers)],
            ["scopes", Self.list(resource.scopesSupported)],
            ["scope its challenge asks", resource.challengeScopes.isEmpty ? "-" : Self.list(resource.challengeScopes)],
            ["bearer methods", Self.list(resource.bearerMethodsSupported)],
            ["DPoP-bound tokens", resource.dpopBoundAccessTokensRequired ? "required (RFC 9449)" : "not required"],
            ["name", resource.resourceName.map(Self.printable) ?? "-"],
        ], style: outStyle))
        out.write("\n2. Authorization server \(Self.printable(server.issuer)) (the first the resource lists; its metadata's issuer is exactly that)\n")
        out.write(Table.render(header: ["METADATA", "VALUE"], rows: Self.metadataRows(server), style: outStyle))
        if server.registrationEndpoint != nil {
            out.write("\n3. It registers clients dynamically (RFC 7591): authflow login \(Self.printable(resource.resource.absoluteString)) "
                + "registers one and adds this entry; or add it yourself and run authflow login \(Self.printable(id)):\n")
        } else {
            out.write("\n3. It does not register clients dynamically: register one there, then add this entry with its client ID:\n")
        }
        out.write(JSONValue.line(entry))
        return .success
    }
}
