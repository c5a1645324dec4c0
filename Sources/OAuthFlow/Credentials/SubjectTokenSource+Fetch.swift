#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

// Getting a token from a source: read the file, fetch the URL, run the command or take the
// variable; then the checks every token passes before it is sent. Nothing is kept: the next
// exchange asks the source again.

extension SubjectTokenSource {
    /// What a fetch needs besides the source.
    struct Context: Sendable {
        /// The provider whose grant needs the token (the error's provider).
        var providerID: String
        /// The token type the grant declares (`subject_token_type`), which decides whether the
        /// token must be a JWT.
        var tokenType: String
        /// What a URL source's GET goes through: the flow's transport, not the provider's (a CI's
        /// endpoint is not the authorization server, and must not see its CA or client certificate);
        /// nil where only a file is read (a client assertion file).
        var transport: (any HTTPTransport)?
        /// The `User-Agent` of a URL source's GET.
        var userAgent: String
        /// Now, for `exp`.
        var now: Date
    }

    /// A token from this source, checked (see ``checked(_:_:)``).
    /// - Throws: ``OAuthError`` whose message starts with ``description``: `.configuration` for a
    ///   file that cannot be read, an unset variable, a URL that breaks the endpoint rules, a
    ///   command that cannot be started; `.transport` when a URL cannot be reached; `.httpStatus`
    ///   for a non-2xx answer; `.invalidResponse` for a redirect, a body or output over
    ///   ``maximumBytes``, an answer that is not the token, a command that failed, a token that is
    ///   not visible ASCII, not a JWT where one is needed, or expired; `.timedOut` for a command
    ///   killed at its timeout; `.cancelled`.
    func token(_ context: Context) async throws(OAuthError) -> Secret {
        if let problem { throw fail(.configuration, context, problem) }
        var bytes: [UInt8]
        switch kind {
        case .file(let path, let field):
            bytes = try readFile(path, context)
            if let field { try replace(&bytes, withMember: field, context) }
        case .url(let template, let headers, let field):
            bytes = try await fetch(template, headers: headers, context)
            if let field { try replace(&bytes, withMember: field, context) }
        case .command(let arguments, let timeout, let environment):
            bytes = try await run(arguments, timeout: timeout, environment: environment, context)
        case .environment(let variable):
            guard let value = environment[variable] else {
                throw fail(.configuration, context, "is not set (or is empty) in the environment")
            }
            bytes = Array(value.reveal().utf8)
        }
        defer { wipe(&bytes) }
        return try checked(bytes, context)
    }

    /// The error of this source: `code`, the provider, and ``description`` followed by `reason`.
    func fail(_ code: OAuthError.Code, _ context: Context, _ reason: String, status: Int? = nil, underlying: (any Error)? = nil) -> OAuthError {
        OAuthError(code, providerID: context.providerID, httpStatus: status, message: "\(description) \(reason)", underlying: underlying)
    }

    // MARK: The kinds

    /// The file's bytes: a regular file of at most ``maximumBytes`` (a symbolic link to one is followed).
    private func readFile(_ path: String, _ context: Context) throws(OAuthError) -> [UInt8] {
        let bytes: [UInt8]
        do {
            bytes = try CredentialFile.read(path, isPrivate: false)
        } catch {
            throw fail(.configuration, context, error.reason)
        }
        guard bytes.count <= Self.maximumBytes else {
            var copy = bytes
            wipe(&copy)
            throw fail(.configuration, context, "is larger than \(Self.maximumBytes >> 10) KiB")
        }
        return bytes
    }

    /// `text` with each `${NAME}` replaced by the captured value.
    private func expand(_ text: String, _ context: Context) throws(OAuthError) -> String {
        var result = ""
        var rest = Substring(text)
        while let start = ASCIIText.firstRange(of: "${", in: rest), let end = rest[start.upperBound...].firstIndex(of: "}") {
            result += rest[..<start.lowerBound]
            let name = String(rest[start.upperBound..<end])
            guard let value = environment[name] else {
                throw fail(.configuration, context, "needs the environment variable \(name), which is not set (or is empty)")
            }
            result += value.reveal()
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }

    /// The body of a GET of the expanded URL, with the expanded headers; never a redirect.
    private func fetch(_ template: String, headers: [Header], _ context: Context) async throws(OAuthError) -> [UInt8] {
        let expanded = try expand(template, context)
        guard let url = URL(string: expanded, encodingInvalidCharacters: false), url.host != nil else {
            throw fail(.configuration, context, "is not a valid URL once its variables are expanded")
        }
        if let problem = Provider.endpointProblem(url) { throw fail(.configuration, context, problem) }
        var fields: [(name: String, value: String)] = [("Accept", "application/json, text/plain"), ("User-Agent", context.userAgent)]
        for header in headers {
            let value = try expand(header.value, context)
            // A value from the environment goes into a header only if it cannot split it (CR, LF, NUL).
            guard value.unicodeScalars.allSatisfy({ $0 == "\t" || !DisplayText.isUnsafe($0) }) else {
                throw fail(.configuration, context, "header \(header.name) holds control characters once its variables are expanded")
            }
            fields.removeAll { ASCIIText.equalsIgnoringCase($0.name, header.name) }
            fields.append((header.name, value))
        }
        guard let transport = context.transport else { throw fail(.configuration, context, "cannot be fetched here (no transport)") }
        let response: HTTPResponse
        do {
            response = try await transport.send(HTTPRequest(method: "GET", url: url, headers: fields))
        } catch {
            switch error.code {
            case .cancelled: throw error
            case .invalidResponse:
                throw fail(.invalidResponse, context, "answered a body larger than the transport accepts", underlying: error)
            default:
                throw fail(.transport, context, "could not be fetched (\(error.code))", underlying: error)
            }
        }
        if (300..<400).contains(response.status) {
            let target = response.headers["location"].flatMap { URL(string: $0) }?.host.map { " to \(DisplayText.escape($0))" } ?? ""
            throw fail(.invalidResponse, context, "answered a redirect (HTTP \(response.status))\(target); a token source's redirects are not followed",
                       status: response.status)
        }
        guard (200..<300).contains(response.status) else {
            throw fail(.httpStatus, context, "answered HTTP \(response.status)", status: response.status)
        }
        guard response.body.count <= Self.maximumBytes else {
            throw fail(.invalidResponse, context, "answered \(response.body.count) bytes, more than \(Self.maximumBytes >> 10) KiB",
                       status: response.status)
        }
        if response.mediaType == "text/html" {
            throw fail(.invalidResponse, context, "answered an HTML page, not a token", status: response.status)
        }
        return Array(response.body)
    }

    /// Replaces `bytes`, a JSON object, with its string member `field`; the object is wiped either way.
    private func replace(_ bytes: inout [UInt8], withMember field: String, _ context: Context) throws(OAuthError) {
        let token: [UInt8]
        do {
            token = try member(field, of: bytes, context)
        } catch {
            wipe(&bytes)
            throw error
        }
        wipe(&bytes)
        bytes = token
    }

    /// The string member `field` of the JSON object in `bytes`.
    private func member(_ field: String, of bytes: [UInt8], _ context: Context) throws(OAuthError) -> [UInt8] {
        let value: JSONValue
        do {
            value = try JSONValue.parse(Data(bytes))
        } catch {
            throw fail(.invalidResponse, context, "is not a JSON object (\(error.message ?? "not JSON")); jsonField \(DisplayText.escape(field)) needs one")
        }
        guard case .object(let members) = value else {
            throw fail(.invalidResponse, context, "is JSON \(value.kind), not an object holding \(DisplayText.escape(field))")
        }
        guard case .string(let token)? = members[field] else {
            throw fail(.invalidResponse, context, "has no string member \(DisplayText.escape(field))")
        }
        return Array(token.utf8)
    }

    /// The command's token: its output as the token, or Google's executable-source JSON.
    private func run(_ arguments: [String], timeout: Duration, environment extra: [Header], _ context: Context) async throws(OAuthError) -> [UInt8] {
        let variables = extra.map { ($0.name, $0.value) }
        let outcome = await CommandRunner.run(arguments, environment: variables, timeout: timeout, outputLimit: Self.maximumBytes)
        switch outcome {
        case .cannotStart(let code):
            throw fail(.configuration, context, "cannot be started: \(String(cString: strerror(code)))")
        case .timedOut:
            throw fail(.timedOut, context, "did not finish within \(timeout.components.seconds) s and was killed")
        case .tooMuchOutput:
            throw fail(.invalidResponse, context, "printed more than \(Self.maximumBytes >> 10) KiB and was killed")
        case .cancelled:
            throw OAuthError(.cancelled, providerID: context.providerID, message: "\(description) was killed: the task was cancelled")
        case .signalled(let signal, var output):
            wipe(&output)
            throw fail(.invalidResponse, context, "was killed by signal \(signal)")
        case .exited(let status, var output):
            if ExecutableOutput.looksLikeJSON(output) {
                defer { wipe(&output) }
                return try ExecutableOutput.token(in: output, source: self, context)
            }
            guard status == 0 else {
                wipe(&output)
                throw fail(.invalidResponse, context, "exited with status \(status)")
            }
            return output
        }
    }

    // MARK: The checks

    /// The token in `bytes`: leading and trailing white space dropped; then at most
    /// ``maximumBytes`` of visible ASCII; then, for a token of three dot-separated parts, the
    /// JWT checks (``checkJWT(_:declared:_:)``): its `exp`, when present, after `now`.
    func checked(_ bytes: [UInt8], _ context: Context) throws(OAuthError) -> Secret {
        func isBlank(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
        }
        var start = 0, end = bytes.count
        while end > start, isBlank(bytes[end - 1]) { end -= 1 }
        while start < end, isBlank(bytes[start]) { start += 1 }
        let isFile: Bool
        if case .file = kind { isFile = true } else { isFile = false }
        // A file's problems are its configuration's (the file is named); the others' are answers.
        let contentCode: OAuthError.Code = isFile ? .configuration : .invalidResponse
        guard end > start else { throw fail(contentCode, context, isFile ? "is empty (only white space)" : "gave an empty token") }
        guard end - start <= Self.maximumBytes else { throw fail(contentCode, context, "gave a token larger than \(Self.maximumBytes >> 10) KiB") }
        guard bytes[start..<end].allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw fail(contentCode, context, (isFile ? "does not hold one token" : "did not give one token")
                + ": it has characters outside visible ASCII (such as control characters, spaces or several lines)")
        }
        let token = String(decoding: bytes[start..<end], as: UTF8.self)
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        if segments.count == 3 {
            try checkJWT(segments, declared: context.tokenType == TokenType.jwt || context.tokenType == TokenType.idToken, context)
        }
        return Secret(token)
    }

    /// A token of three dot-separated parts: when its payload is a JSON object (a JWT), its `exp`,
    /// when present, must be a number after `now`; when it is not, the token is refused only if
    /// it was `declared` a JWT or an ID token (an opaque token may hold two dots). A token of
    /// another shape is left to the server, whatever its declared type: the server judges it.
    private func checkJWT(_ segments: [Substring], declared: Bool, _ context: Context) throws(OAuthError) {
        let malformed = "gave a token that is not a JWT (RFC 7519: three base64url parts, the second a JSON object)"
        guard let payload = Base64URL.decode(String(segments[1])), case .object(let claims)? = try? JSONValue.parse(Data(payload)) else {
            if declared { throw fail(.invalidResponse, context, malformed) }
            return
        }
        guard let exp = claims["exp"], exp != .null else { return }
        guard case .number(let text) = exp, let seconds = Double(text), seconds.isFinite else {
            throw fail(.invalidResponse, context, "gave a JWT whose exp is not a number")
        }
        guard seconds > context.now.timeIntervalSince1970 else {
            let when = Date(timeIntervalSince1970: min(max(seconds, 0), 253_402_300_799)).formatted(Date.ISO8601FormatStyle())
            throw fail(.invalidResponse, context, "gave a token that expired at \(when) (its exp); the platform has not renewed it")
        }
    }
}

/// Google's executable-source output (the `executable` credential source of an
/// `external_account` file, and any command that prints the same): a JSON object with `version`
/// 1, `success`, and on success `token_type`, the token in `id_token` (JWT and ID token types) or
/// `saml_response` (SAML 2), and `expiration_time` (seconds since 1970); on failure `code` and `message`.
enum ExecutableOutput {
    /// True when the first non-blank byte is `{`.
    static func looksLikeJSON(_ bytes: [UInt8]) -> Bool {
        bytes.first { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) } == UInt8(ascii: "{")
    }

    /// The token the output carries.
    /// - Throws: ``OAuthError`` `.invalidResponse` naming `source` for output that is not such an
    ///   object, a failure it reports (its `code` and `message`, escaped and shortened), or a
    ///   token whose `expiration_time` has passed.
    static func token(in bytes: [UInt8], source: SubjectTokenSource, _ context: SubjectTokenSource.Context) throws(OAuthError) -> [UInt8] {
        let prefix = "printed executable-source JSON "
        let object: JSONObject
        do {
            object = try JSONObject(try JSONValue.parse(Data(bytes)), what: "the output") { reason in
                source.fail(.invalidResponse, context, prefix + "that cannot be read: \(reason)")
            }
        } catch {
            throw source.fail(.invalidResponse, context, prefix + "that cannot be read: \(error.message ?? "not JSON")")
        }
        guard try object.integer("version", in: 0...1_000) == 1 else {
            throw source.fail(.invalidResponse, context, prefix + "without version 1")
        }
        guard let success = try object.bool("success") else { throw source.fail(.invalidResponse, context, prefix + "without success") }
        guard success else {
            let code = (try? object.string("code")).flatMap { $0 } ?? "no code"
            let message = (try? object.string("message")).flatMap { $0 } ?? "no message"
            throw source.fail(.invalidResponse, context, prefix + "reporting a failure: \(DisplayText.escape(String(code.prefix(64)))): "
                + DisplayText.escape(String(message.prefix(200))))
        }
        let type = try object.requiredString("token_type")
        let member = type == TokenType.saml2 ? "saml_response" : "id_token"
        guard let token = try object.string(member), !token.isEmpty else {
            throw source.fail(.invalidResponse, context, prefix + "of token_type \(DisplayText.escape(String(type.prefix(80)))) without \(member)")
        }
        if let expiration = try object.integer("expiration_time", in: 0...253_402_300_799),
           Double(expiration) <= context.now.timeIntervalSince1970 {
            throw source.fail(.invalidResponse, context, prefix + "with a token whose expiration_time has passed")
        }
        return Array(token.utf8)
    }
}
