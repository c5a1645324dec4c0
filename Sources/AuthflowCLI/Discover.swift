#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// The arguments of `discover`.
public struct DiscoverOptions: Sendable, Equatable {
    /// The issuer identifier to discover, exactly as it will be configured.
    public var issuer: String
    /// `--id`: the catalog entry's id; nil derives one from the issuer's host.
    public var id: String?
    /// `--client-id`: the catalog entry's `clientID`; nil writes a placeholder.
    public var clientID: String?
    /// `--json`: one JSON object on stdout.
    public var json: Bool

    /// Creates discover options.
    public init(issuer: String, id: String? = nil, clientID: String? = nil, json: Bool = false) {
        self.issuer = issuer
        self.id = id
        self.clientID = clientID
        self.json = json
    }
}

extension Context {
    /// `authflow discover ISSUER`: the metadata and a catalog entry built from it.
    func discover(_ options: DiscoverOptions) async throws(CLIError) -> ExitCode {
        let id = options.id ?? Self.entryID(forIssuer: options.issuer)
        let clientID = options.clientID ?? "YOUR-CLIENT-ID"
        let provider = debugging(Provider(id: id, issuer: options.issuer, clientID: clientID))
        let metadata: ProviderMetadata
        do throws(OAuthError) {
            try provider.validate()
            let flow = try await AuthFlow(providers: [provider], store: MemorySecretStore(), transport: transport,
                                          options: flowOptions(providers: [provider]))
            metadata = try await flow.metadata(for: provider)
        } catch where error.code == .httpStatus && (400..<500).contains(error.httpStatus ?? 0) {
            // No issuer metadata there: perhaps a protected resource (RFC 9728; DiscoverResource.swift).
            return try await discoverResource(options, issuerError: error)
        } catch {
            throw .oauth(error, provider: nil)
        }
        let entry: [(String, JSONValue)] = [("id", .string(id)), ("issuer", .string(options.issuer)), ("clientID", .string(clientID))]
        if options.json {
            // The catalog entry as its own ordered text, so it reads id, issuer, clientID like the catalog.
            out.write("{\"issuer\":\(JSONValue.string(metadata.issuer).jsonText),\"metadata\":\(JSONValue.object(metadata.document).jsonText),"
                + "\"catalog_entry\":\(JSONValue.text(orderedMembers: entry))}\n")
            return .success
        }
        out.write("Issuer \(Self.printable(metadata.issuer))\n")
        out.write(Table.render(header: ["METADATA", "VALUE"], rows: Self.metadataRows(metadata), style: outStyle))
        if metadata.tokenEndpointAuthMethodsSupported?.contains("private_key_jwt") == true {
            // A key is safer than a shared secret (nothing reusable crosses the wire), so say how to use one where the issuer takes it.
            out.write("\nThe issuer accepts private_key_jwt: instead of a client secret, add \"clientAuthentication\": \"private_key_jwt\", "
                + "\"clientKeyFile\": \"${CREDENTIALS_DIRECTORY}/client-key.pem\" (mode 0600) and register the key's public JWK "
                + "(see Documentation/Catalog.md).\n")
        }
        out.write("\nCatalog entry (add clientSecretEnv and redirectURI as your client needs):\n\(JSONValue.line(entry))")
        return .success
    }

    /// The rows of the metadata table: each endpoint under the catalog key that would override it
    /// (from the settings table), then what the server supports.
    static func metadataRows(_ metadata: ProviderMetadata) -> [[String]] {
        var rows = ProviderCatalog.settings.compactMap { setting in
            setting.discovered.map { [setting.key, metadata.document[$0]?.stringValue.map(Self.printable) ?? "-"] }
        }
        rows += [
            ["grant types", list(metadata.grantTypesSupported)],
            ["scopes", list(metadata.scopesSupported)],
            ["ID token algorithms", list(metadata.idTokenSigningAlgorithmsSupported)],
            ["PKCE methods", list(metadata.codeChallengeMethodsSupported)],
            ["iss in callbacks", metadata.authorizationResponseIssParameterSupported ? "required (RFC 9207)" : "not advertised"],
            ["client authentication", list(metadata.tokenEndpointAuthMethodsSupported)],
            ["registration", metadata.registrationEndpoint.map { Self.printable($0.absoluteString) } ?? "-"],
        ]
        return rows
    }

    /// A list of server values for a table cell: printable, space-separated; `-` for none.
    static func list(_ values: [String]?) -> String { values.map { $0.map(Self.printable).joined(separator: " ") } ?? "-" }

    /// The issuer's host as a catalog id: characters an id may not hold become `-`.
    static func entryID(forIssuer issuer: String) -> String {
        let host = URLComponents(string: issuer)?.host ?? "provider"
        let port = URLComponents(string: issuer)?.port.map { "-\($0)" } ?? ""
        let mapped = String((host + port).unicodeScalars.map { scalar -> Character in
            scalar.isASCII && (ASCIIText.isAlphanumeric(UInt8(scalar.value)) || "._-".unicodeScalars.contains(scalar)) ? Character(scalar) : "-"
        })
        let trimmed = mapped.drop { $0 == "." }
        return trimmed.isEmpty ? "provider" : String(trimmed.prefix(128))
    }

    /// A server's text made safe for a terminal: printable ASCII only, bounded.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { (0x20...0x7E).contains($0.value) }.prefix(200)))
    }
}
