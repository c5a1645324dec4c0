#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The headers that authorize one request to a resource server: `Authorization`, and for a
/// DPoP-bound token the `DPoP` proof made for that request (RFC 9449 §7.1).
///
/// Both values are secrets: put them on the request and never log them. A proof is good for
/// one request (its `htm`, `htu` and `jti`); make new headers for every request.
public struct AuthorizationHeaders: Sendable, CustomStringConvertible {
    /// `Bearer <token>` or `DPoP <token>`.
    public var authorization: Secret
    /// The DPoP proof, for a DPoP-bound token; nil for a bearer token.
    public var dpop: Secret?

    /// `AuthorizationHeaders(DPoP, proof)`: the scheme only.
    public var description: String {
        "AuthorizationHeaders(\(dpop == nil ? "Bearer" : "DPoP")\(dpop == nil ? "" : ", proof"))"
    }
}

extension TokenSource {
    /// The headers for a `method` request to `url` with a valid token: `Authorization: Bearer`,
    /// or for a DPoP-bound token `Authorization: DPoP <token>` and a `DPoP` proof with `ath` and
    /// the resource server's latest nonce (RFC 9449 §7.1, §9).
    ///
    /// For HTTP clients other than an ``HTTPTransport`` (``AuthorizingTransport`` does this for
    /// you, and retries a `use_dpop_nonce` answer); call it once per request.
    /// - Throws: what ``tokenSet()`` throws; `.configuration` for a DPoP-bound token without a
    ///   key (one stored before the key was, or a ``Provider/Settings/dpopKey`` removed since);
    ///   `.invalidResponse` for a token an HTTP header cannot carry; what the signer throws.
    public func authorizationHeaders(method: String, url: URL) async throws(OAuthError) -> AuthorizationHeaders {
        let set = try await tokenSet()
        do { return try await headers(for: set, method: method, url: url) } catch { throw await flow.fail(providerID, error) }
    }

    /// The headers for `set` (see ``authorizationHeaders(method:url:)``).
    func headers(for set: TokenSet, method: String, url: URL) async throws(OAuthError) -> AuthorizationHeaders {
        let authorization = Secret(try Self.authorizationValue(for: set))
        guard set.isDPoPBound else { return AuthorizationHeaders(authorization: authorization, dpop: nil) }
        let provider = try flow.provider(providerID)
        let prover: DPoPProver
        if let signer = provider.dpopKey {
            prover = try DPoPProver(signer: signer, algorithm: provider.effectiveDPoPAlgorithm)
        } else if let key = set.dpopKey {
            prover = DPoPProver(key)
        } else {
            throw OAuthError(.configuration, providerID: providerID, message: "the token is DPoP-bound, but no DPoP key is held for it; log in again")
        }
        let nonce = flow.client(for: provider).dpopNonces.nonce(for: url)
        let proof = try await prover.proof(method: method, url: url, nonce: nonce, accessToken: set.accessToken, now: now())
        return AuthorizationHeaders(authorization: authorization, dpop: proof)
    }

    /// Reads a resource server's answer to a request authorized with
    /// ``authorizationHeaders(method:url:)``: keeps its `DPoP-Nonce` (RFC 9449 §9), and returns
    /// true when the request should be sent once more with new headers — a 401 whose
    /// `WWW-Authenticate` says `use_dpop_nonce` and that brought a nonce. Retry once, not in a loop.
    /// - Parameters:
    ///   - headers: The response's header fields (any case).
    ///   - url: The URL the request went to.
    public func shouldRetryWithDPoPNonce(status: Int, headers: [String: String], url: URL) -> Bool {
        let response = HTTPResponse(status: status, headers: headers)
        return recordNonce(response, from: url) && status == 401 && Challenge.isDPoPNonceRequest(response.headers["www-authenticate"])
    }

    /// Keeps the `DPoP-Nonce` a resource server at `url` answered with; true when it gave a valid one.
    @discardableResult
    func recordNonce(_ response: HTTPResponse, from url: URL) -> Bool {
        guard let provider = flow.providers[providerID] else { return false }
        return flow.client(for: provider).dpopNonces.record(response, from: url)
    }
}

extension Challenge {
    /// True when `header` holds a DPoP challenge with `error="use_dpop_nonce"` (RFC 9449 §9).
    static func isDPoPNonceRequest(_ header: String?) -> Bool {
        guard let header else { return false }
        return parse(header).contains { $0.scheme.lowercased() == "dpop" && $0.parameters["error"] == "use_dpop_nonce" }
    }

    /// True when `header` says the access token is not accepted: a Bearer or DPoP challenge with
    /// `error="invalid_token"` (RFC 6750 §3.1, RFC 9449 §7.1).
    static func isInvalidToken(_ header: String?) -> Bool {
        guard let header else { return false }
        return parse(header).contains {
            ($0.isBearer || $0.scheme.lowercased() == "dpop") && $0.parameters["error"] == "invalid_token"
        }
    }
}
