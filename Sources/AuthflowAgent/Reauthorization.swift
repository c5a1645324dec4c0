#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import Glibc
import OAuthFlow
import Synchronization

/// Asks a person again when only a person can make a provider usable (a refused refresh token,
/// no login): one login per provider at a time — an OpenID Connect CIBA request to the person the
/// catalog's `cibaLoginHint` names, else an RFC 8628 device authorization — coordinated with the
/// other agents on the same store, announced through `--notify-command` (Documentation/Agent.md,
/// "Re-authorization").
final class Reauthorizer: Sendable {
    private let host: AgentHost
    private let notifyCommand: String?
    /// Whether the agent runs a CIBA notification endpoint (`--ciba-notification-listen`).
    private let receivesPings: Bool
    private let log: @Sendable (String) -> Void
    private let tasks = Mutex<[String: Task<Void, Never>]>([:])

    /// How often a ping-mode CIBA login is polled while the agent receives pings: only a lost ping
    /// leaves it to the poll (CIBA Core §7.3 makes the provider's interval a minimum).
    static let pingFallbackInterval = 60

    init(host: AgentHost, notifyCommand: String?, receivesPings: Bool = false, log: @escaping @Sendable (String) -> Void) {
        self.host = host
        self.notifyCommand = notifyCommand
        self.receivesPings = receivesPings
        self.log = log
    }

    /// Starts a login for `id` (once at a time), when the provider has a person's grant and someone
    /// to ask: through CIBA (`cibaLoginHint`) or a device endpoint. A provider with a grant no
    /// person logs in to (a service account, a token file, client credentials) is fetched again when
    /// a token is due instead.
    func start(_ id: String, flow: AuthFlow, scheduler: RefreshScheduler) {
        if let grant = flow.providers[id]?.serviceGrant {
            log("\(id): no person logs in to its \(grant.catalogName) grant; it is fetched again when a token is due")
            return
        }
        guard let provider = flow.providers[id], provider.cibaLoginHint != nil || provider.deviceAuthorizationURL != nil else {
            log("\(id): it has no device endpoint and no cibaLoginHint, so the agent cannot ask a person; run: authflow login \(id)")
            return
        }
        tasks.withLock { tasks in
            guard tasks[id] == nil else { return }
            tasks[id] = Task { [weak self] in
                await self?.reauthorize(id, flow: flow, scheduler: scheduler)
                _ = self?.tasks.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    /// Cancels every running authorization (SIGHUP, SIGTERM).
    func cancelAll() {
        let running = tasks.withLock { tasks in
            defer { tasks = [:] }
            return Array(tasks.values)
        }
        for task in running { task.cancel() }
    }

    /// Asks a person (through CIBA, else a device authorization) until a login is approved (or the agent stops).
    ///
    /// Agents sharing a store (a fleet) ask once: under the store's lock on the provider, an agent
    /// takes the login (a marker entry `ID.agent-login` naming it, until the code expires) unless
    /// another agent holds an unexpired one, or a usable login is stored already. The others check
    /// the store every 15 s and adopt the login when it appears.
    private func reauthorize(_ id: String, flow: AuthFlow, scheduler: RefreshScheduler) async {
        var failures = 0
        var waitingFor: String?
        while !Task.isCancelled {
            switch await claimLogin(id) {
            case .loggedIn:
                do throws(OAuthError) {
                    scheduler.adopt(try await flow.tokenSet(for: id))
                    log("\(id): a login stored by another process is used")
                    return
                } catch {}
            case .elsewhere(let owner, let until):
                if waitingFor != owner {
                    log("\(id): \(owner) is asking a person already (until \(Self.iso8601(until))); waiting for its login")
                    waitingFor = owner
                }
            case .claimed:
                waitingFor = nil
                let throughBackchannel = flow.providers[id]?.cibaLoginHint != nil
                do throws(OAuthError) {
                    if throughBackchannel {
                        try await askThroughBackchannel(id, flow: flow)
                    } else {
                        try await askThroughDevice(id, flow: flow)
                    }
                    await releaseLogin(id)
                    log("\(id): the login was approved")
                    return
                } catch {
                    await releaseLogin(id)
                    if error.code == .cancelled || Task.isCancelled { return }
                    failures += 1
                    let delay = min(60 << min(failures - 1, 4), 900)
                    log("\(id): the \(throughBackchannel ? "CIBA" : "device") login failed (\(host.explain(error))); asking again in \(delay) s")
                    do { try await host.clock.sleep(for: .seconds(delay)) } catch { return }
                    continue
                }
            }
            do { try await host.clock.sleep(for: .seconds(15)) } catch { return }
        }
    }

    /// One device login: the code shown in the log and told to the notify command, then the poll.
    private func askThroughDevice(_ id: String, flow: AuthFlow) async throws(OAuthError) {
        let code = try await flow.requestDeviceCode(provider: id)
        await markLogin(id, until: code.expiresAt)
        log("\(id): a person must approve a login: open \(code.verificationURI.absoluteString) and enter the code "
            + "\(code.userCode) (expires \(Self.iso8601(code.expiresAt)))")
        notify(id, [
            "AUTHFLOW_VERIFICATION_URI": code.verificationURI.absoluteString,
            "AUTHFLOW_VERIFICATION_URI_COMPLETE": code.verificationURIComplete?.absoluteString ?? "",
            "AUTHFLOW_USER_CODE": code.userCode,
            "AUTHFLOW_EXPIRES_AT": Self.iso8601(code.expiresAt), "AUTHFLOW_EXPIRES_IN": String(code.expiresIn),
        ])
        _ = try await flow.pollDeviceAuthorization(code)
    }

    /// One CIBA login (OpenID Connect CIBA Core 1.0): the provider asks the person `cibaLoginHint`
    /// names on their own device; the binding message the request shows is logged and told to the
    /// notify command, so the person can check the request is this agent's; then the poll. A
    /// ping-mode login is polled every ``pingFallbackInterval`` seconds while the agent receives
    /// pings (the ping wakes the poll at once), at the provider's interval otherwise.
    private func askThroughBackchannel(_ id: String, flow: AuthFlow) async throws(OAuthError) {
        let message = Self.bindingMessage(id)
        var authentication = try await flow.requestBackchannelAuthentication(provider: id, BackchannelAuthenticationRequest(bindingMessage: message))
        await markLogin(id, until: authentication.expiresAt)
        log("\(id): a person must approve a login on their own device; the request shows \"\(message)\" "
            + "(expires \(Self.iso8601(authentication.expiresAt)))")
        notify(id, [
            "AUTHFLOW_BINDING_MESSAGE": message,
            "AUTHFLOW_EXPIRES_AT": Self.iso8601(authentication.expiresAt), "AUTHFLOW_EXPIRES_IN": String(authentication.expiresIn),
        ])
        if receivesPings, authentication.deliveryMode == .ping {
            authentication.interval = max(authentication.interval, Self.pingFallbackInterval)
        }
        _ = try await flow.pollBackchannelAuthentication(authentication)
    }

    /// `authflow agent: ID (1234)`: names the provider, with four random digits that tell this
    /// request from an earlier one; within the binding message's 128 characters and printable
    /// (a provider id is letters, digits, `.`, `_` and `-`).
    static func bindingMessage(_ id: String) -> String {
        "authflow agent: \(id.prefix(96)) (\(String(Int.random(in: 1000...9999))))"
    }

    // MARK: One login for a fleet

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
        let store = host.store
        let now = host.now()
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
            log("\(id): cannot coordinate the login through the store (\(host.explain(error))); asking a person from here")
            return .claimed
        }
    }

    private static func marker(until: Date) -> Data {
        let seconds = AgentProtocol.wholeSeconds(until.timeIntervalSince1970.rounded())
        return Data(JSONValue.text(orderedMembers: [("owner", .string(owner)), ("expires_at", .number(String(seconds)))]).utf8 + [0x0A])
    }

    /// Sets the marker's expiry to the device code's.
    private func markLogin(_ id: String, until: Date) async {
        do { try await host.store.save(Self.marker(until: until), for: Self.loginKey(id)) } catch {}
    }

    /// Removes this agent's marker.
    private func releaseLogin(_ id: String) async {
        let store = host.store
        _ = try? await store.withExclusiveAccess(to: id) { () async throws(OAuthError) in
            guard let data = try await store.load(Self.loginKey(id)), let value = try? JSONValue.parse(data),
                  value["owner"]?.stringValue == Self.owner else { return }
            try await store.delete(Self.loginKey(id))
        }
    }

    // MARK: Telling a person

    /// `2026-05-01T12:00:00Z`.
    static func iso8601(_ date: Date) -> String { date.formatted(Date.ISO8601FormatStyle()) }

    /// Runs `--notify-command` through `/bin/sh -c` with the login's details in its environment
    /// (`AUTHFLOW_PROVIDER` and `details`; never a token, the device code or the `auth_req_id`);
    /// its output goes to the agent's standard error.
    private func notify(_ id: String, _ details: [String: String]) {
        guard let command = notifyCommand else { return }
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AUTHFLOW_") || $0.key == "AUTHFLOW_AGENT" }
        environment["AUTHFLOW_PROVIDER"] = id
        environment.merge(details) { _, detail in detail }
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
