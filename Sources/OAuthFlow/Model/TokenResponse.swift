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
    /// `issued_token_type` (RFC 8693 §2.2.1): what a token exchange issued; nil for other grants.
    var issuedTokenType: String?

    /// The longest `expires_in` accepted: about 68 years. A larger number is an error, never a
    /// date too far away to compute with.
    static let maximumLifetime = Int(Int32.max)

    /// Decodes a §5.1 body; every number is range-checked and every token's syntax checked
    /// (``TokenSyntax``); a `token_type` other than Bearer is refused, but `DPoP` when a proof was
    /// sent (`dpop` not `.off`, RFC 9449 §5), Bearer when DPoP is `.required`, and `N_A` with an
    /// `issued_token_type` that is not an access token (RFC 8693 §2.2.1).
    /// - Throws: ``OAuthError`` `.invalidResponse` naming the member and the problem.
    init(_ json: JSONObject, dpop: DPoPMode = .off) throws(OAuthError) {
        accessToken = Secret(try json.requiredString("access_token"))
        tokenType = try json.requiredString("token_type")
        issuedTokenType = try json.string("issued_token_type")
        if let issuedTokenType, !TokenType.isValid(issuedTokenType) {
            throw json.fail("issued_token_type is not an absolute URI of printable ASCII (RFC 8693 §3)")
        }
        // Azure sends "3599" as a string.
        expiresIn = try json.integer("expires_in", in: 0...Self.maximumLifetime, acceptsString: true)
        refreshToken = try json.string("refresh_token").flatMap { $0.isEmpty ? nil : Secret($0) }
        idToken = try json.string("id_token").flatMap { $0.isEmpty ? nil : Secret($0) }
        try TokenSyntax.check(
            accessToken: accessToken.reveal(), tokenType: try Self.checkedTokenType(tokenType, issued: issuedTokenType, fail: json.fail),
            refreshToken: refreshToken?.reveal(), idToken: idToken?.reveal(),
            names: ("access_token", "token_type", "refresh_token", "id_token"), allowsDPoP: dpop != .off, fail: json.fail)
        if dpop == .required, !TokenSyntax.isDPoP(tokenType) {
            throw json.fail("token_type is \(tokenType == TokenType.notApplicable ? "N_A" : "Bearer"), but the provider requires DPoP-bound tokens (\"dpop\": \"required\", RFC 9449 §5)")
        }
        switch json.value("scope") {
        case nil: scope = nil   // absent or null: not looked for again
        case .array: scope = try json.strings("scope")?.joined(separator: " ")   // a few servers send an array
        default: scope = try json.string("scope")
        }
    }

    /// The `token_type` the syntax check sees: `Bearer` for RFC 8693's `N_A` ("not applicable"),
    /// which a token exchange may send only when what it issued is not an access token
    /// (§2.2.1); the type as sent otherwise.
    /// - Throws: `fail`'s error for `N_A` without an `issued_token_type`, or with the access token type.
    static func checkedTokenType(_ tokenType: String, issued: String?, fail: (String) -> OAuthError) throws(OAuthError) -> String {
        guard tokenType == TokenType.notApplicable else { return tokenType }
        guard let issued else {
            throw fail("token_type is N_A without an issued_token_type; N_A is only for a token exchange (RFC 8693 §2.2.1)")
        }
        guard issued != TokenType.accessToken else {
            throw fail("token_type is N_A, but issued_token_type says an access token was issued; an access token needs a token_type (RFC 8693 §2.2.1)")
        }
        return "Bearer"
    }
}
