#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The rules every provider meets, from a catalog or from code, and the URL, id and scope checks
// the catalog's decoder shares with them.
extension Provider {
    /// Checks the rules every provider must meet.
    ///
    /// Endpoints must be `https://`, or `http://` on a loopback host (`localhost`, `*.localhost`,
    /// `127.0.0.1`, `[::1]`), without user info or fragment (RFC 6749 §3.1, RFC 9700 §2.6);
    /// the id must be a safe store key; `tokenURL` or `issuer` must be given (the issuer an
    /// `https://` URL, or `http://` on loopback, without query or fragment, RFC 8414 §2);
    /// `idTokenSigningAlgorithms` must name known JWS algorithms, never `none`, and `HS*` only
    /// with a client secret;
    /// `client_secret_basic`/`_post` need a secret.
    /// - Throws: ``OAuthError`` `.configuration` naming the provider, the key and the reason.
    public func validate() throws(OAuthError) {
        func fail(_ key: String, _ reason: String) -> OAuthError {
            OAuthError(.configuration, providerID: self.id, message: "provider \"\(self.id)\": \(key): \(reason)")
        }
        guard Self.isValidID(self.id) else {
            throw fail("id", "must be 1 to 128 characters of letters, digits, '.', '_' or '-', not starting with '.'")
        }
        // A dynamically registered client has no client ID until its registration is stored.
        guard !self.clientID.isEmpty || self.dynamicRegistration != nil else { throw fail("clientID", "must not be empty") }
        try validateRegistration(fail)
        let endpoints: [(String, URL?)] = [
            ("authorizationURL", self.authorizationURL), ("tokenURL", self.tokenURL),
            ("deviceAuthorizationURL", self.deviceAuthorizationURL), ("revocationURL", self.revocationURL),
            ("introspectionURL", self.introspectionURL), ("userinfoURL", self.userinfoURL), ("jwksURL", self.jwksURL),
            ("endSessionURL", self.endSessionURL), ("pushedAuthorizationURL", self.pushedAuthorizationURL),
            ("backchannelAuthenticationURL", self.backchannelAuthenticationURL),
        ]
        for (key, url) in endpoints {
            guard let url else { continue }
            if let reason = Self.endpointProblem(url) { throw fail(key, reason) }
        }
        if let issuer = self.issuer, let reason = Self.issuerProblem(issuer) { throw fail("issuer", reason) }
        guard self.tokenURL != nil || self.issuer != nil else {
            throw fail("tokenURL", "is required unless issuer is given (the token endpoint is then discovered)")
        }
        if let algorithms = self.idTokenSigningAlgorithms {
            guard !algorithms.isEmpty else { throw fail("idTokenSigningAlgorithms", "must name at least one algorithm") }
            for name in algorithms where !Self.signingAlgorithmNames.contains(name) {
                throw fail("idTokenSigningAlgorithms", "\"\(name)\" is not one of \(Self.signingAlgorithmNames.joined(separator: ", "))")
            }
            if self.clientSecret == nil, let hmac = algorithms.first(where: { $0.hasPrefix("HS") }) {
                throw fail("idTokenSigningAlgorithms", "\(hmac) needs the client secret as its key, and there is none")
            }
        }
        if let redirectURI = self.redirectURI {
            guard redirectURI.scheme != nil, redirectURI.fragment == nil else {
                throw fail("redirectURI", "must be an absolute URI without a fragment (RFC 6749 §3.1.2)")
            }
            if let port = redirectURI.port, !(0...65535).contains(port) { throw fail("redirectURI", "has port \(port), above 65535") }
        }
        if !awaitsRegistration { try validateClientCredentials(fail) }
        try validateDPoP(fail)
        try validateAuthorizationRequestOptions(fail)
        try validateGrantSettings(fail)
        if let hint = self.cibaLoginHint, let reason = BackchannelAuthenticationGrant.hintProblem(hint) { throw fail("cibaLoginHint", reason) }
        for name in self.authorizationParameters.keys where Self.reservedAuthorizationParameters.contains(name) {
            throw fail("authorizationParameters", "\"\(name)\" is set by the flow and cannot be overridden")
        }
    }

    /// Parameters the flow sets itself; a catalog may not override them (`scope` comes from `scopes`).
    static let reservedAuthorizationParameters: Set<String> = [
        "response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method", "nonce",
    ]

    /// The JWS algorithms an ID token may be signed with (RFC 7518 §3.1, RFC 8037 §3.1); never `none`.
    static let signingAlgorithmNames = [
        "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "HS256", "HS384", "HS512",
    ]

    /// Why `issuer` may not be an issuer identifier (RFC 8414 §2), or nil when it may.
    static func issuerProblem(_ issuer: String) -> String? {
        guard let url = URL(string: issuer, encodingInvalidCharacters: false) else { return "is not a valid URL" }
        if let problem = endpointProblem(url) { return problem }
        if url.query != nil { return "must not contain a query (RFC 8414 §2)" }
        return nil
    }

    static func isValidID(_ id: String) -> Bool {
        guard (1...128).contains(id.count), !id.hasPrefix(".") else { return false }
        return id.utf8.allSatisfy { ASCIIText.isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    /// Why `url` may not be an endpoint, or nil when it may.
    static func endpointProblem(_ url: URL) -> String? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty
        else { return "is not an absolute URL with a host" }
        if components.user != nil || components.password != nil { return "must not contain user info" }
        if components.fragment != nil { return "must not contain a fragment" }
        if let port = components.port, !(0...65535).contains(port) { return "has port \(port), above 65535" }
        switch scheme {
        case "https": return nil
        case "http": return isLoopback(host: host) ? nil : "must use https:// (http:// is allowed only for loopback hosts)"
        default: return "must use https://"
        }
    }

    /// True when `token` is a valid scope token: printable ASCII except space, `"` and `\`
    /// (RFC 6749 §3.3). Check scopes taken from people or files before passing them to a grant; it throws nothing.
    public static func isValidScopeToken(_ token: String) -> Bool {
        !token.isEmpty && token.unicodeScalars.allSatisfy { scalar in
            (0x21...0x7E).contains(scalar.value) && scalar != "\"" && scalar != "\\"
        }
    }

    /// True for `localhost`, `*.localhost`, `127.0.0.0/8` and `::1` (the CLI's `--listen-port` asks too).
    package static func isLoopback(host: String) -> Bool {
        let host = ASCIIText.trimming(host.lowercased(), where: { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") })
        guard !host.isEmpty else { return false }   // empty, or nothing but brackets
        if host == "localhost" || host.hasSuffix(".localhost") || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
