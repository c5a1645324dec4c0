import Foundation
import Glibc
@testable import OAuthFlow
import Synchronization
import TestSupport
import Testing

/// Encrypted entries: AES-256-GCM vectors, the sealed format, tampering, rotation, and key files.
///
/// Key files live in a fresh 0700 directory per test, removed afterwards. The FIFO test guards its
/// open with a bounded wait and unblocks itself, so a regression fails instead of hanging.
@Suite("EntryEncryption and StoreKey")
struct EntryEncryptionTests {}

// MARK: Support

/// A small deterministic generator (SplitMix64), so a failing hostile input can be replayed.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// The result of a key-file read on another thread.
private final class Outcome: Sendable {
    let value = Mutex<Result<StoreKey, OAuthError>?>(nil)
}

private enum KeyFixture {
    /// The key 0x00, 0x01, … 0x1f.
    static let bytes: [UInt8] = Array(0..<32)
    /// Its id: SHA-256 of 0x00…0x1f begins 630dcd29 66c43366 (checked against `Digest` in `header()`).
    static let id = "630dcd2966c43366"
    static let hex = bytes.map { String(format: "%02x", $0) }.joined()
    static let token = "tok_4kq9ZsJd0xVb7wP2rN8m"
    static let entry = Data(#"{"version":1,"providerID":"github","accessToken":"\#(token)","tokenType":"Bearer"}"#.utf8)

    static func key(_ fill: UInt8) throws -> StoreKey { try StoreKey(bytes: [UInt8](repeating: fill, count: 32)) }

    static func withDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = try TemporaryDirectory("EntryEncryptionTests")
        defer { directory.remove() }
        return try body(directory.url)
    }

    /// Writes `content` to `name` in `directory` with exactly `mode`.
    @discardableResult
    static func write(_ content: [UInt8], _ name: String, in directory: URL, mode: mode_t = 0o600) -> URL {
        let url = directory.appendingPathComponent(name)
        #expect(FileManager.default.createFile(atPath: url.path, contents: Data(content)))
        #expect(chmod(url.path, mode) == 0)
        return url
    }

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    static func contains(_ data: Data, _ needle: String) -> Bool {
        data.range(of: Data(needle.utf8)) != nil
    }

    static func printed(_ value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), String(reflecting: value), "\(value)", dumped]
    }
}

// MARK: AES-256-GCM

extension EntryEncryptionTests {
    /// The GCM specification's AES-256 test cases (McGrew & Viega, "The Galois/Counter Mode of
    /// Operation", Appendix B, test cases 13, 14, 15 and 16), as in NIST's GCM validation suite.
    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var key, nonce, plaintext, associatedData, ciphertext, tag: String
        var testDescription: String { name }
    }

    static let vectors: [Vector] = [
        Vector(name: "test case 13: empty plaintext", key: String(repeating: "00", count: 32), nonce: String(repeating: "00", count: 12),
               plaintext: "", associatedData: "", ciphertext: "", tag: "530f8afbc74536b9a963b4f1c4cb738b"),
        Vector(name: "test case 14: one zero block", key: String(repeating: "00", count: 32), nonce: String(repeating: "00", count: 12),
               plaintext: String(repeating: "00", count: 16), associatedData: "",
               ciphertext: "cea7403d4d606b6e074ec5d3baf39d18", tag: "d0d1c8a799996bf0265b98b5d48ab919"),
        Vector(name: "test case 15: four blocks, no AAD",
               key: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", nonce: "cafebabefacedbaddecaf888",
               plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
               associatedData: "",
               ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
               tag: "b094dac5d93471bdec1a502270e3cc6c"),
        Vector(name: "test case 16: partial block with AAD",
               key: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", nonce: "cafebabefacedbaddecaf888",
               plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
               associatedData: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
               ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
               tag: "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test("AES-256-GCM matches the GCM specification's test vectors", arguments: vectors)
    func gcmVectors(_ vector: Vector) throws {
        let key = KeyMaterial(KeyFixture.hex(vector.key))
        let nonce = KeyFixture.hex(vector.nonce)
        let associatedData = KeyFixture.hex(vector.associatedData)
        let (ciphertext, tag) = try AES256GCM.seal(KeyFixture.hex(vector.plaintext), key: key, nonce: nonce, associatedData: associatedData)
        #expect(ciphertext == KeyFixture.hex(vector.ciphertext))
        #expect(tag == KeyFixture.hex(vector.tag))
        let opened = try AES256GCM.open(ciphertext, tag: tag, key: key, nonce: nonce, associatedData: associatedData)
        #expect(opened == KeyFixture.hex(vector.plaintext))
        var badTag = tag
        badTag[0] ^= 1
        #expect(try AES256GCM.open(ciphertext, tag: badTag, key: key, nonce: nonce, associatedData: associatedData) == nil)
        #expect(try AES256GCM.open(ciphertext, tag: tag, key: key, nonce: nonce, associatedData: associatedData + [0]) == nil)
    }
}

// MARK: The sealed format

extension EntryEncryptionTests {
    @Test("seal then open gives the plaintext back; the sealed bytes never hold it", arguments: [0, 1, 81, 65_536])
    func roundTrip(size: Int) throws {
        let encryption = EntryEncryption(key: try StoreKey(bytes: KeyFixture.bytes))
        let plaintext = size == 81 ? KeyFixture.entry : Data((0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let sealed = try encryption.seal(plaintext, providerID: "github")
        #expect(sealed.count == plaintext.count + EntryEncryption.overhead)
        #expect(EntryEncryption.isSealed(sealed))
        #expect(try encryption.open(sealed, providerID: "github") == plaintext)
        if size == 81 { #expect(!KeyFixture.contains(sealed, KeyFixture.token)) }
    }

    @Test("the header is OAFE, version 1, and the key id; the key id is the first 8 bytes of SHA-256 of the key")
    func header() throws {
        let key = try StoreKey(bytes: KeyFixture.bytes)
        let digest = try Digest.sha256(KeyFixture.bytes)
        #expect(key.id == digest.prefix(8).map { String(format: "%02x", $0) }.joined())
        #expect(key.id == KeyFixture.id)
        let sealed = Array(try EntryEncryption(key: key).seal(KeyFixture.entry, providerID: "github"))
        #expect(Array(sealed[0..<4]) == Array("OAFE".utf8))
        #expect(sealed[4] == 1)
        #expect(Array(sealed[5..<13]) == Array(digest.prefix(8)))
        #expect(EntryEncryption.keyID(of: Data(sealed)) == key.id)
        #expect(!EntryEncryption.isSealed(KeyFixture.entry))
        #expect(EntryEncryption.keyID(of: KeyFixture.entry) == nil)
    }

    @Test("every seal draws a fresh nonce: 1,000 seals of one entry share no nonce and no ciphertext")
    func freshNonces() throws {
        let encryption = EntryEncryption(key: try KeyFixture.key(7))
        var nonces = Set<Data>()
        var ciphertexts = Set<Data>()
        for _ in 0..<1000 {
            let sealed = try encryption.seal(KeyFixture.entry, providerID: "github")
            nonces.insert(sealed[sealed.startIndex + 13..<sealed.startIndex + 25])
            ciphertexts.insert(sealed.dropFirst(25))
        }
        #expect(nonces.count == 1000)
        #expect(ciphertexts.count == 1000)
    }

    @Test("an entry sealed with an unknown key is a .storage error naming the provider and both key ids")
    func wrongKey() throws {
        let sealed = try EntryEncryption(key: try KeyFixture.key(1)).seal(KeyFixture.entry, providerID: "github")
        let other = EntryEncryption(key: try KeyFixture.key(2))
        let error = #expect(throws: OAuthError.self) { try other.open(sealed, providerID: "github") }
        #expect(error?.code == .storage)
        #expect(error?.providerID == "github")
        #expect(error?.message?.contains("\"github\"") == true)
        let firstID = try KeyFixture.key(1).id
        let secondID = try KeyFixture.key(2).id
        #expect(error?.message?.contains("sealed with store key \(firstID)") == true)
        #expect(error?.message?.contains(secondID) == true)
    }

    enum Region: String, CaseIterable, Sendable { case magic, version, keyID, nonce, ciphertext, tag }

    @Test("a changed byte in any part of a sealed entry is a .storage error", arguments: Region.allCases)
    func tampered(_ region: Region) throws {
        let encryption = EntryEncryption(key: try KeyFixture.key(1))
        let sealed = Array(try encryption.seal(KeyFixture.entry, providerID: "github"))
        let offsets: [Int]
        let reason: String
        switch region {
        case .magic: (offsets, reason) = (Array(0..<4), "not an encrypted entry")
        case .version: (offsets, reason) = ([4], "format version")
        case .keyID: (offsets, reason) = (Array(5..<13), "not configured")
        case .nonce: (offsets, reason) = (Array(13..<25), "fails authentication")
        case .ciphertext: (offsets, reason) = (Array(25..<(sealed.count - 16)), "fails authentication")
        case .tag: (offsets, reason) = (Array((sealed.count - 16)..<sealed.count), "fails authentication")
        }
        for offset in offsets {
            var changed = sealed
            changed[offset] ^= 0x20
            let error = #expect(throws: OAuthError.self) { try encryption.open(Data(changed), providerID: "github") }
            #expect(error?.code == .storage)
            #expect(error?.message?.contains(reason) == true, "offset \(offset): \(error?.message ?? "")")
            #expect(error?.message?.contains(KeyFixture.token) == false)
        }
    }

    @Test("a key id changed to another configured key fails authentication instead of opening")
    func keyIDSwappedToKnownKey() throws {
        let first = try KeyFixture.key(1)
        let second = try KeyFixture.key(2)
        var sealed = Array(try EntryEncryption(key: first).seal(KeyFixture.entry, providerID: "github"))
        sealed.replaceSubrange(5..<13, with: second.idBytes)
        let both = EntryEncryption(key: second, previousKeys: [first])
        let error = #expect(throws: OAuthError.self) { try both.open(Data(sealed), providerID: "github") }
        #expect(error?.message?.contains("fails authentication") == true)
    }

    @Test("every truncation of a sealed entry is a .storage error")
    func truncated() throws {
        let encryption = EntryEncryption(key: try KeyFixture.key(1))
        let sealed = try encryption.seal(Data("{}".utf8), providerID: "github")
        for length in 0..<sealed.count {
            let error = #expect(throws: OAuthError.self) { try encryption.open(sealed.prefix(length), providerID: "github") }
            #expect(error?.code == .storage)
            let expected = length < 4 ? "not an encrypted entry" : length < EntryEncryption.overhead ? "truncated" : "fails authentication"
            #expect(error?.message?.contains(expected) == true, "length \(length)")
        }
    }

    @Test("2,000 hostile byte strings (random, and random after a valid header) are each a .storage error, never a trap")
    func hostileBytes() throws {
        let key = try KeyFixture.key(1)
        let encryption = EntryEncryption(key: key)
        var generator = SplitMix64(seed: 0x4f41_4645)
        for round in 0..<2000 {
            let length = Int(generator.next() % 200)
            var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if round % 2 == 0 {  // a valid header for this key, then garbage
                bytes = Array("OAFE".utf8) + [1] + key.idBytes + bytes
            }
            let error = #expect(throws: OAuthError.self) { try encryption.open(Data(bytes), providerID: "github") }
            #expect(error?.code == .storage)
        }
    }

    @Test("an entry copied under another provider's name does not open (the provider id is associated data)")
    func movedToAnotherProvider() throws {
        let encryption = EntryEncryption(key: try KeyFixture.key(1))
        let sealed = try encryption.seal(KeyFixture.entry, providerID: "github")
        let error = #expect(throws: OAuthError.self) { try encryption.open(sealed, providerID: "gitlab") }
        #expect(error?.code == .storage)
        #expect(error?.providerID == "gitlab")
        #expect(error?.message?.contains("another provider") == true)
        #expect(try encryption.open(sealed, providerID: "github") == KeyFixture.entry)
    }

    @Test("rotation: entries sealed with a previous key open; new seals carry the new key id")
    func rotation() throws {
        let old = try KeyFixture.key(1)
        let new = try KeyFixture.key(2)
        let sealedOld = try EntryEncryption(key: old).seal(KeyFixture.entry, providerID: "github")
        let rotated = EntryEncryption(key: new, previousKeys: [old])
        #expect(try rotated.open(sealedOld, providerID: "github") == KeyFixture.entry)
        let resealed = try rotated.seal(KeyFixture.entry, providerID: "github")
        #expect(EntryEncryption.keyID(of: resealed) == new.id)
        #expect(try EntryEncryption(key: new).open(resealed, providerID: "github") == KeyFixture.entry)
        // Once the old key is dropped, old entries name the key they need.
        let error = #expect(throws: OAuthError.self) { try EntryEncryption(key: new).open(sealedOld, providerID: "github") }
        #expect(error?.message?.contains(old.id) == true)
    }

    @Test("StoreKey and EntryEncryption never print key bytes; only key ids")
    func redaction() throws {
        let key = try StoreKey(bytes: KeyFixture.bytes)
        let previous = try KeyFixture.key(0xab)
        let encryption = EntryEncryption(key: key, previousKeys: [previous])
        let raw = String(decoding: KeyFixture.bytes, as: UTF8.self)
        for text in KeyFixture.printed(key) + KeyFixture.printed(encryption) + KeyFixture.printed([key]) {
            #expect(!text.contains(KeyFixture.hex))
            #expect(!text.contains(KeyFixture.hex.uppercased()))
            #expect(!text.contains(raw))
            #expect(!text.contains(String(repeating: "ab", count: 16)))
            #expect(!text.contains("171, 171"))  // no byte arrays either
            #expect(!text.contains("0, 1, 2, 3"))
        }
        #expect(String(describing: key).contains(key.id))
        #expect(String(describing: encryption).contains(previous.id))
    }

    @Test("StoreKey(bytes:) refuses any length but 32")
    func keyLength() throws {
        for count in [0, 16, 31, 33, 64] {
            let error = #expect(throws: OAuthError.self) { try StoreKey(bytes: [UInt8](repeating: 1, count: count)) }
            #expect(error?.code == .configuration)
        }
        #expect(try StoreKey.generate().id != StoreKey.generate().id)
    }
}

// MARK: Key files

extension EntryEncryptionTests {
    @Test("a key file may hold 32 raw bytes, 64 hex characters (either case), optionally with one newline", arguments: [
        "raw", "hex", "HEX", "hex+newline",
    ])
    func keyFileFormats(_ format: String) throws {
        try KeyFixture.withDirectory { directory in
            let content: [UInt8]
            switch format {
            case "raw": content = KeyFixture.bytes
            case "hex": content = Array(KeyFixture.hex.utf8)
            case "HEX": content = Array(KeyFixture.hex.uppercased().utf8)
            default: content = Array((KeyFixture.hex + "\n").utf8)
            }
            let url = KeyFixture.write(content, "key", in: directory)
            let key = try StoreKey(contentsOf: url)
            #expect(key.id == KeyFixture.id)
            // The key really is those bytes: an entry sealed with it opens with a key made from them.
            let sealed = try EntryEncryption(key: key).seal(KeyFixture.entry, providerID: "p")
            #expect(try EntryEncryption(key: try StoreKey(bytes: KeyFixture.bytes)).open(sealed, providerID: "p") == KeyFixture.entry)
        }
    }

    struct BadContent: Sendable, CustomTestStringConvertible {
        var name: String
        var content: [UInt8]
        var reason: String
        var testDescription: String { name }
    }

    static let badContents: [BadContent] = [
        BadContent(name: "empty", content: [], reason: "is 0 bytes"),
        BadContent(name: "31 raw bytes", content: Array(KeyFixture.bytes.dropLast()), reason: "is 31 bytes"),
        BadContent(name: "32 raw bytes and a newline", content: KeyFixture.bytes + [10], reason: "is 33 bytes"),
        BadContent(name: "63 hex characters", content: Array(KeyFixture.hex.dropLast().utf8), reason: "is 63 bytes"),
        BadContent(name: "64 hex and two newlines", content: Array((KeyFixture.hex + "\n\n").utf8), reason: "is 66 bytes"),
        BadContent(name: "64 hex and CR LF", content: Array((KeyFixture.hex + "\r\n").utf8), reason: "is 66 bytes"),
        BadContent(name: "65 hex characters", content: Array((KeyFixture.hex + "0").utf8), reason: "is 65 bytes"),
        BadContent(name: "a long file", content: Array(repeating: 0x41, count: 4096), reason: "is 4096 bytes"),
        BadContent(name: "64 characters, not hex", content: Array(("zz" + KeyFixture.hex.dropFirst(2)).utf8), reason: "not hexadecimal"),
        BadContent(name: "hex with a space", content: Array((KeyFixture.hex.prefix(63) + " ").utf8), reason: "not hexadecimal"),
    ]

    @Test("a key file with the wrong length or not hex is refused with .configuration, never echoing its content",
          arguments: badContents)
    func keyFileBadContent(_ bad: BadContent) throws {
        try KeyFixture.withDirectory { directory in
            let url = KeyFixture.write(bad.content, "key", in: directory)
            let error = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: url) }
            #expect(error?.code == .configuration)
            #expect(error?.message?.contains(url.path) == true)
            #expect(error?.message?.contains(bad.reason) == true, "\(error?.message ?? "")")
            #expect(error?.message?.contains(String(KeyFixture.hex.dropFirst(2).prefix(16))) == false)
            #expect(error.map { String(reflecting: $0).contains(String(KeyFixture.hex.dropFirst(2).prefix(16))) } == false)
        }
    }

    @Test("a key file readable or writable by group or others is refused; 0600 and 0400 are accepted",
          arguments: [(0o644, false), (0o640, false), (0o604, false), (0o620, false), (0o600, true), (0o400, true)] as [(mode_t, Bool)])
    func keyFileModes(mode: mode_t, accepted: Bool) throws {
        try KeyFixture.withDirectory { directory in
            let url = KeyFixture.write(Array(KeyFixture.hex.utf8), "key", in: directory, mode: mode)
            if accepted {
                let loaded = try StoreKey(contentsOf: url)
                #expect(loaded.id == KeyFixture.id)
            } else {
                let error = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: url) }
                #expect(error?.code == .configuration)
                #expect(error?.message?.contains("accessible by group or others (mode 0\(String(mode, radix: 8)))") == true)
                #expect(error?.message?.contains("chmod 600 \"\(url.path)\"") == true)
            }
        }
    }

    @Test("a FIFO in place of the key file is refused at once, without waiting for a writer")
    func keyFileFIFO() throws {
        try KeyFixture.withDirectory { directory in
            let url = directory.appendingPathComponent("key")
            #expect(mkfifo(url.path, 0o600) == 0)
            let result = Outcome()
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let outcome = Result { () throws(OAuthError) -> StoreKey in try StoreKey(contentsOf: url) }
                result.value.withLock { $0 = outcome }
                done.signal()
            }
            if done.wait(timeout: .now() + 20) == .timedOut {
                // The open blocked: release it by opening the write end, then fail.
                let writer = open(url.path, O_WRONLY | O_NONBLOCK)
                if writer >= 0 { close(writer) }
                _ = done.wait(timeout: .now() + 20)
                Issue.record("opening a FIFO as the key file blocked")
                return
            }
            let outcome = result.value.withLock { $0 }
            guard case .failure(let error)? = outcome else {
                Issue.record("a FIFO was accepted as a key file")
                return
            }
            #expect(error.code == .configuration)
            #expect(error.message?.contains("it is a FIFO, not a regular file") == true)
        }
    }

    @Test("a directory or a device in place of the key file is refused")
    func keyFileNotRegular() throws {
        try KeyFixture.withDirectory { directory in
            let sub = directory.appendingPathComponent("key")
            try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            let error = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: sub) }
            #expect(error?.message?.contains("it is a directory, not a regular file") == true)
        }
        let device = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: URL(fileURLWithPath: "/dev/null")) }
        #expect(device?.message?.contains("it is a character device, not a regular file") == true)
        let missing = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: URL(fileURLWithPath: "/nonexistent/authflow-key")) }
        #expect(missing?.code == .configuration)
        #expect(missing?.message?.contains("\"/nonexistent/authflow-key\": it does not exist") == true)
    }

    @Test("a symbolic link is followed and the checks apply to its target")
    func keyFileSymlink() throws {
        try KeyFixture.withDirectory { directory in
            let good = KeyFixture.write(Array(KeyFixture.hex.utf8), "good", in: directory)
            let wide = KeyFixture.write(Array(KeyFixture.hex.utf8), "wide", in: directory, mode: 0o644)
            let toGood = directory.appendingPathComponent("to-good")
            let toWide = directory.appendingPathComponent("to-wide")
            let dangling = directory.appendingPathComponent("dangling")
            try FileManager.default.createSymbolicLink(at: toGood, withDestinationURL: good)
            try FileManager.default.createSymbolicLink(at: toWide, withDestinationURL: wide)
            try FileManager.default.createSymbolicLink(at: dangling, withDestinationURL: directory.appendingPathComponent("missing"))
            let loaded = try StoreKey(contentsOf: toGood)
            #expect(loaded.id == KeyFixture.id)
            let wideError = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: toWide) }
            #expect(wideError?.message?.contains("mode 0644") == true)
            let danglingError = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: dangling) }
            #expect(danglingError?.message?.contains("does not exist") == true)
        }
    }

    @Test("a key file or systemd credential owned by another user is refused (needs root to set up)",
          .enabled(if: geteuid() == 0, "only root can give a file to another user"))
    func keyFileForeignOwner() throws {
        try KeyFixture.withDirectory { directory in
            let url = KeyFixture.write(Array(KeyFixture.hex.utf8), "key", in: directory)
            #expect(chown(url.path, 65534, 65534) == 0)
            let error = #expect(throws: OAuthError.self) { try StoreKey(contentsOf: url) }
            #expect(error?.message?.contains("owned by uid 65534") == true)
            // A systemd credential may be owned by root or by us, not by anyone else.
            let credential = #expect(throws: OAuthError.self) {
                try StoreKey(systemdCredential: "key", environment: ["CREDENTIALS_DIRECTORY": directory.path])
            }
            #expect(credential?.message?.contains("owned by uid 65534, neither this user (uid 0) nor root") == true)
        }
    }

    @Test("a systemd credential: 0400 and 0440 are accepted; write bits for group or any bit for others are refused",
          arguments: [(0o400, true), (0o440, true), (0o600, true), (0o444, false), (0o460, false), (0o404, false)] as [(mode_t, Bool)])
    func systemdCredential(mode: mode_t, accepted: Bool) throws {
        try KeyFixture.withDirectory { directory in
            KeyFixture.write(Array((KeyFixture.hex + "\n").utf8), "store-key", in: directory, mode: mode)
            let environment = ["CREDENTIALS_DIRECTORY": directory.path]
            if accepted {
                let key = try StoreKey(systemdCredential: "store-key", environment: environment)
                #expect(key.id == KeyFixture.id)
            } else {
                let error = #expect(throws: OAuthError.self) { try StoreKey(systemdCredential: "store-key", environment: environment) }
                #expect(error?.code == .configuration)
                #expect(error?.message?.contains(directory.appendingPathComponent("store-key").path) == true)
            }
        }
    }

    @Test("a systemd credential needs CREDENTIALS_DIRECTORY and a single-component name")
    func systemdCredentialSetup() throws {
        let unset = #expect(throws: OAuthError.self) { try StoreKey(systemdCredential: "store-key", environment: [:]) }
        #expect(unset?.code == .configuration)
        #expect(unset?.message?.contains("LoadCredential=store-key") == true)
        let relative = #expect(throws: OAuthError.self) {
            try StoreKey(systemdCredential: "store-key", environment: ["CREDENTIALS_DIRECTORY": "creds"])
        }
        #expect(relative?.code == .configuration)
        for name in ["", ".", "..", "a/b", "../key"] {
            let error = #expect(throws: OAuthError.self) { try StoreKey(systemdCredential: name, environment: ["CREDENTIALS_DIRECTORY": "/run"]) }
            #expect(error?.message?.contains("single path component") == true)
        }
    }
}
