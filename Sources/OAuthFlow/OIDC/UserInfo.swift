#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The claims the userinfo endpoint returned about the signed-in user
/// ([OpenID Connect Core §5.3.2](https://openid.net/specs/openid-connect-core-1_0.html#UserInfoResponse)).
///
/// Get one from ``AuthFlow/userInfo(provider:)``; read ``subject`` for the user's stable id and
/// ``claims`` for everything else (`email`, `name`, …), each a ``JSONValue``. When an ID token is
/// held, ``subject`` has already been checked to equal its `sub` (Core §5.3.4). `description`,
/// `debugDescription` and `dump` show only `sub`: the other claims are personal data.
public struct UserInfo: Sendable, Hashable {
    /// The `sub` claim: the user's identifier at the provider.
    public var subject: String
    /// Every claim of the response, `sub` included.
    public var claims: [String: JSONValue]

    /// Creates a userinfo value; `claims` should hold `sub` too.
    public init(subject: String, claims: [String: JSONValue]) {
        self.subject = subject
        self.claims = claims
    }

    /// Reads a userinfo answer: a JSON object whose `sub` is a non-empty string.
    /// - Throws: ``OAuthError`` `.invalidResponse` through `object`'s failure.
    init(_ object: JSONObject) throws(OAuthError) {
        subject = try object.requiredString("sub")
        claims = object.members
    }
}

extension UserInfo: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `UserInfo(sub: …, N claims)`: the subject and how many claims, no claim values.
    public var description: String { "UserInfo(sub: \(subject), \(claims.count) claims)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// Only the subject and the claim count, so `dump` shows no personal data.
    public var customMirror: Mirror { Mirror(self, children: ["subject": subject, "claimCount": claims.count], displayStyle: .struct) }
}

/// The userinfo request and the reading of its answer (OpenID Connect Core §5.3); no state.
enum UserInfoEndpoint {
    /// The media types accepted: a JSON object, or a signed JWT (Core §5.3.2).
    static let accept = "application/json, application/jwt"

    /// What the endpoint answered.
    enum Answer: Sendable {
        /// A JSON object's claims.
        case claims(UserInfo)
        /// A compact JWS (`application/jwt`), to verify before its claims are read.
        case signed(String)
    }

    /// Sends the bearer GET and returns the answer, unchecked against the ID token.
    ///
    /// - Throws: ``OAuthError`` `.serverRejected` with `invalid_token` (RFC 6750 §3.1) for a
    ///   rejected token; `.httpStatus` for another non-2xx; `.invalidResponse` for a body that is
    ///   not a JSON object with `sub`, an `application/jwt` body that is not a compact JWS, or an
    ///   encrypted one (a JWE: five segments, ``TokenRejection/encrypted``); `.transport`.
    /// With `dpop` (a DPoP-bound token, RFC 9449 §7.1), those headers authorize the request instead of `Bearer`.
    static func fetch(_ url: URL, token: Secret, client: EndpointClient, dpop: AuthorizationHeaders? = nil) async throws(OAuthError) -> Answer {
        var request = client.getRequest(url: url, bearer: dpop == nil ? token : nil, accept: accept)
        if let dpop {
            request.headers.append((name: "Authorization", value: dpop.authorization.reveal()))
            if let proof = dpop.dpop { request.headers.append((name: "DPoP", value: proof.reveal())) }
        }
        let response = try await client.send(request, endpoint: .userinfo)
        let provider = client.provider.id
        guard (200..<300).contains(response.status) else {
            throw BearerChallenge.error(for: response, provider: provider, endpoint: .userinfo)
        }
        let invalid = client.invalid(.userinfo, status: response.status)
        if response.mediaType == "application/jwt" {
            let text = ASCIIText.trimmingBlanksAndNewlines(String(decoding: response.body, as: UTF8.self))
            guard TokenSyntax.isCompactJOSE(text) else {
                throw invalid("an application/jwt body must be a compact JWS (base64url segments and dots, RFC 7515 §7.1)")
            }
            let segments = text.utf8.count(where: { $0 == UInt8(ascii: ".") }) + 1
            if segments == 5 {
                var error = invalid("the answer is encrypted (a JWE, OpenID Connect Core §5.3.2), which OAuthFlow does not decrypt; "
                    + "register the client without userinfo_encrypted_response_alg")
                error.underlying = TokenRejection.encrypted
                throw error
            }
            return .signed(text)
        }
        // application/json as Core §5.3.2 says; a JSON object under another media type is read too.
        guard response.mediaType == "application/json" || response.body.first(where: { !$0.isWhitespaceByte }) == UInt8(ascii: "{") else {
            throw invalid("expected application/json, got \(EndpointClient.describeBody(response))")
        }
        let value = try EndpointClient.parseJSON(response.body, endpoint: .userinfo, provider: provider, status: response.status)
        return .claims(try UserInfo(JSONObject(value, what: "the userinfo response", failure: invalid)))
    }

    /// The claims of a signed answer whose signature was verified: a JSON object with `sub`;
    /// `iss`, when present, equal to `issuer`; `aud`, when present, containing `clientID`; `exp`,
    /// when present, not past by more than `clockSkew` (Core §5.3.2: a signed answer SHOULD carry
    /// `iss` and `aud`).
    /// - Throws: ``OAuthError`` `.invalidResponse` naming the claim, with the ``TokenRejection``
    ///   reason; `.configuration` when the answer has `iss` and the provider has no `issuer` to
    ///   compare it with.
    static func claims(
        ofSigned payload: [UInt8], issuer: String?, clientID: String, now: Date, clockSkew: TimeInterval, provider: String
    ) throws(OAuthError) -> UserInfo {
        let invalid = EndpointClient.invalid(.userinfo, provider: provider, status: 200)
        let rejected = { (reason: TokenRejection, message: String) -> OAuthError in
            var error = invalid("signed answer: \(message)")
            error.underlying = reason
            return error
        }
        let value: JSONValue
        do { value = try JSONValue.parse(payload) } catch { throw rejected(.malformed, "the claims are not JSON: \(error.reason)") }
        let object = try JSONObject(value, what: "the signed answer's claims") { rejected(.invalidClaim, $0) }
        if let returned = try object.string("iss") {
            guard let issuer else {
                throw OAuthError(.configuration, providerID: provider, endpoint: .userinfo,
                                 message: "the signed userinfo answer names an iss, and provider \"\(provider)\" has no issuer to compare it "
                                    + "with; set issuer in the catalog")
            }
            guard returned == issuer else {
                throw rejected(.issuer, "iss \"\(TokenRejection.printable(returned))\" is not the provider's issuer \"\(issuer)\"")
            }
        }
        if let audience = object.value("aud") {
            let names: [String]
            switch audience {
            case .string(let name): names = [name]
            default: names = try object.strings("aud") ?? []
            }
            guard names.contains(clientID) else { throw rejected(.audience, "aud does not contain this client's client_id") }
        }
        if let expiresAt = try object.date("exp"), now.timeIntervalSince(expiresAt) >= clockSkew {
            throw rejected(.expired, "exp is \(Int(now.timeIntervalSince(expiresAt))) s in the past")
        }
        return try UserInfo(object)
    }

    /// A JWS rejection (`.idTokenRejected` from the verifier) restated as what it is here: a
    /// userinfo answer that cannot be trusted, `.invalidResponse` keeping the reason.
    static func rejected(_ error: OAuthError, provider: String) -> OAuthError {
        guard error.code == .idTokenRejected else { return error }
        var restated = EndpointClient.invalid(.userinfo, provider: provider, status: 200)("signed answer: \(error.message ?? "rejected")")
        restated.underlying = error.underlying
        return restated
    }
}

/// The error a protected resource reports in `WWW-Authenticate: Bearer …` ([RFC 6750 §3](https://www.rfc-editor.org/rfc/rfc6750#section-3)).
/// Its `parse(_:)` reads the header with the one `WWW-Authenticate` parser (HTTP/Challenge.swift).
enum BearerChallenge {
    /// The error for a non-2xx answer of a bearer-protected endpoint: the challenge's RFC 6750 code
    /// (or a §5.2 JSON body's) as `.serverRejected`, else `.httpStatus`.
    static func error(for response: HTTPResponse, provider: String, endpoint: OAuthError.Endpoint) -> OAuthError {
        var challenge = response.headers["www-authenticate"].flatMap(parse)
        if challenge == nil {
            // A §5.2-style JSON body instead of the header; a broken body only loses the detail, not the failure.
            do {
                if let object = try EndpointClient.parseBody(response, endpoint: endpoint, provider: provider) {
                    challenge = EndpointClient.errorResponse(in: object)
                }
            } catch {}
        }
        guard let challenge else {
            return OAuthError(.httpStatus, providerID: provider, endpoint: endpoint, httpStatus: response.status,
                              message: "HTTP \(response.status) with \(EndpointClient.describeBody(response))")
        }
        let message: String?
        switch challenge.code {
        case .invalidToken:
            message = "the access token was rejected (expired or revoked); call refresh(provider:) or authorize again"
        case .insufficientScope:
            message = "the access token lacks a scope this endpoint needs; authorize again with it"
        default:
            message = nil
        }
        return OAuthError(.serverRejected, providerID: provider, endpoint: endpoint, httpStatus: response.status,
                          response: challenge, message: message)
    }
}
