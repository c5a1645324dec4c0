import Foundation
@testable import OAuthFlow
import Testing

/// The stored entry's format (Storage/StoredEntry.swift): its exact bytes, its times, and a round
/// trip whether its strings need escaping or not.
@Suite("Stored entry: the format on disk", .timeLimit(.minutes(1)))
struct StoredEntryTests {
    @Test("an entry round-trips whether its strings go out as they are or escaped", arguments: [
        ("plain-access-token", "Bearer", ["read", "write"]),
        (#"quote"and\backslash"#, "bearer", ["scope:\"x\"", "ünïcode", "tab\there"]),
    ])
    func storedEntryRoundTrip(access: String, type: String, scopes: [String]) throws {
        let set = TokenSet(
            providerID: "p", accessToken: Secret(access), tokenType: type, refreshToken: Secret("refresh with space\\"),
            scopes: scopes, issuedAt: Date(timeIntervalSince1970: 1_767_222_000),
            expiresAt: Date(timeIntervalSince1970: 1_767_225_600), grant: .clientCredentials)
        let data = StoredEntry.encode(set)
        #expect(throws: Never.self) { try JSONValue.parse(data) }
        let back = try StoredEntry.decode(data, key: "p")
        #expect(back.accessToken.reveal() == access)
        #expect(back.tokenType == type)
        #expect(back.refreshToken?.reveal() == "refresh with space\\")
        #expect(back.scopes == scopes)
        #expect(back.issuedAt == set.issuedAt)
        #expect(back.expiresAt == set.expiresAt)
    }

    @Test("the entry format is exactly the documented one (sorted members, absent optionals left out)")
    func storedEntryBytes() {
        let set = TokenSet(providerID: "billing", accessToken: Secret("at"), scopes: ["read"],
                           issuedAt: Date(timeIntervalSince1970: 1_767_222_000), expiresAt: Date(timeIntervalSince1970: 1_767_225_600),
                           grant: .clientCredentials)
        let expected = #"{"tokens":{"accessToken":"at","expiresAt":1767225600,"grant":"client_credentials","issuedAt":1767222000,"#
            + #""needsReauthorization":false,"providerID":"billing","scopes":["read"],"tokenType":"Bearer"},"version":1}"#
        #expect(String(decoding: StoredEntry.encode(set), as: UTF8.self) == expected)
    }

    @Test("an entry's times are written as JSONValue writes numbers: whole seconds as integers, fractions in the shortest round-trip form",
          arguments: [1_767_222_000, 1_767_222_000.5, 1_796_183_423.123456, 0.1, 86_400.25, 253_402_296_000.75])
    func storedEntryTimes(seconds: Double) throws {
        let set = TokenSet(providerID: "p", accessToken: Secret("at"), issuedAt: Date(timeIntervalSince1970: seconds),
                           expiresAt: Date(timeIntervalSince1970: seconds + 3600), grant: .clientCredentials)
        var issued = ""
        JSONValue.number(set.issuedAt.timeIntervalSince1970).write(into: &issued)
        var expires = ""
        JSONValue.number(set.expiresAt!.timeIntervalSince1970).write(into: &expires)
        let text = String(decoding: StoredEntry.encode(set), as: UTF8.self)
        #expect(text.contains(#""issuedAt":\#(issued),"#) && text.contains(#""expiresAt":\#(expires),"#), "\(text)")
        let back = try StoredEntry.decode(StoredEntry.encode(set), key: "p")
        #expect(back.issuedAt == set.issuedAt && back.expiresAt == set.expiresAt)
    }
}
