extension Provider {
    /// How a provider's client is registered dynamically (RFC 7591; catalog `"registration": "dynamic"`).
    ///
    /// A provider with it needs an ``Provider/Settings/issuer`` (the registration endpoint is discovered)
    /// and no `clientID`: ``AuthFlow/registerClient(provider:initialAccessToken:)`` registers the
    /// client and keeps the answer in the store, and every flow made afterwards applies it
    /// (``ClientRegistration/applied(to:)``).
    public struct DynamicRegistration: Sendable, Equatable {
        /// The method to register (catalog `clientAuthentication`); nil to choose from the server's
        /// `token_endpoint_auth_methods_supported`: `none` when listed (or nothing is), else
        /// `private_key_jwt` with a key the flow makes, else `client_secret_basic`.
        public var authentication: Provider.ClientAuthentication?
        /// The scopes to register (`scope`); empty for the provider's ``Provider/Settings/scopes``.
        public var scopes: [String]
        /// An initial access token (RFC 7591 §3; catalog `initialAccessTokenFile`), for a server that
        /// registers only clients that present one.
        @ComparedInConstantTime public var initialAccessToken: Secret?
        /// `client_name`; nil for `authflow`.
        public var clientName: String?
        /// `software_id`.
        public var softwareID: String?
        /// `software_version`.
        public var softwareVersion: String?

        /// Settings for a dynamic registration.
        public init(
            authentication: Provider.ClientAuthentication? = nil, scopes: [String] = [], initialAccessToken: Secret? = nil,
            clientName: String? = nil, softwareID: String? = nil, softwareVersion: String? = nil
        ) {
            self.authentication = authentication
            self.scopes = scopes
            self.initialAccessToken = initialAccessToken
            self.clientName = clientName
            self.softwareID = softwareID
            self.softwareVersion = softwareVersion
        }
    }

    /// True for a provider registered dynamically that has no client ID yet: no registration is stored.
    public var awaitsRegistration: Bool { self.dynamicRegistration != nil && self.clientID.isEmpty }

    /// The rules of a dynamic registration (``Provider/validate()``): an issuer, and an id that
    /// leaves room for the store key of the record (`<id>.registration`, at most 128 characters).
    func validateRegistration(_ fail: (String, String) -> OAuthError) throws(OAuthError) {
        if self.id.hasSuffix(ClientRegistration.suffix) {
            throw fail("id", "must not end with \"\(ClientRegistration.suffix)\": the store keeps registrations under such keys")
        }
        guard self.dynamicRegistration != nil else { return }
        guard self.issuer != nil else {
            throw fail("registration", "dynamic registration needs an issuer: the registration endpoint is discovered from it (RFC 8414 §2)")
        }
        guard self.id.utf8.count + ClientRegistration.suffix.utf8.count <= 128 else {
            throw fail("id", "must be at most \(128 - ClientRegistration.suffix.utf8.count) characters for a dynamic registration")
        }
    }
}
