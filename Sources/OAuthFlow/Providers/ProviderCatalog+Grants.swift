#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The catalog keys of the grants that need no person and of resource indicators:
// `grant`, `resource`, `subjectTokenFile`, `subjectTokenType`, `audience`, `requestedTokenType`.
// The subject token file is only named here, not read: it is read on every exchange, because
// the tokens in it rotate.

extension ProviderCatalog.Entry {
    /// `grant`, as a grant type; nil when absent.
    /// - Throws: ``OAuthError`` `.configuration` for a value that names no grant that needs no person.
    func catalogGrant() throws(OAuthError) -> GrantType? {
        guard let name = try string("grant") else { return nil }
        guard let grant = GrantType(catalogName: name), grant.needsNoPerson else {
            throw fail("grant", "must be \"client-credentials\", \"jwt-bearer\" or \"token-exchange\" (a grant that needs no person)")
        }
        return grant
    }

    /// `subjectTokenFile` with `subjectTokenType`, `audience` and `requestedTokenType`, which need
    /// it; the file without `grant` implies `token-exchange`. Read after `grant`.
    func readTokenExchange(into provider: inout Provider) throws(OAuthError) {
        guard let file = try string("subjectTokenFile") else {
            if let stray = ["subjectTokenType", "audience", "requestedTokenType"].first(where: { value($0) != nil }) {
                throw fail(stray, "is a token-exchange setting and needs subjectTokenFile")
            }
            if provider.grant == .tokenExchange {
                throw fail("grant", "token-exchange needs subjectTokenFile (the file holding the subject token, read on every exchange)")
            }
            return
        }
        let path = try credentialPath("subjectTokenFile", file)
        var exchange = Provider.TokenExchange(subjectTokenFile: path)
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
        if provider.grant == nil { provider.grant = .tokenExchange }
        provider.tokenExchange = exchange
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
