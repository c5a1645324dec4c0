#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow

/// `--ciba-notification-listen`: the agent's CIBA notification endpoint (OpenID Connect CIBA Core
/// 1.0 §10.2). A ping-mode provider POSTs `{"auth_req_id": …}` with the request's
/// `client_notification_token` as its bearer once the person has acted; the agent hands both to
/// ``AuthFlow/receiveBackchannelNotification(authorization:body:)``, which wakes the poll of the
/// login it names (Documentation/Agent.md, "Re-authorization").
///
/// HTTP/1.1 through ``HTTPIntake`` (the redirect receiver's server side), on a thread of its own:
/// one request per connection, read within ``timeout``, at most ``maximumConnections`` at once.
/// Answers: 204 when the ping woke a poll, 401 (`WWW-Authenticate: Bearer`) when it names none, 400
/// for anything not a request this endpoint takes, 405 for another method, 411 without a length,
/// 413 for a body over ``maximumBodySize``, 415 for a body not JSON, 431 for a head over
/// ``maximumHeadSize``, 505 for HTTP/1.0, 408 when the time is up. Neither the bearer nor the body
/// is logged.
final class CIBANotifications: Sendable {
    /// The largest head read (request line and fields).
    static let maximumHeadSize = 8 * 1024
    /// The largest body taken (a ping is `{"auth_req_id": "…"}`; the library reads at most 4 KiB).
    static let maximumBodySize = 4 * 1024
    /// How long a connection may take to send its whole request (the default of ``timeout``).
    static let readTimeout: Duration = .seconds(5)
    /// Connections read at once; more are closed as soon as they are accepted.
    static let maximumConnections = 32

    /// Where it listens, the port as bound (`127.0.0.1:8443`, `[::1]:8443`).
    let address: String
    /// How long a connection may take to send its whole request.
    let timeout: Duration
    private let listener: SharedFileDescriptor
    private let wake: FileDescriptor.Pipe
    private let deliver: @Sendable (_ authorization: String?, _ body: Data) -> Bool
    private let log: @Sendable (String) -> Void

    /// Listens on `listen`; nothing is read until ``start()``.
    /// - Parameters:
    ///   - timeout: how long a connection may take to send its request.
    ///   - deliver: hands a ping to the current flow; true when it woke a poll.
    /// - Throws: ``AgentError`` `.data` when the address cannot be bound.
    init(listen: AgentOptions.ListenAddress, timeout: Duration = CIBANotifications.readTimeout,
         deliver: @escaping @Sendable (String?, Data) -> Bool, log: @escaping @Sendable (String) -> Void) throws(AgentError) {
        let socket: FileDescriptor
        do throws(HTTPIntake.ListenFailure) {
            socket = try HTTPIntake.listen(listen.host.contains(":") ? .v6(listen.host) : .v4(listen.host), port: listen.port)
        } catch {
            switch error {
            case .notAnAddress(let text): throw .usage("--ciba-notification-listen: '\(text)' is not an IP address")
            case .system(let call, let code):
                throw .data("cannot listen on \(listen) for CIBA notifications: \(call): \(String(cString: strerror(code)))")
            }
        }
        var bound = listen
        do throws(SystemError) {
            bound.port = try HTTPIntake.localPort(socket)
            wake = try FileDescriptor.pipe(O_NONBLOCK)
        } catch {
            throw .data("cannot listen on \(listen) for CIBA notifications: \(String(cString: strerror(error.code)))")
        }
        address = bound.description
        self.timeout = timeout
        listener = SharedFileDescriptor(socket)
        self.deliver = deliver
        self.log = log
    }

    /// Starts serving on a thread of its own; false when the system gave no thread.
    func start() -> Bool {
        DetachedThread.start(name: "authflow-ciba") { [self] in
            let limits = HTTPIntake.Limits(
                connectionTimeout: timeout, maximumConnections: Self.maximumConnections,
                maximumRequestSize: Self.maximumHeadSize + Self.maximumBodySize, timeoutReply: Self.refusal("408 Request Timeout"))
            let ending: HTTPIntake.Ending<Never> = HTTPIntake.serve(listeners: [listener], wake: wake.read.raw, until: nil, limits: limits) { received in
                let (step, woke) = Self.answer(received, deliver: deliver)
                if let woke { log(woke ? "a CIBA ping woke the poll of a login" : "a CIBA notification named no login being polled (answered 401)") }
                return step
            }
            if case .failed(let code) = ending { log("the CIBA notification endpoint stopped: poll failed: \(String(cString: strerror(code)))") }
        }
    }

    /// Stops serving (connections being read are closed).
    func stop() {
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write.raw, &byte, 1)
    }

    /// What the bytes a connection sent so far call for, and whether a ping was handed to the
    /// flow (true: it woke a poll; nil: none was handed).
    static func answer(_ received: [UInt8], deliver: (String?, Data) -> Bool) -> (HTTPIntake.Step<Never>, woke: Bool?) {
        let head: HTTPIntake.RequestHead
        switch HTTPIntake.parseHead(received, limit: maximumHeadSize) {
        case .incomplete: return (.incomplete, nil)
        case .tooLarge: return (.reply(refusal("431 Request Header Fields Too Large")), nil)
        case .malformed: return (.reply(refusal("400 Bad Request")), nil)
        case .complete(let parsed): head = parsed
        }
        guard head.version == "HTTP/1.1" else { return (.reply(refusal("505 HTTP Version Not Supported")), nil) }
        guard head.method == "POST" else { return (.reply(refusal("405 Method Not Allowed", [("Allow", "POST")])), nil) }
        let authorizations = head.values("Authorization")
        guard head.values("Transfer-Encoding").isEmpty, head.values("Host").count == 1, authorizations.count <= 1 else {
            return (.reply(refusal("400 Bad Request")), nil)
        }
        let lengths = head.values("Content-Length")
        guard let lengthText = lengths.first else { return (.reply(refusal("411 Length Required")), nil) }
        guard lengths.count == 1, !lengthText.isEmpty, lengthText.utf8.count <= 9, lengthText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let length = Int(lengthText) else { return (.reply(refusal("400 Bad Request")), nil) }
        guard length <= maximumBodySize else { return (.reply(refusal("413 Content Too Large")), nil) }
        let mediaType = head.values("Content-Type").first.map { ASCIIText.trimmingBlanks(String($0.prefix { $0 != ";" })).lowercased() }
        guard head.values("Content-Type").count == 1, mediaType == "application/json" else {
            return (.reply(refusal("415 Unsupported Media Type")), nil)
        }
        guard received.count >= head.length + length else { return (.incomplete, nil) }
        let body = Data(received[head.length..<(head.length + length)])
        if deliver(authorizations.first, body) { return (.reply(HTTPIntake.Reply(status: "204 No Content", fields: [("Cache-Control", "no-store")])), true) }
        return (.reply(refusal("401 Unauthorized", [("WWW-Authenticate", "Bearer")])), false)
    }

    /// An answer with no body.
    static func refusal(_ status: String, _ fields: [(String, String)] = []) -> HTTPIntake.Reply {
        HTTPIntake.Reply(status: status, fields: fields + [("Cache-Control", "no-store")])
    }
}
