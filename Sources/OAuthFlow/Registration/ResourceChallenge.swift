#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What a protected resource said in the `WWW-Authenticate` challenge of a refusal: its error and
/// what it asks for — a scope (RFC 6750 §3), an authentication context or a recent authentication
/// (RFC 9470 §3) — and where its metadata is (RFC 9728 §5.1).
///
/// ``AuthorizingTransport`` and ``TokenSource/stepUpError(status:headers:)`` read it from a 401 or
/// 403 and throw ``OAuthError`` `.stepUpRequired` carrying it (``OAuthError/Fields/challenge``). Nothing
/// logs in by itself: show the person ``asked`` and run a login with
/// ``AuthFlow/stepUpRequest(provider:challenge:)``, which asks for ``scopes(adding:)`` and
/// ``authorizationParameters``.
///
/// Every value is checked when it is read: a header with a control character, one longer than
/// 8 KiB, a scope that is not a scope token (RFC 6749 §3.3), an `acr_values` entry outside visible
/// ASCII or a `max_age` that is not a whole number of seconds up to ten years is refused with
/// `.invalidResponse`, so what reaches a terminal or an authorization request is plain.
public struct ResourceChallenge: Sendable, Hashable, CustomStringConvertible {
    /// The challenge's scheme as sent: `Bearer` or `DPoP`.
    public var scheme: String
    /// The HTTP status of the refusal (401 or 403).
    public var httpStatus: Int
    /// `error` (RFC 6750 §3.1): `invalid_token`, `insufficient_scope`,
    /// `insufficient_user_authentication` (RFC 9470 §3), …; nil when the challenge has none.
    public var error: ErrorResponse.Code?
    /// `error_description`, sanitized as ``ErrorResponse`` sanitizes it.
    public var errorDescription: String?
    /// `scope` (RFC 6750 §3): the scopes the request needs; empty when not given.
    public var scope: [String]
    /// `acr_values` (RFC 9470 §3): authentication context classes any one of which is acceptable; empty when not given.
    public var acrValues: [String]
    /// `max_age` (RFC 9470 §3): the person must have authenticated at most this many seconds ago.
    public var maxAge: Int?
    /// `resource_metadata` (RFC 9728 §5.1): where the resource's metadata is.
    public var resourceMetadata: URL?

    /// The longest `acr_values` entry or scope token kept; a longer one is refused.
    static let maximumValueLength = 256
    /// The most scope tokens or `acr_values` entries; more are refused.
    static let maximumValueCount = 64
    /// The largest `max_age` accepted: ten years in seconds.
    static let maximumMaxAge = 315_360_000

    /// Creates a challenge (tests, or a resource of your own).
    public init(
        scheme: String = "Bearer", httpStatus: Int, error: ErrorResponse.Code? = nil, errorDescription: String? = nil,
        scope: [String] = [], acrValues: [String] = [], maxAge: Int? = nil, resourceMetadata: URL? = nil
    ) {
        self.scheme = scheme
        self.httpStatus = httpStatus
        self.error = error
        self.errorDescription = errorDescription
        self.scope = scope
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.resourceMetadata = resourceMetadata
    }

    /// True when the resource asks for more than the token carries: `insufficient_scope`
    /// (RFC 6750 §3.1) or `insufficient_user_authentication` (RFC 9470 §3).
    public var isStepUp: Bool { error == .insufficientScope || error == .insufficientUserAuthentication }

    /// What the resource asked for, for people: `scope="openid api" acr_values="phr" max_age=0`;
    /// empty when it asked for nothing in particular. Every value was checked to be visible ASCII.
    public var asked: String {
        var parts: [String] = []
        if !scope.isEmpty { parts.append("scope=\"\(scope.joined(separator: " "))\"") }
        if !acrValues.isEmpty { parts.append("acr_values=\"\(acrValues.joined(separator: " "))\"") }
        if let maxAge { parts.append("max_age=\(maxAge)") }
        return parts.joined(separator: " ")
    }

    /// The authorization request parameters that answer it (RFC 9470 §4): `acr_values` and
    /// `max_age` when the resource asked for them.
    public var authorizationParameters: [String: String] {
        var parameters: [String: String] = [:]
        if !acrValues.isEmpty { parameters["acr_values"] = acrValues.joined(separator: " ") }
        if let maxAge { parameters["max_age"] = String(maxAge) }
        return parameters
    }

    /// The scopes a new login asks for: `current` (what the token had, so the rest keeps working)
    /// followed by every asked scope it lacks, without repeats.
    public func scopes(adding current: [String]) -> [String] {
        var seen = Set<String>()
        return (current + scope).filter { seen.insert($0).inserted }
    }

    /// `ResourceChallenge(403 insufficient_scope scope="api")`.
    public var description: String {
        "ResourceChallenge(\(httpStatus) \(scheme)\(error.map { " \($0.rawValue)" } ?? "")\(asked.isEmpty ? "" : " \(asked)"))"
    }

    // MARK: Reading

    /// The challenge of a resource's answer: the first `Bearer` or `DPoP` challenge of its
    /// `WWW-Authenticate` that has an `error`, else the first of those schemes; nil when the
    /// answer has none (RFC 6750 §3, RFC 9449 §7.1).
    ///
    /// - Parameters:
    ///   - status: the answer's HTTP status.
    ///   - headers: its header fields (names in any case).
    /// - Throws: ``OAuthError`` `.invalidResponse` (endpoint `.resource`) for a header that holds a
    ///   control character or is longer than 8 KiB, or a value that breaks the rules above.
    public static func parse(status: Int, headers: [String: String]) throws(OAuthError) -> ResourceChallenge? {
        let header = headers.first { ASCIIText.equalsIgnoringCase($0.key, "www-authenticate") }?.value
        guard let header else { return nil }
        return try parse(status: status, header: header)
    }

    /// ``parse(status:headers:)`` for the header's value.
    static func parse(status: Int, header: String) throws(OAuthError) -> ResourceChallenge? {
        func refuse(_ reason: String) -> OAuthError {
            OAuthError(.invalidResponse, endpoint: .resource, httpStatus: status,
                       message: "the resource's WWW-Authenticate header \(reason); it is not acted on")
        }
        if let problem = Challenge.problem(in: header) { throw refuse(problem) }
        let ours = Challenge.parse(header).filter { $0.isBearer || $0.scheme.lowercased() == "dpop" }
        guard let chosen = ours.first(where: { !($0.parameters["error"] ?? "").isEmpty }) ?? ours.first else { return nil }
        let parameters = chosen.parameters
        var challenge = ResourceChallenge(scheme: chosen.scheme, httpStatus: status)
        if let code = parameters["error"], !code.isEmpty {
            let response = ErrorResponse(code: .init(rawValue: code), errorDescription: parameters["error_description"])
            challenge.error = response.code
            challenge.errorDescription = response.errorDescription
        }
        challenge.scope = try words(parameters["scope"], name: "scope", refuse: refuse) { Provider.isValidScopeToken($0) }
        challenge.acrValues = try words(parameters["acr_values"], name: "acr_values", refuse: refuse) { value in
            value.utf8.allSatisfy { (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        }
        if let text = parameters["max_age"] {
            guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let seconds = Int(text), seconds <= maximumMaxAge
            else { throw refuse("has a max_age that is not a whole number of seconds from 0 to \(maximumMaxAge) (RFC 9470 §3)") }
            challenge.maxAge = seconds
        }
        if let text = parameters["resource_metadata"] {
            guard let url = URL(string: text, encodingInvalidCharacters: false), text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw refuse("has a resource_metadata that is not a URL (RFC 9728 §5.1)")
            }
            if let problem = Provider.endpointProblem(url) { throw refuse("has a resource_metadata that \(problem) (RFC 9728 §5.1)") }
            challenge.resourceMetadata = url
        }
        return challenge
    }

    /// A space-separated list, each entry checked by `isValid` and bounded in length and number.
    private static func words(
        _ text: String?, name: String, refuse: (String) -> OAuthError, isValid: (String) -> Bool
    ) throws(OAuthError) -> [String] {
        guard let text else { return [] }
        let items = text.split(separator: " ").map(String.init)
        guard items.count <= maximumValueCount else { throw refuse("has a \(name) of more than \(maximumValueCount) values") }
        for item in items where item.utf8.count > maximumValueLength || !isValid(item) {
            throw refuse("has a \(name) value that is not a token of at most \(maximumValueLength) visible ASCII characters")
        }
        return items
    }

    /// The error a refusal means when the resource asks for a step up: `.stepUpRequired` with the
    /// challenge, its `error` as ``OAuthError/Fields/response``, endpoint `.resource`; nil for any other answer.
    /// - Throws: ``OAuthError`` `.invalidResponse` for a 401 or 403 whose challenge cannot be read (see ``parse(status:headers:)``).
    static func stepUpError(status: Int, headers: [String: String], provider: String?) throws(OAuthError) -> OAuthError? {
        guard status == 401 || status == 403 else { return nil }
        let challenge: ResourceChallenge?
        do {
            challenge = try parse(status: status, headers: headers)
        } catch {
            var error = error
            error.providerID = provider
            throw error
        }
        guard let challenge, challenge.isStepUp, let code = challenge.error else { return nil }
        let what = challenge.asked.isEmpty ? "more than the token carries" : challenge.asked
        var error = OAuthError(
            .stepUpRequired, providerID: provider, endpoint: .resource, httpStatus: status,
            response: ErrorResponse(code: code, errorDescription: challenge.errorDescription),
            message: "the token lacks what the resource asks for: \(what)")
        error.challenge = challenge
        return error
    }
}
