#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import Synchronization

extension Context {
    /// `provider` with the authorization and device endpoints its issuer's metadata adds, so that
    /// the default login method of a provider configured from `issuer` alone can be chosen.
    func discovering(_ provider: Provider) async throws(CLIError) -> Provider {
        guard provider.issuer != nil, provider.authorizationURL == nil || provider.deviceAuthorizationURL == nil else { return provider }
        var filled = provider
        do {
            let flow = try await AuthFlow(providers: [provider], store: MemorySecretStore(), transport: transport,
                                          options: flowOptions(providers: [provider]))
            let metadata = try await flow.metadata(for: provider)
            filled.authorizationURL = provider.authorizationURL ?? metadata.authorizationEndpoint
            filled.deviceAuthorizationURL = provider.deviceAuthorizationURL ?? metadata.deviceAuthorizationEndpoint
        } catch {
            throw .oauth(error, provider: provider.id)
        }
        return filled
    }

    func login(_ options: LoginOptions) async throws(CLIError) -> ExitCode {
        var options = options
        // From a resource's URL: its catalog entry first (ResourceLogin.swift); a dynamic client is registered before its login.
        if let resource = options.resource { options = try await prepareResourceLogin(options, resource: resource) }
        let provider = try await registered(try provider(options.provider), initialAccessTokenFile: options.initialAccessTokenFile)
        let chosen: LoginOptions.Method?
        if let forced = options.method {
            chosen = forced
        } else if provider.dynamicRegistration != nil {
            chosen = .browser   // the grants it registers: the code and refresh grants
        } else {
            chosen = Self.defaultMethod(try await discovering(provider), environment: environment)
        }
        guard let method = chosen else {
            throw .data("\(provider.id) has no authorizationURL, no deviceAuthorizationURL and no client secret: nothing to log in with")
        }
        let store = try store()
        let id = provider.id
        let scopes = options.scopes.isEmpty ? nil : options.scopes
        let session = LoginSession(context: self, json: options.json, qr: options.qr)

        let flow: AuthFlow
        let reporter: StateReporter
        let result: Result<Authorization, OAuthError>
        switch method {
        case .device, .clientCredentials:
            flow = try await self.flow([provider], store: store)
            reporter = session.follow(flow, skipFirst: true)
            result = await capture { () async throws(OAuthError) in
                method == .device
                    ? try await flow.authorizeWithDeviceCode(provider: id, scopes: scopes)
                    : try await Self.fetchWithoutPerson(flow, provider, scopes: scopes)
            }
        case .browser:
            let receiver: LoopbackReceiver
            do { receiver = try LoopbackReceiver(redirectURI: provider.redirectURI) } catch { throw .oauth(error, provider: id) }
            // The redirect_uri sent must be the one listened on (its port may be ephemeral).
            var listening = provider
            listening.redirectURI = receiver.redirectURI
            if let configured = provider.redirectURI,
               configured.host != receiver.redirectURI.host || configured.path != receiver.redirectURI.path {
                err.write("note: the catalog's redirectURI is not a loopback http:// URI; using \(receiver.redirectURI.absoluteString)\n")
            }
            flow = try await self.flow([listening], store: store)
            let request: AuthorizationRequest
            do {
                request = try await flow.authorizationRequest(provider: id, scopes: scopes, parameters: ResourceLogin.stepUpParameters(options))
            } catch {
                receiver.close()
                throw .oauth(error, provider: id)
            }
            // Subscribed after the request: the stream starts with `.authorizing`, shown with its URL.
            reporter = session.follow(flow, skipFirst: false, authorizationURL: request.url, redirectURI: receiver.redirectURI)
            await reporter.waitUntilHandled(flow.state)
            if Self.hasDisplay(environment) {
                services.openURL(request.url)
                if !options.json { err.write("Opened it in your browser.\n") }
            }
            if !options.json {
                let wait = "Waiting up to \(Timestamps.clock(options.timeout)) for the browser to return to "
                    + "\(receiver.redirectURI.absoluteString)…"
                err.write(errStyle.dim(wait) + "\n")
            }
            result = await capture { () async throws(OAuthError) in
                try await receiver.receive(timeout: .seconds(options.timeout)) { url async throws(OAuthError) in
                    try await flow.completeAuthorization(callbackURL: url)
                }
            }
        }
        await reporter.waitUntilHandled(flow.state)
        reporter.stop()
        session.finish()
        guard case .failure(let error) = result else { return .success }
        if options.json, !session.printedError {
            // Failures the flow does not publish (a timeout, a forged state) still end with an error line.
            out.write(JSONValue.line([("state", .string("error")), ("provider", .string(id))] + jsonFields(error, provider: id)))
        }
        throw .oauth(error, provider: id)
    }
}

/// Prints a login's states: JSON Lines, or instructions, a countdown and notes for people.
final class LoginSession: Sendable {
    private let context: Context
    private let json: Bool
    private let qr: Bool?
    private let countdown: Countdown
    private struct Seen {
        var interval: Int?
        var printedError = false
    }
    private let seen = Mutex(Seen())

    init(context: Context, json: Bool, qr: Bool? = nil) {
        self.context = context
        self.json = json
        self.qr = qr
        self.countdown = Countdown(
            sink: context.err, terminal: context.output.stderrIsTerminal, style: context.errStyle, now: context.services.now)
    }

    var printedError: Bool { seen.withLock { $0.printedError } }

    func follow(_ flow: AuthFlow, skipFirst: Bool, authorizationURL: URL? = nil, redirectURI: URL? = nil) -> StateReporter {
        StateReporter(flow.states, skipFirst: skipFirst) { [self] state in
            self.show(state, authorizationURL: authorizationURL, redirectURI: redirectURI)
        }
    }

    func finish() { countdown.stop() }

    private func show(_ state: AuthFlow.State, authorizationURL: URL?, redirectURI: URL?) {
        let out = context.out
        let err = context.err
        if json {
            if case .error = state { seen.withLock { $0.printedError = true } }
            out.write(JSONValue.line(StateJSON.record(state, context: context, authorizationURL: authorizationURL, redirectURI: redirectURI)))
            return
        }
        let style = context.outStyle
        switch state {
        case .empty:
            break
        case .requestingDeviceCode(let provider):
            err.write(context.errStyle.dim("Requesting a device code from \(escaped(provider))…") + "\n")
        case .receivedDeviceCode(let provider, let code):
            let previous = seen.withLock { seen -> Int? in
                defer { seen.interval = code.interval }
                return seen.interval
            }
            if let previous {
                if code.interval > previous {
                    let note = " \(escaped(provider)) asked to slow down (slow_down); polling every \(code.interval) s now."
                    countdown.note(context.errStyle.yellow("note:") + note)
                }
                return
            }
            // Server-chosen text: escaped, so a user code or URI cannot draw on the terminal.
            var text = "To log in to \(escaped(provider)), open this page on any device:\n"
                + "\(style.bold(escaped(code.verificationURI.absoluteString)))\n"
                + "and enter the code:\n\(style.bold(escaped(code.userCode)))\n"
            if let complete = code.verificationURIComplete {
                text += "Or open this link, which fills in the code:\n\(escaped(complete.absoluteString))\n"
            }
            out.write(text)
            // After the text, which stays first for screen readers and copy-paste (see QRCode.swift).
            if let complete = code.verificationURIComplete,
               let drawing = context.qrCode(complete.absoluteString, forced: qr, provider: provider) {
                err.write(drawing)
            }
            countdown.start(expiresAt: code.expiresAt)
        case .authorizing(let provider, _):
            if let authorizationURL {
                out.write("To log in to \(escaped(provider)), open this URL in a browser:\n\(escaped(authorizationURL.absoluteString))\n")
            }
        case .requestingAccessToken:
            countdown.stop()
            err.write(context.errStyle.dim("Requesting a token…") + "\n")
        case .authorized(let provider, let authorization):
            countdown.stop()
            var text = "\(context.outStyle.green("Logged in")) to \(escaped(provider))"
            if !authorization.scopes.isEmpty { text += " with scopes \(escaped(authorization.scopes.joined(separator: " ")))" }
            if let expiresAt = authorization.expiresAt {
                text += "; the token expires \(Timestamps.relative(expiresAt, now: context.services.now()))"
                text += authorization.isRefreshable ? " and refreshes itself" : ""
            }
            out.write(text + ".\n")
        case .error:
            countdown.stop()  // the command reports the error itself
        }
    }
}

/// Text for a person: control characters escaped (``DisplayText/escape(_:)``), the one function
/// every CLI output of server-, file- or flag-chosen text goes through.
func escaped(_ text: String) -> String { DisplayText.escape(text) }

/// Captures an async typed-throwing call as a `Result`.
func capture<T>(_ body: () async throws(OAuthError) -> T) async -> Result<T, OAuthError> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
