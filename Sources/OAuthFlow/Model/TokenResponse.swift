#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The token response fields of RFC 6749 §5.1, decoded from JSON or (GitHub) form encoding.
struct TokenResponse: Sendable {
    var accessToken: Secret
    var tokenType: String
    var expiresIn: Int?
    var refreshToken: Secret?
    var idToken: Secret?
    var scope: String?

    /// The longest `expires_in` accepted: about 68 years. A larger number is an error, never a
    /// date too far away to compute with.
    static let maximumLifetime = Int(Int32.max)

    /// Decodes a §5.1 body; every number is range-checked and every token's syntax checked
    /// (``TokenSyntax``); a `token_type` other than Bearer is refused, but `DPoP` when a proof was
    /// sent (`dpop` not `.off`, RFC 9449 §5), and Bearer when DPoP is `.required`.
    /// - Throws: ``OAuthError`` `.invalidResponse` naming the member and the problem.
    init(_ json: JSONObject, dpop: DPoPMode = .off) throws(OAuthError) {
        accessToken = Secret(try json.requiredString("access_token"))
        tokenType = try json.requiredString("token_type")
        // Azure sends "3599" as a string.
        expiresIn = try json.integer("expires_in", in: 0...Self.maximumLifetime, acceptsString: true)
        refreshToken = try json.string("refresh_token").flatMap { $0.isEmpty ? nil : Secret($0) }
        idToken = try json.string("id_token").flatMap { $0.isEmpty ? nil : Secret($0) }
        try TokenSyntax.check(
            accessToken: accessToken.reveal(), tokenType: tokenType, refreshToken: refreshToken?.reveal(), idToken: idToken?.reveal(),
            names: ("access_token", "token_type", "refresh_token", "id_token"), allowsDPoP: dpop != .off, fail: json.fail)
        if dpop == .required, !TokenSyntax.isDPoP(tokenType) {
            throw json.fail("token_type is Bearer, but the provider requires DPoP-bound tokens (\"dpop\": \"required\", RFC 9449 §5)")
        }
        if case .array = json.value("scope") {
            scope = try json.strings("scope")?.joined(separator: " ")   // a few servers send an array
        } else {
            scope = try json.string("scope")
        }
    }
}
