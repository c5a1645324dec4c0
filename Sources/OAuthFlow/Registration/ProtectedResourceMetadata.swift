#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A protected resource's metadata ([RFC 9728 §2](https://www.rfc-editor.org/rfc/rfc9728#section-2)):
/// which authorization servers issue its tokens, and the scopes and token kinds it takes.
///
/// Get it with ``AuthFlow/resourceMetadata(for:)``, which finds it from the resource's URL
/// alone, then pick the server with ``AuthFlow/authorizationServer(for:issuer:)``. The typed
/// members are the ones OAuthFlow acts on; ``document`` holds every member as sent.
///
/// A document is refused (``OAuthError`` `.invalidResponse`, endpoint `.resource`) unless its
/// `resource` is exactly the URL asked about (§3.3), it lists at least one authorization server,
/// each an issuer identifier (`https://`, or `http://` on a loopback host, without query or
/// fragment; RFC 8414 §2), and its lists and names stay within bounds (at most 16 servers, 256
/// scopes, names of 256 visible characters).
public struct ProtectedResourceMetadata: Sendable, Hashable, CustomStringConvertible {
    /// How the metadata was found.
    public enum Source: String, Sendable, Hashable {
        /// From the `resource_metadata` of the resource's `401` challenge (RFC 9728 §5.1).
        case challenge
        /// From `/.well-known/oauth-protected-resource` inserted into the resource's URL (§3.1).
        case wellKnown
    }

    /// `resource`: the resource identifier, equal to the URL asked about.
    public var resource: URL
    /// `authorization_servers`: the issuer identifiers of the servers whose tokens it accepts, in its order.
    public var authorizationServers: [String]
    /// `scopes_supported`.
    public var scopesSupported: [String]?
    /// `bearer_methods_supported` (`header`, `body`, `query`).
    public var bearerMethodsSupported: [String]?
    /// `resource_name`, for people.
    public var resourceName: String?
    /// `dpop_bound_access_tokens_required` (RFC 9728 §2, RFC 9449); false when absent.
    public var dpopBoundAccessTokensRequired: Bool
    /// Every member of the document as sent.
    public var document: [String: JSONValue]
    /// The URL the document was read from.
    public var metadataURL: URL
    /// How it was found.
    public var source: Source
    /// The scopes the resource's `401` challenge named when it was probed (empty when it named none
    /// or was not probed): what a first login asks for (RFC 6750 §3).
    public var challengeScopes: [String] = []

    /// The most authorization servers a document may list.
    static let maximumServers = 16
    /// The most scopes a document may list.
    static let maximumScopes = 256
    /// The longest name or scope kept.
    static let maximumTextLength = 256

    /// Reads and checks a document fetched from `metadataURL` for the resource identifier `expected`.
    /// - Throws: ``OAuthError`` `.invalidResponse` naming the member at fault, never a value the server chose.
    init(_ json: JSONObject, expected: URL, metadataURL: URL, source: Source) throws(OAuthError) {
        let resource = try json.requiredString("resource")
        // RFC 9728 §3.3: identical, character for character, to the identifier the URL was made from
        // (or, from a challenge, the URL the request went to); otherwise the document is not used.
        guard resource == expected.absoluteString else {
            throw json.fail("its resource \"\(TokenRejection.printable(String(resource.prefix(200))))\" is not the URL asked about, "
                + "\(expected.absoluteString) (RFC 9728 §3.3); the document is not used")
        }
        self.resource = expected
        guard let servers = try json.strings("authorization_servers"), !servers.isEmpty else {
            throw json.fail("authorization_servers is missing or empty: it names no server to get a token from (RFC 9728 §2)")
        }
        guard servers.count <= Self.maximumServers else {
            throw json.fail("authorization_servers lists more than \(Self.maximumServers) servers")
        }
        for server in servers {
            if let problem = Provider.issuerProblem(server) ?? (server.utf8.count > 2048 ? "is too long" : nil) {
                throw json.fail("authorization_servers holds an entry that \(problem) (RFC 8414 §2)")
            }
        }
        authorizationServers = servers
        scopesSupported = try json.strings("scopes_supported")
        if let scopes = scopesSupported {
            guard scopes.count <= Self.maximumScopes else { throw json.fail("scopes_supported lists more than \(Self.maximumScopes) scopes") }
            guard scopes.allSatisfy({ Provider.isValidScopeToken($0) && $0.utf8.count <= Self.maximumTextLength }) else {
                throw json.fail("scopes_supported holds a value that is not a scope token (RFC 6749 §3.3)")
            }
        }
        bearerMethodsSupported = try json.strings("bearer_methods_supported")
        if let name = try json.string("resource_name") {
            guard name.utf8.count <= Self.maximumTextLength, name.unicodeScalars.allSatisfy({ !DisplayText.isUnsafe($0) }) else {
                throw json.fail("resource_name is longer than \(Self.maximumTextLength) bytes or holds control characters")
            }
            resourceName = name
        }
        dpopBoundAccessTokensRequired = try json.bool("dpop_bound_access_tokens_required") ?? false
        document = json.members
        self.metadataURL = metadataURL
        self.source = source
    }

    /// `https://host/.well-known/oauth-protected-resource` with the resource's path (and query)
    /// after it (RFC 9728 §3.1): `https://api.example/mcp` → `https://api.example/.well-known/oauth-protected-resource/mcp`;
    /// a terminating `/` after the host is dropped. Nil for a URL without a host.
    public static func wellKnownURL(for resource: URL) -> URL? {
        guard var components = URLComponents(url: resource, resolvingAgainstBaseURL: false), components.host != nil else { return nil }
        var path = components.percentEncodedPath
        if path == "/" { path = "" }
        components.percentEncodedPath = "/.well-known/oauth-protected-resource" + path
        components.fragment = nil
        return components.url
    }

    /// The resource, its servers and where the document came from; other members are counted.
    public var description: String {
        "ProtectedResourceMetadata(resource: \(resource.absoluteString), authorizationServers: [\(authorizationServers.joined(separator: ", "))], "
            + "source: \(source.rawValue), members: \(document.count))"
    }
}
