import Foundation

/// The token response fields of RFC 6749 §5.1, parsed from JSON or (GitHub) form encoding.
struct TokenResponse: Sendable {
    var accessToken: Secret
    var tokenType: String
    var expiresIn: Int?
    var refreshToken: Secret?
    var idToken: Secret?
    var scope: String?
}

/// Everything the grants share: building form POSTs with client authentication, sending them,
/// decoding 2xx bodies, and mapping errors (RFC 6749 §5.2).
struct EndpointClient: Sendable {
    let provider: Provider
    let transport: any HTTPTransport
    let userAgent: String
    let log: Logger

    /// A POST of `fields` to `url`, authenticated per the provider (RFC 6749 §2.3.1).
    func formRequest(url: URL, fields: [(String, String)], authenticate: Bool = true) -> HTTPRequest {
        var fields = fields
        var headers: [(name: String, value: String)] = [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "application/json"),
            ("User-Agent", provider.userAgent ?? userAgent),
        ]
        switch provider.clientAuthentication {
        case .clientSecretBasic where authenticate:
            let secret = provider.clientSecret?.reveal() ?? ""
            let credentials = "\(FormEncoding.escape(provider.clientID)):\(FormEncoding.escape(secret))"
            headers.append(("Authorization", "Basic \(Data(credentials.utf8).base64EncodedString())"))
        case .clientSecretPost where authenticate:
            fields.append(("client_id", provider.clientID))
            fields.append(("client_secret", provider.clientSecret?.reveal() ?? ""))
        default:
            fields.append(("client_id", provider.clientID))
        }
        return HTTPRequest(method: "POST", url: url, headers: headers, body: Data(FormEncoding.encode(fields).utf8))
    }

    /// Sends `request` and returns the parsed object of a 2xx body; maps every failure to ``OAuthError``.
    ///
    /// A §5.2 body (JSON or form) is an error whatever the status (GitHub sends them with 200).
    func send(_ request: HTTPRequest, endpoint: OAuthError.Endpoint) async throws(OAuthError) -> [String: Any] {
        log.debug(provider, "POST \(endpoint.rawValue) \(request.url.host ?? "")\(request.url.path) fields=\(fieldNames(request))")
        let response: HTTPResponse
        do {
            response = try await transport.send(request)
        } catch {
            var error = error
            error.providerID = provider.id
            error.endpoint = endpoint
            log.debug(provider, "\(endpoint.rawValue) failed: \(error.code)")
            throw error
        }
        log.debug(provider, "\(endpoint.rawValue) answered \(response.status) \(response.mediaType ?? "-") \(response.body.count) bytes")
        guard response.body.count <= transport.maximumBodySize else {
            throw OAuthError(.invalidResponse, providerID: provider.id, endpoint: endpoint, httpStatus: response.status,
                             message: "the response body exceeds \(transport.maximumBodySize) bytes")
        }
        let object = Self.parseBody(response)
        if let object, let errorResponse = Self.errorResponse(in: object) {
            throw Self.error(for: errorResponse, provider: provider.id, endpoint: endpoint, status: response.status)
        }
        guard (200..<300).contains(response.status) else {
            throw OAuthError(
                .httpStatus, providerID: provider.id, endpoint: endpoint, httpStatus: response.status,
                message: "HTTP \(response.status) with \(Self.describeBody(response)) instead of an OAuth error body")
        }
        guard let object else {
            throw OAuthError(.invalidResponse, providerID: provider.id, endpoint: endpoint, httpStatus: response.status,
                             message: "expected a JSON object, got \(Self.describeBody(response))")
        }
        return object
    }

    /// Parses a JSON object, or a form-encoded body when the media type says so (or JSON fails and it looks like a form).
    static func parseBody(_ response: HTTPResponse) -> [String: Any]? {
        guard !response.body.isEmpty else { return nil }
        if let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] { return object }
        let mediaType = response.mediaType ?? ""
        guard mediaType == "application/x-www-form-urlencoded" || mediaType == "text/plain" || mediaType.isEmpty,
              let text = String(data: response.body, encoding: .utf8), !text.contains("<"), text.contains("=")
        else { return nil }
        var object: [String: Any] = [:]
        for (name, value) in FormEncoding.decode(text) where object[name] == nil { object[name] = value }
        return object
    }

    static func errorResponse(in object: [String: Any]) -> ErrorResponse? {
        guard let code = object["error"] as? String, !code.isEmpty else { return nil }
        return ErrorResponse(
            code: .init(rawValue: code), errorDescription: object["error_description"] as? String,
            errorURI: object["error_uri"] as? String)
    }

    /// Maps a §5.2 body to the error a caller acts on (STYLE: access_denied, expired_token, the rest).
    static func error(for response: ErrorResponse, provider: String, endpoint: OAuthError.Endpoint, status: Int?) -> OAuthError {
        let code: OAuthError.Code
        switch response.code {
        case .accessDenied: code = .accessDenied
        case .expiredToken: code = .expired
        default: code = .serverRejected
        }
        return OAuthError(code, providerID: provider, endpoint: endpoint, httpStatus: status, response: response)
    }

    /// Says what a body is without showing it: media type and size, and "an HTML page" when it is one.
    static func describeBody(_ response: HTTPResponse) -> String {
        if response.body.isEmpty { return "an empty body" }
        let looksHTML = response.mediaType == "text/html"
            || response.body.prefix(64).first(where: { !$0.isWhitespaceByte }) == UInt8(ascii: "<")
        let kind = looksHTML ? "an HTML page" : "a \(response.mediaType ?? "body without Content-Type")"
        return "\(kind) of \(response.body.count) bytes"
    }

    private func fieldNames(_ request: HTTPRequest) -> String {
        let body = request.body.flatMap { String(data: $0, encoding: .utf8) } ?? ""
        return FormEncoding.decode(body).map(\.0).joined(separator: ",")
    }

    /// Posts to the token endpoint and decodes a §5.1 token response.
    func requestToken(_ fields: [(String, String)]) async throws(OAuthError) -> TokenResponse {
        let object = try await send(formRequest(url: provider.tokenURL, fields: fields), endpoint: .token)
        return try Self.decodeToken(object, provider: provider.id)
    }

    static func decodeToken(_ object: [String: Any], provider: String) throws(OAuthError) -> TokenResponse {
        func invalid(_ reason: String) -> OAuthError {
            OAuthError(.invalidResponse, providerID: provider, endpoint: .token, httpStatus: 200, message: "token response: \(reason)")
        }
        guard let access = object["access_token"] as? String, !access.isEmpty else {
            throw invalid("access_token is missing or not a string")
        }
        guard let tokenType = object["token_type"] as? String, !tokenType.isEmpty else {
            throw invalid("token_type is missing or not a string")
        }
        var expiresIn: Int?
        if let raw = object["expires_in"], !(raw is NSNull) {
            guard let seconds = integer(raw), seconds >= 0 else { throw invalid("expires_in is not a non-negative number") }
            expiresIn = seconds
        }
        let refresh = (object["refresh_token"] as? String).flatMap { $0.isEmpty ? nil : Secret($0) }
        let idToken = (object["id_token"] as? String).flatMap { $0.isEmpty ? nil : Secret($0) }
        return TokenResponse(
            accessToken: Secret(access), tokenType: tokenType, expiresIn: expiresIn, refreshToken: refresh,
            idToken: idToken, scope: object["scope"] as? String)
    }

    /// A whole number from a JSON number or a numeric string (Azure sends `"3599"`).
    static func integer(_ value: Any) -> Int? {
        if let string = value as? String { return Int(string.trimmingCharacters(in: .whitespaces)) }
        if let number = value as? NSNumber, !isBoolean(number) {
            let double = number.doubleValue
            guard double.isFinite, double >= Double(Int.min), double <= Double(Int.max) else { return nil }
            return Int(double.rounded(.down))
        }
        return nil
    }

    /// JSONSerialization hands `true`/`false` over as NSNumber too; they are not numbers here.
    private static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }
}

extension UInt8 {
    var isWhitespaceByte: Bool { self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D }
}
