#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow
import Synchronization

extension Context {
    /// `provider` with the authorization, device and backchannel endpoints its issuer's metadata
    /// adds, so that the default login method of a provider configured from `issuer` alone can be chosen.
    func discovering(_ provider: Provider) async throws(CLIError) -> Provider {
        guard provider.issuer != nil,
              provider.authorizationURL == nil || provider.deviceAuthorizationURL == nil || provider.backchannelAuthenticationURL == nil
        else { return provider }
        var filled = provider
        do {
            let flow = try await AuthFlow(providers: [provider], store: MemorySecretStore(), transport: transport,
                                          options: flowOptions(providers: [provider]))
            let metadata = try await flow.metadata(for: provider)
            filled.authorizationURL = provider.authorizationURL ?? metadata.authorizationEndpoint
            filled.deviceAuthorizationURL = provider.deviceAuthorizationURL ?? metadata.deviceAuthorizationEndpoint
            filled.backchannelAuthenticationURL = provider.backchannelAuthenticationURL ?? metadata.backchannelAuthenticationEndpoint
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
        let session = LoginSession(context: self, json: options.json, qr: options.qr,
                                   backchannelHint: options.ciba.loginHint ?? (options.ciba.isNamingSomeone ? nil : provider.cibaLoginHint))

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
        case .ciba:
            flow = try await self.flow([provider], store: store)
            reporter = session.follow(flow, skipFirst: true)
            result = await capture { () async throws(OAuthError) in
                try await flow.authorizeWithBackchannel(provider: id, options.ciba.request(scopes: scopes))
            }
        case .paste:
            let pasted = try await pasteLogin(provider, options, store: store, session: session)
            flow = pasted.flow
            reporter = pasted.reporter
            result = pasted.result
        case .browser:
            let receiver: LoopbackReceiver
            do {
                receiver = try LoopbackReceiver(redirectURI: Self.loopbackRedirect(provider.redirectURI, port: options.listenPort))
            } catch {
                throw .oauth(error, provider: id)
            }
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
                // Chosen, not asked for, on a box with no display: the browser may well be elsewhere.
                if options.method == nil, !Self.hasDisplay(environment) {
                    // Fixed: asked for, or the catalog's loopback one; not one the system chose for this run.
                    let fixedPort = receiver.redirectURI.port == (options.listenPort ?? provider.redirectURI?.port)
                    let note = Self.elsewhereNote(provider, listeningOn: receiver.redirectURI, fixedPort: fixedPort)
                    err.write(errStyle.yellow("note:") + " " + note + "\n")
                }
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

extension Context {
    /// The redirect URI the browser login listens on: the catalog's, or with `--listen-port` its
    /// loopback `http://` host and path (else `127.0.0.1` and `/callback`) at that port.
    static func loopbackRedirect(_ configured: URL?, port: Int?) -> URL? {
        guard let port else { return configured }
        if let configured, var components = URLComponents(url: configured, resolvingAgainstBaseURL: false),
           components.scheme?.lowercased() == "http", let host = components.host, Provider.isLoopback(host: host) {
            components.port = port
            if let url = components.url { return url }
        }
        return URL(string: "http://127.0.0.1:\(port)\(LoopbackReceiver.defaultPath)")
    }

    /// What a browser login chosen on a box with no display says (no device endpoint either, or
    /// the device grant would have been chosen): a browser on another machine cannot reach
    /// `redirectURI`; `--paste` fits, or a forwarded port.
    /// `fixedPort`: the port is the catalog's or `--listen-port`'s, not an ephemeral one (which the
    /// next run would not get again).
    static func elsewhereNote(_ provider: Provider, listeningOn redirectURI: URL, fixedPort: Bool) -> String {
        let id = escaped(provider.id)
        let port = fixedPort ? redirectURI.port.map(String.init) ?? "PORT" : "PORT"
        var text = "there is no display here (DISPLAY and WAYLAND_DISPLAY are unset), and \(id) has no device endpoint "
            + "for --device. If your browser runs on another machine, its redirect to \(escaped(redirectURI.absoluteString)) "
            + "cannot reach this one: press Ctrl-C and "
        text += provider.redirectURI == nil
            ? "add the redirectURI registered with \(id) to the catalog to log in with --paste (the address pasted back), "
            : "run 'authflow login \(id) --paste' to paste the address back instead, "
        text += "or forward the port from that machine (ssh -L \(port):127.0.0.1:\(port) THIS-HOST) and run "
            + "'authflow login \(id) --listen-port \(port)'."
        return text
    }
}

/// Prints a login's states: JSON Lines, or instructions, a countdown and notes for people.
final class LoginSession: Sendable {
    private let context: Context
    private let json: Bool
    private let qr: Bool?
    /// The `login_hint` of a CIBA login, shown as whom the provider asks.
    private let backchannelHint: String?
    private let countdown: Countdown
    private struct Seen {
        var interval: Int?
        var printedError = false
    }
    private let seen = Mutex(Seen())

    init(context: Context, json: Bool, qr: Bool? = nil, backchannelHint: String? = nil) {
        self.context = context
        self.json = json
        self.qr = qr
        self.backchannelHint = backchannelHint
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
            if republished(provider, interval: code.interval) { return }
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
        case .authorizing(let provider, _, let backchannel?):
            if republished(provider, interval: backchannel.interval) { return }
            out.write(Self.backchannelInstructions(provider, backchannel, hint: backchannelHint, style: style, now: context.services.now()))
            countdown.start(expiresAt: backchannel.expiresAt, what: "the request")
        case .authorizing(let provider, _, nil):
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

    /// True when a polled login's state comes again (its interval raised by `slow_down`, noted
    /// above the countdown), not for the first time.
    private func republished(_ provider: String, interval: Int) -> Bool {
        let previous = seen.withLock { seen -> Int? in
            defer { seen.interval = interval }
            return seen.interval
        }
        guard let previous else { return false }
        if interval > previous {
            let note = " \(escaped(provider)) asked to slow down (slow_down); polling every \(interval) s now."
            countdown.note(context.errStyle.yellow("note:") + note)
        }
        return true
    }
}

/// Text for a person: control characters escaped (``DisplayText/escape(_:)``), the one function
/// every CLI output of server-, file- or flag-chosen text goes through.
func escaped(_ text: String) -> String { DisplayText.escape(text) }

/// Captures an async typed-throwing call as a `Result`.
func capture<T>(_ body: () async throws(OAuthError) -> T) async -> Result<T, OAuthError> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
