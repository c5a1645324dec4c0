#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import Glibc
import OAuthFlow
import Synchronization

extension Context {
    /// `authflow agent`: serves tokens on a Unix socket and keeps them fresh until SIGTERM.
    func agent(_ options: AgentOptions) async throws(CLIError) -> ExitCode {
        try await AgentService(context: self, options: options).run()
    }
}

/// The running agent: the flow and its scheduler (replaced on SIGHUP), the socket server, the
/// token files, the metrics, systemd notifications and re-authorizations (Documentation/Agent.md).
final class AgentService: Sendable {
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

    /// The name of the systemd credential (`LoadCredential=authflow-store-key:/path`) that holds the store key.
    static let storeKeyCredential = "authflow-store-key"

    let context: Context
    let options: AgentOptions
    let started: Date
    private let runtime = Mutex<Runtime?>(nil)
    /// Raised after each catalog reload, so the socket loops give no answer remembered under the
    /// previous catalog again.
    private let catalogEpoch = AgentServer.Epoch()
    private let reauthorizations = Mutex<[String: Task<Void, Never>]>([:])
    private let store: any SecretStore
    private let sinks: [TokenSink]

    init(context: Context, options: AgentOptions) throws(CLIError) {
        self.context = context
        self.options = options
        self.started = context.services.now()
        // A database store listens (LISTEN): a logout on another machine drops the token here at once.
        store = try context.store(encryption: try Self.credentialEncryption(context), listening: true)
        var sinks: [TokenSink] = []
        for sink in options.sinks {
            let owner = try sink.owner.map { name throws(CLIError) -> UInt32 in
                guard let uid = AgentAccess.userID(name) else { throw .usage(UsageError("--sink: no user '\(DisplayText.escape(name))'", command: "agent")) }
                return uid
            }
            let group = try sink.group.map { name throws(CLIError) -> UInt32 in
                guard let (gid, _) = AgentAccess.group(name) else { throw .usage(UsageError("--sink: no group '\(DisplayText.escape(name))'", command: "agent")) }
                return gid
            }
            do {
                sinks.append(try TokenSink(providerID: sink.provider, path: sink.path, mode: sink.mode, owner: owner, group: group, format: sink.format))
            } catch {
                throw .oauth(error, provider: sink.provider)
            }
        }
        self.sinks = sinks
    }

    /// The store key from systemd's `LoadCredential=`, when no key file is named and
    /// `$CREDENTIALS_DIRECTORY/authflow-store-key` exists.
    static func credentialEncryption(_ context: Context) throws(CLIError) -> EntryEncryption? {
        guard context.invocation.storeKeyPath == nil, (context.environment["AUTHFLOW_STORE_KEY_FILE"] ?? "").isEmpty,
              let directory = context.environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/"),
              access(directory + "/" + storeKeyCredential, F_OK) == 0
        else { return nil }
        do {
            return EntryEncryption(key: try StoreKey(systemdCredential: storeKeyCredential, environment: context.environment))
        } catch {
            throw .data(error.message ?? error.description)
        }
    }

    func log(_ message: String) {
        context.err.write("authflow agent: \(escaped(message))\n")
    }

    // MARK: Running

    func run() async throws(CLIError) -> ExitCode {
        let environment = context.environment
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
        let server: AgentServer
        do {
            server = try AgentServer(
                listener: listener, limits: AgentServer.Limits(clientTimeout: .seconds(options.clientTimeout)),
                log: { [weak self] in self?.log($0) },
                responder: { [weak self] line, peer in
                    // nil from immediateAnswer means "fetch it": only a missing agent is "stopping".
                    guard let self else {
                        return AgentServer.Answer(line: Array(AgentProtocol.failure("unavailable", "the agent is stopping", recovery: "retry_later").utf8))
                    }
                    return self.immediateAnswer(line, peer)
                },
                handler: { [weak self] line, peer in
                    await self?.answer(line, peer) ?? Array(AgentProtocol.failure("unavailable", "the agent is stopping", recovery: "retry_later").utf8)
                })
        } catch {
            throw .data("cannot start the socket server: \(String(cString: strerror(error.code)))")
        }
        guard server.start() else { throw .data("cannot start the socket server's thread") }
        await first.scheduler.start()
        log("ready: \(first.flow.providers.count) provider(s), socket \(socketPath ?? "from systemd (LISTEN_FDS)")")
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
        await server.waitUntilStopped(timeout: .seconds(5))
        watchdog?.cancel()
        metrics?.cancel()
        cancelReauthorizations()
        if let current = runtime.withLock({ $0 }) {
            if !(await current.scheduler.waitUntilIdle(timeout: .seconds(10))) {
                log("a token request was still in flight after 10 s; stopping anyway")
            }
            current.scheduler.stop()
        }
        writeMetrics()
        if let socketPath { unlink(socketPath) }
        log("stopped")
        return .success
    }

    /// Loads the catalog and makes a flow with background renewal and its scheduler.
    private func loadRuntime() async throws(CLIError) -> Runtime {
        let providers = try context.catalog()
        let access = try AgentAccess.load(try context.catalogFile(), agentUID: geteuid())
        for sink in sinks where !providers.contains(where: { $0.id == sink.providerID }) {
            throw .usage(UsageError("--sink names '\(sink.providerID)', which the catalog does not list", command: "agent"))
        }
        var flowOptions = context.flowOptions(log: { [weak self] record in
            if record.level != .debug { self?.log(record.description) }
        }, providers: providers)
        flowOptions.proactiveRefresh = true
        flowOptions.restoresAtStart = false   // the scheduler restores once it listens (RefreshScheduler.start())
        do throws(OAuthError) {
            let flow = try await AuthFlow(providers: providers, store: store, transport: context.transport, options: flowOptions)
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
        cancelReauthorizations()
        answers.withLock { $0 = [:] }
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

    private func describe(_ error: CLIError) -> String {
        switch error {
        case .oauth(let error, _): return Context.explain(error)
        case .usage(let usage): return usage.message
        case .data(let message): return message
        }
    }

    /// `3 provider(s); 1 need(s) a person`.
    private func summary(_ runtime: Runtime) -> String {
        let statuses = runtime.scheduler.statuses
        let needing = statuses.filter { $0.value.needsAuthorization }.keys.sorted()
        return "\(statuses.count) provider(s)" + (needing.isEmpty ? "; all fresh" : "; needs a person: \(needing.joined(separator: ", "))")
    }

    // MARK: The socket

    /// The listening socket: systemd's (`LISTEN_FDS`), else a new one at `--socket` or the default
    /// path, whose directory is made when missing (0700, or 0711 when other users are served).
    private func listen(_ access: AgentAccess) throws(CLIError) -> (SharedFileDescriptor, String?) {
        if let activated = try Systemd.activatedListener(environment: context.environment) { return (SharedFileDescriptor(activated), nil) }
        guard let path = options.socketPath ?? Authflow.defaultAgentSocket(environment: context.environment) else {
            throw .usage(UsageError("no socket path: pass --socket PATH or set XDG_RUNTIME_DIR", command: "agent"))
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

    /// What a request gets: its answer line now (with what keeps it right when the socket loop
    /// may give it again), or a token the flow must fetch first.
    private enum Reply {
        case line([UInt8], reuse: AgentServer.Reuse? = nil)
        case fetch(AuthFlow, String)
    }

    /// The answer line for one request, on the socket loop's thread, without waiting: nil when the
    /// token must be fetched (not in the flow's memory, or due for renewal), for ``answer(_:_:)``.
    func immediateAnswer(_ line: [UInt8], _ peer: Peer) -> AgentServer.Answer? {
        switch reply(line, peer) {
        case .line(let bytes, let reuse): return AgentServer.Answer(line: bytes, reuse: reuse)
        case .fetch: return nil
        }
    }

    /// The answer line for one request, fetching the token when it must.
    func answer(_ line: [UInt8], _ peer: Peer) async -> [UInt8] {
        switch reply(line, peer) {
        case .line(let bytes, _):
            return bytes
        case .fetch(let flow, let id):
            do {
                return tokenAnswer(try await flow.tokenSet(for: id))
            } catch {
                return Array(AgentProtocol.Failure(error).line.utf8)
            }
        }
    }

    private func reply(_ line: [UInt8], _ peer: Peer) -> Reply {
        func failure(_ code: String, _ message: String, recovery: String) -> Reply {
            .line(Array(AgentProtocol.failure(code, message, recovery: recovery).utf8))
        }
        let catalog = catalogEpoch.current   // before the runtime: a reload after this read makes it stale
        guard let runtime = runtime.withLock({ $0 }) else {
            return failure("unavailable", "the agent is starting", recovery: "retry_later")
        }
        let request: AgentProtocol.Request
        switch AgentProtocol.parse(line) {
        case .failure(let failure): return .line(Array(failure.line.utf8))
        case .success(let parsed): request = parsed
        }
        switch request {
        case .metrics:
            guard runtime.access.isOwner(peer) else {
                log("refused \(peer): the metrics are served to uid \(runtime.access.agentUID) only")
                return failure("access_denied", "the metrics are served to the agent's own user only", recovery: "none")
            }
            return .line(Array(AgentProtocol.metrics(AgentMetrics.render(runtime.scheduler.statuses, now: context.services.now(), started: started)).utf8))
        case .token(let id):
            // An unknown provider and a refused one look the same to a peer that may not ask.
            let known = runtime.flow.providers[id] != nil
            guard known || runtime.access.isOwner(peer) else {
                log("refused \(peer) for \"\(id)\": no such provider")
                return failure("access_denied", "uid \(peer.uid) may not have the token of \"\(id)\"", recovery: "none")
            }
            guard known else {
                return failure("unknown_provider", "no provider \"\(id)\" is configured in this agent", recovery: "fix_configuration")
            }
            guard runtime.access.allows(peer, id) else {
                log("refused \(peer) for \"\(id)\": not in its agentAllow list")
                return failure("access_denied", "uid \(peer.uid) may not have the token of \"\(id)\"; the agent's catalog must list it in agentAllow", recovery: "none")
            }
            // The flow's fresh token in memory (what tokenSet(for:) answers without waiting), read
            // without a hop onto its actor; a token that is missing or due is fetched in a task.
            guard let (set, stamp) = runtime.flow.stampedTokenSet(for: id) else {
                answers.withLock { _ = $0.removeValue(forKey: id) }   // the flow let it go (due, or logged out): so does this
                return .fetch(runtime.flow, id)
            }
            // The agent's own uid is allowed every provider whatever its groups, so its answer
            // depends on nothing else of the peer: the loop may give it to that uid again.
            let reuse = runtime.access.isOwner(peer) ? AgentServer.Reuse(token: stamp, catalog: catalog, epoch: catalogEpoch) : nil
            return .line(tokenAnswer(set), reuse: reuse)
        }
    }

    /// The answer line of the last token set answered, per provider: the same set gets the same
    /// bytes, so a cached token costs no encoding. Holds tokens, like the flow's own cache, and lets
    /// a provider's go when the flow no longer holds a fresh one (and all on reload).
    private let answers = Mutex<[String: (set: TokenSet, line: [UInt8])]>([:])

    /// The answer line for `set` (a failure for a token no header can carry).
    private func tokenAnswer(_ set: TokenSet) -> [UInt8] {
        if let last = answers.withLock({ $0[set.providerID] }), Self.sameAnswer(last.set, set) { return last.line }
        let line: [UInt8]
        if Context.isHeaderSafe(set.accessToken) {
            line = Array(AgentProtocol.token(set).utf8)
        } else {
            line = Array(AgentProtocol.failure("storage", "the access token holds characters a token cannot have", recovery: "reauthorize").utf8)
        }
        answers.withLock { $0[set.providerID] = (set, line) }
        return line
    }

    /// True when `a` and `b` give the same answer line (what ``AgentProtocol/token(_:)`` writes).
    private static func sameAnswer(_ a: TokenSet, _ b: TokenSet) -> Bool {
        a.expiresAt == b.expiresAt && a.tokenType == b.tokenType && a.scopes == b.scopes && a.accessToken.constantTimeEquals(b.accessToken)
    }

    // MARK: Events

    private func handle(_ event: RefreshScheduler.Event, flow: AuthFlow) async {
        switch event {
        case .authorized(let set):
            for sink in sinks where sink.providerID == set.providerID {
                do {
                    try sink.write(set)
                } catch {
                    log("\(Context.explain(error))")
                }
            }
        case .failed(let id, let error):
            log("\(id): token request failed, trying again later: \(Context.explain(error))")
        case .needsAuthorization(let id, let error):
            log("\(id): a person is needed: \(Context.explain(error))")
            if let current = runtime.withLock({ $0 }), current.flow === flow { startReauthorization(id, runtime: current) }
        }
        writeMetrics()
        if let current = runtime.withLock({ $0 }), current.flow === flow {
            Systemd.notify("STATUS=\(summary(current))", environment: context.environment)
        }
    }

    private func writeMetrics() {
        guard let path = options.metricsFile, let current = runtime.withLock({ $0 }) else { return }
        let text = AgentMetrics.render(current.scheduler.statuses, now: context.services.now(), started: started)
        do throws(SystemError) {
            try AtomicFile.write(Array(text.utf8), to: path, mode: 0o644)
        } catch {
            log("cannot write the metrics file \(path): \(String(cString: strerror(error.code)))")
        }
    }

    // MARK: Re-authorization

    /// Starts a device authorization for `id` (once at a time), when the provider has a device endpoint.
    private func startReauthorization(_ id: String, runtime: Runtime) {
        guard runtime.flow.providers[id]?.deviceAuthorizationURL != nil else {
            log("\(id): it has no device endpoint, so the agent cannot ask a person; run: authflow login \(id)")
            return
        }
        reauthorizations.withLock { tasks in
            guard tasks[id] == nil else { return }
            tasks[id] = Task { [weak self] in
                await self?.reauthorize(id, runtime: runtime)
                _ = self?.reauthorizations.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    private func cancelReauthorizations() {
        let tasks = reauthorizations.withLock { tasks in
            defer { tasks = [:] }
            return Array(tasks.values)
        }
        for task in tasks { task.cancel() }
    }

    /// Asks a person through a device authorization until one is approved (or the agent stops).
    ///
    /// Agents sharing a store (a fleet) ask once: under the store's lock on the provider, an agent
    /// takes the login (a marker entry `ID.agent-login` naming it, until the code expires) unless
    /// another agent holds an unexpired one, or a usable login is stored already. The others check
    /// the store every 15 s and adopt the login when it appears.
    private func reauthorize(_ id: String, runtime: Runtime) async {
        let flow = runtime.flow
        var failures = 0
        var waitingFor: String?
        while !Task.isCancelled {
            switch await claimLogin(id) {
            case .loggedIn:
                do throws(OAuthError) {
                    runtime.scheduler.adopt(try await flow.tokenSet(for: id))
                    log("\(id): a login stored by another process is used")
                    return
                } catch {}
            case .elsewhere(let owner, let until):
                if waitingFor != owner {
                    log("\(id): \(owner) is asking a person already (until \(Timestamps.iso8601(until))); waiting for its login")
                    waitingFor = owner
                }
            case .claimed:
                waitingFor = nil
                do throws(OAuthError) {
                    let code = try await flow.requestDeviceCode(provider: id)
                    await markLogin(id, until: code.expiresAt)
                    log("\(id): a person must approve a login: open \(code.verificationURI.absoluteString) and enter the code "
                        + "\(code.userCode) (expires \(Timestamps.iso8601(code.expiresAt)))")
                    notify(code)
                    _ = try await flow.pollDeviceAuthorization(code)
                    await releaseLogin(id)
                    log("\(id): the login was approved")
                    return
                } catch {
                    await releaseLogin(id)
                    if error.code == .cancelled || Task.isCancelled { return }
                    failures += 1
                    let delay = min(60 << min(failures - 1, 4), 900)
                    log("\(id): the device login failed (\(Context.explain(error))); asking again in \(delay) s")
                    do { try await context.services.clock.sleep(for: .seconds(delay)) } catch { return }
                    continue
                }
            }
            do { try await context.services.clock.sleep(for: .seconds(15)) } catch { return }
        }
    }

    private enum LoginClaim {
        case claimed
        case elsewhere(owner: String, until: Date)
        case loggedIn
    }

    /// This agent as a marker names it: `host:pid`.
    private static let owner: String = {
        var name = [UInt8](repeating: 0, count: 256)
        let host = name.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { gethostname($0.baseAddress!, $0.count - 1) }
        } == 0 ? String(decoding: name.prefix { $0 != 0 }, as: UTF8.self) : "?"
        return "\(host):\(getpid())"
    }()

    private static func loginKey(_ id: String) -> String { id + ".agent-login" }

    /// Takes the provider's login for this agent unless another holds it or a usable login is stored.
    private func claimLogin(_ id: String) async -> LoginClaim {
        let store = store
        let now = context.services.now()
        let marker = Self.marker(until: now.addingTimeInterval(900))
        do {
            return try await store.withExclusiveAccess(to: id) { () async throws(OAuthError) -> LoginClaim in
                if let data = try await store.load(id), let set = try? AuthFlow.freshStoredSet(data, key: id, now: now), !set.needsReauthorization {
                    return .loggedIn
                }
                if let data = try await store.load(Self.loginKey(id)), let value = try? JSONValue.parse(data),
                   let owner = value["owner"]?.stringValue, owner != Self.owner,
                   let until = value["expires_at"]?.integerValue, Double(until) > now.timeIntervalSince1970 {
                    return .elsewhere(owner: owner, until: Date(timeIntervalSince1970: Double(until)))
                }
                try await store.save(marker, for: Self.loginKey(id))
                return .claimed
            }
        } catch {
            log("\(id): cannot coordinate the login through the store (\(Context.explain(error))); asking a person from here")
            return .claimed
        }
    }

    private static func marker(until: Date) -> Data {
        Data(JSONValue.line([("owner", .string(owner)), ("expires_at", .int(Timestamps.wholeSeconds(until.timeIntervalSince1970.rounded())))]).utf8)
    }

    /// Sets the marker's expiry to the device code's.
    private func markLogin(_ id: String, until: Date) async {
        do { try await store.save(Self.marker(until: until), for: Self.loginKey(id)) } catch {}
    }

    /// Removes this agent's marker.
    private func releaseLogin(_ id: String) async {
        let store = store
        _ = try? await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in
            guard let data = try await store.load(Self.loginKey(id)), let value = try? JSONValue.parse(data),
                  value["owner"]?.stringValue == Self.owner else { return }
            try await store.delete(Self.loginKey(id))
        }
    }

    /// Runs `--notify-command` through `/bin/sh -c` with the login's details in its environment
    /// (never a token or the device code); its output goes to the agent's standard error.
    private func notify(_ code: DeviceCode) {
        guard let command = options.notifyCommand else { return }
        var environment = Authflow.processEnvironment().filter { !$0.key.hasPrefix("AUTHFLOW_") || $0.key == "AUTHFLOW_AGENT" }
        environment["AUTHFLOW_PROVIDER"] = code.providerID
        environment["AUTHFLOW_VERIFICATION_URI"] = code.verificationURI.absoluteString
        environment["AUTHFLOW_VERIFICATION_URI_COMPLETE"] = code.verificationURIComplete?.absoluteString ?? ""
        environment["AUTHFLOW_USER_CODE"] = code.userCode
        environment["AUTHFLOW_EXPIRES_AT"] = Timestamps.iso8601(code.expiresAt)
        environment["AUTHFLOW_EXPIRES_IN"] = String(code.expiresIn)
        guard Self.spawn(["/bin/sh", "-c", command], environment: environment) else {
            log("cannot run the notify command")
            return
        }
    }

    /// Starts `arguments` with `environment`, `/dev/null` as input and standard error as output;
    /// reaped by a thread of its own (`waitpid` blocks, so not on a thread of the concurrency runtime).
    static func spawn(_ arguments: [String], environment: [String: String]) -> Bool {
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { return false }
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 2, 1)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for item in argv { free(item) }
            for item in envp { free(item) }
        }
        var pid: pid_t = 0
        guard posix_spawn(&pid, arguments[0], &actions, nil, argv, envp) == 0 else { return false }
        let child = pid
        let reaping = DetachedThread.start(name: "authflow-reap") {
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        }
        if !reaping {   // no thread to be had: reap it at the next chance instead of leaving a zombie for good
            DispatchQueue.global().async {
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            }
        }
        return true
    }
}
