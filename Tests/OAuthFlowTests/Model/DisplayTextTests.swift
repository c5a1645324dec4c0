import Foundation
import OAuthFlow
import OAuthFlowTesting
import Testing

@Suite("Terminal safety: one escaping function for text shown to people")
struct DisplayTextTests {
    @Test("control characters, C1 and bidi overrides are written as visible escapes", arguments: [
        ("a\u{1B}[2Jb", "a\\u{1B}[2Jb"), ("line\r\nX-Evil: 1", "line\\u{D}\\u{A}X-Evil: 1"), ("\u{0}", "\\u{0}"),
        ("del\u{7F}", "del\\u{7F}"), ("csi\u{9B}31m", "csi\\u{9B}31m"), ("\u{202E}txt.exe", "\\u{202E}txt.exe"),
        ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"), ("a\u{2028}b", "a\\u{2028}b"), ("tab\there", "tab\\u{9}here"),
    ])
    func escapes(raw: String, shown: String) {
        #expect(DisplayText.escape(raw) == shown)
        #expect(!DisplayText.escape(raw).unicodeScalars.contains { DisplayText.isUnsafe($0) })
    }

    @Test("ordinary text, Unicode letters and backslashes are unchanged", arguments: ["WDJB-MJHT", "café ☕ 日本", #"a\u{1B}b"#, ""])
    func keeps(text: String) {
        #expect(DisplayText.escape(text) == text)
    }

    @Test("an error made only of control characters stays visible (RFC 6749 §5.2 fields are printable ASCII)")
    func controlOnlyError() async throws {
        let mock = MockProvider()
        mock.script(.token, [.json(#"{"error":"\u001b\u0007\r\n","error_description":"\u001b[31mred\u001b[0m"}"#, status: 400)])
        let flow = try await AuthFlow(providers: [mock.provider(id: "svc", clientSecret: "s")], transport: mock.transport(),
                                      options: options(TestClock()))
        let error = try #require(await #expect(throws: OAuthError.self) { try await flow.clientCredentials(provider: "svc") })
        #expect(error.code == .serverRejected)
        #expect(error.response?.code.rawValue == "\\u{1B}\\u{7}\\u{D}\\u{A}")
        #expect(error.response?.errorDescription == "\\u{1B}[31mred\\u{1B}[0m")
        #expect(!error.description.unicodeScalars.contains { DisplayText.isUnsafe($0) })
    }

    @Test("OAuthError.description escapes a message holding control characters")
    func messageEscaped() {
        let error = OAuthError(.configuration, providerID: "p\u{1B}", message: "bad \u{1B}]0;title\u{7}")
        #expect(!error.description.unicodeScalars.contains { DisplayText.isUnsafe($0) })
        #expect(error.description.contains("\\u{1B}]0;title\\u{7}"))
    }

    @Test("§5.2 fields are bounded after escaping")
    func bounded() {
        let response = ErrorResponse(code: .init(rawValue: String(repeating: "\u{1B}", count: 1000)))
        #expect(response.code.rawValue.utf8.count <= 128)
        #expect(response.code.rawValue.hasPrefix("\\u{1B}"))
    }
}
