#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// `authflow token PROVIDER --dpop-proof METHOD URL` (RFC 9449 §7.1): the header lines of one
/// request, for `curl -H @-`.
enum DPoPProofCommand {
    /// Checks the arguments: an HTTP method token, and an absolute `http` or `https` URL with a host.
    /// - Throws: ``UsageError`` otherwise.
    static func check(method: String, url: String) throws(UsageError) {
        guard (1...32).contains(method.utf8.count), method.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else {
            throw UsageError("--dpop-proof needs an HTTP method such as GET or POST, not '\(DisplayText.escape(String(method.prefix(40))))'",
                             command: "token")
        }
        _ = try self.url(url)
    }

    /// The target URL: absolute `http` or `https` with a host.
    /// - Throws: ``UsageError`` otherwise.
    static func url(_ text: String) throws(UsageError) -> URL {
        guard let url = URL(string: text, encodingInvalidCharacters: false), let scheme = url.scheme?.lowercased(),
              scheme == "https" || scheme == "http", url.host?.isEmpty == false else {
            throw UsageError("--dpop-proof needs an absolute http(s) URL, not '\(DisplayText.escape(String(text.prefix(200))))'", command: "token")
        }
        return url
    }
}

extension Context {
    /// Prints `Authorization: Bearer|DPoP <token>` and, for a DPoP-bound token, `DPoP: <proof>`
    /// for `method` on `url`; nothing else on stdout.
    func tokenProof(_ id: String, method: String, url text: String) async throws(CLIError) -> ExitCode {
        let url: URL
        do { url = try DPoPProofCommand.url(text) } catch { throw .usage(error) }
        let provider = try provider(id)
        let flow = try await flow([provider], store: store())
        let headers: AuthorizationHeaders
        do {
            headers = try await flow.tokenSource(for: id).authorizationHeaders(method: method, url: url)
        } catch {
            throw .oauth(error, provider: id)
        }
        guard Self.isHeaderSafe(Secret(String(headers.authorization.reveal().drop { $0 != " " }.dropFirst()))),
              headers.dpop.map(Self.isHeaderSafe) ?? true else {
            throw .oauth(OAuthError(.storage, providerID: id, message: "the stored access token holds characters a token cannot have"),
                         provider: id)
        }
        var lines = "Authorization: \(headers.authorization.reveal())\n"
        if let proof = headers.dpop { lines += "DPoP: \(proof.reveal())\n" }
        out.write(lines)
        return .success
    }
}
