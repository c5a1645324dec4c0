#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ProviderCatalog {
    /// Every key of a provider entry, once, in the order an entry is read.
    ///
    /// Adding a key is a row here plus the code that uses it: the decoder reads the rows, the
    /// strict mode knows their keys and aliases (``knownKeys``), the typo suggestion picks from
    /// them, `authflow discover` shows the rows with a ``CatalogSetting/discovered`` member, and
    /// a test holds `Documentation/Catalog.md`'s key table to these rows in both directions.
    /// Rules across keys live in ``Entry/applyEntryRules(to:)`` and ``Provider/validate()``.
    package static let settings: [CatalogSetting] = [
        .custom("id", type: "string, **required**", default: "—",
                doc: "a stable name: the store key, and what `accessToken(for:)` and `authflow login` take") { entry, provider in
            provider.id = entry.rawID
        },
        .endpoint("authorizationURL", \.authorizationURL, discovered: "authorization_endpoint",
                  doc: "the authorization endpoint (RFC 6749 §3.1), for the browser grant"),
        .endpoint("tokenURL", \.tokenURL, type: "URL string, **required unless `issuer` is given**", aliases: ["accessTokenURL"],
                  discovered: "token_endpoint", doc: "the token endpoint (RFC 6749 §3.2), for every grant"),
        .endpoint("deviceAuthorizationURL", \.deviceAuthorizationURL, aliases: ["deviceCodeURL"], discovered: "device_authorization_endpoint",
                  doc: "the device authorization endpoint (RFC 8628 §3.1), for the device grant"),
        .endpoint("revocationURL", \.revocationURL, discovered: "revocation_endpoint", doc: "the revocation endpoint (RFC 7009)"),
        .endpoint("introspectionURL", \.introspectionURL, discovered: "introspection_endpoint", doc: "the introspection endpoint (RFC 7662)"),
        .endpoint("userinfoURL", \.userinfoURL, discovered: "userinfo_endpoint", doc: "the userinfo endpoint (OpenID Connect Core §5.3)"),
        .custom("issuer", type: "URL string",
                doc: "the issuer identifier: where discovery starts, and what ID tokens' `iss` must equal") { entry, provider throws(OAuthError) in
            provider.issuer = try entry.issuer()
        },
        .endpoint("jwksURL", \.jwksURL, discovered: "jwks_uri", doc: "where the keys that sign ID tokens are published"),
        .endpoint("endSessionURL", \.endSessionURL, discovered: "end_session_endpoint",
                  doc: "the RP-initiated logout endpoint (OpenID Connect RP-Initiated Logout 1.0)"),
        .custom("idTokenSigningAlgorithms", type: "array of JWS algorithm names, or one name", default: "see below",
                doc: "the JWS algorithms accepted for ID tokens") { entry, provider throws(OAuthError) in
            provider.idTokenSigningAlgorithms = try entry.signingAlgorithms()
        },
        .custom("clientID", type: "string, **required**", default: "—", doc: "your `client_id`") { entry, provider throws(OAuthError) in
            if let clientID = try entry.string("clientID") { provider.clientID = clientID }
        },
        .custom("clientSecret", type: "string", doc: "the client secret itself (prefer the next two)") { entry, provider throws(OAuthError) in
            provider.clientSecret = try entry.clientSecret()
        },
        .read("clientSecretEnv", with: "clientSecret", type: "environment variable name",
              doc: "the name of the environment variable that holds the client secret"),
        .read("clientSecretFile", with: "clientSecret", type: "file path", doc: "the file that holds the client secret, such as a systemd credential"),
        .custom("clientAuthentication",
                type: "`\"client_secret_basic\"`, `\"client_secret_post\"`, `\"client_secret_jwt\"`, `\"private_key_jwt\"`, "
                    + "`\"tls_client_auth\"`, `\"self_signed_tls_client_auth\"` or `\"none\"`",
                default: "`client_secret_basic` with a secret, `private_key_jwt` with a `clientKeyFile` or `clientAssertionFile` and no secret, "
                    + "`none` otherwise",
                doc: "how the client authenticates at the token endpoint (RFC 6749 §2.3)") { entry, provider throws(OAuthError) in
            if let method = try entry.clientAuthentication(hasSecret: provider.clientSecret != nil) { provider.clientAuthentication = method }
        },
        .custom("clientKeyFile", type: "file path (PEM private key)",
                doc: "the client's private key, for `private_key_jwt` and mutual TLS") { entry, provider throws(OAuthError) in
            provider.clientKey = try entry.clientKey()
        },
        .custom("clientKeyID", type: "string", doc: "the `kid` of client assertions") { entry, provider throws(OAuthError) in
            provider.clientKeyID = try entry.clientKeyID()
        },
        .custom("clientCertificateFile", type: "file path (PEM certificate chain)",
                doc: "the client certificate, for mutual TLS and the assertions' `x5t#S256`") { entry, provider throws(OAuthError) in
            provider.clientCertificate = try entry.clientCertificate()
        },
        .custom("clientAssertionAlgorithm", type: "JWS algorithm name", default: "from the key (see below); `HS256` for `client_secret_jwt`",
                doc: "the client assertion's `alg`") { entry, provider throws(OAuthError) in
            provider.clientAssertionAlgorithm = try entry.clientAssertionAlgorithm()
        },
        .custom("clientAssertionAudience", type: "`\"endpoint\"`, `\"issuer\"` or a URI", default: "`\"endpoint\"`",
                doc: "the client assertion's `aud`") { entry, provider throws(OAuthError) in
            if let audience = try entry.clientAssertionAudience() { provider.clientAssertionAudience = audience }
        },
        .custom("clientAssertionFile", type: "file path (a JWT made elsewhere)",
                doc: "a federated client assertion (such as `${AZURE_FEDERATED_TOKEN_FILE}`), read on every request and sent as "
                    + "`client_assertion` (`private_key_jwt`)") { entry, provider throws(OAuthError) in
            provider.clientAssertionFile = try entry.clientAssertionFile()
        },
        .custom("caFile", type: "file path (PEM CA bundle)", default: "none (the system's CAs)",
                doc: "the CA certificates to trust for this provider's endpoints") { entry, provider throws(OAuthError) in
            provider.caFile = try entry.caFile()
        },
        .custom("serviceAccountFile", type: "file path (Google-style service-account JSON key)",
                doc: "a service-account key: the JWT-bearer grant (RFC 7523 §2.1), signed with it") { entry, provider throws(OAuthError) in
            provider.serviceAccount = try entry.serviceAccountKey()
        },
        .text("subject", \.serviceAccountSubject, type: "string", doc: "the user a service account acts for (`sub`)"),
        .custom("dpop", type: "`true`, `false` or `\"required\"` (DPoP, RFC 9449)", default: "`false`",
                doc: "bind the tokens to a key with a DPoP proof on every token request") { entry, provider throws(OAuthError) in
            try entry.readDPoP(into: &provider)
        },
        .read("dpopAlgorithm", with: "dpop", type: "`\"ES256\"`, `\"ES384\"`, `\"EdDSA\"`, `\"PS256\"` or `\"RS256\"`", default: "`\"ES256\"`",
              doc: "the DPoP proofs' `alg`"),
        .flag("pushedAuthorization", \.pushedAuthorization,
              default: "`false` (pushed anyway when discovery says `require_pushed_authorization_requests`)",
              doc: "push the authorization request to the server first (RFC 9126)"),
        .endpoint("pushedAuthorizationURL", \.pushedAuthorizationURL, discovered: "pushed_authorization_request_endpoint",
                  doc: "the pushed authorization request endpoint (RFC 9126 §2)"),
        .flag("requestObject", \.requestObject, doc: "sign the authorization request into a request object (RFC 9101)"),
        .endpoint("backchannelAuthenticationURL", \.backchannelAuthenticationURL, discovered: "backchannel_authentication_endpoint",
                  doc: "the backchannel authentication endpoint (OpenID Connect CIBA Core 1.0 §7), for `authflow login --ciba`"),
        .custom("cibaDeliveryMode", type: "`\"poll\"` or `\"ping\"`", default: "`\"poll\"`",
                doc: "how a CIBA login learns the person answered: polling, or the server's ping waking the poll") { entry, provider throws(OAuthError) in
            if let mode = try entry.cibaDeliveryMode() { provider.cibaDeliveryMode = mode }
        },
        .text("cibaLoginHint", \.cibaLoginHint, type: "string",
              doc: "the `login_hint` of a CIBA login that names no one; with it `authflow agent` re-authorizes through CIBA"),
        .custom("grant", type: "`\"client-credentials\"`, `\"jwt-bearer\"` or `\"token-exchange\"`",
                default: "implied: `jwt-bearer` with `serviceAccountFile`, `token-exchange` with `subjectTokenSource`, `subjectTokenFile` "
                    + "or `externalAccountFile`",
                doc: "the grant that runs with no person when no valid token is stored") { entry, provider throws(OAuthError) in
            provider.grant = try entry.catalogGrant()
        },
        .custom("subjectTokenSource", type: "object with `file`, `url`, `command` or `preset`; or a preset's name",
                doc: "where the subject token (or a `jwt-bearer` grant's assertion) comes from, asked on every exchange") { entry, provider throws(OAuthError) in
            try entry.readTokenExchange(into: &provider)
        },
        .read("subjectTokenFile", with: "subjectTokenSource", type: "file path (the token to exchange)",
              doc: "the same as `subjectTokenSource` `{\"file\": PATH}`: the file whose token is exchanged (RFC 8693), read on every exchange"),
        .read("externalAccountFile", with: "subjectTokenSource", type: "file path (Google `external_account` JSON)",
              doc: "a Google workload identity federation file, read as it is: its source, STS exchange and impersonation"),
        .read("subjectTokenType", with: "subjectTokenSource", type: "token type URI (RFC 8693 §3)",
              default: "`urn:ietf:params:oauth:token-type:jwt`", doc: "the exchange's `subject_token_type`"),
        .read("audience", with: "subjectTokenSource", type: "string, or array of strings", doc: "the exchange's `audience` values"),
        .read("requestedTokenType", with: "subjectTokenSource", type: "token type URI", default: "none (the server chooses)",
              doc: "the exchange's `requested_token_type`"),
        .custom("resource", type: "absolute URI without fragment, or array of them",
                doc: "resource indicators (RFC 8707), sent with every grant") { entry, provider throws(OAuthError) in
            provider.resources = try entry.resources()
        },
        .custom("registration", type: "`\"dynamic\"` or `\"manual\"`", default: "`\"manual\"`",
                doc: "`dynamic`: the client registers itself at the issuer (RFC 7591) at its first login; no `clientID`") { entry, provider throws(OAuthError) in
            try entry.readRegistration(into: &provider)
        },
        .read("initialAccessTokenFile", with: "registration", type: "file path",
              doc: "the file holding the initial access token a registration presents (RFC 7591 §3)"),
        .custom("redirectURI", type: "URI string", doc: "the registered redirect URI, for the browser grant") { entry, provider throws(OAuthError) in
            provider.redirectURI = try entry.redirectURI()
        },
        .custom("scopes", type: "array of strings, or one space-separated string", default: "`[]`", aliases: ["scope"],
                doc: "the scopes requested by default") { entry, provider throws(OAuthError) in
            if let scopes = try entry.aliased("scopes", ["scope"], { key throws(OAuthError) in try entry.scopeList(key) }) {
                provider.scopes = scopes
            }
        },
        .custom("authorizationParameters", type: "object of string → string", default: "`{}`",
                doc: "extra authorization request parameters, such as `login_hint` or `prompt`") { entry, provider throws(OAuthError) in
            if let parameters = try entry.authorizationParameters() { provider.authorizationParameters = parameters }
        },
        .custom("userAgent", type: "string", default: "the flow's default", aliases: ["customUserAgent"],
                doc: "the `User-Agent` of this provider's requests") { entry, provider throws(OAuthError) in
            provider.userAgent = try entry.aliased("userAgent", ["customUserAgent"], { key throws(OAuthError) in try entry.headerValue(key) })
        },
        .flag("debug", \.debug, doc: "debug log events for this provider (shapes, never values)"),
        .foreign("gitUsername", reader: .cli, type: "string, 1–128 characters, no control characters", default: "`oauth2`",
                 doc: "the username `authflow git-credential` answers git"),
        .foreign("registries", reader: .cli, type: "array of registries: `\"HOST\"` or `\"HOST:PORT\"`",
                 default: "none: no registry", doc: "the container registries `authflow docker-credential` gives this provider's token to"),
        .foreign("registryUsername", reader: .cli, type: "string, 1–128 characters, no control characters", default: "`oauth2accesstoken`",
                 doc: "the username `authflow docker-credential` answers Docker"),
        .foreign("agentAllow", reader: .agent, type: "array of `\"uid:USER\"` / `\"group:GROUP\"` strings",
                 default: "none: the agent's own user only", doc: "the other local users and groups `authflow agent` gives the token to"),
        .foreign("encodeHttpBody", reader: .ignored, type: "any",
                 doc: "OAuthKit's; token requests are always a form body, never a query string"),
        .foreign("icon", reader: .ignored, type: "any", doc: "OAuthKit's"),
        .foreign("authorizationPattern", reader: .ignored, type: "any", doc: "OAuthKit's"),
    ]
}
