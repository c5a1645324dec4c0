public import OAuthFlow

/// The process exit statuses of `authflow` (the BSD `sysexits.h` values, plus 130 for Ctrl-C).
public enum ExitCode: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// 0: the command did what was asked.
    case success = 0
    /// 1: an unexpected internal failure; for `docker-credential`, an error of Docker's
    /// credential-helper protocol (credentials not found, an unknown action, a refused `store`).
    case failure = 1
    /// 64: the command line is wrong (unknown command or option, missing argument, unknown provider).
    case usage = 64
    /// 65: the configuration or stored data is bad (catalog, store, a refused key or credential, a
    /// provider's answer); retrying will not help, and neither will a login.
    case dataError = 65
    /// 69: the provider could not be reached.
    case unavailable = 69
    /// 75: a temporary failure (server busy, a lock or a wait timed out); try again later.
    case temporaryFailure = 75
    /// 77: denied, or a new login is needed (refresh token rejected, device code expired, state mismatch).
    case denied = 77
    /// 126: `exec` found COMMAND but could not run it (not executable, not a program), as a shell reports it.
    case cannotExecute = 126
    /// 127: `exec` found no COMMAND (no such file, or not on `PATH`), as a shell reports it.
    case commandNotFound = 127
    /// 130: interrupted with Ctrl-C; nothing was stored.
    case interrupted = 130

    /// The status for an ``OAuthError`` when nothing is known of its provider: the status of the
    /// first row of the CLI's advice table that matches (see `Documentation/Errors.md`). The
    /// error names its grant, so a refused service-account key is 65 here too; a command that
    /// knows the provider reads the table with it only to name the credential in its advice.
    public init(_ error: OAuthError) {
        self = ErrorAdvice.row(for: error, ErrorAdvice.Subject()).status
    }

    /// The number and its meaning, as `--help` lists them.
    public var description: String {
        switch self {
        case .success: return "0    success"
        case .failure: return "1    unexpected failure; for docker-credential, an error of Docker's protocol"
        case .usage: return "64   usage error: unknown command or option, missing argument, unknown provider"
        case .dataError: return "65   bad configuration or data: catalog, store, a refused key or credential, or a provider's answer"
        case .unavailable: return "69   provider unreachable"
        case .temporaryFailure: return "75   temporary failure: try again later"
        case .denied: return "77   denied, or a new login is needed"
        case .cannotExecute: return "126  exec: COMMAND cannot be run"
        case .commandNotFound: return "127  exec: COMMAND not found"
        case .interrupted: return "130  interrupted (Ctrl-C); nothing stored"
        }
    }
}
