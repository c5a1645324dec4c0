#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The catalog keys of the grants that need no person and of resource indicators: `grant`,
// `resource`, and where the subject token comes from with the exchange's settings
// (`subjectTokenSource`, `subjectTokenFile`, `externalAccountFile`, `subjectTokenType`,
// `audience`, `requestedTokenType`). A subject token source is only described here, never read:
// it is asked on every exchange, because the tokens it gives rotate. An `external_account` file
// is read and checked now (``ExternalAccountFile``), as a service-account file is.

extension ProviderCatalog.Entry {
    /// `grant`, as a grant type; nil when absent.
    /// - Throws: ``OAuthError`` `.configuration` for a value that names no grant that needs no person.
    func catalogGrant() throws(OAuthError) -> GrantType? {
        guard let name = try string("grant") else { return nil }
        guard let grant = GrantType(catalogName: name), !grant.needsPerson else {
            throw fail("grant", "must be \"client-credentials\", \"jwt-bearer\" or \"token-exchange\" (a grant that needs no person)")
        }
        return grant
    }

    /// The keys of the exchange that only a source makes sense with.
    static let exchangeKeys = ["subjectTokenType", "audience", "requestedTokenType"]

    /// `externalAccountFile`, or `subjectTokenSource` / `subjectTokenFile` with `subjectTokenType`,
    /// `audience` and `requestedTokenType`. A source without `grant` implies `token-exchange`;
    /// with `grant` `jwt-bearer` its token is the grant's assertion. Read after `grant`.
    func readTokenExchange(into provider: inout Provider) throws(OAuthError) {
        if let account = try externalAccount() {
            let fromFile = ["subjectTokenSource", "subjectTokenFile", "tokenURL", "accessTokenURL", "issuer", "clientID", "clientSecret",
                            "clientSecretEnv", "clientSecretFile", "clientAuthentication"] + Self.exchangeKeys
            if let clash = fromFile.first(where: { value($0) != nil }) {
                throw fail(clash, "comes from the external_account file (externalAccountFile); remove it here")
            }
            if let grant = provider.grant, grant != .tokenExchange {
                throw fail("grant", "is \(grant.catalogName), and an external_account file is exchanged with token-exchange")
            }
            provider.apply(account)
            return
        }
        guard let source = try subjectTokenSource() else {
            if let stray = Self.exchangeKeys.first(where: { value($0) != nil }) {
                throw fail(stray, "is a token-exchange setting and needs subjectTokenSource (or subjectTokenFile)")
            }
            if provider.grant == .tokenExchange {
                throw fail("grant", "token-exchange needs subjectTokenSource or subjectTokenFile (where the subject token comes from, "
                    + "asked again on every exchange)")
            }
            return
        }
        provider.subjectTokenSource = source
        if let grant = provider.grant, grant != .tokenExchange {
            if let stray = Self.exchangeKeys.first(where: { value($0) != nil }) {
                throw fail(stray, "is a token-exchange setting, and grant is \(grant.catalogName)")
            }
            return
        }
        var exchange = Provider.TokenExchange()
        if let type = try string("subjectTokenType") {
            guard TokenType.isValid(type) else { throw fail("subjectTokenType", "must be an absolute URI such as \(TokenType.jwt) (RFC 8693 §3)") }
            exchange.subjectTokenType = type
        }
        if let type = try string("requestedTokenType") {
            guard TokenType.isValid(type) else {
                throw fail("requestedTokenType", "must be an absolute URI such as \(TokenType.accessToken) (RFC 8693 §3)")
            }
            exchange.requestedTokenType = type
        }
        exchange.audience = try stringList("audience") ?? []
        provider.grant = .tokenExchange
        provider.tokenExchange = exchange
    }

    /// `externalAccountFile`: a Google `external_account` file, read and checked (``ExternalAccountFile``).
    func externalAccount() throws(OAuthError) -> ExternalAccountFile? {
        try credentialFile("externalAccountFile", label: "external_account file") { path throws(OAuthError) in
            try ExternalAccountFile(contentsOfFile: path, environment: context.environment)
        }
    }

    /// `subjectTokenSource` (an object or a preset's name) or `subjectTokenFile` (a path); not both.
    func subjectTokenSource() throws(OAuthError) -> SubjectTokenSource? {
        let key = "subjectTokenSource"
        if let path = try string("subjectTokenFile") {
            guard value(key) == nil else { throw fail("subjectTokenFile", "and subjectTokenSource name two sources; keep one") }
            return .file(try credentialPath("subjectTokenFile", path))
        }
        guard let written = value(key) else { return nil }
        if case .string(let name) = written { return try preset(name, options: [:]) }
        guard case .object(let members) = written else { throw fail(key, "must be an object or a preset's name, found \(written.kind)") }
        let kinds = ["file", "url", "command", "preset"].filter { members[$0] != nil }
        guard kinds.count == 1, let kind = kinds.first else {
            throw fail(key, "must have exactly one of \"file\", \"url\", \"command\" and \"preset\"")
        }
        let allowed: [String: Set<String>] = [
            "file": ["file", "jsonField"], "url": ["url", "headers", "jsonField"], "command": ["command", "timeoutSeconds"],
            "preset": ["preset", "path", "audience", "variable"],
        ]
        if let unknown = members.keys.sorted().first(where: { !(allowed[kind] ?? []).contains($0) }) {
            throw fail(key, "\"\(DisplayText.escape(String(unknown.prefix(64))))\" is not a member of a \(kind) source (\(allowed[kind]!.sorted().joined(separator: ", ")))")
        }
        func text(_ member: String) throws(OAuthError) -> String? {
            guard let value = members[member], value != .null else { return nil }
            guard case .string(let text) = value, !text.isEmpty else { throw fail("\(key).\(member)", "must be a non-empty string") }
            return text
        }
        switch kind {
        case "file":
            return .file(try credentialPath("\(key).file", try text("file") ?? ""), jsonField: try text("jsonField"))
        case "url":
            var headers: [String: String] = [:]
            if let value = members["headers"], value != .null {
                guard case .object(let fields) = value else { throw fail("\(key).headers", "must be an object of strings") }
                for (name, field) in fields {
                    guard case .string(let text) = field else { throw fail("\(key).headers.\(DisplayText.escape(name))", "must be a string") }
                    headers[name] = text
                }
            }
            return .url(try text("url") ?? "", headers: headers, jsonField: try text("jsonField"), environment: context.environment)
        case "command":
            guard case .array(let items)? = members["command"], !items.isEmpty else {
                throw fail("\(key).command", "must be a non-empty array of strings: the program, then its arguments (no shell)")
            }
            var arguments: [String] = []
            for item in items {
                guard case .string(let argument) = item else { throw fail("\(key).command", "must be an array of strings") }
                arguments.append(argument)
            }
            var timeout = SubjectTokenSource.defaultCommandTimeout
            if let value = members["timeoutSeconds"], value != .null {
                let limit = Int(SubjectTokenSource.maximumCommandTimeout.components.seconds)
                guard case .number(let number) = value, let seconds = JSONValue.wholeNumber(number), (1...limit).contains(seconds) else {
                    throw fail("\(key).timeoutSeconds", "must be a whole number of seconds from 1 to \(limit)")
                }
                timeout = .seconds(seconds)
            }
            return .command(arguments, timeout: timeout)
        default:
            var options: [String: String] = [:]
            for member in ["path", "audience", "variable"] { options[member] = try text(member) }
            return try preset(try text("preset") ?? "", options: options)
        }
    }

    /// The preset `name` with its `options` (`path`, `audience`, `variable`).
    private func preset(_ name: String, options: [String: String]) throws(OAuthError) -> SubjectTokenSource {
        let key = "subjectTokenSource"
        let takes: [String: String] = ["kubernetes": "path", "github-actions": "audience", "gitlab-ci": "variable"]
        guard let option = takes[name] else {
            throw fail(key, "\"\(DisplayText.escape(String(name.prefix(64))))\" is not a preset; the presets are "
                + "\"kubernetes\", \"github-actions\" and \"gitlab-ci\"")
        }
        if let other = options.keys.sorted().first(where: { $0 != option }) {
            throw fail("\(key).\(other)", "is not an option of the \(name) preset (it takes \(option))")
        }
        switch name {
        case "kubernetes":
            guard let path = options["path"] else { return .kubernetes() }
            return .kubernetes(path: try credentialPath("\(key).path", path))
        case "github-actions":
            return .githubActions(audience: options["audience"], environment: context.environment)
        default:
            return .gitlabCI(variable: options["variable"] ?? "CI_JOB_JWT_V2", environment: context.environment)
        }
    }

    /// `resource`: one absolute URI without a fragment, or an array of them (RFC 8707 §2).
    func resources() throws(OAuthError) -> [URL] {
        guard let texts = try stringList("resource") else { return [] }
        var resources: [URL] = []
        for (index, text) in texts.enumerated() {
            let key = texts.count == 1 ? "resource" : "resource[\(index)]"
            guard let url = URL(string: text, encodingInvalidCharacters: false) else { throw fail(key, "is not a valid URI") }
            if let problem = Provider.resourceProblem(url) { throw fail(key, problem) }
            resources.append(url)
        }
        return resources
    }

    /// One non-empty string of visible ASCII, or a non-empty array of them.
    func stringList(_ key: String) throws(OAuthError) -> [String]? {
        guard let value = value(key) else { return nil }
        let items: [String]
        switch value {
        case .string(let text):
            items = [text]
        case .array(let members):
            var collected: [String] = []
            for (index, member) in members.enumerated() {
                guard case .string(let text) = member else { throw fail("\(key)[\(index)]", "must be a string, found \(member.kind)") }
                collected.append(text)
            }
            guard !collected.isEmpty else { throw fail(key, "must not be an empty array") }
            items = collected
        default:
            throw fail(key, "must be a string or an array of strings, found \(value.kind)")
        }
        for (index, item) in items.enumerated() where !TokenType.isPrintable(item) {
            throw fail(items.count == 1 ? key : "\(key)[\(index)]", "must be a non-empty string of visible ASCII")
        }
        return items
    }
}
