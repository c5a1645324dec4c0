#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// The arguments of `request` (`gh api` is the model).
public struct RequestOptions: Sendable, Equatable {
    /// The provider whose token authorizes the request.
    public var provider: String
    /// The URL.
    public var url: String
    /// `--method`; nil for GET, or POST with a body.
    public var method: String?
    /// `--data`: the body itself, `@FILE` or `@-`.
    public var data: String?
    /// `--add-header` values, `Name: value`, in order.
    public var headers: [String]

    /// Creates request options.
    public init(provider: String, url: String, method: String? = nil, data: String? = nil, headers: [String] = []) {
        self.provider = provider
        self.url = url
        self.method = method
        self.data = data
        self.headers = headers
    }

    /// The largest body `--data @FILE` sends.
    static let maximumBody = 1 << 20

    /// Reads the options of `request`.
    /// - Throws: ``UsageError`` for a method that is not an HTTP token, a header without `:` or with
    ///   a control character, an `Authorization` header (the token is the provider's), or a URL
    ///   that is not https:// (or loopback http://).
    static func parse(provider: String, url: String, _ options: [(name: String, value: String?)]) throws(UsageError) -> RequestOptions {
        var request = RequestOptions(provider: provider, url: url)
        if let method = options.last(where: { $0.name == "--method" })?.value {
            guard !method.isEmpty, method.utf8.count <= 32, method.utf8.allSatisfy({ ASCIIText.isAlphanumeric($0) || $0 == UInt8(ascii: "-") }) else {
                throw UsageError("--method needs an HTTP method such as GET or POST", command: "request")
            }
            request.method = method.uppercased()
        }
        request.data = options.last { $0.name == "--data" }?.value
        for header in options where header.name == "--add-header" {
            let text = header.value ?? ""
            guard let colon = text.firstIndex(of: ":"), colon != text.startIndex,
                  text.utf8.allSatisfy({ $0 == 0x09 || (0x20...0x7E).contains($0) }) else {
                throw UsageError("--add-header needs \"Name: value\" in visible ASCII", command: "request")
            }
            guard !ASCIIText.equalsIgnoringCase(String(text[..<colon]), "authorization") else {
                throw UsageError("--add-header Authorization: the token comes from the provider; leave it out", command: "request")
            }
            request.headers.append(text)
        }
        guard let parsed = URL(string: url, encodingInvalidCharacters: false), let scheme = parsed.scheme?.lowercased(),
              scheme == "https" || scheme == "http", parsed.host != nil else {
            throw UsageError("'\(DisplayText.escape(url))' is not an absolute https:// URL", command: "request")
        }
        return request
    }
}

extension Context {
    /// `authflow request PROVIDER URL`: one request through the library's ``AuthorizingTransport``;
    /// the body on stdout, the status deciding the exit code.
    func request(_ options: RequestOptions) async throws(CLIError) -> ExitCode {
        let provider = try provider(options.provider)
        guard let url = URL(string: options.url) else { throw .usage(UsageError("bad URL", command: "request")) }
        if let problem = Self.requestURLProblem(url, provider: provider) { throw .data(problem) }
        var headers: [(name: String, value: String)] = options.headers.map { header in
            let colon = header.firstIndex(of: ":")!
            return (name: String(header[..<colon]), value: ASCIIText.trimmingBlanks(header[header.index(after: colon)...]))
        }
        var body: Data?
        if let data = options.data {
            body = try requestBody(data)
            if !headers.contains(where: { ASCIIText.equalsIgnoringCase($0.name, "content-type") }) {
                headers.append(("Content-Type", "application/json"))
            }
        }
        if !headers.contains(where: { ASCIIText.equalsIgnoringCase($0.name, "accept") }) { headers.append(("Accept", "application/json, */*")) }
        headers.append(("User-Agent", "authflow/\(Authflow.version)"))
        let method = options.method ?? (body == nil ? "GET" : "POST")
        let flow = try await flow([provider], store: store())
        let api = AuthorizingTransport(base: transport, source: flow.tokenSource(for: provider.id))
        let response: HTTPResponse
        do {
            response = try await api.send(HTTPRequest(method: method, url: url, headers: headers, body: body))
        } catch {
            // A step-up too: the advice table's `step-up` row prints what was asked and the login line.
            throw .oauth(error, provider: provider.id)
        }
        out.write(printableBody(response.body))
        if (200..<300).contains(response.status) { return .success }
        err.write("\(errStyle.red("authflow: error:")) \(escaped(provider.id)): HTTP \(response.status) from \(escaped(url.absoluteString))\n")
        switch response.status {
        case 401, 403: return .denied
        case 429, 500...: return .temporaryFailure
        default: return .dataError
        }
    }

    /// Why `url` may not get `provider`'s token, or nil: it must be https:// or loopback http://
    /// (a token never crosses the network in clear), and on the origin of one of the provider's
    /// resources when it names any (the token was issued for those).
    static func requestURLProblem(_ url: URL, provider: Provider) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host else { return "\(url.absoluteString) is not an absolute URL" }
        if scheme == "http", !Provider.isLoopback(host: host) {
            return "\(escaped(url.absoluteString)): a token is sent over https:// only (http:// on loopback)"
        }
        guard !provider.resources.isEmpty else { return nil }
        func origin(_ url: URL) -> String {
            let scheme = url.scheme?.lowercased() ?? ""
            return "\(scheme)://\((url.host ?? "").lowercased()):\(url.port ?? (scheme == "https" ? 443 : 80))"
        }
        guard provider.resources.contains(where: { origin($0) == origin(url) }) else {
            return "\(escaped(url.absoluteString)) is not on the origin of \(escaped(provider.id))'s resources "
                + "(\(provider.resources.map(\.absoluteString).joined(separator: ", "))); its token is not sent there"
        }
        return nil
    }

    /// The body of `--data`: the text itself, a file's content (`@FILE`) or standard input (`@-`), at most 1 MiB.
    private func requestBody(_ data: String) throws(CLIError) -> Data {
        guard data.hasPrefix("@") else { return Data(data.utf8) }
        let path = String(data.dropFirst())
        if path == "-" { return Data(services.standardInput().utf8) }
        do {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            guard bytes.count <= RequestOptions.maximumBody else { throw CLIError.data("--data @\(path): the file is larger than 1 MiB") }
            return bytes
        } catch let error as CLIError {
            throw error
        } catch {
            throw .data("--data @\(path): cannot read the file")
        }
    }

    /// The answer's body for stdout: as it came when stdout is not a terminal (a pipe, a file);
    /// on a terminal every control character but newline and tab is escaped (``escaped(_:)``), so
    /// an answer cannot move the cursor or retitle the window. A newline ends it when it has none.
    func printableBody(_ body: Data) -> String {
        var text = String(decoding: body, as: UTF8.self)
        if output.stdoutIsTerminal {
            text = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                line.split(separator: "\t", omittingEmptySubsequences: false).map { escaped(String($0)) }.joined(separator: "\t")
            }.joined(separator: "\n")
        }
        if !text.isEmpty, !text.hasSuffix("\n") { text += "\n" }
        return text
    }
}
