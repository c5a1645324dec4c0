import Foundation
@testable import OAuthFlow
import Testing

/// The one JSON parser (JSON/JSONParser.swift) on its fast paths and its general ones: strings
/// without escapes and with them, object members looked up by comparing names and by hashing.
@Suite("JSON parser: strings and object members", .timeLimit(.minutes(1)))
struct JSONParserTests {
    @Test("a string without escapes and one with escapes decode to the same text", arguments: [
        (#""plain-token.0123""#, "plain-token.0123"),
        (#""prefix \"quoted\" and \\ back""#, #"prefix "quoted" and \ back"#),
        (#""caf\u00e9 then more""#, "café then more"),
        ("\"caf\u{e9} raw UTF-8\"", "café raw UTF-8"),
        (#""""#, ""),
        (#""ends with an escape\n""#, "ends with an escape\n"),
    ])
    func jsonStrings(json: String, text: String) throws {
        #expect(try JSONValue.parse(Data(json.utf8)) == .string(text))
        #expect(try JSONValue.parse(Data("{\"k\":\(json),\"n\":1}".utf8))["k"] == .string(text))
    }

    @Test("invalid UTF-8 and control characters are refused whether or not an escape came first", arguments: [
        ([0x22, 0x61, 0xFF, 0x62, 0x22], "not valid UTF-8"),
        ([0x22, 0x5C, 0x6E, 0x61, 0xFF, 0x22], "not valid UTF-8"),
        ([0x22, 0x61, 0x0A, 0x62, 0x22], "control characters"),
        ([0x22, 0x5C, 0x74, 0x61, 0x0A, 0x22], "control characters"),
        ([0x22, 0x61, 0x62], "a string is not closed"),
        ([0x22, 0x5C, 0x74, 0x61], "a string is not closed"),
    ] as [([UInt8], String)])
    func jsonStringErrors(bytes: [UInt8], reason: String) {
        let error = #expect(throws: OAuthError.self) { try JSONValue.parse(Data(bytes)) }
        #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "no message")")
    }

    @Test("an object's members are found by name the same way with few members (compared) and many (hashed)", arguments: [3, 12])
    func jsonMembers(count: Int) throws {
        var members = (0..<count).map { #""m\#($0)":\#($0)"# }
        members.append(#""caf\u00e9":"precomposed""#)
        members.append(#""empty":null"#)
        let object = try JSONObject(JSONValue.parse(Data("{\(members.joined(separator: ","))}".utf8)), what: "the test", failure: {
            OAuthError(.invalidResponse, message: $0)
        })
        for index in 0..<count { #expect(object.value("m\(index)") == .number("\(index)")) }
        #expect(object.value("m\(count)") == nil)
        #expect(object.value("empty") == nil, "null counts as absent")
        #expect(object.contains("m0") && !object.contains("M0"))
        #expect(try object.string("caf\u{65}\u{301}") == "precomposed", "canonically equivalent names are equal Strings, as for a Dictionary")
    }
}
