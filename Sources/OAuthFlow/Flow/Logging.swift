#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One log event from OAuthFlow: shapes and names, never a secret value.
///
/// Receive events through ``AuthFlow/Options/log``. Debug events come only for providers with
/// ``Provider/Settings/debug`` set.
public struct LogRecord: Sendable, CustomStringConvertible {
    /// How important the event is.
    public enum Level: String, Sendable, Comparable {
        /// Request shapes, response sizes, state transitions.
        case debug
        /// Notable but expected: a refresh, a restored authorization.
        case info
        /// Something failed or was refused.
        case warning

        private var rank: Int { self == .debug ? 0 : self == .info ? 1 : 2 }
        /// Orders debug < info < warning.
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rank < rhs.rank }
    }
    /// The level.
    public var level: Level
    /// The provider, when the event concerns one.
    public var providerID: String?
    /// The text; built by OAuthFlow from names, counts and codes only.
    public var message: String
    /// `level provider: message`.
    public var description: String { "\(level.rawValue) \(providerID.map { "\($0): " } ?? "")\(message)" }
}

/// The internal face of the logging hook.
struct Logger: Sendable {
    let sink: (@Sendable (LogRecord) -> Void)?

    func debug(_ provider: Provider, _ message: @autoclosure () -> String) {
        guard provider.debug, let sink else { return }
        sink(LogRecord(level: .debug, providerID: provider.id, message: message()))
    }

    func info(_ providerID: String?, _ message: String) {
        sink?(LogRecord(level: .info, providerID: providerID, message: message))
    }

    func warning(_ providerID: String?, _ message: String) {
        sink?(LogRecord(level: .warning, providerID: providerID, message: message))
    }
}
