#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import Glibc
import OAuthFlow
import Synchronization

/// The running agent: the flow and its scheduler (replaced on SIGHUP), the socket server, the
/// token files, the metrics, systemd notifications and re-authorizations (Documentation/Agent.md).
package final class AgentService: Sendable {
    /// What a catalog load makes; replaced whole on SIGHUP.
    ///
    /// A class: every request reads it out of its lock, and a reference costs one retain where a
    /// struct of these members costs one per member.
    final class Runtime: Sendable {
        let flow: AuthFlow
        let scheduler: RefreshScheduler
        let access: AgentAccess

        init(flow: AuthFlow, scheduler: RefreshScheduler, access: AgentAccess) {
            self.flow = flow
            self.scheduler = scheduler
            self.access = access
        }
    }

    let host: AgentHost
    let options: AgentOptions
    let started: Date
    let runtime = Mutex<Runtime?>(nil)
    /// Raised after each catalog reload, so the socket loops give no answer remembered under the
    /// previous catalog again.
    let catalogEpoch = AgentServer.Epoch()
    /// The answer line of the last token set answered, per provider.
    let answerLines = AnswerLines()
    let sinks: TokenSinks
    let reauthorizer: Reauthorizer

    /// An agent for `options` over what `host` gives; nothing runs until ``run()``.
    /// - Throws: ``AgentError`` `.usage` for a `--sink` owner or group that does not exist;
    ///   `.oauth` for a sink the library refuses.
    package init(host: AgentHost, options: AgentOptions) throws(AgentError) {
        self.host = host
        self.options = options
        self.started = host.now()
        self.sinks = try TokenSinks(options.sinks)
        let log = host.standardError
        self.reauthorizer = Reauthorizer(host: host, notifyCommand: options.notifyCommand, receivesPings: options.cibaNotificationListen != nil) {
            log("authflow agent: \(DisplayText.escape($0))\n")
        }
    }

    func log(_ message: String) {
        host.standardError("authflow agent: \(DisplayText.escape(message))\n")
    }

    // MARK: Running

    /// Serves until SIGTERM or SIGINT (SIGHUP reloads the catalog); returns once stopped.
    /// - Throws: ``AgentError`` when the first catalog does not load or the socket cannot be served.
    package func run() async throws(AgentError) {
        let environment = host.environment
        for number in [SIGHUP, SIGTERM, SIGINT, SIGPIPE] { signal(number, SIG_IGN) }
        let (signals, continuation) = AsyncStream.makeStream(of: Int32.self)
        let sources = [SIGHUP, SIGTERM, SIGINT].map { number -> any DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
        defer { for source in sources { source.cancel() } }

        let first = try await loadRuntime()
        runtime.withLock { $0 = first }
        let (listener, socketPath) = try listen(first.access)
        let server = try startServer(listener)
        let notifications = try startNotifications()
        await first.scheduler.start()
        log("ready: \(first.flow.providers.count) provider(s), socket \(socketPath ?? "from systemd (LISTEN_FDS)")"
            + (notifications.map { ", CIBA notifications on \($0.address)" } ?? ""))
        Systemd.notify("READY=1\nSTATUS=\(summary(first))", environment: environment)
        writeMetrics()

        let watchdog = Systemd.watchdogInterval(environment: environment).map { interval in
            Task {
                while !Task.isCancelled {
                    Systemd.notify("WATCHDOG=1", environment: environment)
                    try? await Task.sleep(for: interval)
                }
            }
        }
        let metrics = options.metricsFile.map { _ in
            Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(15))
                    self?.writeMetrics()
                }
            }
        }

        for await number in signals {
            guard number == SIGHUP else { break }
            Systemd.notify("RELOADING=1", environment: environment)
            await reload(socketPath: socketPath)
            if let current = runtime.withLock({ $0 }) { Systemd.notify("READY=1\nSTATUS=\(summary(current))", environment: environment) }
        }

        Systemd.notify("STOPPING=1\nSTATUS=stopping", environment: environment)
        log("stopping")
        server.stop()
        notifications?.stop()
        await server.waitUntilStopped(timeout: .seconds(5))
        watchdog?.cancel()
        metrics?.cancel()
        reauthorizer.cancelAll()
        if let current = runtime.withLock({ $0 }) {
            if !(await current.scheduler.waitUntilIdle(timeout: .seconds(10))) {
                log("a token request was still in flight after 10 s; stopping anyway")
            }
            current.scheduler.stop()
        }
        writeMetrics()
        if let socketPath { unlink(socketPath) }
        log("stopped")
    }

    /// The socket server over `listener`, answering through ``immediateAnswer(_:_:)`` and ``answer(_:_:)``, started.
    private func startServer(_ listener: SharedFileDescriptor) throws(AgentError) -> AgentServer {
        let stopping = Array(AgentProtocol.failure("unavailable", "the agent is stopping", recovery: "retry_later").utf8)
        let server: AgentServer
        do {
            server = try AgentServer(
                listener: listener, limits: AgentServer.Limits(clientTimeout: .seconds(options.clientTimeout)),
                log: { [weak self] in self?.log($0) },
                // nil from immediateAnswer means "fetch it": only a missing agent is "stopping".
                responder: { [weak self] line, peer in self.map { $0.immediateAnswer(line, peer) } ?? AgentServer.Answer(line: stopping) },
                handler: { [weak self] line, peer in await self?.answer(line, peer) ?? stopping })
        } catch {
            throw .data("cannot start the socket server: \(String(cString: strerror(error.code)))")
        }
        guard server.start() else { throw .data("cannot start the socket server's thread") }
        return server
    }

    /// The CIBA notification endpoint (`--ciba-notification-listen`), started; nil without the option.
    /// A ping goes to the flow of the catalog loaded when it arrives.
    private func startNotifications() throws(AgentError) -> CIBANotifications? {
        guard let address = options.cibaNotificationListen else { return nil }
        let endpoint = try CIBANotifications(listen: address, deliver: { [weak self] authorization, body in
            guard let flow = self?.runtime.withLock({ $0 })?.flow else { return false }
            return flow.receiveBackchannelNotification(authorization: authorization, body: body)
        }, log: { [weak self] in self?.log($0) })
        guard endpoint.start() else { throw .data("cannot start the CIBA notification endpoint's thread") }
        return endpoint
    }

    /// Loads the catalog and makes a flow with background renewal and its scheduler.
    private func loadRuntime() async throws(AgentError) -> Runtime {
        let catalog = try host.catalog()
        let access = try AgentAccess.load(catalog.file, agentUID: geteuid())
        if let sink = sinks.first(notIn: catalog.providers) {
            throw .usage("--sink names '\(sink)', which the catalog does not list")
        }
        var flowOptions = host.flowOptions(catalog.providers) { [weak self] record in
            if record.level != .debug { self?.log(record.description) }
        }
        flowOptions.proactiveRefresh = true
        flowOptions.restoresAtStart = false   // the scheduler restores once it listens (RefreshScheduler.start())
        do throws(OAuthError) {
            let flow = try await AuthFlow(providers: catalog.providers, store: host.store, transport: host.transport, options: flowOptions)
            let scheduler = try RefreshScheduler(flow: flow) { [weak self] event in await self?.handle(event, flow: flow) }
            return Runtime(flow: flow, scheduler: scheduler, access: access)
        } catch {
            throw .oauth(error, provider: nil)
        }
    }

    /// SIGHUP: a new catalog, flow and scheduler; on failure the old ones keep serving.
    private func reload(socketPath: String?) async {
        let next: Runtime
        do {
            next = try await loadRuntime()
        } catch {
            log("reload failed, still serving the previous catalog: \(describe(error))")
            return
        }
        reauthorizer.cancelAll()
        answerLines.removeAll()
        let previous = runtime.withLock { runtime in
            defer { runtime = next }
            return runtime
        }
        catalogEpoch.advance()
        previous?.scheduler.stop()
        if let socketPath {
            let mode = next.access.socketMode
            if let group = mode.group { _ = chown(socketPath, UInt32.max, group) }
            _ = chmod(socketPath, mode.mode)
        }
        await next.scheduler.start()
        log("reloaded: \(next.flow.providers.count) provider(s)")
        writeMetrics()
    }

    private func describe(_ error: AgentError) -> String {
        switch error {
        case .oauth(let error, _): return host.explain(error)
        case .usage(let message), .data(let message): return message
        }
    }

    /// `3 provider(s); 1 need(s) a person`.
    private func summary(_ runtime: Runtime) -> String {
        let statuses = runtime.scheduler.statuses
        let needing = statuses.filter { $0.value.needsAuthorization }.keys.sorted()
        return "\(statuses.count) provider(s)" + (needing.isEmpty ? "; all fresh" : "; needs a person: \(needing.joined(separator: ", "))")
    }

    // MARK: The socket

    /// The agent's socket when `--socket` is not given: `$XDG_RUNTIME_DIR/authflow/agent.sock`,
    /// else `/run/authflow/agent.sock` for root; nil for another user without `XDG_RUNTIME_DIR`.
    package static func defaultSocketPath(environment: [String: String]) -> String? {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return runtime + "/authflow/agent.sock" }
        return geteuid() == 0 ? "/run/authflow/agent.sock" : nil
    }

    /// The listening socket: systemd's (`LISTEN_FDS`), else a new one at `--socket` or the default
    /// path, whose directory is made when missing (0700, or 0711 when other users are served).
    private func listen(_ access: AgentAccess) throws(AgentError) -> (SharedFileDescriptor, String?) {
        if let activated = try Systemd.activatedListener(environment: host.environment) { return (SharedFileDescriptor(activated), nil) }
        guard let path = options.socketPath ?? Self.defaultSocketPath(environment: host.environment) else {
            throw .usage("no socket path: pass --socket PATH or set XDG_RUNTIME_DIR")
        }
        let mode = access.socketMode
        let directory = String(path[..<path.lastIndex(of: "/")!])
        if !directory.isEmpty, mkdir(directory, mode.mode == 0o600 ? 0o700 : 0o711) == 0 {
            _ = chmod(directory, mode.mode == 0o600 ? 0o700 : 0o711)   // not narrowed by the umask
        }
        do {
            return (SharedFileDescriptor(try UnixSocket.listen(path, mode: mode.mode, group: mode.group)), path)
        } catch {
            if error.code == EADDRINUSE { throw .data("another process answers on \(path); is an agent already running?") }
            throw .data("cannot listen on \(path): \(String(cString: strerror(error.code)))")
        }
    }

    // MARK: Events

    private func handle(_ event: RefreshScheduler.Event, flow: AuthFlow) async {
        switch event {
        case .authorized(let set):
            sinks.write(set) { log(host.explain($0)) }
        case .failed(let id, let error):
            // A refused key or credential is named: logging in cannot fix it, the configuration must.
            let advice = error.recovery == .fixConfiguration ? flow.providers[id].flatMap { host.advice(error, $0) } : nil
            log("\(id): token request failed, trying again later: \(host.explain(error))" + (advice.map { " " + $0 } ?? ""))
        case .needsAuthorization(let id, let error):
            log("\(id): a person is needed: \(host.explain(error))")
            if let current = runtime.withLock({ $0 }), current.flow === flow {
                reauthorizer.start(id, flow: current.flow, scheduler: current.scheduler)
            }
        }
        writeMetrics()
        if let current = runtime.withLock({ $0 }), current.flow === flow {
            Systemd.notify("STATUS=\(summary(current))", environment: host.environment)
        }
    }

    private func writeMetrics() {
        guard let path = options.metricsFile, let current = runtime.withLock({ $0 }) else { return }
        let text = AgentMetrics.render(current.scheduler.statuses, now: host.now(), started: started)
        do throws(SystemError) {
            try AtomicFile.write(Array(text.utf8), to: path, mode: 0o644)
        } catch {
            log("cannot write the metrics file \(path): \(String(cString: strerror(error.code)))")
        }
    }
}
