import Foundation
@testable import OAuthFlow
import Synchronization
import Testing

/// The byte-level helpers that replace swift-corelibs-foundation's string API in the library
/// (ASCIIText.swift), checked against Foundation's answers where Foundation has the same function.
@Suite("ASCII text helpers (FoundationEssentials only)")
struct ASCIITextTests {
    @Test("removingPercentEncoding answers as Foundation's does", arguments: [
        "", "plain", "a%20b", "%41%42%43", "%e2%82%ac", "%E2%82%AC!", "100%", "%4", "%zz", "%%41", "%C3%28", "%FF",
        "caf%C3%A9", "+stays+", "%2B", "%00x", "é%20é",
    ])
    func removingPercentEncoding(_ text: String) {
        #expect(ASCIIText.removingPercentEncoding(text) == text.removingPercentEncoding)
    }

    @Test("Trimming removes only spaces and tabs (and CR/LF when asked), as HTTP's optional whitespace", arguments: [
        ("  a b  ", "a b", "a b"), ("\ta\t", "a", "a"), ("\r\n a \r\n", "\r\n a \r\n", "a"), ("", "", ""), ("   ", "", ""),
        ("\u{00A0}x\u{00A0}", "\u{00A0}x\u{00A0}", "\u{00A0}x\u{00A0}"), (" é ", "é", "é"), (" e\u{301} ", "e\u{301}", "e\u{301}"),
    ])
    func trimming(_ input: String, _ blanks: String, _ blanksAndNewlines: String) {
        #expect(ASCIIText.trimmingBlanks(input) == blanks)
        #expect(ASCIIText.trimmingBlanksAndNewlines(input) == blanksAndNewlines)
        #expect(ASCIIText.trimmingBlanks(Substring(input)) == blanks)
    }

    @Test("Replacing compares UTF-8 bytes: a combining mark after a match does not hide it")
    func replacingBytes() {
        #expect(ASCIIText.replacing("pw", in: "a pw b pwpw", with: "<redacted>") == "a <redacted> b <redacted><redacted>")
        // Grapheme-wise, "pẃ" (w + U+0301) is not "pw"; a password must still be removed from it.
        #expect(ASCIIText.replacing("pw", in: "xpw\u{301}y", with: "<r>") == "x<r>\u{301}y")
        #expect(ASCIIText.replacing("é", in: "café café", with: "e") == "cafe cafe")
        #expect(ASCIIText.replacing("", in: "abc", with: "x") == "abc")
        #expect(ASCIIText.replacing("abcd", in: "abc", with: "x") == "abc")
        #expect(ASCIIText.replacing(UInt8(ascii: "+"), in: "a+b+", with: "%20") == "a%20b%20")
        #expect(ASCIIText.replacing(UInt8(ascii: "-"), in: "no dash", with: "") == "no dash")
    }

    @Test("firstRange finds an ASCII needle in a Substring, or nothing")
    func firstRange() throws {
        let text = Substring("x$y${HOME}/${A}")
        let found = try #require(ASCIIText.firstRange(of: "${", in: text))
        #expect(text[found] == "${")
        #expect(text[found.upperBound...].hasPrefix("HOME"))
        #expect(ASCIIText.firstRange(of: "${", in: Substring("$ {")) == nil)
        #expect(ASCIIText.firstRange(of: "${", in: Substring("$")) == nil)
        #expect(ASCIIText.firstRange(of: "${", in: Substring("")) == nil)
    }

    @Test("Case-insensitive comparison folds ASCII letters only", arguments: [
        ("Content-Type", "content-type", true), ("X-A", "x-a", true), ("ETag", "etaG", true), ("a", "ab", false),
        ("É", "é", false), ("K", "\u{212A}", false),
    ])
    func equalsIgnoringCase(_ a: String, _ b: String, _ equal: Bool) {
        #expect(ASCIIText.equalsIgnoringCase(a, b) == equal)
    }

    @Test("Form decoding: '+' is a space, escapes are decoded, a malformed escape is kept literally")
    func formDecoding() {
        #expect(FormEncoding.decode("a=b+c&d=%41%42&e=100%&f=%C3%A9").map { [$0.0, $0.1] } == [["a", "b c"], ["d", "AB"], ["e", "100%"], ["f", "é"]])
        #expect(FormEncoding.encodeQuery([("q", "a b+c"), ("login_hint", "+1 555")]) == "q=a%20b%2Bc&login_hint=%2B1%20555")
    }

    @Test("A detached thread runs its body once, named as asked (the kernel keeps 15 bytes)")
    func detachedThread() async throws {
        let seen = Mutex<String?>(nil)
        let started = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let ok = DetachedThread.start(name: "OAuthFlow.test-thread-name") {
                var name = [CChar](repeating: 0, count: 32)
                let fd = open("/proc/thread-self/comm", O_RDONLY)
                if fd >= 0 {
                    _ = read(fd, &name, 31)
                    close(fd)
                }
                let text = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                seen.withLock { $0 = text.trimmingCharacters(in: .newlines) }
                continuation.resume(returning: true)
            }
            if !ok { continuation.resume(returning: false) }
        }
        #expect(started)
        #expect(seen.withLock { $0 } == "OAuthFlow.test-")
    }
}
