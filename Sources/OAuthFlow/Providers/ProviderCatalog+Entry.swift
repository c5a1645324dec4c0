#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ProviderCatalog {
    /// One provider object, read key by key with the key named in every failure.
    struct Entry {
        let position: Int
        let fields: [String: JSONValue]
        let context: Context
        /// The id as written; not shown in messages unless valid.
        private(set) var rawID = ""
        /// The entry's id once known to be valid; shown in messages and set as the error's provider.
        private(set) var id: String?

        init(position: Int, fields: [String: JSONValue], context: Context) throws(OAuthError) {
            self.position = position
            self.fields = fields
            self.context = context
            guard let id = try string("id") else { throw fail("id", "is required") }
            self.rawID = id
            // An invalid id is not echoed; `Provider.validate()` reports it below.
            if Provider.isValidID(id) { self.id = id }
        }

        /// `provider #2 ("gitlab")`, or `provider #2` while the id is unknown or invalid.
        var label: String { id.map { "provider #\(position) (\"\($0)\")" } ?? "provider #\(position)" }

        func fail(_ key: String, _ reason: String, underlying: (any Error)? = nil) -> OAuthError {
            OAuthError(.configuration, providerID: id, message: context.prefix + "\(label): \(key): \(reason)", underlying: underlying)
        }

        /// The provider: in strict mode every key known, then each setting read in table order
        /// (``ProviderCatalog/settings``), the rules across keys, and ``Provider/validate()``.
        func provider() throws(OAuthError) -> Provider {
            if context.strict, let unknown = fields.keys.sorted().first(where: { !ProviderCatalog.knownKeys.contains($0) }) {
                throw OAuthError(.configuration, providerID: id, message: context.prefix + "\(label): "
                    + ProviderCatalog.unknownKey(unknown, known: ProviderCatalog.knownKeys))
            }
            var provider = Provider(id: rawID, clientID: "")
            for setting in ProviderCatalog.settings {
                if case .read(let read) = setting.decode { try read(self, &provider) }
            }
            try applyEntryRules(to: &provider)
            do {
                try provider.validate()
            } catch {
                // `validate()` says `provider "<id>": <key>: <reason>`; keep the key and reason, use our label.
                let theirs = "provider \"\(rawID)\": "
                let detail = error.message.map { $0.hasPrefix(theirs) ? String($0.dropFirst(theirs.count)) : $0 } ?? "is invalid"
                throw OAuthError(.configuration, providerID: id, message: context.prefix + "\(label): \(detail)", underlying: error)
            }
            return provider
        }

        /// The rules across keys that only a catalog has: what a service-account file supplies
        /// (`tokenURL`, `clientID`; an `external_account` file supplies them when it is read), the keys required, and the client authentication when the
        /// entry names none.
        func applyEntryRules(to provider: inout Provider) throws(OAuthError) {
            if provider.tokenURL == nil { provider.tokenURL = provider.serviceAccount?.tokenURI }
            guard provider.tokenURL != nil || provider.issuer != nil else {
                throw fail("tokenURL", "is required unless issuer is given (OAuthKit's accessTokenURL is accepted too)")
            }
            if value("clientID") == nil, provider.dynamicRegistration == nil, provider.externalAccount == nil {
                guard let email = provider.serviceAccount?.clientEmail else { throw fail("clientID", "is required") }
                provider.clientID = email
            }
            if value("clientAuthentication") == nil { provider.clientAuthentication = defaultAuthentication(provider) }
        }

        // MARK: Typed keys

        /// The value at `key`; JSON `null` counts as absent.
        func value(_ key: String) -> JSONValue? {
            guard let value = fields[key], value != .null else { return nil }
            return value
        }

        func string(_ key: String) throws(OAuthError) -> String? {
            guard let value = value(key) else { return nil }
            guard case .string(let text) = value else { throw fail(key, "must be a string, found \(value.kind)") }
            return text
        }

        func bool(_ key: String) throws(OAuthError) -> Bool? {
            guard let value = value(key) else { return nil }
            guard case .bool(let flag) = value else { throw fail(key, "must be true or false, found \(value.kind)") }
            return flag
        }

        /// An endpoint URL; the scheme and host rules are ``Provider``'s, reported under the key as written.
        func endpoint(_ key: String) throws(OAuthError) -> URL? {
            guard let text = try string(key) else { return nil }
            guard let url = URL(string: text, encodingInvalidCharacters: false) else {
                throw fail(key, "is not a valid URL")
            }
            if let problem = Provider.endpointProblem(url) { throw fail(key, problem) }
            return url
        }

        /// The issuer identifier: an `https` URL without query or fragment (RFC 8414 §2).
        func issuer() throws(OAuthError) -> String? {
            guard let text = try string("issuer") else { return nil }
            if let problem = Provider.issuerProblem(text) { throw fail("issuer", problem) }
            return text
        }

        /// `idTokenSigningAlgorithms`: a non-empty array of JWS algorithm names, or one string.
        func signingAlgorithms() throws(OAuthError) -> [String]? {
            let key = "idTokenSigningAlgorithms"
            guard let value = value(key) else { return nil }
            let names: [String]
            switch value {
            case .string(let text): names = [text]
            case .array(let items):
                var collected: [String] = []
                for (index, item) in items.enumerated() {
                    guard case .string(let name) = item else { throw fail("\(key)[\(index)]", "must be a string, found \(item.kind)") }
                    collected.append(name)
                }
                names = collected
            default: throw fail(key, "must be an array of algorithm names such as [\"RS256\"], found \(value.kind)")
            }
            guard !names.isEmpty else { throw fail(key, "must name at least one algorithm") }
            for name in names where !Provider.signingAlgorithmNames.contains(name) {
                throw fail(key, name == "none" ? "\"none\" is never accepted (unsigned ID tokens)"
                    : "names an unknown algorithm; use one of \(Provider.signingAlgorithmNames.joined(separator: ", "))")
            }
            return names
        }

        func redirectURI() throws(OAuthError) -> URL? {
            guard let text = try string("redirectURI") else { return nil }
            guard let url = URL(string: text, encodingInvalidCharacters: false) else {
                throw fail("redirectURI", "is not a valid URI")
            }
            return url
        }

        /// An array of scope tokens, or one space-separated string of them (RFC 6749 §3.3).
        func scopeList(_ key: String) throws(OAuthError) -> [String]? {
            guard let value = value(key) else { return nil }
            let reason = "is not a valid scope token (RFC 6749 §3.3 allows printable ASCII except space, '\"' and '\\')"
            switch value {
            case .string(let text):
                let tokens = text.split(separator: " ").map(String.init)
                for (index, token) in tokens.enumerated() where !Self.isScopeToken(token) {
                    throw fail(key, "scope \(index + 1) of the string \(reason)")
                }
                return tokens
            case .array(let items):
                var tokens: [String] = []
                for (index, item) in items.enumerated() {
                    guard case .string(let token) = item else {
                        throw fail("\(key)[\(index)]", "must be a string, found \(item.kind)")
                    }
                    guard Self.isScopeToken(token) else { throw fail("\(key)[\(index)]", reason) }
                    tokens.append(token)
                }
                return tokens
            default:
                throw fail(key, "must be an array of strings or a space-separated string, found \(value.kind)")
            }
        }

        static func isScopeToken(_ token: String) -> Bool { Provider.isValidScopeToken(token) }

        func authorizationParameters() throws(OAuthError) -> [String: String]? {
            let key = "authorizationParameters"
            guard let value = value(key) else { return nil }
            guard case .object(let members) = value else {
                throw fail(key, "must be an object of string values, found \(value.kind)")
            }
            var parameters: [String: String] = [:]
            for (name, item) in members {
                guard !name.isEmpty else { throw fail(key, "parameter names must not be empty") }
                guard case .string(let text) = item else {
                    throw fail("\(key).\(name)", "must be a string, found \(item.kind)")
                }
                parameters[name] = text
            }
            return parameters
        }

        /// A value sent as an HTTP header: not empty, no control characters.
        func headerValue(_ key: String) throws(OAuthError) -> String? {
            guard let text = try string(key) else { return nil }
            guard !text.isEmpty else { throw fail(key, "must not be empty") }
            guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw fail(key, "must not contain control characters such as line breaks")
            }
            return text
        }

        /// Reads `key` or one of its OAuthKit `aliases`; a key and an alias may both be given only with equal values.
        func aliased<Value: Equatable>(
            _ key: String, _ aliases: [String], _ read: (String) throws(OAuthError) -> Value?
        ) throws(OAuthError) -> Value? {
            var found = try read(key)
            for alias in aliases {
                guard let secondary = try read(alias) else { continue }
                if let found, found != secondary {
                    throw fail("\(key) and \(alias)", "\(alias) is an alias of \(key), and the two are given with different values; keep one")
                }
                found = secondary
            }
            return found
        }
    }
}
