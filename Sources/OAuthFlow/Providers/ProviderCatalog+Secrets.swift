#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The client secret of an entry, from exactly one of `clientSecret`, `clientSecretEnv` and
// `clientSecretFile`, resolved when the catalog loads. No message shows a value from the catalog:
// a secret pasted into the wrong key must not end up in a log.

extension ProviderCatalog.Entry {
    /// The client secret from exactly one of `clientSecret`, `clientSecretEnv`, `clientSecretFile`.
    func clientSecret() throws(OAuthError) -> Secret? {
        let inline = try string("clientSecret")
        let variable = try string("clientSecretEnv")
        let file = try string("clientSecretFile")
        let given = [("clientSecret", inline), ("clientSecretEnv", variable), ("clientSecretFile", file)]
            .filter { $0.1 != nil }.map(\.0)
        if given.count > 1 {
            throw fail(
                given.joined(separator: " and "),
                "a client secret may come from only one of clientSecret, clientSecretEnv and clientSecretFile; keep one")
        }
        if let inline {
            guard !inline.isEmpty else { throw fail("clientSecret", "must not be empty") }
            return Secret(inline)
        }
        if let variable {
            // Never the value in a message: it may be a secret pasted here by mistake.
            guard Self.isVariableName(variable) else {
                throw fail("clientSecretEnv", "must be the name of an environment variable, such as GITHUB_CLIENT_SECRET; "
                    + "the value given (\(Self.shape(variable))) does not look like a variable name")
            }
            guard let value = context.environment[variable] else {
                throw fail("clientSecretEnv", "the environment variable it names (\(Self.shape(variable))) is not set; "
                    + "the name is not shown in case it is a secret pasted by mistake")
            }
            guard !value.isEmpty else {
                throw fail("clientSecretEnv", "the environment variable it names (\(Self.shape(variable))) is empty")
            }
            return Secret(value)
        }
        if let file { return try secretFile(file) }
        return nil
    }

    func secretFile(_ written: String, key: String = "clientSecretFile") throws(OAuthError) -> Secret {
        guard !written.isEmpty else { throw fail(key, "must not be empty") }
        guard !written.hasPrefix("~") else { throw fail(key, "\"~\" is not expanded; write ${HOME}/… instead") }
        let path = try expandVariables(written)
        let url: URL
        if path.hasPrefix("/") {
            url = URL(fileURLWithPath: path)
        } else if let base = context.baseDirectory {
            url = base.appendingPathComponent(path).standardizedFileURL
        } else {
            throw fail(key, "is a relative path (\(Self.shape(path))), but the catalog has no directory to resolve it "
                + "against; use an absolute path or pass baseDirectory")
        }
        let data: Data
        do {
            data = try ProviderCatalog.readFile(at: url, limit: ProviderCatalog.maximumSecretFileBytes)
        } catch {
            // The path is not shown: it may be a secret pasted by mistake. Its shape is.
            throw fail(key, "the file it names (\(Self.shape(written))) \(error.reason)", underlying: error.underlying)
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw fail(key, "the file it names (\(Self.shape(written))) is not UTF-8 text")
        }
        // Drop trailing line breaks (an editor's or `echo`'s); by scalar, since "\r\n" is one Character.
        let scalars = text.unicodeScalars
        var end = scalars.endIndex
        while end > scalars.startIndex, scalars[scalars.index(before: end)] == "\n" || scalars[scalars.index(before: end)] == "\r" {
            end = scalars.index(before: end)
        }
        guard end > scalars.startIndex else { throw fail(key, "the file it names (\(Self.shape(written))) is empty") }
        return Secret(String(scalars[..<end]))
    }

    /// Replaces each `${NAME}` with that environment variable, which must be set and non-empty.
    func expandVariables(_ path: String, key: String = "clientSecretFile") throws(OAuthError) -> String {
        var result = ""
        var rest = Substring(path)
        while let start = ASCIIText.firstRange(of: "${", in: rest) {
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                throw fail(key, "has a \"${\" without its closing \"}\"")
            }
            let name = String(rest[start.upperBound..<end])
            guard Self.isVariableName(name) else {
                throw fail(key, "has an invalid variable reference; write ${NAME} with letters, digits and '_'")
            }
            guard let value = context.environment[name], !value.isEmpty else {
                let hint = name == "CREDENTIALS_DIRECTORY" ? " (systemd sets it for units with LoadCredential=)" : ""
                throw fail(key, "environment variable \(name) is not set or is empty\(hint)")
            }
            result += value
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }

    /// What a value looks like without showing it: its length, and whether it looks like a
    /// path or a variable name (`40 characters, not a path`).
    static func shape(_ value: String) -> String {
        var parts = ["\(value.count) character\(value.count == 1 ? "" : "s")"]
        if value.contains("/") {
            parts.append(value.hasPrefix("/") || value.hasPrefix("${") ? "an absolute path" : "a relative path")
        } else if isVariableName(value) {
            parts.append("letters, digits and '_'")
        } else {
            parts.append("not a path or a variable name")
        }
        return parts.joined(separator: ", ")
    }

    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else {
            return false
        }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
    }
}
