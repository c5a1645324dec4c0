import Foundation
import Glibc
import TestSupport
import Testing

/// The tests' one maker of temporary files (`TestSupport/TemporaryDirectory.swift`): whatever a test
/// puts in it is gone when the test is over, whether the test removed it, forgot to, or threw.
@Suite("TemporaryDirectory: tests leave nothing in the temporary directory")
struct TemporaryDirectoryTests {
    private struct Planned: Error {}

    /// A rig as the tests write them: a directory and something made after it that can fail.
    private struct Rig {
        let directory: TemporaryDirectory
        init(_ seen: inout URL?, failing: Bool) throws {
            directory = try TemporaryDirectory("TemporaryDirectoryTests")
            seen = directory.url
            try Data("x".utf8).write(to: directory.url.appendingPathComponent("made-before-the-failure"))
            if failing { throw Planned() }
        }
    }

    private func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

    @Test("a new directory is <prefix>-<UUID> under the base, mode 0700; remove() takes it and all in it, never a link's target")
    func removeTakesEverything() throws {
        let outside = try TemporaryDirectory("TemporaryDirectoryTests-outside")
        defer { outside.remove() }
        let target = outside.url.appendingPathComponent("target")
        try Data("keep".utf8).write(to: target)

        let directory = try TemporaryDirectory("TemporaryDirectoryTests")
        #expect(directory.url.deletingLastPathComponent().standardizedFileURL == FileManager.default.temporaryDirectory.standardizedFileURL)
        let name = directory.url.lastPathComponent
        #expect(name.hasPrefix("TemporaryDirectoryTests-") && UUID(uuidString: String(name.dropFirst("TemporaryDirectoryTests-".count))) != nil)
        var info = stat()
        #expect(stat(directory.path, &info) == 0 && info.st_mode & 0o7777 == 0o700)

        let nested = directory.url.appendingPathComponent("a/b", isDirectory: true)
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: true)
        let locked = nested.appendingPathComponent("locked")
        try Data("secret".utf8).write(to: locked)
        #expect(chmod(locked.path, 0) == 0)
        try FileManager.default.createSymbolicLink(at: directory.url.appendingPathComponent("link"), withDestinationURL: target)

        directory.remove()
        #expect(!exists(directory.url))
        #expect(try String(contentsOf: target, encoding: .utf8) == "keep", "the link went, not what it points to")
        directory.remove()  // already gone: nothing happens
        #expect(!exists(directory.url))
    }

    @Test("a directory nobody removed goes with its last reference; in another base (/tmp) too")
    func goesWithTheLastReference() throws {
        let made: [URL] = try [FileManager.default.temporaryDirectory, URL(fileURLWithPath: "/tmp")].map { base in
            let directory = try TemporaryDirectory("TemporaryDirectoryTests", in: base)
            try Data("x".utf8).write(to: directory.url.appendingPathComponent("file"))
            #expect(exists(directory.url))
            return directory.url
        }
        for url in made { #expect(!exists(url), "\(url.path) is still there") }
    }

    @Test("a rig that throws after making its directory, or a test that throws holding one, leaves nothing")
    func throwingLeavesNothing() throws {
        var inInit: URL?
        #expect(throws: Planned.self) { _ = try Rig(&inInit, failing: true) }
        #expect(!exists(try #require(inInit)))

        var inBody: URL?
        func test() throws {
            let rig = try Rig(&inBody, failing: false)
            #expect(exists(rig.directory.url.appendingPathComponent("made-before-the-failure")))
            throw Planned()
        }
        #expect(throws: Planned.self) { try test() }
        #expect(!exists(try #require(inBody)))
    }
}
