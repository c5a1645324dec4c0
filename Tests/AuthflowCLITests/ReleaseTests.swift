@testable import AuthflowCLI
import Foundation
import Testing

/// The version is written once, in the file VERSION: `authflow --version` (``Authflow/version``),
/// the package's name and version (scripts/package.sh reads VERSION), CHANGELOG.md's newest
/// released section and the file names the documents show must all say it.
@Suite("VERSION, authflow --version, CHANGELOG.md and the package names agree")
struct ReleaseTests {
    static func text(_ path: String) throws -> String {
        try ReadmeTests.text(path)
    }

    static var version: String {
        get throws { try text("VERSION").trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// The versions CHANGELOG.md has a section for (`## 0.1.0 — 2026-12-06`), newest first.
    static func released(_ changelog: String) -> [String] {
        changelog.split(separator: "\n").compactMap { line in
            guard let match = line.wholeMatch(of: /## (\d+\.\d+\.\d+) — \d{4}-\d{2}-\d{2}/) else { return nil }
            return String(match.1)
        }
    }

    /// Every version in a package file name (`authflow_0.1.0_amd64.deb`, `authflow-0.1.0-linux-x86_64.tar.gz`) in `text`.
    static func packageVersions(_ text: String) -> [String] {
        text.matches(of: /authflow(?:-dbgsym)?[_-](\d+\.\d+\.\d+)[_-](?:amd64|arm64|linux)/).map { String($0.1) }
    }

    @Test("VERSION is what authflow --version prints")
    func versionFile() throws {
        let version = try Self.version
        #expect(version.wholeMatch(of: /\d+\.\d+\.\d+/) != nil, "VERSION must hold MAJOR.MINOR.PATCH")
        #expect(version == Authflow.version,
                "VERSION says \(version), Authflow.version (Sources/AuthflowCLI/Help.swift) \(Authflow.version): make them the same")
    }

    @Test("CHANGELOG.md's newest released section is VERSION's, and it has the last release's")
    func changelog() throws {
        let version = try Self.version
        let released = Self.released(try Self.text("CHANGELOG.md"))
        #expect(released.first == version, "CHANGELOG.md's newest section is \(released.first ?? "none"), VERSION \(version)")
        let record = try Self.text("api/last-release").split(separator: "\n").first { $0.hasPrefix("version ") }
        let last = try #require(record).dropFirst("version ".count)
        #expect(released.contains(String(last)), "api/last-release names \(last), which CHANGELOG.md has no section for")
    }

    @Test("the package file names in README.md, CLI.md and Agent.md carry VERSION")
    func documentedNames() throws {
        let version = try Self.version
        var found = 0
        for path in ["README.md", "Documentation/CLI.md", "Documentation/Agent.md"] {
            for shown in Self.packageVersions(try Self.text(path)) {
                found += 1
                #expect(shown == version, "\(path) shows a package of version \(shown), VERSION is \(version)")
            }
        }
        #expect(found >= 3)
    }

    @Test("the checks above see a disagreement")
    func checksCanFail() {
        #expect(Self.released("## Unreleased\n\n## 0.2.0 — 2027-01-02\n\n## 0.1.0 — 2026-12-06\n") == ["0.2.0", "0.1.0"])
        #expect(Self.released("## 0.2.0\n## 0.1.0 - 2026-12-06\n").isEmpty)
        #expect(Self.packageVersions("sudo apt install ./authflow_0.0.9_amd64.deb; authflow-0.0.9-linux-x86_64.tar.gz") == ["0.0.9", "0.0.9"])
    }
}
