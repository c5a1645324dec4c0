#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Pushed authorization requests ([RFC 9126](https://www.rfc-editor.org/rfc/rfc9126)): the
/// authorization parameters are POSTed to the server, with the client authenticated as at the
/// token endpoint, and the browser gets only `client_id` and the `request_uri` the server
/// answers with.
///
/// Builds the pushed form and reads the answer; stores nothing and publishes nothing
/// (``AuthFlow/authorizationRequest(provider:scopes:parameters:usePKCE:resources:)`` strings it together).
enum PushedAuthorization {
    /// The longest `expires_in` accepted, in seconds. RFC 9126 §2.2 expects a short lifetime
    /// (its example is 60 s); a larger number is a broken or hostile answer.
    static let maximumLifetime = 86_400
    /// The longest `request_uri` accepted, in bytes (it goes into the browser's URL).
    static let maximumRequestURILength = 2_048

    /// The server's answer (RFC 9126 §2.2).
    struct Answer: Sendable {
        /// The `request_uri` to send the browser with.
        let requestURI: String
        /// Seconds until it expires.
        let expiresIn: Int
    }

    /// The form fields pushed (RFC 9126 §2.1): every authorization parameter, or only `request`
    /// with a signed request object (RFC 9126 §3). `client_id` is left to the client's
    /// authentication, which puts it in the body for every method but `client_secret_basic`;
    /// with Basic it is sent here, so it appears exactly once.
    static func fields(
        _ parameters: [(String, String)], requestObject: Secret?, clientID: String, authenticator: ClientAuthenticator
    ) -> [(String, String)] {
        var fields: [(String, String)]
        if let requestObject {
            fields = [("request", requestObject.reveal())]
        } else {
            fields = parameters.filter { $0.0 != "client_id" }
        }
        if case .secretBasic = authenticator { fields.insert(("client_id", clientID), at: 0) }
        return fields
    }

    /// POSTs `fields` to the pushed authorization request endpoint `url` through `client` (which
    /// authenticates the client, with a fresh assertion for each attempt) and reads the answer.
    ///
    /// With `proof` (a DPoP provider), every attempt carries a fresh DPoP proof for `POST` and
    /// `url` with the server's latest nonce, and a `use_dpop_nonce` answer is sent once more with
    /// the nonce it brought: the token endpoint's path in ``EndpointClient/post(_:to:endpoint:retrying:proof:)``
    /// (RFC 9449 §5, §8, §10.1; the pushed fields keep the matching `dpop_jkt`).
    /// - Throws: ``OAuthError`` `.serverRejected` for a §5.2 body (such as `invalid_request`, or a
    ///   second `use_dpop_nonce`); `.httpStatus` for another non-2xx answer; `.invalidResponse` for
    ///   an answer that is not a JSON object, or whose `request_uri` or `expires_in` is missing or
    ///   malformed; `.crypto` when a proof cannot be signed; `.transport`.
    static func push(
        _ fields: [(String, String)], to url: URL, client: EndpointClient, proof: DPoPProver? = nil
    ) async throws(OAuthError) -> Answer {
        let object = try await client.post(fields, to: url, endpoint: .pushedAuthorization, retrying: .transient, proof: proof)
        return try answer(object)
    }

    /// Reads an answer: `request_uri` a URI of printable ASCII (at most 2048 bytes) and
    /// `expires_in` a whole number of seconds from 1 to 86 400 (RFC 9126 §2.2).
    /// - Throws: ``OAuthError`` `.invalidResponse` naming the member at fault.
    static func answer(_ object: JSONObject) throws(OAuthError) -> Answer {
        let requestURI = try object.requiredString("request_uri")
        guard requestURI.utf8.count <= maximumRequestURILength else {
            throw object.fail("request_uri is longer than \(maximumRequestURILength) bytes")
        }
        guard requestURI.utf8.allSatisfy({ (0x21...0x7E).contains($0) }), let colon = requestURI.firstIndex(of: ":"),
              colon != requestURI.startIndex
        else {
            throw object.fail("request_uri is not a URI (printable ASCII with a scheme)")
        }
        guard let expiresIn = try object.integer("expires_in", in: 1...maximumLifetime) else {
            throw object.fail("expires_in is missing")
        }
        return Answer(requestURI: requestURI, expiresIn: expiresIn)
    }
}
