#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import OAuthFlowPostgres

/// What `authflow` returns and advises for a library error: one row per kind of failure, tried in
/// order; the first that matches gives the exit status and the advice line printed under the error.
///
/// Every place the CLI turns an ``OAuthError`` into output reads it: the error report on stderr,
/// `exit_code` in `--json` lines, `logout`'s revocation errors, `demo`, and ``ExitCode/init(_:)``.
/// `Documentation/Errors.md` lists the rows and the exit codes of `Documentation/CLI.md` name them;
/// both are tested against this table in both directions.
///
/// The advice depends on the grant the error names (``OAuthError/Fields/grant``), as its recovery does.
/// For a grant no person logs in to (JWT-bearer with a service-account key or a client key, token
/// exchange, client credentials), a refused credential is named — the key, certificate or token
/// file, the account, the client ID — and exits 65: logging in again cannot fix it. `authflow
/// login` is advised only where a login helps. `authflow agent` logs the same advice, and the
/// agent path of `authflow token` exits with the status of the row of the recovery the agent
/// answers (``status(for:)``).
struct ErrorAdvice {
    /// What the advice may name about the provider that failed, read from the catalog.
    struct Subject: Sendable, Equatable {
        /// The provider's id.
        var provider: String?
        /// The catalog's path.
        var catalog: String?
        /// What the provider's grant that runs with no person (`ON DEMAND` in `authflow
        /// providers`) presents, in words: the service-account key file and account, the client
        /// key file, the subject token file; else the client's own credential.
        var credential: String?
        /// The client's own credential (its client authentication), in words.
        var client: String?
        /// The provider's configured scopes (what a step-up login keeps asking for).
        var scopes: [String] = []
        /// The `authflow login` line that answers a resource's step-up (`LOGIN`); set for `.stepUpRequired` only.
        var stepUpLogin: String?

        /// A subject known only by its id and the catalog's path (a grant a person logs in to is assumed).
        init(provider: String? = nil, catalog: String? = nil) {
            self.provider = provider
            self.catalog = catalog
        }

        /// What the catalog says of `provider`: its grant that needs no person and the credentials
        /// to name; `catalog` is the catalog's path.
        init(_ provider: Provider, catalog: String?) {
            self.init(provider: provider.id, catalog: catalog)
            scopes = provider.scopes
            client = Self.client(of: provider)
            credential = Self.credential(of: provider, grant: Context.onDemandGrant(provider)) ?? client
        }

        /// The client's credential in words: the service-account key (the account is the client),
        /// the client key, client assertion or certificate file, the client secret, or the client ID of a public client.
        static func client(of provider: Provider) -> String {
            if let account = provider.serviceAccount { return "the service-account key \(account.path) (\(account.clientEmail))" }
            let id = "client ID \(provider.clientID)"
            switch provider.clientAuthentication {
            case .privateKeyJWT:
                if let file = provider.clientAssertionFile { return "the client assertion in \(file) of \(id)" }
                return ((provider.clientKey as? ClientKey)?.path).map { "the client key \($0) of \(id)" } ?? "the signing key of \(id)"
            case .tlsClientAuth, .selfSignedTLSClientAuth:
                return provider.clientCertificate.map { "the client certificate \($0.path) of \(id)" } ?? "the client certificate of \(id)"
            case .clientSecretBasic, .clientSecretPost, .clientSecretJWT:
                return "the client secret of \(id)"
            case .none:
                return id
            }
        }

        /// What `grant` presents in words; nil for a grant a person logs in to.
        static func credential(of provider: Provider, grant: GrantType?) -> String? {
            switch grant {
            case .jwtBearer?:
                if provider.serviceAccount == nil, let key = provider.clientKey {
                    return ((key as? ClientKey)?.path).map { "the client key \($0) of client ID \(provider.clientID)" }
                        ?? "the signing key of client ID \(provider.clientID)"
                }
                return client(of: provider)
            case .tokenExchange?:
                return provider.subjectTokenSource.map { $0.filePath.map { "the subject token in \($0)" } ?? $0.description } ?? client(of: provider)
            case .clientCredentials?:
                return client(of: provider)
            default:
                return nil
            }
        }
    }

    /// One kind of failure.
    struct Row: Sendable {
        /// A short stable name, which the docs use.
        let name: String
        /// When the row applies, in words (`Documentation/Errors.md` shows it).
        let condition: String
        /// The exit status.
        let status: ExitCode
        /// The advice line, with `PROVIDER`, `CLIENT`, `CREDENTIAL` and `CATALOG` filled in from
        /// the subject; nil for none.
        let advice: String?
        /// The recovery the row takes every remaining error of (the last four rows); nil for a row
        /// that matches on more.
        let recovery: OAuthError.Recovery?
        /// Whether the row applies to an error for a subject.
        let matches: @Sendable (OAuthError, Subject) -> Bool

        init(
            name: String, condition: String, status: ExitCode, advice: String?, matches: @escaping @Sendable (OAuthError, Subject) -> Bool
        ) {
            self.name = name
            self.condition = condition
            self.status = status
            self.advice = advice
            self.recovery = nil
            self.matches = matches
        }

        /// The row that takes every error whose recovery is `recovery`.
        init(name: String, condition: String, status: ExitCode, advice: String?, takingEvery recovery: OAuthError.Recovery) {
            self.name = name
            self.condition = condition
            self.status = status
            self.advice = advice
            self.recovery = recovery
            self.matches = { error, _ in error.recovery == recovery }
        }
    }

    /// The rows, in the order they are tried. Each recovery has a row that takes every error with
    /// it, so some row always matches.
    static let rows: [Row] = [
        Row(name: "database-busy", condition: "a database store that is down, restarting or busy (`PostgresStoreFailure.isTemporary`)",
            status: .temporaryFailure, advice: temporary) { error, _ in (error.underlying as? PostgresStoreFailure)?.isTemporary == true },
        Row(name: "interrupted", condition: "`.cancelled`: Ctrl-C; `authflow: interrupted; nothing was stored.` replaces the error line",
            status: .interrupted, advice: nil) { error, _ in error.code == .cancelled },
        Row(name: "unreachable", condition: "`.transport`: no answer (DNS, connection, TLS, timeout)",
            status: .unavailable, advice: temporary) { error, _ in error.code == .transport },
        Row(name: "client-refused", condition: "`invalid_client`: the provider refused the client's own credential, whatever the grant",
            status: .dataError, advice: "The provider refused CLIENT: check it against the catalog at CATALOG and the provider's "
                + "settings; logging in again cannot fix this.") { error, _ in error.response?.code == .invalidClient },
        Row(name: "credential-refused", condition: "`invalid_grant` (recovery `fixConfiguration`), or a 401 without an OAuth error "
            + "body, from the token endpoint for a grant no person logs in to (the error's `grant`: JWT-bearer, token exchange, "
            + "client credentials)",
            status: .dataError, advice: "The provider refused CREDENTIAL: check that it is still valid there (not deleted, disabled, "
                + "expired or replaced); logging in again cannot fix this.") { error, _ in
            error.grant?.needsPerson == false
                && (error.response?.code == .invalidGrant || error.response == nil && error.httpStatus == 401)
        },
        Row(name: "step-up", condition: "`.stepUpRequired`: a resource asked for more scope or a stronger or more recent authentication "
            + "(RFC 6750 §3.1, RFC 9470); the error names what it asked",
            status: .denied, advice: "Log in again with what it asked for: LOGIN") { error, _ in error.code == .stepUpRequired },
        Row(name: "login-needed", condition: "recovery `reauthorize`: nothing stored, a refresh token or code refused (`invalid_grant`, "
            + "`invalid_token`), `.expired`, `.stateMismatch`, `.invalidCallback`, `.idTokenRejected`",
            status: .denied, advice: "Log in again: authflow login PROVIDER", takingEvery: .reauthorize),
        Row(name: "temporary", condition: "recovery `retryLater`: `.timedOut` (a lock or a wait), HTTP 429 or 5xx, "
            + "`temporarily_unavailable`, `server_error`",
            status: .temporaryFailure, advice: temporary, takingEvery: .retryLater),
        Row(name: "storage", condition: "`.storage`: the store cannot be read or written (the message names the path and the fix)",
            status: .dataError, advice: nil) { error, _ in error.code == .storage },
        Row(name: "configuration", condition: "recovery `fixConfiguration` otherwise: `.configuration`, `.crypto`, `.invalidResponse`, "
            + "HTTP 4xx, every other OAuth error (`invalid_scope`, `unauthorized_client`, …)",
            status: .dataError, advice: "Check the catalog at CATALOG.", takingEvery: .fixConfiguration),
        Row(name: "denied", condition: "recovery `none` otherwise: `.accessDenied`, the person or the server said no",
            status: .denied, advice: nil, takingEvery: .none),
    ]

    private static let temporary = "This is temporary; try again later."

    /// The first row that matches `error` for `subject`.
    static func row(for error: OAuthError, _ subject: Subject) -> Row {
        rows.first { $0.matches(error, subject) } ?? rows[rows.count - 1]
    }

    /// The status of the row that takes every error with `recovery`: what an answer that carries
    /// only a recovery exits with (the agent's, on the agent path of `authflow token`).
    static func status(for recovery: OAuthError.Recovery) -> ExitCode {
        rows.first { $0.recovery == recovery }?.status ?? .denied
    }

    /// The advice line for `error` of `provider`, as `authflow agent` logs it beside a failure.
    static func line(for error: OAuthError, of provider: Provider, catalog: String?) -> String? {
        let subject = Subject(provider, catalog: catalog)
        return line(row(for: error, subject), subject)
    }

    /// `row`'s advice for `subject`, its names escaped for a terminal; nil when the row has none or
    /// the subject lacks a name it needs.
    static func line(_ row: Row, _ subject: Subject) -> String? {
        guard var line = row.advice else { return nil }
        for (placeholder, value) in [("PROVIDER", subject.provider), ("CLIENT", subject.client),
                                     ("CREDENTIAL", subject.credential), ("CATALOG", subject.catalog),
                                     ("LOGIN", subject.stepUpLogin)] where line.contains(placeholder) {
            guard let value else { return nil }
            line = line.replacing(placeholder, with: escaped(value))
        }
        return line
    }
}

extension Context {
    /// ``adviceSubject(_:)`` for `error`: with the `authflow login` line that answers a resource's
    /// step-up (`LOGIN`: its scopes added to the provider's, its `acr_values` and `max_age`).
    func adviceSubject(_ provider: String?, for error: OAuthError) -> ErrorAdvice.Subject {
        var subject = adviceSubject(provider)
        if let challenge = error.challenge, let id = subject.provider {
            subject.stepUpLogin = ResourceLogin.loginLine(provider: id, challenge: challenge, held: subject.scopes)
        }
        return subject
    }

    /// What the advice may name about `provider`, from the catalog; only the id and the catalog's
    /// path when the provider cannot be loaded.
    func adviceSubject(_ provider: String?) -> ErrorAdvice.Subject {
        let catalog = try? configURL().path
        guard let provider, let loaded = try? self.provider(provider) else { return ErrorAdvice.Subject(provider: provider, catalog: catalog) }
        return ErrorAdvice.Subject(loaded, catalog: catalog)
    }

    /// `code` (the OAuthError code), `error` (the server's RFC 6749 §5.2 code, or null),
    /// `description`, `recovery` and `exit_code` (from ``ErrorAdvice``) of `error` for `provider`.
    func jsonFields(_ error: OAuthError, provider: String?) -> [(String, JSONValue)] {
        [
            ("code", .string(error.code.description)),
            ("error", .string(error.response?.code.rawValue)),
            ("description", .string(Context.explain(error))),
            ("recovery", .string(error.recovery.rawValue)),
            ("exit_code", .int(Int(ErrorAdvice.row(for: error, adviceSubject(provider ?? error.providerID)).status.rawValue))),
        ]
    }
}
