import Foundation
import OAuthFlow
import OAuthFlowTesting
import Synchronization
import Testing

typealias State = AuthFlow.State

/// Subscribes `count` listeners to `flow.states` now (synchronously, so none misses a transition)
/// and collects what each sees: the current state, then transitions until `done` holds for one,
/// or `limit` states arrived.
func recordStates(
    _ flow: AuthFlow, count: Int = 2, limit: Int = 64, until done: @escaping @Sendable (State) -> Bool = isTerminal
) -> [Task<[State], Never>] {
    (0..<count).map { _ in
        let stream = flow.states
        return Task {
            var seen: [State] = []
            for await state in stream {
                seen.append(state)
                // The first state is the current one; `done` applies to what follows.
                if seen.count > 1 && done(state) || seen.count >= limit { break }
            }
            return seen
        }
    }
}

/// `.authorized` or `.error`: where an operation's states end.
@Sendable func isTerminal(_ state: State) -> Bool {
    switch state {
    case .authorized, .error: return true
    default: return false
    }
}

/// Awaits every recorder and returns what each saw.
func collected(_ recorders: [Task<[State], Never>]) async -> [[State]] {
    var all: [[State]] = []
    for recorder in recorders { all.append(await recorder.value) }
    return all
}

/// Log records, collected from ``AuthFlow/Options/log``.
final class LogCollector: Sendable {
    private let records = Mutex<[LogRecord]>([])
    var all: [LogRecord] { records.withLock { $0 } }
    var sink: @Sendable (LogRecord) -> Void { { [self] record in records.withLock { $0.append(record) } } }
}

/// Options on `clock` with a log sink, a refresh margin and a retry policy.
func options(
    _ clock: TestClock, log: LogCollector? = nil, refreshMargin: TimeInterval = 60, retry: RetryPolicy = RetryPolicy()
) -> AuthFlow.Options {
    AuthFlow.Options(clock: clock, now: { clock.date }, refreshMargin: refreshMargin, log: log?.sink, retry: retry)
}

/// The query of `url` as ordered, decoded pairs.
func queryPairs(_ url: URL) -> [(String, String)] {
    (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }
}

/// The decoded query of `url` keyed by name; `nil` when a name occurs twice.
func query(_ url: URL) -> [String: String]? {
    var result: [String: String] = [:]
    for (name, value) in queryPairs(url) {
        guard result[name] == nil else { return nil }
        result[name] = value
    }
    return result
}

/// The redirect the authorization server sends back: `redirect_uri?code=…&state=…` plus `extra`,
/// each value percent-encoded as a server does (so a `+` in a value stays a `+`).
func callback(_ request: AuthorizationRequest, code: String = "auth-code-1", extra: [(String, String)] = []) -> URL {
    let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    let pairs = [("code", code), ("state", request.state.reveal())] + extra
    let query = pairs.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: unreserved)!)" }.joined(separator: "&")
    return URL(string: "\(request.redirectURI.absoluteString)?\(query)")!
}

/// A callback URL with a raw query.
func callback(query: String) -> URL {
    URL(string: "http://127.0.0.1:8765/callback?\(query)")!
}

/// The form body of `request` keyed by name; `nil` when a name occurs twice.
func uniqueForm(_ request: RecordedRequest) -> [String: String]? {
    let pairs = request.formPairs
    let form = request.form
    return pairs.count == form.count ? form : nil
}

/// Runs the device flow on `mock` so `provider` holds tokens (interval 1 s, instant on a TestClock).
@discardableResult
func authorizeByDevice(
    _ flow: AuthFlow, mock: MockProvider, provider: String, access: String = "at-1", refresh: String? = "rt-1",
    expiresIn: Int? = 3600, scope: String? = nil
) async throws -> Authorization {
    mock.script(.deviceAuthorization, [.deviceCode(interval: 1)])
    mock.script(.token, [.token(access: access, expiresIn: expiresIn, refresh: refresh, scope: scope)])
    return try await flow.authorizeWithDeviceCode(provider: provider)
}

/// Sends one request to every endpoint that authenticates the client — device authorization and
/// the token endpoint (a device login), the token endpoint again (a refresh), introspection and
/// revocation (refresh and access token) — and returns those six requests in that order.
func requestEveryAuthenticatingEndpoint(_ flow: AuthFlow, mock: MockProvider, provider: String) async throws -> [RecordedRequest] {
    _ = try await authorizeByDevice(flow, mock: mock, provider: provider)
    mock.script(.token, [.token(access: "at-2", refresh: "rt-2")])
    _ = try await flow.refresh(provider: provider)
    mock.script(.introspection, [.json(#"{"active":true}"#)])
    _ = try await flow.introspect(provider: provider)
    mock.script(.revocation, [.json("{}"), .json("{}")])
    _ = try await flow.revoke(provider: provider)
    return mock.requests(.deviceAuthorization) + mock.requests(.token) + mock.requests(.introspection) + mock.requests(.revocation)
}

/// The base64url alphabet (RFC 4648 §5).
let base64URLAlphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

extension Array {
    /// The single element, or nil when there are none or several.
    var only: Element? { count == 1 ? first : nil }
}
