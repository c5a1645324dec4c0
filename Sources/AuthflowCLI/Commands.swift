#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import Synchronization

extension Context {
    // MARK: providers

    func providers(json: Bool) async throws(CLIError) -> ExitCode {
        let providers = try catalog()
        if json {
            for provider in providers {
                out.write(JSONValue.line([
                    ("id", .string(provider.id)),
                    ("grants", .strings(Self.loginMethods(provider).map(\.rawValue))),
                    ("login", .string(Self.defaultMethod(provider, environment: environment)?.rawValue)),
                    ("authentication", .string(provider.clientAuthentication.rawValue)),
                    ("on_demand", .string(Self.onDemandGrant(provider)?.catalogName)),
                    ("scopes", .strings(provider.scopes)),
                ]))
            }
            return .success
        }
        guard !providers.isEmpty else {
            err.write("The catalog lists no providers.\n")
            return .success
        }
        let rows = providers.map { provider in
            [provider.id, Self.loginMethods(provider).map(\.rawValue).joined(separator: ", "),
             Self.defaultMethod(provider, environment: environment)?.rawValue ?? "-",
             provider.clientAuthentication.rawValue, Self.onDemandGrant(provider)?.catalogName ?? "-",
             provider.scopes.isEmpty ? "-" : provider.scopes.joined(separator: " ")]
        }
        out.write(Table.render(header: ["PROVIDER", "GRANTS", "LOGIN", "AUTH", "ON DEMAND", "SCOPES"], rows: rows, style: outStyle))
        return .success
    }

    /// The grant `token` runs by itself when nothing is stored (no person needed): the catalog's
    /// `grant`, or the one a service-account key or subject token file implies, or client
    /// credentials for a confidential client with no authorization or device endpoint written.
    static func onDemandGrant(_ provider: Provider) -> GrantType? {
        if let grant = provider.serviceGrant { return grant }
        if provider.isConfidential, provider.authorizationURL == nil, provider.deviceAuthorizationURL == nil,
           provider.backchannelAuthenticationURL == nil {
            return .clientCredentials
        }
        return nil
    }

    /// The login methods the CLI can run for `provider`.
    static func loginMethods(_ provider: Provider) -> [LoginOptions.Method] {
        var methods: [LoginOptions.Method] = []
        if provider.deviceAuthorizationURL != nil { methods.append(.device) }
        if provider.authorizationURL != nil { methods.append(.browser) }
        if provider.isConfidential || onDemandGrant(provider) != nil { methods.append(.clientCredentials) }
        if provider.isConfidential, provider.backchannelAuthenticationURL != nil { methods.append(.ciba) }
        return methods
    }

    /// What `login --client-credentials` runs: the provider's grant that needs no person (a
    /// JWT-bearer assertion, the subject token file's exchange), else client credentials.
    static func fetchWithoutPerson(_ flow: AuthFlow, _ provider: Provider, scopes: [String]?) async throws(OAuthError) -> Authorization {
        switch provider.serviceGrant {
        case .jwtBearer?: return try await flow.jwtBearer(provider: provider.id, scopes: scopes)
        case .tokenExchange?: return try await flow.refresh(provider: provider.id)   // exchanges the file's token again
        default: return try await flow.clientCredentials(provider: provider.id, scopes: scopes)
        }
    }

    /// What `login` runs without a flag: CIBA for a confidential provider with a backchannel
    /// endpoint and a `cibaLoginHint` and no other way in; client credentials for a secret-only
    /// provider; the device grant without a display; the browser otherwise; nil when nothing fits.
    static func defaultMethod(_ provider: Provider, environment: [String: String]) -> LoginOptions.Method? {
        // A person's provider reached only through CIBA: someone to ask, and nothing else to log in with.
        if provider.isConfidential, provider.backchannelAuthenticationURL != nil, provider.cibaLoginHint != nil,
           provider.redirectURI == nil, provider.deviceAuthorizationURL == nil {
            return .ciba
        }
        if provider.isConfidential || provider.serviceGrant != nil, provider.redirectURI == nil, provider.deviceAuthorizationURL == nil {
            return .clientCredentials
        }
        let methods = loginMethods(provider)
        if methods.contains(.device), !hasDisplay(environment) || !methods.contains(.browser) { return .device }
        if methods.contains(.browser) { return .browser }
        return methods.first
    }

    /// True when a graphical session is available: `DISPLAY` or `WAYLAND_DISPLAY` is set.
    static func hasDisplay(_ environment: [String: String]) -> Bool {
        !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
    }

    // MARK: token

    /// Whether `token` is only visible ASCII (0x21–0x7E), so `$(authflow token P)` can never put a
    /// space, a control character or a line break into a header line.
    static func isHeaderSafe(_ token: Secret) -> Bool {
        token.reveal().utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// `id`'s valid token set from `flow` (refreshed or re-fetched when due), its access token
    /// checked once more: the library checks every token before storing and after loading, and this
    /// is the token a caller puts into a header (`$(authflow token P)`, git's password).
    /// - Throws: ``CLIError`` for what `tokenSet(for:)` throws, `.storage` for a token a header cannot carry.
    func checkedTokenSet(_ id: String, flow: AuthFlow) async throws(CLIError) -> TokenSet {
        let set: TokenSet
        do {
            set = try await flow.tokenSet(for: id)
        } catch {
            throw .oauth(error, provider: id)
        }
        guard Self.isHeaderSafe(set.accessToken) else {
            throw .oauth(OAuthError(.storage, providerID: id, message: "the stored access token holds characters a token cannot have"),
                         provider: id)
        }
        return set
    }

    func token(_ id: String, json: Bool) async throws(CLIError) -> ExitCode {
        let provider = try provider(id)
        let set = try await checkedTokenSet(id, flow: try await flow([provider], store: store()))
        if json {
            out.write(JSONValue.line([
                ("access_token", .string(set.accessToken.reveal())),
                ("token_type", .string(set.tokenType)),
                ("expires_at", .date(set.expiresAt)),
                ("scopes", .strings(set.scopes)),
            ]))
        } else {
            out.write(set.accessToken.reveal() + "\n")
        }
        return .success
    }

    /// `token PROVIDER --header`: `Authorization: Bearer <token>` and a newline, for `curl -H @-`.
    func tokenHeader(_ id: String) async throws(CLIError) -> ExitCode {
        let flow = try await flow([provider(id)], store: store())
        do {
            out.write("Authorization: \(try await flow.tokenSource(for: id).authorizationHeaderValue())\n")
        } catch {
            throw .oauth(error, provider: id)
        }
        return .success
    }

    // MARK: status

    func status(_ id: String?, json: Bool) async throws(CLIError) -> ExitCode {
        let providers: [Provider]
        if let id { providers = [try provider(id)] } else { providers = try catalog() }
        let store = try store()
        // Entries that cannot be read are published as errors while the flow restores; keep their reasons.
        let problems = Mutex<[String: String]>([:])
        let flow = try await flow(providers, store: store) { record in
            if record.level == .warning, let provider = record.providerID { problems.withLock { $0[provider] = record.message } }
        }
        let authorizations = await flow.authorizations
        let keys: Set<String>
        do { keys = Set(try await store.keys()) } catch { throw .oauth(error, provider: nil) }
        let rows = providers.map { provider in
            StatusRow(provider: provider.id, authentication: provider.clientAuthentication.rawValue, authorization: authorizations[provider.id],
                      problem: keys.contains(provider.id) && authorizations[provider.id] == nil
                          ? problems.withLock { $0[provider.id] } ?? "unreadable" : nil)
        }
        let now = services.now()
        if json {
            for row in rows { out.write(JSONValue.line(row.json(now: now))) }
        } else {
            out.write(StatusRow.table(rows, now: now, style: outStyle))
        }
        if id != nil, let row = rows.first, !row.isUsable(now: now) { return .denied }
        return .success
    }

    // MARK: userinfo

    func userinfo(_ id: String) async throws(CLIError) -> ExitCode {
        let provider = try provider(id)
        let flow = try await flow([provider], store: store())
        let info: UserInfo
        do {
            info = try await flow.userInfo(provider: id)
        } catch {
            throw .oauth(error, provider: id)
        }
        // The claims are the server's: written through the escaping encoder, never raw.
        out.write(JSONValue.object(info.claims).jsonText + "\n")
        return .success
    }

    // MARK: logout

    func logout(_ id: String, localOnly: Bool) async throws(CLIError) -> ExitCode {
        let provider = try provider(id)
        let flow = try await flow([provider], store: store())
        let held = await flow.authorization(for: id) != nil
        let result: RevocationResult
        do {
            if localOnly || !held {
                try await flow.clear(provider: id)
                out.write(held ? "Forgot the tokens of \(id) (not revoked at the provider).\n" : "Nothing was stored for \(id).\n")
                return .success
            }
            result = try await flow.revoke(provider: id)
        } catch {
            throw .oauth(error, provider: id)
        }
        guard result.hasRevocationEndpoint else {
            out.write("Forgot the tokens of \(id); it has no revocation endpoint, so they stay valid there until they expire.\n")
            return .success
        }
        if result.isComplete {
            out.write("Revoked the tokens of \(id) at the provider and forgot them.\n")
            return .success
        }
        out.write("Forgot the tokens of \(id) locally.\n")
        var status = ExitCode.success
        for kind in [TokenKind.refreshToken, .accessToken] where result.heldTokens.contains(kind) {
            let name = kind == .refreshToken ? "refresh token" : "access token"
            let confirmed = kind == .refreshToken ? result.refreshTokenRevoked : result.accessTokenRevoked
            if confirmed {
                out.write("The provider confirmed revoking the \(name).\n")
            } else if let error = result.errors[kind] {
                err.write("\(errStyle.red("authflow: error:")) the provider did not confirm revoking the \(name), which may stay "
                    + "valid there until it expires: \(Self.explain(error))\n")
                if status == .success { status = ErrorAdvice.row(for: error, adviceSubject(id)).status }
            }
        }
        return status
    }
}

/// One provider's line of `status`.
struct StatusRow {
    var provider: String
    /// The provider's client authentication (`client_secret_basic`, `private_key_jwt`, …).
    var authentication: String = "-"
    var authorization: Authorization?
    var problem: String?

    func isExpired(now: Date) -> Bool { authorization?.expiresAt.map { $0 <= now } ?? false }

    /// True when only a new login can give a token: flagged, or expired with nothing to renew it.
    func needsReauthorization(now: Date) -> Bool {
        guard let authorization else { return true }
        if authorization.needsReauthorization { return true }
        return isExpired(now: now) && !authorization.isRefreshable && !Self.fetchedAgain(authorization.grant)
    }

    func isUsable(now: Date) -> Bool { authorization != nil && !needsReauthorization(now: now) }

    /// The members of its `status --json` line, in order.
    func json(now: Date) -> [(String, JSONValue)] {
        guard let authorization else {
            var pairs: [(String, JSONValue)] = [("provider", .string(provider)), ("authentication", .string(authentication)), ("logged_in", .bool(false))]
            if let problem { pairs.append(("error", .string(problem))) }
            pairs.append(("needs_reauthorization", .bool(true)))
            return pairs
        }
        return [
            ("provider", .string(provider)),
            ("authentication", .string(authentication)),
            ("logged_in", .bool(true)),
            ("grant", .string(authorization.grant.rawValue)),
            ("token_type", .string(authorization.tokenType)),
            ("dpop_bound", .bool(authorization.isDPoPBound)),   // RFC 9449: the token needs a proof; the key is never shown
            ("issued_at", .date(authorization.issuedAt)),
            ("expires_at", .date(authorization.expiresAt)),
            ("expired", .bool(isExpired(now: now))),
            ("scopes", .strings(authorization.scopes)),
            ("refreshable", .bool(authorization.isRefreshable)),
            ("needs_reauthorization", .bool(needsReauthorization(now: now))),
            // The validated ID token's identity (Documentation/OIDC.md); null without one.
            ("idToken", authorization.idToken.map { token in
                .object(["sub": .string(token.subject), "iss": .string(token.issuer), "exp": .date(token.expiresAt)])
            } ?? .null),
        ]
    }

    /// True for the grants that need no person: an expired token is fetched again, not refreshed.
    static func fetchedAgain(_ grant: GrantType) -> Bool {
        grant == .clientCredentials || grant == .jwtBearer || grant == .tokenExchange
    }

    static func grantName(_ grant: GrantType) -> String {
        switch grant {
        case .deviceCode: return "device"
        case .authorizationCode: return "browser"
        case .clientCredentials: return "client-credentials"
        case .refreshToken: return "refresh"
        case .jwtBearer: return "jwt-bearer"
        case .tokenExchange: return "token-exchange"
        case .ciba: return "ciba"
        }
    }

    func state(now: Date) -> String {
        guard let authorization else { return problem.map { "unreadable: \($0)" } ?? "not logged in" }
        if authorization.needsReauthorization { return "needs login" }
        guard isExpired(now: now) else { return "valid" }
        if Self.fetchedAgain(authorization.grant) { return "expired (fetched again on use)" }
        return authorization.isRefreshable ? "expired (refreshed on use)" : "expired (needs login)"
    }

    static func table(_ rows: [StatusRow], now: Date, style: Style) -> String {
        let lines = rows.map { row -> [String] in
            let authorization = row.authorization
            let expires = authorization.map { auth in
                auth.expiresAt.map { "\(Timestamps.iso8601($0)) (\(Timestamps.relative($0, now: now)))" } ?? "never"
            } ?? "-"
            return [row.provider, row.state(now: now), authorization.map { grantName($0.grant) + ($0.isDPoPBound ? " (DPoP)" : "") } ?? "-",
                    row.authentication, expires,
                    authorization.map { $0.scopes.isEmpty ? "-" : $0.scopes.joined(separator: " ") } ?? "-",
                    authorization.map { $0.isRefreshable ? "yes" : "no" } ?? "-",
                    row.needsReauthorization(now: now) ? "yes" : "no"]
        }
        return Table.render(header: ["PROVIDER", "STATUS", "GRANT", "AUTH", "EXPIRES", "SCOPES", "REFRESH TOKEN", "NEEDS LOGIN"],
                            rows: lines, style: style)
    }
}

enum Table {
    /// Left-aligned columns separated by two spaces; the header in bold on a terminal. Cells are
    /// escaped (``escaped(_:)``) before they are measured.
    static func render(header: [String], rows: [[String]], style: Style) -> String {
        let rows = rows.map { $0.map(escaped) }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                column == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: "  ")
        }
        return ([style.bold(line(header))] + rows.map(line)).joined(separator: "\n") + "\n"
    }
}
