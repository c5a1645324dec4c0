import Foundation
@testable import OAuthFlow
import Testing

/// `Provider ==` is derived from `Provider.Settings`' declaration (Providers/Provider.swift): these
/// tests change one setting at a time, for every stored field of `Settings` (found by `Mirror`)
/// and for every row of ``ProviderCatalog/settings``, and expect the two providers to differ.
/// A field or a catalog key the equality missed fails here, and so does a field or a row without
/// a case below.
@Suite("Provider equality follows the one declaration of its settings")
struct ProviderEqualityTests {
    /// The objects a provider holds by reference: two of each kind, loaded from the same files, so
    /// that only their identity differs.
    struct Objects {
        let files: KeyFiles
        let key: ClientKey, otherKey: ClientKey
        let certificate: ClientCertificate, otherCertificate: ClientCertificate
        let account: ServiceAccountKey, otherAccount: ServiceAccountKey
        let external: ExternalAccountFile, otherExternal: ExternalAccountFile

        init() throws {
            files = try KeyFiles()
            let keyPath = try files.key(.p256SEC1)
            let certificatePath = try files.certificate(for: keyPath)
            let accountPath = try ServiceAccountKeyTests.accountFile(files)
            key = try ClientKey(contentsOfFile: keyPath)
            otherKey = try ClientKey(contentsOfFile: keyPath)
            certificate = try ClientCertificate(contentsOfFile: certificatePath)
            otherCertificate = try ClientCertificate(contentsOfFile: certificatePath)
            account = try ServiceAccountKey(contentsOfFile: accountPath)
            otherAccount = try ServiceAccountKey(contentsOfFile: accountPath)
            let externalPath = try files.write("wif.json", Self.externalAccountJSON)
            external = try ExternalAccountFile(contentsOfFile: externalPath, environment: [:])
            otherExternal = try ExternalAccountFile(contentsOfFile: externalPath, environment: [:])
        }

        /// A Google `external_account` file with a file source.
        static let externalAccountJSON = """
            {"type": "external_account", "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k8s",
             "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": "https://sts.test/v1/token",
             "credential_source": {"file": "/var/run/token"}}
            """

        /// A provider with every setting given a value, so that each can be changed to another.
        var provider: Provider {
            var provider = Provider(
                id: "demo", authorizationURL: URL(string: "https://as.test/authorize"), tokenURL: URL(string: "https://as.test/token"),
                deviceAuthorizationURL: URL(string: "https://as.test/device"), revocationURL: URL(string: "https://as.test/revoke"),
                introspectionURL: URL(string: "https://as.test/introspect"), userinfoURL: URL(string: "https://as.test/userinfo"),
                issuer: "https://as.test", jwksURL: URL(string: "https://as.test/jwks"), endSessionURL: URL(string: "https://as.test/logout"),
                idTokenSigningAlgorithms: ["RS256"], clientID: "app", clientSecret: Secret("s3cret"), clientAuthentication: .clientSecretBasic,
                redirectURI: URL(string: "http://127.0.0.1:8765/callback"), scopes: ["read"], authorizationParameters: ["prompt": "login"],
                userAgent: "demo/1", debug: false, clientKey: key, clientKeyID: "k1", clientCertificate: certificate,
                clientAssertionAlgorithm: .es256, clientAssertionAudience: .endpoint, caFile: "/etc/ca.pem", serviceAccount: account,
                serviceAccountSubject: "alice@demo.example")
            provider.dpop = .enabled
            provider.dpopAlgorithm = .es256
            provider.dpopKey = key
            provider.pushedAuthorization = false
            provider.pushedAuthorizationURL = URL(string: "https://as.test/par")
            provider.requestObject = false
            provider.grant = .jwtBearer
            provider.resources = [URL(string: "https://api.test")!]
            provider.tokenExchange = Provider.TokenExchange(audience: ["billing"])
            provider.subjectTokenSource = .file("/var/run/token")
            provider.externalAccount = external
            provider.clientAssertionFile = "/var/run/assertion"
            provider.dynamicRegistration = Provider.DynamicRegistration(initialAccessToken: Secret("initial-1"))
            return provider
        }

        /// One change per stored field of `Settings`, by the field's name in `Mirror` (a wrapped
        /// field is `_name`; the fields of `grantSettings` are `grantSettings.name`).
        var changes: [String: (inout Provider) -> Void] {
            [
                "id": { $0.id = "other" },
                "authorizationURL": { $0.authorizationURL = URL(string: "https://as.test/other") },
                "tokenURL": { $0.tokenURL = URL(string: "https://as.test/other") },
                "deviceAuthorizationURL": { $0.deviceAuthorizationURL = URL(string: "https://as.test/other") },
                "revocationURL": { $0.revocationURL = URL(string: "https://as.test/other") },
                "introspectionURL": { $0.introspectionURL = URL(string: "https://as.test/other") },
                "userinfoURL": { $0.userinfoURL = URL(string: "https://as.test/other") },
                "issuer": { $0.issuer = "https://other.test" },
                "jwksURL": { $0.jwksURL = URL(string: "https://as.test/other") },
                "endSessionURL": { $0.endSessionURL = URL(string: "https://as.test/other") },
                "idTokenSigningAlgorithms": { $0.idTokenSigningAlgorithms = ["ES256"] },
                "clientID": { $0.clientID = "other" },
                "_clientSecret": { $0.clientSecret = Secret("s3cre7") },   // same length, last byte differs
                "clientAuthentication": { $0.clientAuthentication = .clientSecretPost },
                "redirectURI": { $0.redirectURI = URL(string: "http://127.0.0.1:8765/other") },
                "scopes": { $0.scopes = ["write"] },
                "authorizationParameters": { $0.authorizationParameters = ["prompt": "consent"] },
                "userAgent": { $0.userAgent = "demo/2" },
                "debug": { $0.debug = true },
                "_clientKey": { [otherKey] in $0.clientKey = otherKey },
                "clientKeyID": { $0.clientKeyID = "k2" },
                "_clientCertificate": { [otherCertificate] in $0.clientCertificate = otherCertificate },
                "clientAssertionAlgorithm": { $0.clientAssertionAlgorithm = .es384 },
                "clientAssertionAudience": { $0.clientAssertionAudience = .issuer },
                "caFile": { $0.caFile = "/etc/other.pem" },
                "_serviceAccount": { [otherAccount] in $0.serviceAccount = otherAccount },
                "serviceAccountSubject": { $0.serviceAccountSubject = "bob@demo.example" },
                "dpop": { $0.dpop = .required },
                "dpopAlgorithm": { $0.dpopAlgorithm = .es384 },
                "_dpopKey": { [otherKey] in $0.dpopKey = otherKey },
                "pushedAuthorization": { $0.pushedAuthorization = true },
                "pushedAuthorizationURL": { $0.pushedAuthorizationURL = URL(string: "https://as.test/other") },
                "requestObject": { $0.requestObject = true },
                "backchannelAuthenticationURL": { $0.backchannelAuthenticationURL = URL(string: "https://as.test/bc") },
                "cibaDeliveryMode": { $0.cibaDeliveryMode = .ping },
                "cibaLoginHint": { $0.cibaLoginHint = #"{"username":"alice"}"# },
                "grantSettings.grant": { $0.grant = .tokenExchange },
                "grantSettings.resources": { $0.resources = [URL(string: "https://other.test")!] },
                "grantSettings.tokenExchange": { $0.tokenExchange = Provider.TokenExchange(audience: ["other"]) },
                "grantSettings.subjectTokenSource": { $0.subjectTokenSource = .file("/var/run/other") },
                "grantSettings.externalAccount": { [otherExternal] in $0.externalAccount = otherExternal },
                "clientAssertionFile": { $0.clientAssertionFile = "/var/run/other" },
                "dynamicRegistration": { $0.dynamicRegistration = Provider.DynamicRegistration(initialAccessToken: Secret("initial-2")) },
            ]
        }
    }

    /// The names of `Settings`' stored fields, as `Mirror` shows them; `grantSettings`' own fields
    /// are listed in its place.
    static func storedFields(_ provider: Provider) -> [String] {
        Mirror(reflecting: provider[dynamicMember: \Provider.Settings.self]).children.flatMap { child -> [String] in
            let label = child.label ?? "?"
            guard label == "grantSettings" else { return [label] }
            return Mirror(reflecting: child.value).children.map { "grantSettings.\($0.label ?? "?")" }
        }
    }

    @Test("every stored field of Provider.Settings (by Mirror): changed alone, the providers differ; written back, they are equal")
    func everyStoredField() throws {
        let objects = try Objects()
        defer { objects.files.remove() }
        let base = objects.provider
        let fields = Self.storedFields(base)
        let changes = objects.changes
        #expect(fields.count > 30, "Mirror found \(fields)")
        for field in fields where changes[field] == nil {
            Issue.record("Provider.Settings has a field \(field) this test does not change: add it to Objects.changes")
        }
        for field in changes.keys where !fields.contains(field) {
            Issue.record("Objects.changes names \(field), which Provider.Settings does not have")
        }
        for field in fields {
            guard let change = changes[field] else { continue }
            var changed = base
            change(&changed)
            #expect(changed != base, "\(field): the providers differ only there, and compare equal")
            #expect(base != changed, "\(field): not symmetric")
        }
        // Written, so held in a box of its own, yet with the same values (the secret a new String):
        // equal by comparing every field, not by sharing storage.
        var rewritten = base
        rewritten.clientSecret = Secret(["s3", "cret"].joined())
        rewritten.clientKey = objects.key
        #expect(rewritten == base)
        #expect(rewritten.hashValue == base.hashValue)
    }

    @Test("the secret is compared by value in constant time, keys by identity; nil equals only nil")
    func wrappers() throws {
        typealias Secrets = Provider.ComparedInConstantTime
        #expect(Secrets(wrappedValue: Secret("a")) == Secrets(wrappedValue: Secret("a")))
        #expect(Secrets(wrappedValue: Secret("a")) != Secrets(wrappedValue: Secret("b")))
        #expect(Secrets(wrappedValue: Secret("a")) != Secrets(wrappedValue: Secret("ab")))
        #expect(Secrets(wrappedValue: nil) == Secrets(wrappedValue: nil))
        #expect(Secrets(wrappedValue: nil) != Secrets(wrappedValue: Secret("")))

        let objects = try Objects()
        defer { objects.files.remove() }
        typealias Keys = Provider.ComparedByIdentity<any ClientAssertionSigner>
        #expect(Keys(wrappedValue: objects.key) == Keys(wrappedValue: objects.key))
        #expect(Keys(wrappedValue: objects.key) != Keys(wrappedValue: objects.otherKey), "the same file loaded twice is two keys")
        #expect(Keys(wrappedValue: nil) == Keys(wrappedValue: nil))
        #expect(Keys(wrappedValue: nil) != Keys(wrappedValue: objects.key))
    }

    // MARK: Every catalog key

    /// What a catalog key is set to, and what the entry needs beside it to load (`context`, which
    /// both entries compared have). A key that cannot be left out of a loadable entry is compared
    /// with itself set to `baseValue`; `without` names the usual members it refuses beside it
    /// (`registration` `dynamic` refuses a `clientID`, which `manual` needs).
    struct Sample {
        var value: String
        var context: String = ""
        var baseValue: String? = nil
        var without: [String] = []
        /// What the entry with `baseValue` leaves out, when not `without`.
        var baseWithout: [String]? = nil
    }

    /// One value per key of ``ProviderCatalog/settings`` (files are in the test's directory).
    static let samples: [String: Sample] = [
        "id": Sample(value: #""other""#),
        "authorizationURL": Sample(value: #""https://auth.example.com/authorize""#),
        "tokenURL": Sample(value: #""https://auth.example.com/other-token""#),
        "deviceAuthorizationURL": Sample(value: #""https://auth.example.com/device""#),
        "revocationURL": Sample(value: #""https://auth.example.com/revoke""#),
        "introspectionURL": Sample(value: #""https://auth.example.com/introspect""#),
        "userinfoURL": Sample(value: #""https://auth.example.com/userinfo""#),
        "issuer": Sample(value: #""https://auth.example.com""#),
        "jwksURL": Sample(value: #""https://auth.example.com/jwks""#),
        "endSessionURL": Sample(value: #""https://auth.example.com/logout""#),
        "idTokenSigningAlgorithms": Sample(value: #"["ES256"]"#),
        "clientID": Sample(value: #""other""#),
        "clientSecret": Sample(value: #""s3cret""#),
        "clientSecretEnv": Sample(value: #""DEMO_SECRET""#),
        "clientSecretFile": Sample(value: #""secret.txt""#),
        "clientAuthentication": Sample(value: #""client_secret_post""#, context: #""clientSecret": "s3cret""#),
        "clientKeyFile": Sample(value: #""key.pem""#),
        "clientKeyID": Sample(value: #""k1""#, context: #""clientKeyFile": "key.pem""#),
        "clientCertificateFile": Sample(value: #""cert.pem""#, context: #""clientKeyFile": "key.pem""#),
        "clientAssertionAlgorithm": Sample(value: #""ES256""#, context: #""clientKeyFile": "key.pem""#),
        "clientAssertionAudience": Sample(value: #""issuer""#, context: #""clientKeyFile": "key.pem", "issuer": "https://auth.example.com""#),
        "caFile": Sample(value: #""cert.pem""#),
        "serviceAccountFile": Sample(value: #""sa.json""#),
        "subject": Sample(value: #""alice@demo.example""#, context: #""serviceAccountFile": "sa.json""#),
        "dpop": Sample(value: "true"),
        "dpopAlgorithm": Sample(value: #""ES384""#, context: #""dpop": true"#),
        "pushedAuthorization": Sample(value: "true", context: #""authorizationURL": "https://auth.example.com/authorize""#),
        "pushedAuthorizationURL": Sample(value: #""https://auth.example.com/par""#),
        "requestObject": Sample(value: "true", context: #""clientKeyFile": "key.pem", "issuer": "https://auth.example.com", "authorizationURL": "https://auth.example.com/authorize""#),
        "grant": Sample(value: #""client-credentials""#, context: #""clientSecret": "s3cret""#),
        "subjectTokenFile": Sample(value: #""subject-token""#),
        "subjectTokenSource": Sample(value: #"{"file": "subject-token"}"#),
        "externalAccountFile": Sample(value: #""wif-other.json""#, baseValue: #""wif.json""#, without: ["tokenURL", "clientID"]),
        "clientAssertionFile": Sample(value: #""assertion.jwt""#),
        "registration": Sample(value: #""dynamic""#, context: #""issuer": "https://auth.example.com""#, baseValue: #""manual""#,
                               without: ["clientID"], baseWithout: []),
        "initialAccessTokenFile": Sample(value: #""initial-token""#, context: #""issuer": "https://auth.example.com", "registration": "dynamic""#,
                                         without: ["clientID"]),
        "subjectTokenType": Sample(value: #""urn:ietf:params:oauth:token-type:access_token""#, context: #""subjectTokenFile": "subject-token""#),
        "audience": Sample(value: #""billing""#, context: #""subjectTokenFile": "subject-token""#),
        "requestedTokenType": Sample(value: #""urn:ietf:params:oauth:token-type:access_token""#, context: #""subjectTokenFile": "subject-token""#),
        "resource": Sample(value: #""https://api.example.com""#),
        "redirectURI": Sample(value: #""http://127.0.0.1:8765/callback""#),
        "scopes": Sample(value: #"["read"]"#),
        "authorizationParameters": Sample(value: #"{"prompt": "login"}"#),
        "userAgent": Sample(value: #""demo/1.0""#),
        "debug": Sample(value: "true"),
        "backchannelAuthenticationURL": Sample(value: #""https://auth.example.com/bc-authorize""#),
        "cibaDeliveryMode": Sample(value: #""ping""#),
        "cibaLoginHint": Sample(value: #""alice@example.com""#),
        "gitUsername": Sample(value: #""git""#),
        "registries": Sample(value: #"["registry.example.com"]"#),
        "registryUsername": Sample(value: #""oauth2accesstoken-x""#),
        "agentAllow": Sample(value: #"["uid:root"]"#),
        "encodeHttpBody": Sample(value: "true"),
        "icon": Sample(value: #""icon.png""#),
        "authorizationPattern": Sample(value: #""pattern""#),
    ]

    /// Loads one strict entry: `id`, `tokenURL` and `clientID`, then `members` (which may replace them).
    static func load(_ members: String, without: [String] = [], files: KeyFiles) throws -> Provider {
        var fields: [(String, String)] = [("id", #""demo""#), ("tokenURL", #""https://auth.example.com/token""#), ("clientID", #""app""#)]
        fields.removeAll { without.contains($0.0) }
        let extra = "{" + members + "}"
        let given = try #require(try JSONSerialization.jsonObject(with: Data(extra.utf8)) as? [String: Any])
        fields.removeAll { given[$0.0] != nil }
        let text = "[{" + (fields.map { "\"\($0.0)\": \($0.1)" } + (members.isEmpty ? [] : [members])).joined(separator: ", ") + "}]"
        return try ProviderCatalog.load(data: Data(text.utf8), baseDirectory: files.directory, environment: ["DEMO_SECRET": "s3cret"],
                                        strict: true)[0]
    }

    /// `provider` holding `reference`'s key, certificate, service account and external account where both hold one:
    /// two loads of one file are two objects, which compare unequal by identity, and the context
    /// loads them in both entries.
    static func sharingObjects(_ provider: Provider, with reference: Provider) -> Provider {
        var provider = provider
        if provider.clientKey != nil, reference.clientKey != nil { provider.clientKey = reference.clientKey }
        if provider.clientCertificate != nil, reference.clientCertificate != nil { provider.clientCertificate = reference.clientCertificate }
        if provider.serviceAccount != nil, reference.serviceAccount != nil { provider.serviceAccount = reference.serviceAccount }
        if provider.externalAccount != nil, reference.externalAccount != nil { provider.externalAccount = reference.externalAccount }
        return provider
    }

    @Test("every key of the catalog's settings table: two entries that differ only there load as unequal providers (keys the library does not read: equal)")
    func everyCatalogKey() throws {
        let files = try KeyFiles()
        defer { files.remove() }
        try files.certificate(for: try files.key(.p256SEC1))
        _ = try ServiceAccountKeyTests.accountFile(files)
        _ = try files.write("secret.txt", "s3cret\n")
        _ = try files.write("subject-token", "subject-token-value")
        _ = try files.write("assertion.jwt", "a.b.c")
        _ = try files.write("initial-token", "initial-access-token")
        _ = try files.write("wif.json", Objects.externalAccountJSON)
        _ = try files.write("wif-other.json", Objects.externalAccountJSON.replacingOccurrences(of: "providers/k8s", with: "providers/ci"))
        var tried = 0
        for setting in ProviderCatalog.settings {
            guard let sample = Self.samples[setting.key] else {
                Issue.record("\(setting.key) is a row of ProviderCatalog.settings without a sample here: add one to ProviderEqualityTests.samples")
                continue
            }
            func joined(_ value: String?) -> String {
                guard let value else { return sample.context }
                let member = "\"\(setting.key)\": \(value)"
                return sample.context.isEmpty ? member : sample.context + ", " + member
            }
            let baseWithout = sample.baseWithout ?? sample.without
            let base = try Self.load(joined(sample.baseValue), without: baseWithout, files: files)
            #expect(Self.sharingObjects(try Self.load(joined(sample.baseValue), without: baseWithout, files: files), with: base) == base,
                    "\(setting.key): the context alone, loaded twice, should compare equal")
            let changed = Self.sharingObjects(try Self.load(joined(sample.value), without: sample.without, files: files), with: base)
            if setting.reader == .library {
                #expect(changed != base, "\(setting.key) = \(sample.value) loads a provider equal to one without it")
            } else {
                #expect(changed == base, "\(setting.key) is read by \(setting.reader.rawValue), not by the library, yet changes the provider")
            }
            tried += 1
        }
        #expect(tried == ProviderCatalog.settings.count)
        for key in Self.samples.keys where !ProviderCatalog.settings.contains(where: { $0.key == key }) {
            Issue.record("samples names \(key), which is not a key of ProviderCatalog.settings")
        }
    }
}
