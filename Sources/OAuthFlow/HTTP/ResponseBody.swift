#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Reading an endpoint's answer: its body parsed (JSON, or a form where servers send one), the
// RFC 6749 §5.2 error in it and the error a caller acts on, and a description of a body that
// never shows it. Static, so that what only reads an answer (the retry decision in Retry.swift,
// the callback's error) needs no client, and nothing here sends or calls back.
extension EndpointClient {
    static func invalid(_ endpoint: OAuthError.Endpoint, provider: String, status: Int?) -> (String) -> OAuthError {
        { reason in
            OAuthError(.invalidResponse, providerID: provider, endpoint: endpoint, httpStatus: status,
                       message: "\(endpoint.rawValue) response: \(reason)")
        }
    }

    static func parseJSON(_ body: Data, endpoint: OAuthError.Endpoint, provider: String, status: Int) throws(OAuthError) -> JSONValue {
        do {
            return try JSONValue.parse(Array(body))
        } catch {
            throw invalid(endpoint, provider: provider, status: status)(
                "not valid JSON: \(error.reason) (line \(error.line), column \(error.column))")
        }
    }

    /// Parses a JSON object, or a form-encoded body when the media type allows it and it looks like
    /// a form (GitHub without `Accept`); nil for an empty or unrecognisable body.
    /// - Throws: when the body is JSON but broken in a way that matters (a member twice, a
    ///   top-level value that is not an object).
    static func parseBody(_ response: HTTPResponse, endpoint: OAuthError.Endpoint, provider: String) throws(OAuthError) -> JSONObject? {
        guard !response.body.isEmpty else { return nil }
        let failure = invalid(endpoint, provider: provider, status: response.status)
        // Read through the contiguous bytes: `Data`'s own iterator and its generic copy into an
        // array cost about 1 500 instructions on every token response.
        let firstByte = response.body.withUnsafeBytes { $0.first(where: { !$0.isWhitespaceByte }) }
        if firstByte == UInt8(ascii: "{") || response.mediaType == "application/json" {
            let value: JSONValue
            do {
                value = try JSONValue.parse(response.body.withUnsafeBytes { [UInt8]($0) })
            } catch {
                // Broken JSON in a 2xx answer is an error; an HTML page or an error status is
                // described by the caller, not parsed.
                guard firstByte == UInt8(ascii: "{"), (200..<300).contains(response.status) else { return nil }
                throw failure("not valid JSON: \(error.reason) (line \(error.line), column \(error.column))")
            }
            guard case .object(let members) = value else { return nil }
            return JSONObject(members: members, failure: failure)
        }
        let mediaType = response.mediaType ?? ""
        guard mediaType == "application/x-www-form-urlencoded" || mediaType == "text/plain" || mediaType.isEmpty,
              let text = String(data: response.body, encoding: .utf8), !text.contains("<"), text.contains("=")
        else { return nil }
        var members: [String: JSONValue] = [:]
        for (name, value) in FormEncoding.decode(text) where members[name] == nil { members[name] = .string(value) }
        return JSONObject(members: members, failure: failure)
    }

    /// The §5.2 error in a body, when it has a string `error`.
    static func errorResponse(in object: JSONObject) -> ErrorResponse? {
        guard case .string(let code)? = object.value("error"), !code.isEmpty else { return nil }
        return ErrorResponse(
            code: .init(rawValue: code), errorDescription: object.value("error_description")?.stringValue,
            errorURI: object.value("error_uri")?.stringValue)
    }

    /// Maps a §5.2 body to the error a caller acts on: `access_denied` is `.accessDenied`,
    /// `expired_token` is `.expired`, any other `.serverRejected`.
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
}

extension UInt8 {
    var isWhitespaceByte: Bool { self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D }
}
