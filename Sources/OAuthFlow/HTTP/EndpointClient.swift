#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One provider's HTTP client, shared by the token endpoint and every other endpoint: form POSTs
/// with the client's authentication (retried as the caller allows, with a DPoP proof when given),
/// bearer GETs and public document GETs; sending them; decoding bodies through the one JSON
/// parser; and mapping errors (RFC 6749 §5.2).
///
/// A class: every grant passes its client down a chain of async calls, and a reference keeps each
/// of their frames (allocated per task) small.
final class EndpointClient: Sendable {
    let provider: Provider
    let transport: any HTTPTransport
    let userAgent: String
    let log: Logger
    /// Retries for the requests sent with a ``RetryScope`` (token requests; see Retry.swift).
    let retry: Retrier
    /// How the client authenticates (Credentials/ClientAuthenticator.swift): made once, applied
    /// to every form POST.
    let authenticator: ClientAuthenticator
    /// The latest `DPoP-Nonce` of each server this provider's requests reach (RFC 9449 §8, §9).
    let dpopNonces = DPoPNonces()
    /// The DPoP key made for this provider until its tokens hold it (``TokenEndpoint/prover(previous:)``).
    let dpopKeySlot = DPoPKeySlot()

    /// A client for `provider`; its authenticator is made from the provider's registration
    /// unless given. ``AuthFlow`` makes one per provider when it is made.
    init(
        provider: Provider, transport: any HTTPTransport, userAgent: String, log: Logger, retry: Retrier = .none,
        authenticator: ClientAuthenticator? = nil
    ) {
        self.provider = provider
        self.transport = transport
        self.userAgent = userAgent
        self.log = log
        self.retry = retry
        self.authenticator = authenticator ?? ClientAuthenticator(provider)
    }

    /// The largest body accepted: the transport's own setting.
    var maximumBodySize: Int { transport.maximumBodySize }

    /// A POST of `fields` to `url`, with the client's authentication applied (RFC 6749 §2.3): the
    /// one place every request that authenticates the client is built (token endpoint, device
    /// authorization, revocation, introspection, pushed authorization).
    /// - Throws: what the authenticator throws (a signer's failure, an unusable method).
    func formRequest(url: URL, fields: [(String, String)]) async throws(OAuthError) -> HTTPRequest {
        var post = FormPost(url: url, clientID: provider.clientID, fields: fields, headers: [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "application/json"),
            ("User-Agent", provider.userAgent ?? userAgent),
        ])
        try await authenticator.apply(to: &post)
        return HTTPRequest(method: "POST", url: url, headers: post.headers, body: FormEncoding.body(post.fields))
    }

    /// A GET of `url`; with `bearer`, authorized by that access token (RFC 6750 §2.1) — the
    /// scheme is always written `Bearer`, whatever case the server used in `token_type`.
    func getRequest(url: URL, bearer: Secret? = nil, accept: String = "application/json") -> HTTPRequest {
        var headers: [(name: String, value: String)] = [("Accept", accept), ("User-Agent", provider.userAgent ?? userAgent)]
        if let bearer { headers.append(("Authorization", "Bearer \(bearer.reveal())")) }
        return HTTPRequest(method: "GET", url: url, headers: headers)
    }

    /// Sends `request` once and returns the response whatever its status; maps transport failures
    /// and refuses a body over ``maximumBodySize``.
    func send(_ request: HTTPRequest, endpoint: OAuthError.Endpoint) async throws(OAuthError) -> HTTPResponse {
        log.debug(provider, "\(request.method) \(endpoint.rawValue) \(request.url.host ?? "")\(request.url.path) fields=\(fieldNames(request))")
        let response: HTTPResponse
        do {
            response = try await transport.send(request)
        } catch {
            throw failed(error, endpoint: endpoint)
        }
        try checkAnswered(response, endpoint: endpoint)
        return response
    }

    // Out of line: inlined into the async `send`, the error and the strings built here would be
    // given room in its frame, which every request in flight holds for the whole network wait.

    /// A transport failure, with the provider and endpoint filled in.
    @inline(never)
    private func failed(_ error: OAuthError, endpoint: OAuthError.Endpoint) -> OAuthError {
        var error = error
        error.providerID = provider.id
        error.endpoint = endpoint
        log.debug(provider, "\(endpoint.rawValue) failed: \(error.code)")
        return error
    }

    /// Logs the answer and refuses a body over ``maximumBodySize``.
    @inline(never)
    private func checkAnswered(_ response: HTTPResponse, endpoint: OAuthError.Endpoint) throws(OAuthError) {
        log.debug(provider, "\(endpoint.rawValue) answered \(response.status) \(response.mediaType ?? "-") \(response.body.count) bytes")
        guard response.body.count <= maximumBodySize else {
            throw OAuthError(.invalidResponse, providerID: provider.id, endpoint: endpoint, httpStatus: response.status,
                             message: "the response body exceeds \(maximumBodySize) bytes")
        }
    }

    /// POSTs `fields` as a form to `url` with the client's authentication, and returns the object
    /// of a 2xx body; maps every failure to ``OAuthError``.
    ///
    /// Every attempt (see `scope`) is a request made anew, with the client's authentication applied
    /// again: a retry never resends a client assertion (each carries a fresh `jti`, RFC 7523 §3).
    /// A §5.2 body (JSON or form) is an error whatever the status (GitHub sends them with 200).
    ///
    /// With `proof`, every attempt carries a fresh DPoP proof (RFC 9449 §5) with the server's latest
    /// nonce; a `use_dpop_nonce` answer that brings a new `DPoP-Nonce` is sent once more with it
    /// (§8): a second `use_dpop_nonce` is an error, never a loop.
    func post(
        _ fields: [(String, String)], to url: URL, endpoint: OAuthError.Endpoint, retrying scope: RetryScope = .never,
        proof: DPoPProver? = nil
    ) async throws(OAuthError) -> JSONObject {
        var (response, gaveNonce) = try await sendForm(fields, to: url, endpoint: endpoint, retrying: scope, proof: proof)
        var object = try Self.parseBody(response, endpoint: endpoint, provider: provider.id)
        if gaveNonce, let first = object, Self.errorResponse(in: first)?.code == .useDPoPNonce {
            log.debug(provider, "\(endpoint.rawValue) asked for a DPoP nonce; sending once more with it")
            (response, _) = try await sendForm(fields, to: url, endpoint: endpoint, retrying: scope, proof: proof)
            object = try Self.parseBody(response, endpoint: endpoint, provider: provider.id)
        }
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

    /// One form POST with its retries: attempts until one is final (``Retrier/wait(after:attempt:startedAt:_:provider:log:)``
    /// says nil), sleeping between them; a `DPoP-Nonce` in the answer is kept (`gaveNonce`).
    private func sendForm(
        _ fields: [(String, String)], to url: URL, endpoint: OAuthError.Endpoint, retrying scope: RetryScope, proof: DPoPProver?
    ) async throws(OAuthError) -> (response: HTTPResponse, gaveNonce: Bool) {
        let response: HTTPResponse
        if retry.retries(scope) {
            response = try await sendRetrying(fields, to: url, endpoint: endpoint, retrying: scope, proof: proof)
        } else {
            response = try await sendOnce(fields, to: url, endpoint: endpoint, proof: proof)
        }
        return (response, proof != nil && dpopNonces.record(response, from: url))
    }

    private func sendRetrying(
        _ fields: [(String, String)], to url: URL, endpoint: OAuthError.Endpoint, retrying scope: RetryScope, proof: DPoPProver?
    ) async throws(OAuthError) -> HTTPResponse {
        let started = retry.now()
        var attempt = 1
        while true {
            let outcome: Result<HTTPResponse, OAuthError>
            do { outcome = .success(try await sendOnce(fields, to: url, endpoint: endpoint, proof: proof)) } catch { outcome = .failure(error) }
            guard let wait = retry.wait(after: outcome, attempt: attempt, startedAt: started, scope, provider: provider, log: log) else {
                return try outcome.get()
            }
            try await retry.sleep(wait, provider: provider)
            attempt += 1
        }
    }

    /// One attempt, built anew: the form with the client's authentication, and with `proof` a
    /// fresh DPoP proof carrying the server's latest nonce.
    private func sendOnce(
        _ fields: [(String, String)], to url: URL, endpoint: OAuthError.Endpoint, proof: DPoPProver?
    ) async throws(OAuthError) -> HTTPResponse {
        var request = try await formRequest(url: url, fields: fields)
        if let proof {
            let value = try await proof.proof(method: "POST", url: url, nonce: dpopNonces.nonce(for: url), now: retry.now())
            request.headers.append((name: "DPoP", value: value.reveal()))
        }
        return try await send(request, endpoint: endpoint)
    }

    /// GETs a public JSON document (discovery, JWKS): a 2xx JSON object, else a typed error.
    /// Returns the object and the response (for its `Cache-Control`).
    func document(_ url: URL, endpoint: OAuthError.Endpoint) async throws(OAuthError) -> (JSONObject, HTTPResponse) {
        let response = try await send(getRequest(url: url), endpoint: endpoint)
        guard (200..<300).contains(response.status) else {
            throw OAuthError(.httpStatus, providerID: provider.id, endpoint: endpoint, httpStatus: response.status,
                             message: "HTTP \(response.status) with \(Self.describeBody(response)) for \(url.redactedForLog)")
        }
        let value = try Self.parseJSON(response.body, endpoint: endpoint, provider: provider.id, status: response.status)
        return (try JSONObject(value, what: "the \(endpoint.rawValue) document", failure: invalid(endpoint, status: response.status)), response)
    }

    /// The error builder for a malformed answer from `endpoint`: `.invalidResponse` naming the
    /// endpoint and the reason.
    func invalid(_ endpoint: OAuthError.Endpoint, status: Int? = 200) -> (String) -> OAuthError {
        Self.invalid(endpoint, provider: provider.id, status: status)
    }

    private func fieldNames(_ request: HTTPRequest) -> String {
        // A JSON body (a registration, RFC 7591) shows its member names, never the text.
        if request.header("Content-Type") == "application/json" {
            guard let body = request.body, case .object(let members)? = try? JSONValue.parse(body) else { return "" }
            return members.keys.sorted().joined(separator: ",")
        }
        let body = request.body.flatMap { String(data: $0, encoding: .utf8) } ?? ""
        return FormEncoding.decode(body).map(\.0).joined(separator: ",")
    }
}
