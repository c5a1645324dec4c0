import Foundation
import Testing

/// The fleet tests' store key (`Support/Fleet.swift`): about forty tests make one each, and
/// none removes it by hand.
@Suite("TestKey leaves no key file behind")
struct TestKeyTests {
    @Test("the key file and its directory are gone once the key is")
    func keyFileGoes() throws {
        let file: URL = try {
            let key = try TestKey()
            #expect(try String(contentsOf: key.file, encoding: .utf8).count == 65, "64 hex digits and a newline")
            return key.file
        }()
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(!FileManager.default.fileExists(atPath: file.deletingLastPathComponent().path))
    }
}
