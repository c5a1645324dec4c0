import Foundation
@testable import AuthflowCLI
import Glibc
import TestSupport
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

/// How `authflow login` opens a browser (`xdg-open`), through posix_spawn rather than Foundation's `Process`.
@Suite("Opening the browser: a detached child with /dev/null for its input and output")
struct SpawnTests {
    @Test("The program gets its arguments, /dev/null as stdin and stdout, and is reaped")
    func spawnDetached() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let script = directory.url.appendingPathComponent("fake-xdg-open")
        let record = directory.url.appendingPathComponent("record")
        try Data("""
            #!/bin/sh
            stdin=$(readlink /proc/$$/fd/0); stdout=$(readlink /proc/$$/fd/1)
            printf '%s\\n' "$@" "$stdin" "$stdout" > '\(record.path).tmp'
            mv '\(record.path).tmp' '\(record.path)'
            """.utf8).write(to: script)
        chmod(script.path, 0o700)
        // ETXTBSY: a child another test spawns at this moment shares this process's descriptors
        // until it execs, and one of them may be the script's, still open for writing (the kernel
        // refuses to run a file open for writing). That lasts microseconds, so it is retried.
        var started = Authflow.spawnDetached(script.path, ["https://login.example.com/authorize?a=b&c=d", "second"])
        for _ in 0..<100 where started == ETXTBSY {   // at most 100 tries, 10 s
            try await Task.sleep(for: .milliseconds(100))
            started = Authflow.spawnDetached(script.path, ["https://login.example.com/authorize?a=b&c=d", "second"])
        }
        #expect(started == 0, "posix_spawnp: \(String(cString: strerror(started)))")
        guard started == 0 else { return }
        var text: String?
        for _ in 0..<1200 where text == nil {   // at most 60 s (generous for a busy machine; ends when the file appears)
            text = try? String(contentsOf: record, encoding: .utf8)
            if text == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(text == "https://login.example.com/authorize?a=b&c=d\nsecond\n/dev/null\n/dev/null\n")
        // Reaped: no child of this process named fake-xdg-open is left, zombie or not.
        var children = Self.children(named: "fake-xdg-open")
        for _ in 0..<600 where !children.isEmpty {   // at most 30 s (ends once it is reaped)
            try await Task.sleep(for: .milliseconds(50))
            children = Self.children(named: "fake-xdg-open")
        }
        #expect(children.isEmpty, "still in the process table: \(children)")
    }

    /// The `/proc/PID/stat` lines of this process's children whose command is `name`.
    static func children(named name: String) -> [String] {
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { $0.allSatisfy(\.isNumber) }.compactMap { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  stat.contains("(\(name))"), let close = stat.lastIndex(of: ")") else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == me ? stat : nil
        }
    }

    @Test("A program that does not exist is reported (ENOENT), not a crash")
    func missingProgram() {
        #expect(Authflow.spawnDetached("/nonexistent/xdg-open", ["https://example.com"]) == ENOENT)
    }
}
