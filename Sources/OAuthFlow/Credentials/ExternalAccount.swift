#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A Google `external_account` credential file (workload identity federation), read as Google's
/// tools write it: the workload's identity (a file, a URL or a command) exchanged at `token_url`
/// for a Google access token (RFC 8693), then, when the file says so, exchanged again for a
/// service account's token.
///
/// Load it with ``init(contentsOfFile:environment:)`` (the catalog's `externalAccountFile` does,
/// `"${GOOGLE_APPLICATION_CREDENTIALS}"` included). The members read:
///
/// - `type` `"external_account"`; `audience`; `subject_token_type`; `token_url` (`https://`, or
///   `http://` on loopback);
/// - `credential_source`: `file`, `url` (with `headers`) or `executable` (`command`,
///   `timeout_millis`, `output_file`), each with `format` `{"type": "text"}` or
///   `{"type": "json", "subject_token_field_name": …}`;
/// - `service_account_impersonation_url` and `service_account_impersonation.token_lifetime_seconds`:
///   followed (a POST with the exchanged token; the answer's `accessToken` and `expireTime`);
/// - `client_id` and `client_secret` (HTTP Basic at `token_url`), `workforce_pool_user_project`
///   (sent in Google's `options`), and `scopes` (an array; the catalog's `scopes` win, and
///   `https://www.googleapis.com/auth/cloud-platform` is the default).
///
/// `quota_project_id`, `token_info_url` and `universe_domain` are accepted and not used: they
/// concern the API calls made with the token, not getting it. Any other member is refused, naming
/// it: a member this library does not know (AWS's `environment_id` is one) may change what the
/// file means, and reading the file as something it is not would send the workload's identity
/// where it should not go. An `executable` source runs only when the environment has
/// `GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1`, as Google's libraries require; its
/// `output_file` is handed to the command (`GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE`) but not read:
/// the command is run on every exchange.
///
/// `description` shows the file's path, audience and `token_url`, never a secret.
public final class ExternalAccountFile: Sendable, CustomStringConvertible {
    /// The file, as given.
    public let path: String
    /// `audience`: the workload identity pool provider, sent as the exchange's `audience`.
    public let audience: String
    /// `subject_token_type`: the type of the workload's token (`urn:ietf:params:oauth:token-type:jwt`, …).
    public let subjectTokenType: String
    /// `token_url`: where the workload's token is exchanged (Google's STS).
    public let tokenURL: URL
    /// `service_account_impersonation_url`: where the exchanged token is exchanged again for a
    /// service account's token; nil when the file has none.
    public let serviceAccountImpersonationURL: URL?
    /// `service_account_impersonation.token_lifetime_seconds`: the impersonated token's lifetime (600 to 43200; 3600 unless set).
    public let impersonationLifetime: Int
    /// `scopes`, when the file has them.
    public let scopes: [String]?
    /// `client_id`, when the file has one (workforce pools): then the exchange authenticates with HTTP Basic.
    public let clientID: String?
    /// `client_secret`, with `client_id`.
    let clientSecret: Secret?
    /// `workforce_pool_user_project`, sent in the exchange's `options` as `userProject`.
    public let workforcePoolUserProject: String?
    /// Where the workload's token comes from (`credential_source`).
    public let source: SubjectTokenSource

    /// The scope requested when neither the catalog nor the file names one.
    public static let defaultScope = "https://www.googleapis.com/auth/cloud-platform"
    /// The members that are read.
    static let readMembers: Set<String> = [
        "type", "audience", "subject_token_type", "token_url", "credential_source", "service_account_impersonation_url",
        "service_account_impersonation", "scopes", "client_id", "client_secret", "workforce_pool_user_project",
    ]
    /// The members accepted and not used (they concern the API calls made with the token).
    static let ignoredMembers: Set<String> = ["quota_project_id", "token_info_url", "universe_domain"]

    /// Reads and checks the file at `path`; `environment` is where `${NAME}` in a URL source's
    /// headers and `GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES` are looked up.
    /// - Throws: ``OAuthError`` `.configuration` naming the file and what is wrong (missing, not
    ///   JSON, a member missing, of the wrong type or unknown, a URL that is not `https://`, an
    ///   AWS source, an executable source not allowed); never a secret of the file.
    public init(contentsOfFile path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(OAuthError) {
        let label = "external_account file \(DisplayText.escape(path))"
        func fail(_ reason: String) -> OAuthError { OAuthError(.configuration, message: "\(label): \(reason)") }
        let object = try CredentialFile.jsonObject(path, isPrivate: false, label: label) { fail($0) }
        if let unknown = object.members.keys.sorted().first(where: { !Self.readMembers.contains($0) && !Self.ignoredMembers.contains($0) }) {
            throw fail("has the member \"\(DisplayText.escape(String(unknown.prefix(64))))\", which this library does not read; "
                + "refused rather than ignored, since it may change what the file means")
        }
        guard try object.string("type") == "external_account" else { throw fail("type is not \"external_account\"") }
        audience = try object.requiredString("audience")
        guard TokenType.isPrintable(audience) else { throw fail("audience must be visible ASCII") }
        subjectTokenType = try object.requiredString("subject_token_type")
        guard TokenType.isValid(subjectTokenType) else { throw fail("subject_token_type must be an absolute URI (RFC 8693 §3)") }
        tokenURL = try Self.url(object, "token_url", fail)
        if try object.string("service_account_impersonation_url") != nil {
            serviceAccountImpersonationURL = try Self.url(object, "service_account_impersonation_url", fail)
        } else {
            serviceAccountImpersonationURL = nil
        }
        var lifetime = 3600
        if let value = object.value("service_account_impersonation") {
            let settings = try JSONObject(value, what: "service_account_impersonation") { fail("service_account_impersonation: \($0)") }
            if let unknown = settings.members.keys.sorted().first(where: { $0 != "token_lifetime_seconds" }) {
                throw fail("service_account_impersonation has the member \"\(DisplayText.escape(String(unknown.prefix(64))))\", which this library does not read")
            }
            lifetime = try settings.integer("token_lifetime_seconds", in: 600...43_200) ?? 3600
        }
        impersonationLifetime = lifetime
        if let value = object.value("scopes") {
            let items = value.arrayValue ?? []
            let scopes = items.compactMap(\.stringValue)
            guard !items.isEmpty, scopes.count == items.count, scopes.allSatisfy(Provider.isValidScopeToken) else {
                throw fail("scopes must be a non-empty array of scope tokens")
            }
            self.scopes = scopes
        } else {
            scopes = nil
        }
        clientID = try object.string("client_id")
        clientSecret = try object.string("client_secret").map(Secret.init)
        if clientSecret != nil, clientID == nil { throw fail("client_secret needs client_id") }
        workforcePoolUserProject = try object.string("workforce_pool_user_project")
        if workforcePoolUserProject != nil, clientID != nil {
            throw fail("workforce_pool_user_project is for a workforce pool without client_id (Google's rule)")
        }
        guard let sourceValue = object.value("credential_source") else { throw fail("has no credential_source") }
        source = try Self.source(sourceValue, path: path, audience: audience, subjectTokenType: subjectTokenType,
                                 impersonationURL: serviceAccountImpersonationURL, environment: environment, fail)
        self.path = path
    }

    /// `external_account(/etc/gcp/wif.json, audience: //iam.googleapis.com/…, token_url: https://sts.googleapis.com/v1/token)`.
    public var description: String {
        "external_account(\(DisplayText.escape(path)), audience: \(DisplayText.escape(audience)), token_url: \(tokenURL.redactedForLog)"
            + (serviceAccountImpersonationURL.map { ", impersonation: \($0.redactedForLog)" } ?? "") + ")"
    }

    /// The exchange's `options` (Google's STS): `{"userProject": …}` for a workforce pool; nil otherwise.
    var options: String? {
        workforcePoolUserProject.map { JSONValue.text(orderedMembers: [("userProject", .string($0))]) }
    }

    /// The service-account impersonation this file asks for, or nil.
    var impersonation: ServiceAccountImpersonation? {
        serviceAccountImpersonationURL.map { ServiceAccountImpersonation(url: $0, lifetime: impersonationLifetime) }
    }

    /// A URL member: an absolute `https://` URL (`http://` on loopback).
    private static func url(_ object: JSONObject, _ key: String, _ fail: @escaping (String) -> OAuthError) throws(OAuthError) -> URL {
        let text = try object.requiredString(key)
        guard let url = URL(string: text, encodingInvalidCharacters: false), url.host != nil else { throw fail("\(key) is not a URL") }
        if let problem = Provider.endpointProblem(url) { throw fail("\(key) \(problem)") }
        return url
    }

    /// `credential_source` as a ``SubjectTokenSource``.
    private static func source(
        _ value: JSONValue, path: String, audience: String, subjectTokenType: String, impersonationURL: URL?,
        environment: [String: String], _ fail: @escaping (String) -> OAuthError
    ) throws(OAuthError) -> SubjectTokenSource {
        let object = try JSONObject(value, what: "credential_source") { fail("credential_source: \($0)") }
        let aws: Set<String> = ["environment_id", "region_url", "regional_cred_verification_url", "imdsv2_session_token_url"]
        if object.members.keys.contains(where: aws.contains) {
            throw fail("credential_source is an AWS source (environment_id, region_url, …), which this library does not support")
        }
        let known: Set<String> = ["file", "url", "headers", "format", "executable"]
        if let unknown = object.members.keys.sorted().first(where: { !known.contains($0) }) {
            throw fail("credential_source has the member \"\(DisplayText.escape(String(unknown.prefix(64))))\", which this library does not read")
        }
        let kinds = ["file", "url", "executable"].filter { object.contains($0) }
        guard kinds.count == 1 else { throw fail("credential_source must have exactly one of file, url and executable") }
        var field: String?
        if let formatValue = object.value("format") {
            let format = try JSONObject(formatValue, what: "credential_source.format") { fail("credential_source.format: \($0)") }
            if let unknown = format.members.keys.sorted().first(where: { $0 != "type" && $0 != "subject_token_field_name" }) {
                throw fail("credential_source.format has the member \"\(DisplayText.escape(String(unknown.prefix(64))))\", which this library does not read")
            }
            switch try format.string("type") ?? "text" {
            case "text": break
            case "json":
                guard let name = try format.string("subject_token_field_name"), !name.isEmpty else {
                    throw fail("credential_source.format of type json needs subject_token_field_name")
                }
                field = name
            default: throw fail("credential_source.format.type must be \"text\" or \"json\"")
            }
        }
        let preset = "external_account"
        switch kinds[0] {
        case "file":
            guard !object.contains("headers") else { throw fail("credential_source.headers is only for a url source") }
            let file = try object.requiredString("file")
            return SubjectTokenSource(.file(path: file, jsonField: field), preset: preset)
        case "url":
            let url = try object.requiredString("url")
            var headers: [SubjectTokenSource.Header] = []
            if let headersValue = object.value("headers") {
                guard case .object(let members) = headersValue else { throw fail("credential_source.headers must be an object") }
                for (name, value) in members.sorted(by: { $0.key < $1.key }) {
                    guard case .string(let text) = value else { throw fail("credential_source.headers values must be strings") }
                    headers.append(SubjectTokenSource.Header(name: name, value: text))
                }
            }
            let names = SubjectTokenSource.variableNames(in: [url] + headers.map(\.value))
            return SubjectTokenSource(.url(template: url, headers: headers, jsonField: field), preset: preset,
                                      environment: CapturedEnvironment(names, from: environment))
        default:
            guard !object.contains("headers") else { throw fail("credential_source.headers is only for a url source") }
            guard environment["GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES"] == "1" else {
                throw fail("credential_source.executable runs a command, which needs GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1 "
                    + "in the environment (Google's rule)")
            }
            guard field == nil, !object.contains("format") else {
                throw fail("credential_source.format is not used with executable (the command prints Google's executable-source JSON)")
            }
            let executableValue = object.value("executable") ?? .null
            let executable = try JSONObject(executableValue, what: "credential_source.executable") { fail("credential_source.executable: \($0)") }
            let allowed: Set<String> = ["command", "timeout_millis", "output_file", "interactive_timeout_millis"]
            if let unknown = executable.members.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw fail("credential_source.executable has the member \"\(DisplayText.escape(String(unknown.prefix(64))))\", which this library does not read")
            }
            if executable.contains("interactive_timeout_millis") {
                throw fail("credential_source.executable.interactive_timeout_millis: interactive executables are not supported")
            }
            let command = try executable.requiredString("command")
            let arguments = command.split(separator: " ").map(String.init)
            guard let program = arguments.first, program.hasPrefix("/") else {
                throw fail("credential_source.executable.command must start with the program's absolute path")
            }
            let millis = try executable.integer("timeout_millis", in: 5_000...120_000) ?? 30_000
            var variables = [
                SubjectTokenSource.Header(name: "GOOGLE_EXTERNAL_ACCOUNT_AUDIENCE", value: audience),
                SubjectTokenSource.Header(name: "GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE", value: subjectTokenType),
                SubjectTokenSource.Header(name: "GOOGLE_EXTERNAL_ACCOUNT_INTERACTIVE", value: "0"),
            ]
            if let email = impersonationURL.flatMap(Self.impersonatedEmail) {
                variables.append(SubjectTokenSource.Header(name: "GOOGLE_EXTERNAL_ACCOUNT_IMPERSONATED_EMAIL", value: email))
            }
            if let output = try executable.string("output_file") {
                variables.append(SubjectTokenSource.Header(name: "GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE", value: output))
            }
            return SubjectTokenSource(.command(arguments: arguments, timeout: .milliseconds(millis), environment: variables), preset: preset)
        }
    }

    /// The service account's email in an impersonation URL (`…/serviceAccounts/EMAIL:generateAccessToken`).
    static func impersonatedEmail(_ url: URL) -> String? {
        guard let last = url.path.split(separator: "/").last, let colon = last.lastIndex(of: ":") else { return nil }
        let email = last[..<colon]
        return email.contains("@") ? String(email) : nil
    }
}

extension ExternalAccountFile: Hashable {
    /// True for the same loaded file (the same object), as providers compare their keys.
    public static func == (lhs: ExternalAccountFile, rhs: ExternalAccountFile) -> Bool { lhs === rhs }

    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// Google's service-account impersonation: the token a workload identity exchange gave is sent to
/// `url` (IAM Credentials `generateAccessToken`), which answers a service account's token.
struct ServiceAccountImpersonation: Sendable, Hashable {
    /// `service_account_impersonation_url`.
    var url: URL
    /// The token's lifetime in seconds (600 to 43200).
    var lifetime: Int

    /// The largest answer read.
    static let maximumBytes = 64 * 1024

    /// Exchanges `exchanged` (the STS answer) for the service account's token: a POST to ``url``
    /// with `Authorization: Bearer` the exchanged token and the JSON body `{"scope": […],
    /// "lifetime": "3600s"}`; the answer's `accessToken` and `expireTime` (RFC 3339) become a
    /// Bearer token response with `expires_in`.
    /// - Throws: ``OAuthError`` (endpoint `.token`): `.httpStatus` for a non-2xx answer (Google's
    ///   error `status` named); `.invalidResponse` for an answer without a usable `accessToken` or
    ///   `expireTime`, or one already expired; what the transport throws.
    func exchange(_ exchanged: TokenResponse, scopes: [String], client: EndpointClient, now: Date) async throws(OAuthError) -> TokenResponse {
        let providerID = client.provider.id
        func invalid(_ reason: String, status: Int? = nil) -> OAuthError {
            OAuthError(.invalidResponse, providerID: providerID, endpoint: .token, httpStatus: status,
                       message: "service account impersonation (\(url.redactedForLog)): \(reason)")
        }
        let body = JSONValue.text(orderedMembers: [
            ("scope", .array(scopes.map { .string($0) })), ("lifetime", .string("\(lifetime)s")),
        ])
        let request = HTTPRequest(method: "POST", url: url, headers: [
            ("Content-Type", "application/json"), ("Accept", "application/json"),
            ("User-Agent", client.provider.userAgent ?? client.userAgent), ("Authorization", "Bearer \(exchanged.accessToken.reveal())"),
        ], body: Data(body.utf8))
        let response = try await client.send(request, endpoint: .token)
        guard (200..<300).contains(response.status) else {
            var detail = ""
            if response.body.count <= Self.maximumBytes, case .object(let members)? = try? JSONValue.parse(response.body),
               case .object(let error)? = members["error"], case .string(let status)? = error["status"] {
                detail = " (\(DisplayText.escape(String(status.prefix(64)))))"
            }
            throw OAuthError(.httpStatus, providerID: providerID, endpoint: .token, httpStatus: response.status,
                             message: "service account impersonation (\(url.redactedForLog)) answered HTTP \(response.status)\(detail)")
        }
        guard response.body.count <= Self.maximumBytes else { throw invalid("the answer is larger than 64 KiB", status: response.status) }
        let object: JSONObject
        do {
            object = try JSONObject(try JSONValue.parse(response.body), what: "the answer") { invalid($0, status: response.status) }
        } catch {
            throw invalid("the answer is not a JSON object (\(error.message ?? "not JSON"))", status: response.status)
        }
        let token = try object.requiredString("accessToken")
        guard TokenType.isPrintable(token) else { throw invalid("accessToken is not visible ASCII", status: response.status) }
        guard let expiry = Self.timestamp(try object.requiredString("expireTime")) else {
            throw invalid("expireTime is not an RFC 3339 time", status: response.status)
        }
        let seconds = Int(expiry.timeIntervalSince(now).rounded(.down))
        guard seconds > 0 else { throw invalid("the token's expireTime has passed", status: response.status) }
        let members: [String: JSONValue] = [
            "access_token": .string(token), "token_type": .string("Bearer"), "expires_in": .number(String(min(seconds, 43_200))),
            "issued_token_type": .string(TokenType.accessToken), "scope": .string(scopes.joined(separator: " ")),
        ]
        return try TokenResponse(JSONObject(members: members) { invalid($0, status: response.status) })
    }

    /// An RFC 3339 time in UTC or with an offset (`2026-12-06T18:01:23.045123456Z`); nil when it is not one.
    static func timestamp(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                guard (0x30...0x39).contains(bytes[index]) else { return nil }
                value = value * 10 + Int(bytes[index] - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), bytes[4] == UInt8(ascii: "-"), let month = number(5..<7), bytes[7] == UInt8(ascii: "-"),
              let day = number(8..<10), bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
              let hour = number(11..<13), bytes[13] == UInt8(ascii: ":"), let minute = number(14..<16), bytes[16] == UInt8(ascii: ":"),
              let second = number(17..<19), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offset = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == bytes.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == bytes.count, let hours = number(index + 1..<index + 3), bytes[index + 3] == UInt8(ascii: ":"),
                  let minutes = number(index + 4..<index + 6), hours < 24, minutes < 60 else { return nil }
            offset = (hours * 60 + minutes) * 60 * (bytes[index] == UInt8(ascii: "+") ? 1 : -1)
        default:
            return nil
        }
        // Days from 1970-01-01 to the civil date (proleptic Gregorian).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}
