import Foundation
import Glibc
@testable import OAuthFlow
import Testing
import TestSupport

/// ``TokenSink`` (Storage/TokenSink.swift): the bytes of each format, the atomic replace, the
/// modes, and what it refuses.
@Suite("Token sinks")
struct TokenSinkTests {
    let set = TokenSet(providerID: "svc", accessToken: Secret("at-sink-1"), tokenType: "Bearer", scopes: ["read", "write"],
                       issuedAt: Date(timeIntervalSince1970: 1_800_000_000), expiresAt: Date(timeIntervalSince1970: 1_800_003_600),
                       grant: .clientCredentials)

    @Test("each format's exact bytes", arguments: [
        (TokenSink.Format.raw, "at-sink-1"),
        (.header, "Authorization: Bearer at-sink-1\n"),
        (.json, #"{"access_token":"at-sink-1","token_type":"Bearer","expires_at":1800003600,"scope":"read write"}"# + "\n"),
    ])
    func formats(format: TokenSink.Format, expected: String) throws {
        #expect(String(decoding: try TokenSink.contents(of: set, format: format), as: UTF8.self) == expected)
    }

    @Test("write replaces the file atomically with the mode asked for, leaving no temporary file")
    func writes() throws {
        let dir = try TemporaryDirectory("sink")
        defer { dir.remove() }
        let path = dir.url.appendingPathComponent("token").path
        let sink = try TokenSink(providerID: "svc", path: path, mode: 0o640, format: .raw)
        let previous = umask(0o077)
        defer { umask(previous) }
        try sink.write(set)
        var first = stat()
        #expect(stat(path, &first) == 0)
        #expect(first.st_mode & 0o777 == 0o640, "fchmod, not the umask, sets the mode")
        var next = set
        next.accessToken = Secret("at-sink-2")
        try sink.write(next)
        var second = stat()
        #expect(stat(path, &second) == 0)
        #expect(second.st_ino != first.st_ino, "a new file renamed over the old one")
        #expect(second.st_mode & 0o777 == 0o640)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "at-sink-2")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["token"])
    }

    @Test("refused: modes open to others, relative paths, another provider's set, a header for a DPoP token")
    func refusals() throws {
        for mode: UInt32 in [0o644, 0o604, 0o601, 0o4600] {
            let error = #expect(throws: OAuthError.self) { try TokenSink(providerID: "svc", path: "/tmp/x", mode: mode) }
            #expect(error?.code == .configuration)
        }
        for path in ["token", "/tmp/dir/", "/tmp/.."] {
            #expect(throws: OAuthError.self) { try TokenSink(providerID: "svc", path: path) }
        }
        let sink = try TokenSink(providerID: "other", path: "/tmp/never-written")
        let mismatch = #expect(throws: OAuthError.self) { try sink.write(set) }
        #expect(mismatch?.code == .configuration)
        var dpop = set
        dpop.tokenType = "DPoP"
        let header = #expect(throws: OAuthError.self) { try TokenSink.contents(of: dpop, format: .header) }
        #expect(header?.code == .invalidResponse)
    }

    @Test("a missing directory is a .storage error naming the path, never the token; description shows no token")
    func failuresShowNoToken() throws {
        let sink = try TokenSink(providerID: "svc", path: "/nonexistent-\(UUID().uuidString)/token", format: .json)
        let error = #expect(throws: OAuthError.self) { try sink.write(set) }
        #expect(error?.code == .storage)
        #expect(error?.message?.contains(sink.path) == true)
        #expect(!String(reflecting: error as Any).contains("at-sink-1"))
        #expect(!String(describing: sink).contains("at-sink"))
        #expect(String(describing: sink) == "TokenSink(svc -> \(sink.path), mode 0600, json)")
    }
}
