import Foundation
@testable import AuthflowAgent
import OAuthFlow
import Testing

/// The socket protocol's requests (Documentation/Agent.md, "The socket protocol").
@Suite("The agent's protocol")
struct ProtocolTests {
    @Test("protocol requests: token, metrics, and what is refused", arguments: [
        (#"{"v":1,"token":"gh"}"#, "token gh"),
        (#"{"token":"gh"}"#, "token gh"),
        (#"{"v":1,"metrics":true}"#, "metrics"),
        (#"{"v":1,"token":"../etc"}"#, "invalid_request"),
        (#"{"v":1}"#, "invalid_request"),
        (#"{"v":"1","token":"gh"}"#, "unsupported_version"),
        ("\u{00}", "invalid_request"),
    ])
    func requests(line: String, expected: String) {
        switch AgentProtocol.parse(Array(line.utf8)) {
        case .success(.token(let provider)): #expect("token \(provider)" == expected)
        case .success(.metrics): #expect("metrics" == expected)
        case .failure(let failure): #expect(failure.code == expected)
        }
    }

    @Test("the plain token request is read without the JSON parser, with the parser's result; every other shape goes to the parser", arguments: [
        (#"{"v":1,"token":"gh"}"#, true),
        (#"{"v":1,"token":"p1"}"# + "\r", true),
        (#"{"v":1,"token":"a.b_c-D9"}"#, true),
        (#"{"v":1,"token":".hidden"}"#, false),
        (#"{"v":1,"token":""}"#, false),
        (#"{"v":1,"token":"g\u0068"}"#, false),
        (#"{"v":1,"token":"a\"b"}"#, false),
        (#"{"v":1,"token":"gh"} "#, false),
        (#"{"v":1,"token":"gh","v":2}"#, false),
        (#"{"v":1,"token":"gh"}{"v":1,"token":"x"}"#, false),
        (#"{"v":1, "token":"gh"}"#, false),
        (#"{"v":1,"token":""# + String(repeating: "a", count: 129) + #""}"#, false),
        (#"{"v":1,"token":""# + String(repeating: "a", count: 128) + #""}"#, true),
    ])
    func plainTokenRequest(line: String, plain: Bool) {
        var bytes = Array(line.utf8)
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        let fast = AgentProtocol.plainTokenRequest(bytes)
        #expect((fast != nil) == plain)
        let full = AgentProtocol.parseDocument(bytes)
        #expect(AgentProtocol.parse(Array(line.utf8)) == full, "parse and the parser agree")
        if let fast { #expect(full == .success(.token(provider: fast))) }
    }
}
