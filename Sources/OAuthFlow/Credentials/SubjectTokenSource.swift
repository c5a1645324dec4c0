#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Where a provider's subject token comes from: the token a token exchange sends as
/// `subject_token` ([RFC 8693 §2.1](https://www.rfc-editor.org/rfc/rfc8693#section-2.1)), or the
/// pre-made assertion a JWT-bearer grant sends as `assertion` (RFC 7523 §2.1) — the identity a
/// workload already holds.
///
/// Set it as ``Provider/subjectTokenSource`` (catalog `subjectTokenSource`, or `subjectTokenFile`
/// for a file); ``AuthFlow/accessToken(for:)`` then asks the source for a token every time it
/// exchanges one, never keeping one from an exchange to the next: a file is read again, a URL
/// fetched again, a command run again (Kubernetes projected tokens and CI tokens rotate, and an
/// exchange happens only when the token it gave is due). Every token is checked before it is
/// sent: visible ASCII, at most 64 KiB, and, for a JWT (three parts, the middle one a JSON
/// object), an `exp` that has not passed; under the JWT and ID token types, three parts that are
/// not a JWT are refused.
///
/// The kinds: a file (``file(_:jsonField:)``), a URL (``url(_:headers:jsonField:environment:)``,
/// with `${NAME}` taken from the environment), a command run without a shell
/// (``command(_:timeout:)``), an environment variable (``environmentVariable(_:environment:)``),
/// and the presets of the common platforms (``kubernetes(path:)``, ``githubActions(audience:environment:)``,
/// ``gitlabCI(variable:environment:)``). Documentation/WorkloadIdentity.md has a recipe per platform.
///
/// `description` names the source (a path, a URL without its query, a program, a variable name),
/// never a token or a header value; every failure is an ``OAuthError`` whose message starts with it.
public struct SubjectTokenSource: Sendable, Hashable, CustomStringConvertible {
    /// What the source reads.
    enum Kind: Sendable, Hashable {
        /// A file read on every exchange; with `jsonField`, a JSON object whose member that is.
        case file(path: String, jsonField: String?)
        /// A GET of `template` (`${NAME}` expanded) with `headers`; the body is the token, or with
        /// `jsonField` a JSON object whose member that is.
        case url(template: String, headers: [Header], jsonField: String?)
        /// A program and its arguments, run without a shell; its standard output is the token, or
        /// Google's executable-source JSON. `environment` is added to this process's for it.
        case command(arguments: [String], timeout: Duration, environment: [Header])
        /// An environment variable's value, taken when the source was made.
        case environment(variable: String)
    }

    /// A name and a value that may hold `${NAME}` references (a header, an environment variable).
    struct Header: Sendable, Hashable {
        var name: String
        var value: String
    }

    /// The default timeout of a command (Google's executable sources use the same).
    public static let defaultCommandTimeout: Duration = .seconds(30)
    /// The longest timeout a command may be given.
    public static let maximumCommandTimeout: Duration = .seconds(600)
    /// Where Kubernetes mounts a pod's service-account token (the `kubernetes` preset's default).
    public static let kubernetesTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    /// The largest token, file, body or command output a source reads (64 KiB; a JWT is a few KiB).
    public static let maximumBytes = 64 * 1024

    let kind: Kind
    /// The preset this source was made from (`kubernetes`, `github-actions`, `gitlab-ci`,
    /// `external_account`), named in messages.
    let preset: String?
    /// The values of the environment variables the source names, taken when it was made.
    let environment: CapturedEnvironment
    /// What the token is called in messages: `subject token`, or `client assertion` for a
    /// federated client assertion file (``Provider/Settings/clientAssertionFile``).
    let noun: String

    init(_ kind: Kind, preset: String? = nil, environment: CapturedEnvironment = CapturedEnvironment(), noun: String = "subject token") {
        self.kind = kind
        self.preset = preset
        self.environment = environment
        self.noun = noun
    }

    /// The path of a file source; nil for the other kinds.
    package var filePath: String? {
        if case .file(let path, _) = kind { return path }
        return nil
    }

    // MARK: Making one

    /// The token in the file at `path`, read on every exchange (trailing white space dropped);
    /// with `jsonField`, the file is a JSON object and the token is that string member.
    public static func file(_ path: String, jsonField: String? = nil) -> SubjectTokenSource {
        SubjectTokenSource(.file(path: path, jsonField: jsonField))
    }

    /// The token a GET of `url` answers, fetched on every exchange.
    ///
    /// `${NAME}` in `url` and in the header values is replaced by the variable's value in
    /// `environment`, taken now (a variable that is not set fails the exchange, naming it). The
    /// body is the token; with `jsonField`, a JSON object whose string member that is (GitHub
    /// Actions answers `{"value": "…"}`). Redirects are not followed; the URL must be `https://`
    /// (`http://` on loopback).
    public static func url(
        _ url: String, headers: [String: String] = [:], jsonField: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> SubjectTokenSource {
        let headers = headers.sorted { $0.key < $1.key }.map { Header(name: $0.key, value: $0.value) }
        let names = Self.variableNames(in: [url] + headers.map(\.value))
        return SubjectTokenSource(.url(template: url, headers: headers, jsonField: jsonField),
                                  environment: CapturedEnvironment(names, from: environment))
    }

    /// The token a command prints, run on every exchange: `arguments[0]` is the program (a path,
    /// or a name looked up on `PATH`), run without a shell, with no input, this process's
    /// environment, and its standard error passed through to this process's.
    ///
    /// Its standard output is the token, or Google's executable-source JSON (`version` 1,
    /// `success`, `token_type`, `id_token` or `saml_response`, `expiration_time`). It is killed
    /// (with everything it started) when it runs longer than `timeout` or prints more than
    /// ``maximumBytes``; a non-zero exit fails the exchange.
    public static func command(_ arguments: [String], timeout: Duration = defaultCommandTimeout) -> SubjectTokenSource {
        SubjectTokenSource(.command(arguments: arguments, timeout: timeout, environment: []))
    }

    /// The value of the environment variable `name` in `environment`, taken now.
    public static func environmentVariable(
        _ name: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> SubjectTokenSource {
        SubjectTokenSource(.environment(variable: name), environment: CapturedEnvironment([name], from: environment))
    }

    /// The `kubernetes` preset: the service-account token Kubernetes mounts in the pod, at `path`
    /// (a projected volume's path when you project one with its own audience).
    public static func kubernetes(path: String = kubernetesTokenPath) -> SubjectTokenSource {
        SubjectTokenSource(.file(path: path, jsonField: nil), preset: "kubernetes")
    }

    /// The `github-actions` preset: the job's OIDC token, fetched from
    /// `$ACTIONS_ID_TOKEN_REQUEST_URL` (with `&audience=` when `audience` is given) with
    /// `Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN`, read from the answer's `value`.
    /// The job needs `permissions: id-token: write`.
    public static func githubActions(
        audience: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> SubjectTokenSource {
        var template = "${ACTIONS_ID_TOKEN_REQUEST_URL}"
        if let audience { template += "&audience=" + FormEncoding.escape(audience) }
        let headers = [Header(name: "Authorization", value: "bearer ${ACTIONS_ID_TOKEN_REQUEST_TOKEN}")]
        return SubjectTokenSource(
            .url(template: template, headers: headers, jsonField: "value"), preset: "github-actions",
            environment: CapturedEnvironment(["ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"], from: environment))
    }

    /// The `gitlab-ci` preset: the job's ID token from the environment variable `variable` — the
    /// name an `id_tokens:` entry of `.gitlab-ci.yml` gives it, or `CI_JOB_JWT_V2` on GitLab
    /// versions that still set that one.
    public static func gitlabCI(
        variable: String = "CI_JOB_JWT_V2", environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> SubjectTokenSource {
        SubjectTokenSource(.environment(variable: variable), preset: "gitlab-ci", environment: CapturedEnvironment([variable], from: environment))
    }

    // MARK: Showing one

    /// `the subject token file /var/run/secrets/tokens/token`, `the github-actions subject token
    /// URL ${ACTIONS_ID_TOKEN_REQUEST_URL}&audience=…`, `the subject token command /usr/bin/get-token`,
    /// `the gitlab-ci subject token variable CI_JOB_JWT_V2`: never a value.
    public var description: String {
        let prefix = "the " + (preset.map { "\($0) " } ?? "") + noun + " "
        switch kind {
        case .file(let path, _):
            return prefix + "file " + DisplayText.escape(path)
        case .url(let template, _, _):
            return prefix + "URL " + Self.shown(template)
        case .command(let arguments, _, _):
            return prefix + "command " + DisplayText.escape(arguments.first ?? "(none)")
        case .environment(let variable):
            return prefix + "variable " + DisplayText.escape(variable)
        }
    }

    /// A URL template as messages show it: its query cut (it may carry a credential), at most 200 characters.
    static func shown(_ template: String) -> String {
        var text = Substring(template)
        if let query = text.firstIndex(of: "?") { text = text[..<query] + "?…" }
        return DisplayText.escape(String(text.prefix(200)))
    }

    // MARK: Checking one

    /// Why this source cannot be used, or nil: an empty path, program or variable name, a
    /// `${` without its `}`, a header name that is not a token, a timeout outside 1 s…10 min.
    var problem: String? {
        switch kind {
        case .file(let path, let field):
            if path.isEmpty { return "the file path must not be empty" }
            if let field, field.isEmpty { return "jsonField must not be empty" }
        case .url(let template, let headers, let field):
            if template.isEmpty { return "the URL must not be empty" }
            if let field, field.isEmpty { return "jsonField must not be empty" }
            for header in headers where !ASCIIText.isToken(header.name) {
                return "the header name \"\(DisplayText.escape(String(header.name.prefix(64))))\" is not an HTTP token (RFC 9110 §5.1)"
            }
            for text in [template] + headers.map(\.value) {
                if let problem = Self.templateProblem(text) { return problem }
            }
        case .command(let arguments, let timeout, _):
            guard let program = arguments.first, !program.isEmpty else { return "the command must name a program" }
            if arguments.contains(where: { $0.utf8.contains(0) }) { return "a command argument holds a NUL byte" }
            guard timeout >= .seconds(1), timeout <= Self.maximumCommandTimeout else {
                return "timeoutSeconds must be 1 to \(Self.maximumCommandTimeout.components.seconds)"
            }
        case .environment(let variable):
            guard Self.isVariableName(variable) else { return "the variable name must be letters, digits and '_'" }
        }
        return nil
    }

    /// True for `NAME`: ASCII letters, digits and `_`, not starting with a digit.
    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(0x30...0x39).contains(first) else { return false }
        return name.utf8.allSatisfy { ASCIIText.isAlphanumeric($0) || $0 == UInt8(ascii: "_") }
    }

    /// Why `text` is not a valid template (`${NAME}` references only), or nil.
    static func templateProblem(_ text: String) -> String? {
        var rest = Substring(text)
        while let start = ASCIIText.firstRange(of: "${", in: rest) {
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else { return "has a \"${\" without its closing \"}\"" }
            guard isVariableName(String(rest[start.upperBound..<end])) else {
                return "has an invalid variable reference; write ${NAME} with letters, digits and '_'"
            }
            rest = rest[rest.index(after: end)...]
        }
        return nil
    }

    /// The names `${NAME}` references in `texts`, in order of first use.
    static func variableNames(in texts: [String]) -> [String] {
        var names: [String] = []
        for text in texts {
            var rest = Substring(text)
            while let start = ASCIIText.firstRange(of: "${", in: rest), let end = rest[start.upperBound...].firstIndex(of: "}") {
                let name = String(rest[start.upperBound..<end])
                if isVariableName(name), !names.contains(name) { names.append(name) }
                rest = rest[rest.index(after: end)...]
            }
        }
        return names
    }
}

/// The values of the environment variables a source names, taken when it was made: a URL's
/// `${NAME}`s, a preset's variables. Values are ``Secret``s (`ACTIONS_ID_TOKEN_REQUEST_TOKEN` is
/// a credential); equal when the same names hold equal values (compared in constant time).
struct CapturedEnvironment: Sendable, Hashable {
    private(set) var values: [String: Secret] = [:]

    init() {}

    /// The values of `names` in `environment`; a name that is not set (or is empty) is left out.
    init(_ names: [String], from environment: [String: String]) {
        for name in names {
            if let value = environment[name], !value.isEmpty { values[name] = Secret(value) }
        }
    }

    subscript(name: String) -> Secret? { values[name] }

    static func == (lhs: CapturedEnvironment, rhs: CapturedEnvironment) -> Bool {
        lhs.values.count == rhs.values.count && lhs.values.allSatisfy { name, value in
            rhs.values[name].map { $0.constantTimeEquals(value) } ?? false
        }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(values.keys.sorted())
    }
}
