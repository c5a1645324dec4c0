import Foundation
@testable import OAuthFlow
import Testing

@Suite("The one JSON writer (RFC 8259)")
struct JSONWriterTests {
    @Test("objects are written with members sorted by name, compact, numbers as sent")
    func sorted() {
        let value = JSONValue.object([
            "b": .array([.number("1e3"), .bool(true), .null]), "a": .string("x"), "c": .object(["z": .number("2"), "y": .number("1")]),
        ])
        #expect(value.jsonText == #"{"a":"x","b":[1e3,true,null],"c":{"y":1,"z":2}}"#)
        #expect(value.jsonData == Data(value.jsonText.utf8))
    }

    @Test("ordered members keep the order given; objects nested inside are sorted")
    func ordered() {
        let text = JSONValue.text(orderedMembers: [
            ("state", .string("authorized")), ("provider", .string("p")), ("idToken", .object(["sub": .string("1"), "iss": .string("i")])),
        ])
        #expect(text == #"{"state":"authorized","provider":"p","idToken":{"iss":"i","sub":"1"}}"#)
        #expect(JSONValue.text(orderedMembers: []) == "{}")
    }

    @Test("every control, C1, line-separator and bidirectional character is escaped, so the text cannot act on a terminal",
          arguments: [
              ("\"\\", #""\"\\""#), ("a\nb\r\tc", #""a\nb\r\tc""#), ("\u{1B}[2J", #""\u001b[2J""#), ("\u{7F}\u{9B}", #""\u007f\u009b""#),
              ("\u{2028}\u{2029}", #""\u2028\u2029""#), ("x\u{202E}y\u{2066}", #""x\u202ey\u2066""#), ("é€😀", "\"é€😀\""),
          ])
    func escaping(raw: String, written: String) throws {
        #expect(JSONValue.string(raw).jsonText == written)
        // And it reads back as the same string through the one parser.
        #expect(try JSONValue.parse(Data(written.utf8)) == .string(raw))
    }

    @Test("a number from a double is exact, whole values without a fraction; an infinity or NaN is null")
    func doubles() {
        #expect(JSONValue.number(1_767_225_600.0) == .number("1767225600"))
        #expect(JSONValue.number(0.5) == .number("0.5"))
        #expect(JSONValue.number(Double.infinity) == .null)
        #expect(JSONValue.number(Double.nan) == .null)
        #expect(JSONValue.number(42) == .number("42"))
    }
}
