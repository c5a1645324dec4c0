#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// The CIBA options of `login` (OpenID Connect CIBA Core 1.0 §7.1): whom the provider asks, and
/// what the request shows them. Given with `--ciba`, or alone (they imply it).
public struct CIBALoginOptions: Sendable, Equatable {
    /// `--login-hint VALUE`: `login_hint`.
    public var loginHint: String?
    /// `--id-token-hint TOKEN`: `id_token_hint`.
    public var idTokenHint: String?
    /// `--login-hint-token TOKEN`: `login_hint_token`.
    public var loginHintToken: String?
    /// `--binding-message TEXT`: `binding_message`, shown here and on the person's device.
    public var bindingMessage: String?
    /// `--user-code CODE`: `user_code`.
    public var userCode: String?
    /// `--requested-expiry SECONDS`: `requested_expiry`.
    public var requestedExpiry: Int?

    /// Options naming no one: the catalog's `cibaLoginHint` is asked.
    public init(
        loginHint: String? = nil, idTokenHint: String? = nil, loginHintToken: String? = nil, bindingMessage: String? = nil,
        userCode: String? = nil, requestedExpiry: Int? = nil
    ) {
        self.loginHint = loginHint
        self.idTokenHint = idTokenHint
        self.loginHintToken = loginHintToken
        self.bindingMessage = bindingMessage
        self.userCode = userCode
        self.requestedExpiry = requestedExpiry
    }

    /// True when no CIBA option was given.
    var isEmpty: Bool { self == CIBALoginOptions() }

    /// True when a hint of any kind was given (else the catalog's `cibaLoginHint` is asked).
    var isNamingSomeone: Bool { loginHint != nil || idTokenHint != nil || loginHintToken != nil }

    /// Reads the CIBA options of a `login` command line; the last of each wins.
    /// - Throws: ``UsageError`` for two kinds of hint, or a `--requested-expiry` that is not a positive number.
    static func parse(_ options: [(name: String, value: String?)]) throws(UsageError) -> CIBALoginOptions {
        func last(_ name: String) -> String? { options.last { $0.name == name }?.value }
        var parsed = CIBALoginOptions(
            loginHint: last("--login-hint"), idTokenHint: last("--id-token-hint"), loginHintToken: last("--login-hint-token"),
            bindingMessage: last("--binding-message"), userCode: last("--user-code"))
        guard [parsed.loginHint, parsed.idTokenHint, parsed.loginHintToken].compactMap({ $0 }).count <= 1 else {
            throw UsageError("choose one of --login-hint, --id-token-hint, --login-hint-token (CIBA names the person once)", command: "login")
        }
        if let text = last("--requested-expiry") {
            guard let seconds = Int(text), seconds > 0 else {
                throw UsageError("--requested-expiry needs a positive number of seconds, not '\(DisplayText.escape(text))'", command: "login")
            }
            parsed.requestedExpiry = seconds
        }
        return parsed
    }

    /// The library's request: the hint given (none: the catalog's `cibaLoginHint`), the binding
    /// message, user code and expiry, `scopes` (nil: the provider's). The library checks each.
    func request(scopes: [String]?) -> BackchannelAuthenticationRequest {
        let hint: BackchannelAuthenticationRequest.Hint?
        if let loginHint {
            hint = .loginHint(loginHint)
        } else if let idTokenHint {
            hint = .idTokenHint(Secret(idTokenHint))
        } else {
            hint = loginHintToken.map { .loginHintToken(Secret($0)) }
        }
        return BackchannelAuthenticationRequest(
            hint: hint, bindingMessage: bindingMessage, userCode: userCode.map(Secret.init), requestedExpiry: requestedExpiry, scopes: scopes)
    }
}

extension LoginSession {
    /// What a person reads while a CIBA request waits: whom it went to, the binding message to
    /// compare with the one on their device, and when it expires. Every part is escaped (the
    /// binding message was refused with a control character before it was sent; the provider id
    /// and the hint come from the catalog or the command line).
    static func backchannelInstructions(
        _ provider: String, _ authentication: BackchannelAuthentication, hint: String?, style: Style, now: Date
    ) -> String {
        var text = "\(escaped(provider)) is asking "
            + (hint.map { style.bold(escaped(String($0.prefix(200)))) } ?? "the person") + " to approve this login on their own device.\n"
        if let message = authentication.bindingMessage {
            text += "Check that the request shows:\n\(style.bold(escaped(message)))\n"
        }
        text += "It expires \(Timestamps.relative(authentication.expiresAt, now: now)).\n"
        return text
    }
}
