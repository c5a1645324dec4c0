#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// A token `authflow` hands to another program rather than printing it for a script: `exec`'s
/// environment, the answer of `docker-credential`. It is got exactly as `authflow token` gets it:
/// from a running agent, else fresh from the store before the concurrency runtime starts
/// (``Authflow/quickTokens(_:invocation:output:environment:services:)``), else by the full path, which
/// refreshes or fetches it again (``Context/helperTokens(_:)``).
struct HelperToken: Sendable {
    /// The access token (visible ASCII only: checked by every path that makes one).
    var token: Secret
    /// Its `token_type`.
    var tokenType: String
    /// When it expires, if known.
    var expiresAt: Date?
    /// The granted scopes.
    var scopes: [String] = []

    init(token: Secret, tokenType: String, expiresAt: Date?, scopes: [String] = []) {
        self.token = token
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scopes = scopes
    }

    init(_ set: TokenSet) {
        self.init(token: set.accessToken, tokenType: set.tokenType, expiresAt: set.expiresAt, scopes: set.scopes)
    }

    /// The token when it is a bearer token, which a program can use alone; `use` says where it
    /// was going (`exec puts no such token in an environment`).
    /// - Throws: ``CLIError/data(_:)`` (exit 65) for a DPoP-bound token (RFC 9449 §7.1: it is
    ///   useless without its key and a proof made for each request) or any other type.
    func bearer(of provider: String, refusing use: String) throws(CLIError) -> Secret {
        switch tokenType.lowercased() {
        case "bearer":
            return token
        case "dpop":
            throw .data("the token of \(provider) is DPoP-bound (RFC 9449): it is useless without its key and a proof made for each "
                + "request, so \(use); use authflow token \(provider) --dpop-proof METHOD URL for each request instead")
        default:
            throw .data("the token of \(provider) has token_type \(String(tokenType.prefix(32))), not Bearer, so \(use)")
        }
    }
}

/// A refusal before the runtime: the status and the line to print after `authflow: error:`.
struct HelperRefusal: Error {
    var status: ExitCode
    var message: String
}

extension Authflow {
    /// The tokens of `ids` before the concurrency runtime starts, as `authflow token` gets them
    /// there: from a running agent (``agentToken(_:invocation:environment:)``), else fresh from a
    /// plaintext file store (``freshSetFromStore(_:invocation:output:environment:services:)``).
    /// Blocks for at most 30 s on the agent's socket per id.
    /// - Returns: every id's token; the agent's refusal of one; or nil, with nothing printed, when
    ///   some token needs the full path (no agent answered, and it is not fresh in the store).
    static func quickTokens(
        _ ids: [String], invocation: Invocation, output: Output, environment: [String: String], services: Services
    ) -> Result<[String: HelperToken], HelperRefusal>? {
        var tokens: [String: HelperToken] = [:]
        for id in ids where tokens[id] == nil {
            switch agentToken(id, invocation: invocation, environment: environment) {
            case .token(let token)?:
                tokens[id] = token
            case .refused(let status, let message)?:
                return .failure(HelperRefusal(status: status, message: message))
            case nil:
                guard let set = freshSetFromStore(id, invocation: invocation, output: output, environment: environment, services: services)
                else { return nil }
                tokens[id] = HelperToken(set)
            }
        }
        return .success(tokens)
    }
}

extension Context {
    /// The tokens of `ids` by the full path, as `authflow token` gets them: the stored token while
    /// valid, else refreshed, or fetched again for a grant no person logs in to, and stored.
    /// - Returns: every id's token; nil when a provider whose grant a person logs in to has nothing
    ///   stored, after one line on stderr naming `authflow login` (the caller exits 77). Never
    ///   logs in: the program the token is for owns the terminal, or there is none.
    /// - Throws: ``CLIError`` as `authflow token` fails (unknown provider, unreachable, refused, …).
    func helperTokens(_ ids: [String]) async throws(CLIError) -> [String: HelperToken]? {
        var unique: [String] = []
        for id in ids where !unique.contains(id) { unique.append(id) }
        var providers: [Provider] = []
        for id in unique { providers.append(try provider(id)) }
        let store = try store()
        let flow = try await flow(providers, store: store)
        var tokens: [String: HelperToken] = [:]
        for provider in providers {
            guard let set = try await validTokenSet(provider, flow: flow, store: store, interactive: false) else { return nil }
            tokens[provider.id] = HelperToken(set)
        }
        return tokens
    }
}
