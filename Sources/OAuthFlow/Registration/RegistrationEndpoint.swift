#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The registration endpoint (RFC 7591 §3) and the client configuration endpoint (RFC 7592 §2):
/// the JSON requests and their answers. Builds, sends and reads; stores nothing (the flow does,
/// Flow/AuthFlow+Registration.swift).
enum RegistrationEndpoint {
    /// POSTs `metadata` to `url`, with the initial access token when one is given (RFC 7591 §3).
    /// - Returns: the answer's JSON object (201, or any 2xx: glewlwyd answers 200).
    /// - Throws: ``OAuthError`` as ``answer(_:client:)``.
    static func register(
        _ metadata: ClientMetadata, at url: URL, initialAccessToken: Secret?, client: EndpointClient
    ) async throws(OAuthError) -> JSONObject {
        let request = jsonRequest("POST", url, body: metadata.members(), token: initialAccessToken, client: client)
        guard let object = try answer(try await client.send(request, endpoint: .registration), client: client) else {
            throw OAuthError(.invalidResponse, providerID: client.provider.id, endpoint: .registration, message: "the registration answer is empty")
        }
        return object
    }

    /// GETs the client's configuration (RFC 7592 §2.1).
    /// - Throws: ``OAuthError`` as ``answer(_:client:)``; `.invalidResponse` for an empty answer.
    static func read(_ uri: URL, token: Secret, client: EndpointClient) async throws(OAuthError) -> JSONObject {
        guard let object = try answer(try await client.send(jsonRequest("GET", uri, body: nil, token: token, client: client), endpoint: .registration),
                                      client: client) else {
            throw OAuthError(.invalidResponse, providerID: client.provider.id, endpoint: .registration, message: "the configuration answer is empty")
        }
        return object
    }

    /// PUTs the full metadata with `client_id` (RFC 7592 §2.2).
    /// - Throws: ``OAuthError`` as ``answer(_:client:)``; `.invalidResponse` for an empty answer.
    static func update(
        _ uri: URL, token: Secret, metadata: ClientMetadata, clientID: String, client: EndpointClient
    ) async throws(OAuthError) -> JSONObject {
        let request = jsonRequest("PUT", uri, body: metadata.members(clientID: clientID), token: token, client: client)
        guard let object = try answer(try await client.send(request, endpoint: .registration), client: client) else {
            throw OAuthError(.invalidResponse, providerID: client.provider.id, endpoint: .registration, message: "the update answer is empty")
        }
        return object
    }

    /// DELETEs the client (RFC 7592 §2.3): 204, or any 2xx (glewlwyd answers 200 with an empty body).
    /// - Throws: ``OAuthError`` as ``answer(_:client:)``.
    static func delete(_ uri: URL, token: Secret, client: EndpointClient) async throws(OAuthError) {
        _ = try answer(try await client.send(jsonRequest("DELETE", uri, body: nil, token: token, client: client), endpoint: .registration),
                       client: client)
    }

    /// A JSON request with `Authorization: Bearer` when `token` is given.
    static func jsonRequest(_ method: String, _ url: URL, body: [String: JSONValue]?, token: Secret?, client: EndpointClient) -> HTTPRequest {
        var headers: [(name: String, value: String)] = [("Accept", "application/json"), ("User-Agent", client.provider.userAgent ?? client.userAgent)]
        if body != nil { headers.insert(("Content-Type", "application/json"), at: 0) }
        if let token { headers.append(("Authorization", "Bearer \(token.reveal())")) }
        return HTTPRequest(method: method, url: url, headers: headers, body: body.map { Data(JSONValue.object($0).jsonText.utf8) })
    }

    /// The object of a 2xx answer (nil when its body is empty); an RFC 7591 §3.2.2 error body is
    /// an error whatever the status (`.serverRejected`, or `.accessDenied` for `access_denied`).
    /// - Throws: ``OAuthError`` `.serverRejected` / `.accessDenied` with the body; `.httpStatus`
    ///   for a non-2xx answer without one (a 401 with an empty body for a wrong token);
    ///   `.invalidResponse` for a 2xx body that is not a JSON object.
    static func answer(_ response: HTTPResponse, client: EndpointClient) throws(OAuthError) -> JSONObject? {
        let provider = client.provider.id
        let object = try EndpointClient.parseBody(response, endpoint: .registration, provider: provider)
        if let object, let error = EndpointClient.errorResponse(in: object) {
            throw EndpointClient.error(for: error, provider: provider, endpoint: .registration, status: response.status)
        }
        guard (200..<300).contains(response.status) else {
            throw OAuthError(.httpStatus, providerID: provider, endpoint: .registration, httpStatus: response.status,
                             message: "HTTP \(response.status) with \(EndpointClient.describeBody(response)) instead of an OAuth error body")
        }
        if object == nil, !response.body.isEmpty {
            throw OAuthError(.invalidResponse, providerID: provider, endpoint: .registration, httpStatus: response.status,
                             message: "expected a JSON object, got \(EndpointClient.describeBody(response))")
        }
        return object
    }
}
