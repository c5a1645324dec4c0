import Foundation
@testable import AuthflowCLI
import Testing

/// The CLI's own formatting, which replaced swift-corelibs-foundation's `String(format:)` and
/// `ISO8601DateFormatter` (the CLI builds on FoundationEssentials alone), checked against them.
@Suite("CLI formatting without swift-corelibs-foundation")
struct FormattingTests {
    @Test("The demo's clock column prints what %6.1f prints", arguments: [0, 0.04, 0.05, 0.1, 5.1, 10.25, 99.95, 123.4, 9999.9, 100_000.0])
    func tenths(_ seconds: Double) {
        #expect(Demo.tenths(seconds) == String(format: "%6.1f", (seconds * 10).rounded() / 10))
    }

    @Test("Timestamps are RFC 3339 in UTC, as ISO8601DateFormatter's internet date-time", arguments: [0, 1_700_000_000, 1_800_000_000.75, 4_102_444_800])
    func iso8601(_ seconds: Double) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        let date = Date(timeIntervalSince1970: seconds)
        #expect(Timestamps.iso8601(date) == formatter.string(from: date))
    }
}
