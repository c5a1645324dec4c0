import Foundation
#if canImport(Glibc)
import Glibc
#endif
import OAuthFlow
import TestSupport
import Testing

/// The JSON provider catalog: format, OAuthKit compatibility, secret sources, and every rejection.
///
/// Catalogs are inline strings. Secret files live in a fresh temporary directory per test.
/// No test touches the network or the process environment.
@Suite("ProviderCatalog")
struct ProviderCatalogTests {}

// MARK: - Support

enum CatalogFixture {
    /// A valid minimal entry; most failure cases change one thing about it.
    static let minimal = #"{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app"}"#

    static func load(
        _ json: String, environment: [String: String] = [:], baseDirectory: URL? = nil
    ) throws(OAuthError) -> [Provider] {
        try ProviderCatalog.load(data: Data(json.utf8), baseDirectory: baseDirectory, environment: environment)
    }

    /// Runs `body` with a fresh directory that is removed afterwards.
    static func withDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = try TemporaryDirectory("ProviderCatalogTests")
        defer { directory.remove() }
        return try body(directory.url)
    }

    static func write(_ text: String, to url: URL) throws {
        try Data(text.utf8).write(to: url)
    }

    /// The repository's `Resources/providers.json`, found from this file's path.
    static func shippedCatalogURL(filePath: String = #filePath) -> URL {
        URL(fileURLWithPath: filePath)
            .deletingLastPathComponent()   // Providers
            .deletingLastPathComponent()   // OAuthFlowTests
            .deletingLastPathComponent()   // Tests
            .deletingLastPathComponent()   // repository root
            .appendingPathComponent("Resources/providers.json")
    }

    /// Values for every `clientSecretEnv` the shipped catalog names.
    static let shippedEnvironment = [
        "GOOGLE_CLIENT_SECRET": "test-google", "AUTH0_CLIENT_SECRET": "test-auth0", "OKTA_CLIENT_SECRET": "test-okta",
        "KEYCLOAK_CLIENT_SECRET": "test-keycloak", "PHONE_VERIFY_CLIENT_SECRET": "test-phone",
    ]

    /// A catalog in the shape of an OAuthKit `oauth.json` (our own values, OAuthKit's keys and habits:
    /// capitalized ids, `accessTokenURL`, `deviceCodeURL`, `scope`, `customUserAgent`, `encodeHttpBody`,
    /// `icon`, inline secrets, a custom-scheme redirect, and trailing commas).
    static let oauthKit = #"""
    [
        {
            "id": "GitHub",
            "icon": "https://github.githubassets.com/favicons/favicon.svg",
            "authorizationURL": "https://github.com/login/oauth/authorize",
            "accessTokenURL": "https://github.com/login/oauth/access_token",
            "deviceCodeURL": "https://github.com/login/device/code",
            "clientID": "CLIENT_ID",
            "clientSecret": "CLIENT_SECRET",
            "redirectURI": "myapp://oauth/callback",
            "scope": [
                "read:user",
                "repo",
            ],
            "debug": true,
        },
        {
            "id": "Google",
            "authorizationURL": "https://accounts.google.com/o/oauth2/v2/auth",
            "accessTokenURL": "https://oauth2.googleapis.com/token",
            "deviceCodeURL": "https://oauth2.googleapis.com/device/code",
            "clientID": "CLIENT_ID",
            "clientSecret": "CLIENT_SECRET",
            "redirectURI": "https://app.example.com/oauth/callback",
            "scope": ["openid", "email", "profile"]
        },
        {
            "id": "Slack",
            "authorizationURL": "https://slack.com/oauth/v2/authorize",
            "accessTokenURL": "https://slack.com/api/oauth.v2.access",
            "clientID": "CLIENT_ID",
            "clientSecret": "CLIENT_SECRET",
            "redirectURI": "https://app.example.com/oauth/callback",
            "customUserAgent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)",
            "encodeHttpBody": false,
            "authorizationPattern": "^https://slack\\.com/api/.*",
            "scope": ["incoming-webhook"],
        },
    ]
    """#
}

// MARK: - Loading

extension ProviderCatalogTests {
    @Suite("Loading")
    struct Loading {
        @Test("A minimal entry gets the documented defaults")
        func minimalDefaults() throws {
            let providers = try CatalogFixture.load("[\(CatalogFixture.minimal)]")
            let provider = try #require(providers.first)
            #expect(providers.count == 1)
            #expect(provider.id == "demo")
            #expect(provider.tokenURL?.absoluteString == "https://auth.example.com/token")
            #expect(provider.clientID == "app")
            #expect(provider.clientSecret == nil)
            #expect(provider.clientAuthentication == .none)
            #expect(provider.scopes.isEmpty)
            #expect(provider.authorizationParameters.isEmpty)
            #expect(provider.userAgent == nil)
            #expect(provider.debug == false)
            #expect(provider.authorizationURL == nil && provider.deviceAuthorizationURL == nil && provider.issuer == nil)
        }

        @Test("An entry with issuer and clientID alone loads: its endpoints are discovered later")
        func issuerOnly() throws {
            let json = #"[{"id": "corp", "issuer": "https://login.example.com", "clientID": "app", "endSessionURL": "https://login.example.com/bye", "idTokenSigningAlgorithms": ["ES256", "RS256"]}]"#
            let provider = try #require(try CatalogFixture.load(json).first)
            #expect(provider.tokenURL == nil)
            #expect(provider.issuer == "https://login.example.com")
            #expect(provider.endSessionURL?.absoluteString == "https://login.example.com/bye")
            #expect(provider.idTokenSigningAlgorithms == ["ES256", "RS256"])
            let bare = Provider(id: "x", clientID: "app")
            #expect(throws: OAuthError.self) { try bare.validate() }
        }

        @Test("Every key maps onto its Provider field")
        func everyKey() throws {
            let json = #"""
            [{
              "id": "full",
              "authorizationURL": "https://auth.example.com/authorize",
              "tokenURL": "https://auth.example.com/token",
              "deviceAuthorizationURL": "https://auth.example.com/device",
              "revocationURL": "https://auth.example.com/revoke",
              "introspectionURL": "https://auth.example.com/introspect",
              "userinfoURL": "https://auth.example.com/userinfo",
              "issuer": "https://auth.example.com",
              "jwksURL": "https://auth.example.com/jwks.json",
              "clientID": "full-app",
              "clientSecret": "inline-secret",
              "clientAuthentication": "client_secret_post",
              "redirectURI": "https://app.example.com/callback",
              "scopes": "openid  profile ip:phone_verify",
              "authorizationParameters": {"login_hint": "999123456789", "prompt": "consent"},
              "userAgent": "demo/1.0",
              "debug": true
            }]
            """#
            let provider = try #require(try CatalogFixture.load(json).first)
            #expect(provider.authorizationURL?.absoluteString == "https://auth.example.com/authorize")
            #expect(provider.deviceAuthorizationURL?.absoluteString == "https://auth.example.com/device")
            #expect(provider.revocationURL?.absoluteString == "https://auth.example.com/revoke")
            #expect(provider.introspectionURL?.absoluteString == "https://auth.example.com/introspect")
            #expect(provider.userinfoURL?.absoluteString == "https://auth.example.com/userinfo")
            #expect(provider.issuer == "https://auth.example.com")
            #expect(provider.jwksURL?.absoluteString == "https://auth.example.com/jwks.json")
            #expect(provider.clientSecret?.reveal() == "inline-secret")
            #expect(provider.clientAuthentication == .clientSecretPost)
            #expect(provider.redirectURI?.absoluteString == "https://app.example.com/callback")
            #expect(provider.scopes == ["openid", "profile", "ip:phone_verify"])
            #expect(provider.authorizationParameters == ["login_hint": "999123456789", "prompt": "consent"])
            #expect(provider.userAgent == "demo/1.0")
            #expect(provider.debug)
            #expect(provider.isConfidential)
        }

        @Test("A secret without clientAuthentication means client_secret_basic (RFC 6749 §2.3.1)")
        func secretDefaultsToBasic() throws {
            let json = #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "s"}]"#
            #expect(try CatalogFixture.load(json).first?.clientAuthentication == .clientSecretBasic)
        }

        @Test("The {\"providers\": [...]} form loads, and other top-level keys are ignored")
        func providersObject() throws {
            let json = #"{"$schema": "./providers.schema.json", "providers": [\#(CatalogFixture.minimal)], "version": 2}"#
            #expect(try CatalogFixture.load(json).map(\.id) == ["demo"])
        }

        @Test("An empty catalog loads as no providers")
        func emptyCatalog() throws {
            #expect(try CatalogFixture.load("[]").isEmpty)
            #expect(try CatalogFixture.load(#"{"providers": []}"#).isEmpty)
        }

        @Test("Unknown keys are ignored; null counts as absent")
        func unknownKeysAndNull() throws {
            let json = #"""
            [{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app",
              "colour": 7, "notes": {"anything": [1, 2]}, "issuer": null, "scopes": null, "debug": null}]
            """#
            let provider = try #require(try CatalogFixture.load(json).first)
            #expect(provider.issuer == nil && provider.scopes.isEmpty && provider.debug == false)
        }

        @Test("Trailing commas are accepted; commas and brackets inside strings are kept")
        func trailingCommas() throws {
            let json = #"""
            [
              {"id": "a", "tokenURL": "https://auth.example.com/token", "clientID": "x,]",
               "authorizationParameters": {"prompt": "consent,}", "acr_values": "a, ]",},
               "scopes": ["one", "two",],},
              {"id":"b","tokenURL":"https://auth.example.com/token","clientID":"y",},
            ]
            """#
            let providers = try CatalogFixture.load(json)
            #expect(providers.map(\.id) == ["a", "b"])
            #expect(providers[0].clientID == "x,]")
            #expect(providers[0].authorizationParameters == ["prompt": "consent,}", "acr_values": "a, ]"])
            #expect(providers[0].scopes == ["one", "two"])
        }

        @Test("String escapes, surrogate pairs and a byte order mark are decoded")
        func escapesAndBOM() throws {
            let json = #"[{"id": "demo", "tokenURL": "https:\/\/auth.example.com\/token", "clientID": "caf\u00e9 \ud83d\ude00 \"q\" \\ \t"}]"#
            let data = Data([0xEF, 0xBB, 0xBF]) + Data(json.utf8)
            let provider = try #require(try ProviderCatalog.load(data: data, environment: [:]).first)
            #expect(provider.tokenURL?.absoluteString == "https://auth.example.com/token")
            #expect(provider.clientID == "café 😀 \"q\" \\ \t")
        }

        @Test("http:// is allowed for loopback endpoints only", arguments: [
            "http://localhost/token", "http://127.0.0.1:8080/token", "http://[::1]:9000/token", "http://idp.localhost/token",
        ])
        func loopbackHTTP(url: String) throws {
            let json = #"[{"id": "dev", "tokenURL": "\#(url)", "clientID": "app"}]"#
            #expect(try CatalogFixture.load(json).first?.tokenURL?.absoluteString == url)
        }

        @Test("An alias given with the same value as its key is accepted")
        func aliasSameValue() throws {
            let json = #"""
            [{"id": "demo", "tokenURL": "https://auth.example.com/token", "accessTokenURL": "https://auth.example.com/token",
              "clientID": "app", "scopes": ["a", "b"], "scope": "a b", "userAgent": "x/1", "customUserAgent": "x/1"}]
            """#
            let provider = try #require(try CatalogFixture.load(json).first)
            #expect(provider.scopes == ["a", "b"] && provider.userAgent == "x/1")
        }

        @Test("Providers keep catalog order")
        func order() throws {
            let json = ["zeta", "alpha", "mid"].map { #"{"id": "\#($0)", "tokenURL": "https://a.example.com/t", "clientID": "c"}"# }
            #expect(try CatalogFixture.load("[\(json.joined(separator: ","))]").map(\.id) == ["zeta", "alpha", "mid"])
        }
    }
}

// MARK: - OAuthKit compatibility

extension ProviderCatalogTests {
    @Suite("OAuthKit compatibility")
    struct OAuthKitCompatibility {
        @Test("An OAuthKit oauth.json loads unchanged, aliases mapped and OAuthKit-only keys ignored")
        func loadsUnchanged() throws {
            let providers = try CatalogFixture.load(CatalogFixture.oauthKit)
            #expect(providers.map(\.id) == ["GitHub", "Google", "Slack"])

            let github = providers[0]
            #expect(github.tokenURL?.absoluteString == "https://github.com/login/oauth/access_token")
            #expect(github.deviceAuthorizationURL?.absoluteString == "https://github.com/login/device/code")
            #expect(github.scopes == ["read:user", "repo"])
            #expect(github.redirectURI?.absoluteString == "myapp://oauth/callback")
            #expect(github.clientSecret?.reveal() == "CLIENT_SECRET")
            #expect(github.clientAuthentication == .clientSecretBasic)
            #expect(github.debug)

            #expect(providers[1].deviceAuthorizationURL?.absoluteString == "https://oauth2.googleapis.com/device/code")
            #expect(providers[1].debug == false)

            let slack = providers[2]
            #expect(slack.tokenURL?.absoluteString == "https://slack.com/api/oauth.v2.access")
            #expect(slack.userAgent == "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)")
            #expect(slack.deviceAuthorizationURL == nil)
        }

        @Test("A key and its OAuthKit alias with different values are rejected", arguments: [
            (#""tokenURL": "https://a.example.com/token", "accessTokenURL": "https://b.example.com/token""#, "tokenURL and accessTokenURL"),
            (#""deviceAuthorizationURL": "https://a.example.com/d", "deviceCodeURL": "https://b.example.com/d""#,
             "deviceAuthorizationURL and deviceCodeURL"),
            (#""scopes": ["a"], "scope": ["b"]"#, "scopes and scope"),
            (#""userAgent": "x/1", "customUserAgent": "x/2""#, "userAgent and customUserAgent"),
        ])
        func aliasConflict(keys: String, named: String) throws {
            let tokenURL = keys.contains(#""tokenURL":"#) ? "" : #""tokenURL": "https://a.example.com/token", "#
            let json = #"[{"id": "demo", "clientID": "app", \#(tokenURL)\#(keys)}]"#
            let error = #expect(throws: OAuthError.self) { try CatalogFixture.load(json) }
            #expect(error?.code == .configuration)
            #expect(error?.message?.contains(#"provider #1 ("demo"): \#(named): "#) == true)
            #expect(error?.message?.contains("different values") == true)
        }
    }
}

// MARK: - Rejections

/// One catalog that must fail, and what its message must say.
struct CatalogFailure: Sendable, CustomTestStringConvertible {
    var name: String
    var json: String
    var environment: [String: String] = [:]
    /// Fragments the message must contain: the provider label, the key, the reason.
    var fragments: [String]
    /// The `providerID` the error must carry (nil when the id is unknown or invalid).
    var providerID: String?

    var testDescription: String { name }

    /// `{"id": "demo", "tokenURL": …, "clientID": "app", <extra>}` in an array; `extra` may replace tokenURL or clientID.
    static func demo(_ name: String, _ extra: String, environment: [String: String] = [:], _ fragments: String...) -> Self {
        var members = [#""id": "demo""#]
        if !extra.contains(#""tokenURL":"#) { members.append(#""tokenURL": "https://auth.example.com/token""#) }
        if !extra.contains(#""clientID":"#) { members.append(#""clientID": "app""#) }
        let json = "[{" + (members + [extra]).joined(separator: ", ") + "}]"
        return Self(name: name, json: json, environment: environment, fragments: [#"provider #1 ("demo"): "#] + fragments,
                    providerID: "demo")
    }
}

extension CatalogFailure {
    static let syntax: [Self] = [
        Self(name: "not JSON, with line and column", json: "[\n  {\"id\": \"demo\",\n   \"tokenURL\" \"https://x.example.com\"}]",
             fragments: ["catalog is not valid JSON at line 3, column 15", "expected ':' after a member name"]),
        Self(name: "empty document", json: "  \n", fragments: ["not valid JSON", "the document is empty"]),
        Self(name: "text after the value", json: "[] x", fragments: ["line 1, column 4", "unexpected text after the top-level value"]),
        Self(name: "comment", json: "[ // none\n]", fragments: ["comments are not allowed"]),
        Self(name: "single quotes", json: "[{'id': 'demo'}]", fragments: ["line 1, column 3", "expected a member name in double quotes"]),
        Self(name: "unquoted value", json: #"[{"id": demo}]"#, fragments: ["expected a value"]),
        Self(name: "a lone comma is not a trailing comma", json: "[,]", fragments: ["line 1, column 2", "expected a value"]),
        Self(name: "two commas", json: "[1,,]", fragments: ["line 1, column 4", "expected a value"]),
        Self(name: "missing comma", json: #"[{"id": "a"} {"id": "b"}]"#, fragments: ["expected ',' or ']' after an array element"]),
        Self(name: "unterminated string", json: #"[{"id": "demo}]"#, fragments: ["line 1, column 9", "a string is not closed"]),
        Self(name: "raw line break in a string", json: "[\"a\nb\"]", fragments: ["control characters"]),
        Self(name: "invalid escape", json: #"["\q"]"#, fragments: ["invalid escape sequence"]),
        Self(name: "unpaired surrogate", json: #"["\ud800x"]"#, fragments: ["high surrogate without its low surrogate"]),
        Self(name: "leading zero", json: "[01]", fragments: ["leading zeros"]),
        Self(name: "TRUE in capitals", json: "[TRUE]", fragments: ["expected a value"]),
        Self(name: "unclosed array", json: "[1, 2", fragments: ["the document ends inside an array"]),
        Self(name: "too deep", json: String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
             fragments: ["nested more than 64 levels deep"]),
        Self(name: "a member twice in one object", json: "[{\"id\": \"demo\",\n  \"id\": \"other\"}]",
             fragments: ["line 2, column 3", #"the member "id" appears twice in one object"#]),
    ]

    static let shape: [Self] = [
        Self(name: "top level a string", json: #""providers""#, fragments: ["catalog must be a JSON array of providers", "found a string"]),
        Self(name: "top level an object without providers", json: #"{"items": []}"#, fragments: [#"has no "providers" key"#]),
        Self(name: "providers not an array", json: #"{"providers": {"id": "demo"}}"#,
             fragments: [#"catalog "providers" must be an array"#, "found an object"]),
        Self(name: "an entry not an object", json: "[\(CatalogFixture.minimal), 42]",
             fragments: ["provider #2: must be a JSON object, found a number"]),
        Self(name: "missing id", json: #"[{"tokenURL": "https://auth.example.com/token", "clientID": "app"}]"#,
             fragments: ["provider #1: id: is required"]),
        Self(name: "id not a string", json: #"[{"id": 7, "tokenURL": "https://auth.example.com/token", "clientID": "app"}]"#,
             fragments: ["provider #1: id: must be a string, found a number"]),
        Self(name: "id not a safe store key", json: #"[{"id": "no spaces", "tokenURL": "https://auth.example.com/token", "clientID": "app"}]"#,
             fragments: ["provider #1: id: must be 1 to 128 characters"]),
        Self(name: "missing tokenURL", json: #"[{"id": "demo", "clientID": "app"}]"#,
             fragments: [#"provider #1 ("demo"): tokenURL: is required"#, "accessTokenURL"], providerID: "demo"),
        Self(name: "missing clientID", json: #"[{"id": "demo", "tokenURL": "https://auth.example.com/token"}]"#,
             fragments: [#"provider #1 ("demo"): clientID: is required"#], providerID: "demo"),
        Self(name: "duplicate ids, ignoring case",
             json: #"[{"id": "github", "tokenURL": "https://a.example.com/t", "clientID": "a"}, {"id": "GitHub", "tokenURL": "https://a.example.com/t", "clientID": "b"}]"#,
             fragments: [#"provider #2 ("GitHub"): id: duplicates provider #1 ("github")"#], providerID: "GitHub"),
        Self(name: "the third entry is counted as #3",
             json: "[\(CatalogFixture.minimal.replacingOccurrences(of: "demo", with: "a")), \(CatalogFixture.minimal.replacingOccurrences(of: "demo", with: "b")), "
                + #"{"id": "c", "tokenURL": "http://auth.example.com/token", "clientID": "app"}]"#,
             fragments: [#"provider #3 ("c"): tokenURL: must use https://"#], providerID: "c"),
    ]

    static let types: [Self] = [
        demo("scopes a number", #""scopes": 5"#, "scopes: must be an array of strings or a space-separated string, found a number"),
        demo("a scope not a string", #""scopes": ["read", 1]"#, "scopes[1]: must be a string, found a number"),
        demo("a scope with a space", #""scopes": ["read user"]"#, "scopes[0]: is not a valid scope token (RFC 6749 §3.3"),
        demo("a scope with a quote", #""scope": "read \"x\"""#, "scope: scope 2 of the string is not a valid scope token"),
        demo("debug a string", #""debug": "yes""#, "debug: must be true or false, found a string"),
        demo("debug a number", #""debug": 1"#, "debug: must be true or false, found a number"),
        demo("clientID a number", #""clientID": 12"#, "clientID: must be a string, found a number"),
        demo("clientID empty", #""clientID": """#, "clientID: must not be empty"),
        demo("tokenURL an object", #""tokenURL": {"url": "x"}"#, "tokenURL: must be a string, found an object"),
        demo("authorizationParameters an array", #""authorizationParameters": ["login_hint"]"#,
             "authorizationParameters: must be an object of string values, found an array"),
        demo("an authorization parameter a number", #""authorizationParameters": {"max_age": 300}"#,
             "authorizationParameters.max_age: must be a string, found a number"),
        demo("an authorization parameter the flow sets", #""authorizationParameters": {"state": "fixed"}"#,
             "authorizationParameters: \"state\" is set by the flow"),
        demo("userAgent with a line break", #""userAgent": "x\r\nX-Injected: 1""#, "userAgent: must not contain control characters"),
        demo("userAgent empty", #""customUserAgent": """#, "customUserAgent: must not be empty"),
    ]

    static let endpoints: [Self] = [
        demo("unparseable URL", #""authorizationURL": "https://exa mple.com/authorize""#, "authorizationURL: is not a valid URL"),
        demo("empty URL", #""revocationURL": """#, "revocationURL: is not a valid URL"),
        demo("relative URL", #""userinfoURL": "auth.example.com/userinfo""#, "userinfoURL: is not an absolute URL with a host"),
        demo("http on a public host", #""deviceAuthorizationURL": "http://auth.example.com/device""#,
             "deviceAuthorizationURL: must use https:// (http:// is allowed only for loopback hosts)"),
        demo("http under the OAuthKit name", #""deviceCodeURL": "http://auth.example.com/device""#, "deviceCodeURL: must use https://"),
        demo("another scheme", #""introspectionURL": "ftp://auth.example.com/introspect""#, "introspectionURL: must use https://"),
        demo("user info in an endpoint", #""jwksURL": "https://user:pass@auth.example.com/jwks""#, "jwksURL: must not contain user info"),
        demo("a fragment in an endpoint", #""jwksURL": "https://auth.example.com/jwks#keys""#, "jwksURL: must not contain a fragment"),
        demo("issuer over http", #""issuer": "http://auth.example.com""#, "issuer: must use https://"),
        demo("issuer with a query", #""issuer": "https://auth.example.com?tenant=1""#, "issuer: must not contain a query (RFC 8414 §2)"),
        demo("endSessionURL over http", #""endSessionURL": "http://auth.example.com/logout""#, "endSessionURL: must use https://"),
        demo("idTokenSigningAlgorithms none", #""idTokenSigningAlgorithms": ["RS256", "none"]"#,
             "idTokenSigningAlgorithms: \"none\" is never accepted"),
        demo("idTokenSigningAlgorithms unknown", #""idTokenSigningAlgorithms": "RS1""#, "idTokenSigningAlgorithms: names an unknown algorithm"),
        demo("idTokenSigningAlgorithms empty", #""idTokenSigningAlgorithms": []"#, "idTokenSigningAlgorithms: must name at least one"),
        demo("idTokenSigningAlgorithms a number", #""idTokenSigningAlgorithms": [256]"#,
             "idTokenSigningAlgorithms[0]: must be a string, found a number"),
        demo("HS256 without a client secret", #""idTokenSigningAlgorithms": ["HS256"]"#,
             "idTokenSigningAlgorithms: HS256 needs the client secret"),
        demo("redirectURI unparseable", #""redirectURI": "not a uri""#, "redirectURI: is not a valid URI"),
        demo("redirectURI relative", #""redirectURI": "/callback""#, "redirectURI: must be an absolute URI without a fragment"),
        demo("redirectURI with a fragment", #""redirectURI": "https://app.example.com/cb#x""#,
             "redirectURI: must be an absolute URI without a fragment"),
    ]

    static let secrets: [Self] = [
        demo("inline and env", #""clientSecret": "a", "clientSecretEnv": "DEMO_SECRET""#, environment: ["DEMO_SECRET": "b"],
             "clientSecret and clientSecretEnv: a client secret may come from only one of"),
        demo("inline and file", #""clientSecret": "a", "clientSecretFile": "/run/credentials/demo/secret""#,
             "clientSecret and clientSecretFile: a client secret may come from only one of"),
        demo("env and file", #""clientSecretEnv": "DEMO_SECRET", "clientSecretFile": "/run/credentials/demo/secret""#,
             environment: ["DEMO_SECRET": "b"], "clientSecretEnv and clientSecretFile: a client secret may come from only one of"),
        demo("inline empty", #""clientSecret": """#, "clientSecret: must not be empty"),
        demo("env unset", #""clientSecretEnv": "DEMO_SECRET""#,
             "clientSecretEnv: the environment variable it names (11 characters, letters, digits and '_') is not set"),
        demo("env empty", #""clientSecretEnv": "DEMO_SECRET""#, environment: ["DEMO_SECRET": ""],
             "clientSecretEnv: the environment variable it names (11 characters, letters, digits and '_') is empty"),
        demo("env not a variable name", #""clientSecretEnv": "s3cr3t value""#, "clientSecretEnv: must be the name of an environment variable"),
        demo("file not a string", #""clientSecretFile": ["a"]"#, "clientSecretFile: must be a string, found an array"),
        demo("file relative without a base directory", #""clientSecretFile": "secrets/demo""#,
             "clientSecretFile: is a relative path (12 characters, a relative path), but the catalog has no directory"),
        demo("file under ~", #""clientSecretFile": "~/demo-secret""#, "clientSecretFile: \"~\" is not expanded"),
        demo("file with CREDENTIALS_DIRECTORY unset", #""clientSecretFile": "${CREDENTIALS_DIRECTORY}/demo""#,
             "clientSecretFile: environment variable CREDENTIALS_DIRECTORY is not set or is empty", "LoadCredential="),
        demo("file with an unclosed ${", #""clientSecretFile": "${CREDENTIALS_DIRECTORY/demo""#,
             "clientSecretFile: has a \"${\" without its closing \"}\""),
        demo("file with a bad variable name", #""clientSecretFile": "${1X}/demo""#, "clientSecretFile: has an invalid variable reference"),
        demo("clientAuthentication unknown", #""clientAuthentication": "basic""#,
             "clientAuthentication: must be one of client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt, "
                + "tls_client_auth, self_signed_tls_client_auth or none"),
        demo("clientAuthentication a number", #""clientAuthentication": 1"#, "clientAuthentication: must be a string, found a number"),
        demo("client_secret_basic without a secret", #""clientAuthentication": "client_secret_basic""#,
             "clientAuthentication: client_secret_basic needs a client secret"),
        demo("client_secret_post without a secret", #""clientAuthentication": "client_secret_post""#,
             "clientAuthentication: client_secret_post needs a client secret"),
        demo("none with a secret", #""clientAuthentication": "none", "clientSecret": "a""#,
             "clientAuthentication: is none, but a client secret is configured"),
    ]
}

extension ProviderCatalogTests {
    @Suite("Rejections")
    struct Rejections {
        @Test("Syntax errors name the line and column", arguments: CatalogFailure.syntax)
        func syntax(_ failure: CatalogFailure) { check(failure) }

        @Test("Shape errors name the provider by position and id", arguments: CatalogFailure.shape)
        func shape(_ failure: CatalogFailure) { check(failure) }

        @Test("Known keys are strict about their types", arguments: CatalogFailure.types)
        func types(_ failure: CatalogFailure) { check(failure) }

        @Test("Endpoints follow Provider.validate() (RFC 6749 §3.1, RFC 9700 §2.6)", arguments: CatalogFailure.endpoints)
        func endpoints(_ failure: CatalogFailure) { check(failure) }

        @Test("Secrets come from exactly one resolvable place (RFC 6749 §2.3.1)", arguments: CatalogFailure.secrets)
        func secrets(_ failure: CatalogFailure) { check(failure) }

        func check(_ failure: CatalogFailure, sourceLocation: SourceLocation = #_sourceLocation) {
            let error = #expect(throws: OAuthError.self, sourceLocation: sourceLocation) {
                try CatalogFixture.load(failure.json, environment: failure.environment)
            }
            guard let error else { return }
            #expect(error.code == .configuration, sourceLocation: sourceLocation)
            #expect(error.recovery == .fixConfiguration, sourceLocation: sourceLocation)
            #expect(error.providerID == failure.providerID, sourceLocation: sourceLocation)
            let message = error.message ?? ""
            for fragment in failure.fragments {
                #expect(message.contains(fragment), "\(message)", sourceLocation: sourceLocation)
            }
        }

        @Test("An invalid id is never echoed")
        func invalidIDNotEchoed() {
            let json = #"[{"id": "evil\u001b[31m id", "tokenURL": "https://auth.example.com/token", "clientID": "app"}]"#
            let error = #expect(throws: OAuthError.self) { try CatalogFixture.load(json) }
            #expect(error?.message?.contains("evil") == false)
            #expect(error?.providerID == nil)
        }
    }
}

// MARK: - Secrets never print

extension ProviderCatalogTests {
    @Suite("Secrets never print")
    struct SecretsNeverPrint {
        static let secret = "S3CR3T-must-not-print"

        /// Catalogs that carry the secret inline and fail somewhere else, or right next to it.
        static let catalogs: [String] = [
            #"[{"id": "demo", "tokenURL": "http://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)", "clientAuthentication": "bogus"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)", "clientSecretEnv": "X"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)"} {"id": "next"}]"#,
            #"[{"id": "demo", "clientSecret": "\#(secret)", "clientSecret": "\#(secret)"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)"}, {"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "b"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)", "clientAuthentication": "none"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)", "redirectURI": "x#y"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecretEnv": "\#(secret)"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(secret)", "scopes": ["\#(secret) x"]}]"#,
            #"[{"id": "demo", "tokenURL": "https://\#(secret)@auth.example.com/token", "clientID": "app"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token?x=\#(secret) y", "clientID": "app"}]"#,
            #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "debug": "\#(secret)"}]"#,
        ]

        @Test("No failure message, description or reflection contains an inline secret", arguments: catalogs)
        func inline(json: String) {
            let error = #expect(throws: OAuthError.self) { try CatalogFixture.load(json) }
            guard let error else { return }
            #expect(error.code == .configuration)
            #expect(!(error.message ?? "").contains(Self.secret))
            #expect(!error.description.contains(Self.secret))
            #expect(!String(reflecting: error).contains(Self.secret))
        }

        @Test("Secrets from the environment and from files stay out of later failures")
        func environmentAndFile() throws {
            try CatalogFixture.withDirectory { directory in
                try CatalogFixture.write(Self.secret + "\n", to: directory.appendingPathComponent("file-secret"))
                let json = #"""
                [{"id": "env", "tokenURL": "https://auth.example.com/token", "clientID": "a", "clientSecretEnv": "ENV_SECRET"},
                 {"id": "file", "tokenURL": "https://auth.example.com/token", "clientID": "b", "clientSecretFile": "file-secret",
                  "clientAuthentication": "none"}]
                """#
                let error = #expect(throws: OAuthError.self) {
                    try CatalogFixture.load(json, environment: ["ENV_SECRET": Self.secret], baseDirectory: directory)
                }
                #expect(error?.message?.contains(#"provider #2 ("file"): clientAuthentication: is none"#) == true)
                #expect(error.map { String(reflecting: $0).contains(Self.secret) } == false)
            }
        }

        @Test("A loaded provider's description redacts its secret")
        func loadedDescription() throws {
            let json = #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecret": "\#(Self.secret)"}]"#
            let provider = try #require(try CatalogFixture.load(json).first)
            #expect(provider.clientSecret?.reveal() == Self.secret)
            #expect(!String(describing: provider).contains(Self.secret))
            #expect(!String(reflecting: provider).contains(Self.secret))
        }
    }
}

// MARK: - Secret sources

extension ProviderCatalogTests {
    @Suite("Secret sources")
    struct SecretSources {
        @Test("clientSecretEnv reads the injected environment")
        func environment() throws {
            let json = #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecretEnv": "DEMO_SECRET"}]"#
            let provider = try #require(try CatalogFixture.load(json, environment: ["DEMO_SECRET": "from-env "]).first)
            #expect(provider.clientSecret?.reveal() == "from-env ")
            #expect(provider.clientAuthentication == .clientSecretBasic)
        }

        @Test("clientSecretFile resolves relative paths against the catalog's directory and trims trailing line breaks")
        func relativeFile() throws {
            try CatalogFixture.withDirectory { directory in
                let secrets = directory.appendingPathComponent("secrets", isDirectory: true)
                try FileManager.default.createDirectory(at: secrets, withIntermediateDirectories: false)
                try CatalogFixture.write("line one\nline two\r\n\n", to: secrets.appendingPathComponent("demo"))
                let catalog = directory.appendingPathComponent("providers.json")
                try CatalogFixture.write(
                    #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecretFile": "secrets/../secrets/demo"}]"#,
                    to: catalog)
                let provider = try #require(try ProviderCatalog.load(contentsOf: catalog, environment: [:]).first)
                #expect(provider.clientSecret?.reveal() == "line one\nline two")
            }
        }

        @Test("clientSecretFile expands ${CREDENTIALS_DIRECTORY} (systemd LoadCredential=)")
        func credentialsDirectory() throws {
            try CatalogFixture.withDirectory { directory in
                try CatalogFixture.write("from-systemd\n", to: directory.appendingPathComponent("github-secret"))
                let json = #"""
                [{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app",
                  "clientSecretFile": "${CREDENTIALS_DIRECTORY}/github-secret"}]
                """#
                let provider = try #require(
                    try CatalogFixture.load(json, environment: ["CREDENTIALS_DIRECTORY": directory.path]).first)
                #expect(provider.clientSecret?.reveal() == "from-systemd")
            }
        }

        @Test("An absolute clientSecretFile needs no base directory")
        func absoluteFile() throws {
            try CatalogFixture.withDirectory { directory in
                let file = directory.appendingPathComponent("secret")
                try CatalogFixture.write("abs", to: file)
                let json = #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecretFile": "\#(file.path)"}]"#
                #expect(try CatalogFixture.load(json).first?.clientSecret?.reveal() == "abs")
            }
        }

        enum FileState: String, CaseIterable, Sendable {
            case missing, directory, empty, onlyLineBreaks, tooLarge, notUTF8
        }

        @Test("A secret file that is missing, a directory, empty, too large or not text is rejected", arguments: FileState.allCases)
        func badFile(_ state: FileState) throws {
            try CatalogFixture.withDirectory { directory in
                let file = directory.appendingPathComponent("secret")
                let reason: String
                switch state {
                case .missing: reason = "does not exist"
                case .directory:
                    try FileManager.default.createDirectory(at: file, withIntermediateDirectories: false)
                    reason = "is a directory"
                case .empty:
                    try CatalogFixture.write("", to: file)
                    reason = "is empty"
                case .onlyLineBreaks:
                    try CatalogFixture.write("\n\r\n", to: file)
                    reason = "is empty"
                case .tooLarge:
                    try Data(repeating: 0x61, count: 64 * 1024 + 1).write(to: file)
                    reason = "is larger than 64 KiB"
                case .notUTF8:
                    try Data([0xFF, 0xFE, 0x00]).write(to: file)
                    reason = "is not UTF-8 text"
                }
                let json = #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecretFile": "secret"}]"#
                let error = #expect(throws: OAuthError.self) {
                    try CatalogFixture.load(json, baseDirectory: directory)
                }
                #expect(error?.code == .configuration)
                #expect(error?.providerID == "demo")
                let message = error?.message ?? ""
                #expect(message.contains(#"provider #1 ("demo"): clientSecretFile: the file it names (6 characters, "#), "\(message)")
                #expect(message.contains(reason), "\(message)")
            }
        }

        @Test("A secret file without read permission is rejected", .enabled(if: getuid() != 0, "root can read any file"))
        func unreadableFile() throws {
            try CatalogFixture.withDirectory { directory in
                let file = directory.appendingPathComponent("secret")
                try CatalogFixture.write("s", to: file)
                try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: file.path)
                let json = #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "clientSecretFile": "secret"}]"#
                let error = #expect(throws: OAuthError.self) { try CatalogFixture.load(json, baseDirectory: directory) }
                #expect(error?.message?.contains("clientSecretFile: the file it names (6 characters, letters, digits and '_') "
                    + "cannot be opened: permission denied") == true)
            }
        }
    }
}

// MARK: - Files

extension ProviderCatalogTests {
    @Suite("Files")
    struct Files {
        @Test("Failures from a file start with the file's path")
        func pathPrefix() throws {
            try CatalogFixture.withDirectory { directory in
                let catalog = directory.appendingPathComponent("providers.json")
                try CatalogFixture.write(#"[{"id": "demo", "tokenURL": "https://auth.example.com/token"}]"#, to: catalog)
                let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: catalog, environment: [:]) }
                #expect(error?.message == #"\#(catalog.path): provider #1 ("demo"): clientID: is required"#)
            }
        }

        @Test("A missing catalog file, a directory, and a non-file URL are rejected")
        func unreadableCatalog() throws {
            try CatalogFixture.withDirectory { directory in
                let missing = directory.appendingPathComponent("nope.json")
                let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: missing, environment: [:]) }
                #expect(error?.code == .configuration)
                #expect(error?.message == "catalog \(missing.path) does not exist")

                let folder = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: directory, environment: [:]) }
                #expect(folder?.message?.contains("is a directory") == true)
            }
            let remote = try #require(URL(string: "https://example.com/providers.json"))
            let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: remote, environment: [:]) }
            #expect(error?.message?.contains("must be a file: URL") == true)
        }
    }
}

// MARK: - The shipped catalog

extension ProviderCatalogTests {
    @Suite("Shipped Resources/providers.json")
    struct ShippedCatalog {
        @Test("Every shipped entry loads and passes validation")
        func loads() throws {
            let providers = try ProviderCatalog.load(
                contentsOf: CatalogFixture.shippedCatalogURL(), environment: CatalogFixture.shippedEnvironment)
            #expect(providers.map(\.id) == ["github", "gitlab", "google", "microsoft", "auth0", "okta", "keycloak", "phone-verify"])
            for provider in providers { try provider.validate() }
        }

        @Test("The real endpoints are the documented ones")
        func endpoints() throws {
            let providers = try ProviderCatalog.load(
                contentsOf: CatalogFixture.shippedCatalogURL(), environment: CatalogFixture.shippedEnvironment)
            let byID = Dictionary(uniqueKeysWithValues: providers.map { ($0.id, $0) })

            let github = try #require(byID["github"])
            #expect(github.deviceAuthorizationURL?.absoluteString == "https://github.com/login/device/code")
            #expect(github.tokenURL?.absoluteString == "https://github.com/login/oauth/access_token")
            #expect(github.authorizationURL?.absoluteString == "https://github.com/login/oauth/authorize")
            #expect(github.scopes == ["read:user"])
            #expect(github.clientAuthentication == .none)
            #expect(github.supportedGrants.contains(.deviceCode))

            let gitlab = try #require(byID["gitlab"])
            #expect(gitlab.deviceAuthorizationURL?.absoluteString == "https://gitlab.com/oauth/authorize_device")
            #expect(gitlab.userinfoURL?.absoluteString == "https://gitlab.com/oauth/userinfo")
            #expect(gitlab.issuer == "https://gitlab.com")

            let google = try #require(byID["google"])
            #expect(google.authorizationURL?.absoluteString == "https://accounts.google.com/o/oauth2/v2/auth")
            #expect(google.tokenURL?.absoluteString == "https://oauth2.googleapis.com/token")
            #expect(google.deviceAuthorizationURL?.absoluteString == "https://oauth2.googleapis.com/device/code")
            #expect(google.revocationURL?.absoluteString == "https://oauth2.googleapis.com/revoke")
            #expect(google.jwksURL?.absoluteString == "https://www.googleapis.com/oauth2/v3/certs")
            #expect(google.issuer == "https://accounts.google.com")
            #expect(google.clientSecret?.reveal() == "test-google")

            let microsoft = try #require(byID["microsoft"])
            #expect(microsoft.deviceAuthorizationURL?.absoluteString == "https://login.microsoftonline.com/common/oauth2/v2.0/devicecode")
            #expect(microsoft.issuer == nil)   // the common tenant's issuer differs per tenant

            let keycloak = try #require(byID["keycloak"])
            #expect(keycloak.deviceAuthorizationURL?.absoluteString
                == "https://keycloak.example.com/realms/example/protocol/openid-connect/auth/device")
            #expect(keycloak.introspectionURL?.absoluteString
                == "https://keycloak.example.com/realms/example/protocol/openid-connect/token/introspect")

            let phone = try #require(byID["phone-verify"])
            #expect(phone.scopes == ["openid", "ip:phone_verify"])
            #expect(phone.authorizationParameters["login_hint"] != nil)
            #expect(phone.isConfidential && phone.redirectURI != nil)
            #expect(phone.supportedGrants.contains(.authorizationCode))
        }

        @Test("Without its environment variables the shipped catalog names the first one missing")
        func needsEnvironment() {
            let error = #expect(throws: OAuthError.self) {
                try ProviderCatalog.load(contentsOf: CatalogFixture.shippedCatalogURL(), environment: [:])
            }
            #expect(error?.providerID == "google")
            // The variable's name is not echoed (it could be a pasted secret); its shape is.
            #expect(error?.message?.contains(#"provider #3 ("google"): clientSecretEnv: the environment variable it names (20 characters, letters, digits and '_') is not set"#) == true)
        }
    }
}

/// `load(contentsOf:only:)`: one provider, without resolving the others' secrets.
@Suite("Loading one provider from a catalog")
struct ProviderCatalogSelectionTests {
    /// Writes `text` as `providers.json` in `directory`.
    private func write(_ text: String, in directory: TemporaryDirectory) throws -> URL {
        let url = directory.url.appendingPathComponent("providers.json")
        try Data(text.utf8).write(to: url)
        return url
    }

    private let twoProviders = """
        [
          { "id": "gh", "clientID": "c1", "tokenURL": "https://github.com/login/oauth/access_token" },
          { "id": "svc", "clientID": "c2", "tokenURL": "https://auth.example.com/token", "clientSecretEnv": "SVC_SECRET" },
        ]
        """

    @Test("another entry's unset secret variable does not stop the selected one")
    func otherSecretUnresolved() throws {
        let directory = try TemporaryDirectory("catalog-only")
        defer { directory.remove() }
        let url = try write(twoProviders, in: directory)
        let provider = try #require(try ProviderCatalog.load(contentsOf: url, only: "gh", environment: [:]))
        #expect(provider.id == "gh")
        #expect(provider.clientID == "c1")
        // The strict loader still refuses the whole catalog.
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: url, environment: [:]) }
        #expect(error?.message?.contains(#"("svc"): clientSecretEnv: the environment variable it names (10 characters"#) == true)
    }

    @Test("the selected entry is resolved and validated in full")
    func selectedValidated() throws {
        let directory = try TemporaryDirectory("catalog-only")
        defer { directory.remove() }
        let url = try write(twoProviders, in: directory)
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: url, only: "svc", environment: [:]) }
        #expect(error?.code == .configuration)
        #expect(error?.message?.contains(#"("svc"): clientSecretEnv: the environment variable it names (10 characters"#) == true)
        let provider = try #require(try ProviderCatalog.load(contentsOf: url, only: "svc", environment: ["SVC_SECRET": "s3cret"]))
        #expect(provider.clientSecret?.reveal() == "s3cret")
        #expect(provider.clientAuthentication == .clientSecretBasic)
    }

    @Test("an id not in the catalog gives nil; ids are matched exactly")
    func unknownID() throws {
        let directory = try TemporaryDirectory("catalog-only")
        defer { directory.remove() }
        let url = try write(twoProviders, in: directory)
        #expect(try ProviderCatalog.load(contentsOf: url, only: "gitlab", environment: [:]) == nil)
        #expect(try ProviderCatalog.load(contentsOf: url, only: "GH", environment: [:]) == nil)
    }

    @Test("the whole file must still parse, and ids must still be unique", arguments: [
        #"[{ "id": "gh", "clientID": "c", "tokenURL": "https://a.example/t" }, { "id": "GH", "clientID": "d", "tokenURL": "https://b.example/t" }]"#,
        #"[{ "id": "gh", "clientID": "c", "tokenURL": "https://a.example/t" }, { "clientID": "d" }]"#,
        #"[{ "id": "gh", "clientID": "c", "tokenURL": "https://a.example/t" } { "id": "x" }]"#,
    ])
    func fileStillChecked(text: String) throws {
        let directory = try TemporaryDirectory("catalog-only")
        defer { directory.remove() }
        let url = try write(text, in: directory)
        let error = #expect(throws: OAuthError.self) { try ProviderCatalog.load(contentsOf: url, only: "gh", environment: [:]) }
        #expect(error?.code == .configuration)
    }
}
