#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow

// `login --paste`: the authorization code grant with nothing listening. The person signs in on any
// device; the browser's redirect goes nowhere this machine can see, so they paste back the address
// it ended on (or the code the provider's page shows). The library reads and checks the line
// (`AuthFlow.completeAuthorization(pasted:request:)`); this file shows the URL and reads the line.
extension Context {
    /// What a paste-back login leaves for `login` to report.
    struct PasteLogin {
        let flow: AuthFlow
        let reporter: StateReporter
        let result: Result<Authorization, OAuthError>
    }

    /// Runs `login --paste`: the authorization request (its URL on stdout, and as a QR code where a
    /// device login would draw one), then one line read from standard input within `--timeout`,
    /// completed by the library. The end of input before a line exits 65; Ctrl-C is `.cancelled`.
    /// - Throws: ``CLIError`` `.data` without a catalog `redirectURI` or at the end of input; the
    ///   request's own failures.
    func pasteLogin(
        _ provider: Provider, _ options: LoginOptions, store: any SecretStore, session: LoginSession
    ) async throws(CLIError) -> PasteLogin {
        let id = provider.id
        guard let redirectURI = provider.redirectURI else {
            throw .data("""
                --paste needs \(id)'s redirectURI in the catalog: the redirect URI registered with the provider (a loopback \
                one such as http://127.0.0.1:8400/callback, a custom scheme, or an https page); the browser ends there and \
                you paste that address back
                """)
        }
        let flow = try await self.flow([provider], store: store)
        let request: AuthorizationRequest
        do {
            request = try await flow.authorizationRequest(provider: id, scopes: options.scopes.isEmpty ? nil : options.scopes)
        } catch {
            throw .oauth(error, provider: id)
        }
        // Subscribed after the request: the stream starts with `.authorizing`, shown with its URL.
        let reporter = session.follow(flow, skipFirst: false, authorizationURL: request.url, redirectURI: redirectURI)
        await reporter.waitUntilHandled(flow.state)
        if !options.json {
            if let drawing = qrCode(request.url.absoluteString, forced: options.qr, provider: id) { err.write(drawing) }
            err.write("""
                Sign in there, on this or any other device. The browser then goes back to \(escaped(redirectURI.absoluteString)) \
                with the answer in its address; that page may fail to load, which is expected. Copy the whole address from the browser's address bar (or \
                the code the provider's page shows), paste it here and press Enter (within \(Timestamps.clock(options.timeout))).

                """)
            err.write(errStyle.bold("Address or code:") + " ")
        }
        let line: String
        switch await PastedLine.read(from: 0, timeout: .seconds(options.timeout)) {
        case .line(let text):
            line = text
        case .endOfInput:
            reporter.stop()
            session.finish()
            throw .data("the input ended before an address or a code was pasted; nothing was stored")
        case .failure(var error):
            error.providerID = id
            return PasteLogin(flow: flow, reporter: reporter, result: .failure(error))
        }
        let result = await capture { () async throws(OAuthError) in
            try await flow.completeAuthorization(pasted: line, request: request)
        }
        return PasteLogin(flow: flow, reporter: reporter, result: result)
    }
}

/// Reads the one line a person pastes, on a thread of its own (a thread of the concurrency runtime
/// never waits on a terminal), until a line end, the end of input, the deadline or cancellation.
enum PastedLine {
    /// How a read ended.
    enum Outcome: Sendable {
        /// The line, without its line end (a last line without one counts too).
        case line(String)
        /// The input ended (Ctrl-D, a closed pipe) before any text.
        case endOfInput
        /// `.cancelled` (Ctrl-C), `.timedOut`, or `.invalidCallback` for a line too long.
        case failure(OAuthError)
    }

    /// The longest line a Linux terminal passes in canonical mode: its line buffer holds 4096 bytes
    /// with the line end, and what is typed or pasted past it is dropped. A line from a terminal
    /// that fills it was most likely cut, and is refused rather than sent on.
    static let terminalLineLimit = 4095

    /// Reads one line from `fd` within `timeout`; cancelling the calling task ends it at once.
    /// A line longer than `limit` bytes (or, from a terminal, one that fills its line buffer) is
    /// refused without being read further.
    static func read(from fd: Int32, timeout: Duration, limit: Int = AuthorizationResponse.maximumPastedLength) async -> Outcome {
        let wake: Wake
        do throws(SystemError) {
            wake = Wake(try FileDescriptor.pipe(O_NONBLOCK))
        } catch {
            return .failure(OAuthError(.configuration, endpoint: .authorization,
                                       message: "cannot create a pipe: \(String(cString: strerror(error.code)))"))
        }
        let deadline = ContinuousClock.now.advanced(by: timeout)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let started = DetachedThread.start(name: "PastedLine") {
                    continuation.resume(returning: readLine(fd, wake: wake, deadline: deadline, timeout: timeout, limit: limit))
                }
                if !started {
                    continuation.resume(returning: .failure(OAuthError(
                        .configuration, endpoint: .authorization, message: "could not start a thread to read the pasted line")))
                }
            }
        } onCancel: {
            wake.signal()
        }
    }

    /// The blocking part: poll `fd` and the wake pipe, a second at most at a time, until a line.
    private static func readLine(_ fd: Int32, wake: Wake, deadline: ContinuousClock.Instant, timeout: Duration, limit: Int) -> Outcome {
        let terminal = isatty(fd) == 1
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = ContinuousClock.now
            guard now < deadline else {
                return .failure(OAuthError(.timedOut, endpoint: .authorization,
                                           message: "nothing was pasted within \(timeout.components.seconds) s; nothing was stored"))
            }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.pipe.read.raw, events: Int16(POLLIN), revents: 0)]
            let remaining = now.duration(to: deadline)
            let wait: Int32 = remaining >= .seconds(1) ? 1000 : Int32(remaining.components.attoseconds / 1_000_000_000_000_000) + 1
            let ready = poll(&fds, 2, wait)
            if ready < 0 {
                if errno == EINTR { continue }
                return .failure(OAuthError(.configuration, endpoint: .authorization,
                                           message: "cannot wait for the pasted line: \(String(cString: strerror(errno)))"))
            }
            if fds[1].revents != 0 {
                return .failure(OAuthError(.cancelled, endpoint: .authorization,
                                           message: "the login was interrupted before a line was pasted"))
            }
            guard fds[0].revents != 0 else { continue }
            let count = Glibc.read(fd, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                // EIO: the terminal hung up, which is an end of input too.
                if errno == EIO { return bytes.isEmpty ? .endOfInput : finish(bytes, terminal: terminal) }
                return .failure(OAuthError(.configuration, endpoint: .authorization,
                                           message: "cannot read the pasted line: \(String(cString: strerror(errno)))"))
            }
            if count == 0 { return bytes.isEmpty ? .endOfInput : finish(bytes, terminal: terminal) }
            if let end = chunk[0..<count].firstIndex(of: UInt8(ascii: "\n")) {
                bytes += chunk[0..<end]
                return bytes.count > limit ? tooLong(limit) : finish(bytes, terminal: terminal)
            }
            bytes += chunk[0..<count]
            if bytes.count > limit { return tooLong(limit) }
        }
    }

    private static func finish(_ bytes: [UInt8], terminal: Bool) -> Outcome {
        let length = bytes.last == UInt8(ascii: "\r") ? bytes.count - 1 : bytes.count
        if terminal, length >= terminalLineLimit {
            return .failure(OAuthError(.invalidCallback, endpoint: .authorization, message: """
                the pasted line fills the terminal's line buffer (\(terminalLineLimit) bytes), so the terminal most likely cut \
                it; nothing was sent
                """))
        }
        return .line(String(decoding: bytes, as: UTF8.self))
    }

    private static func tooLong(_ limit: Int) -> Outcome {
        .failure(OAuthError(.invalidCallback, endpoint: .authorization,
                            message: "the pasted line is longer than \(limit) bytes; nothing was sent"))
    }

    /// A pipe whose write end wakes the reading thread; both ends close with this owner.
    private final class Wake: Sendable {
        let pipe: FileDescriptor.Pipe

        init(_ pipe: consuming FileDescriptor.Pipe) { self.pipe = pipe }

        func signal() {
            var byte: UInt8 = 1
            _ = Glibc.write(pipe.write.raw, &byte, 1)
        }
    }
}
