import Foundation
@testable import OAuthFlow
import Testing

/// The bytes of a form body (HTTP/FormEncoding.swift).
@Suite("Form encoding: the body's bytes", .timeLimit(.minutes(1)))
struct FormEncodingTests {
    @Test("Data(utf8Of:) holds the same bytes as Data(text.utf8)", arguments: ["", "grant_type=client_credentials", "ünï€😀", String(repeating: "x", count: 300)])
    func utf8Data(text: String) {
        #expect(Data(utf8Of: text) == Data(text.utf8))
        #expect(Data(utf8Of: text.lowercased() + text) == Data((text.lowercased() + text).utf8))
    }
}
