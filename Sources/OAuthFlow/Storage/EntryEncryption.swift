#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Glibc

/// A 256-bit key that encrypts stored entries (see ``EntryEncryption``), held as a secret.
///
/// Load it from a file with ``init(contentsOf:)`` or from a systemd credential with
/// ``init(systemdCredential:environment:)``; make a key file with `openssl rand -hex 32 > key`
/// (then `chmod 600 key`). The key bytes never appear in `description`, `debugDescription` or
/// `dump`; only the ``id`` does, which is safe to log and is written in every sealed entry.
/// The bytes live in memory of their own that is wiped when the last copy of the key goes.
public struct StoreKey: Sendable {
    /// The key's bytes, wiped when released.
    let material: KeyMaterial

    /// The key id: the first 8 bytes of the key's SHA-256, as 16 lowercase hexadecimal characters.
    ///
    /// Sealed entries carry it in their header, so ``EntryEncryption`` picks the right key while
    /// keys rotate, and an error can say which key an entry needs.
    public let id: String
    /// ``id`` as the 8 bytes written in a sealed entry's header.
    let idBytes: [UInt8]

    /// The length of a key in bytes.
    public static let byteCount = 32

    /// Wraps 32 key bytes, for keys that come from a vault or a key management service.
    ///
    /// Prefer ``init(contentsOf:)`` for keys on disk: it checks the file's type, owner and mode.
    /// - Throws: ``OAuthError`` `.configuration` when `bytes` is not exactly 32 bytes long.
    public init(bytes: some Collection<UInt8>) throws(OAuthError) {
        guard bytes.count == Self.byteCount else {
            throw OAuthError(.configuration, message: "a store key is \(Self.byteCount) bytes, not \(bytes.count)")
        }
        try self.init(material: KeyMaterial(bytes))
    }

    private init(material: KeyMaterial) throws(OAuthError) {
        self.material = material
        self.idBytes = Array(try material.sha256().prefix(8))
        self.id = Self.hex(idBytes)
    }

    /// A new key from OpenSSL's random generator (`RAND_bytes`), for tests and for tools that
    /// write a key file.
    /// - Throws: ``OAuthError`` `.crypto` when the random generator fails.
    public static func generate() throws(OAuthError) -> StoreKey {
        var bytes = try SecureRandom.bytes(byteCount)
        defer { wipe(&bytes) }
        return try StoreKey(bytes: bytes)
    }

    /// Reads a key file: 32 raw bytes, or 64 hexadecimal characters optionally followed by one newline.
    ///
    /// The file must be a regular file owned by the effective user with no group or other
    /// permission bits (mode 0600 or 0400). It is opened non-blocking, so a FIFO or a device in its
    /// place is refused at once instead of hanging. A symbolic link is followed and the checks apply
    /// to the file it points to (Kubernetes and Docker mount secrets as links). Create one with
    /// `(umask 077; openssl rand -hex 32 > /path/to/key)`.
    /// - Parameter url: the key file's location.
    /// - Throws: ``OAuthError`` `.configuration` naming the path and the reason (missing, not a
    ///   regular file, owned by another user, accessible by group or others, wrong length, not
    ///   hexadecimal); the message never contains any of the file's bytes.
    public init(contentsOf url: URL) throws(OAuthError) {
        guard url.isFileURL else {
            throw OAuthError(.configuration, message: "the store key file must be a file URL, not \"\(url.scheme ?? "")\"")
        }
        try self.init(material: KeyFile.read(url.path, rule: .privateFile))
    }

    /// Reads a key passed to a systemd service with `LoadCredential=NAME:/path/to/key`.
    ///
    /// The file is `$CREDENTIALS_DIRECTORY/NAME` and holds the same formats as
    /// ``init(contentsOf:)``. systemd gives the service a read-only copy that is owned by the
    /// service's user, or by root with an access-control entry granting the service user read
    /// access (shown as mode 0440); so this accepts owner root as well as the effective user, and
    /// group read, but no group write and no permission for others.
    /// See [systemd.exec(5), Credentials](https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html#Credentials).
    /// - Parameters:
    ///   - name: the credential's name, a single path component.
    ///   - environment: consulted for `CREDENTIALS_DIRECTORY`.
    /// - Throws: ``OAuthError`` `.configuration` when `CREDENTIALS_DIRECTORY` is not set to an
    ///   absolute path (the unit needs `LoadCredential=`), `name` is not a single component, or the
    ///   file fails a check (the message names the path and the reason, never the content).
    public init(
        systemdCredential name: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.utf8.contains(0) else {
            throw OAuthError(.configuration, message: "the credential name \"\(name)\" must be a single path component")
        }
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else {
            throw OAuthError(
                .configuration,
                message: "CREDENTIALS_DIRECTORY is not set to an absolute path; run under systemd with LoadCredential=\(name):/path/to/key")
        }
        let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
        try self.init(material: KeyFile.read(path, rule: .systemdCredential))
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension StoreKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `StoreKey(id: …, <redacted>)`: the id only.
    public var description: String { "StoreKey(id: \(id), <redacted>)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror with only the ``id``, so `dump` shows nothing of the key.
    public var customMirror: Mirror { Mirror(self, children: ["id": id]) }
}

/// Encrypts and authenticates stored entries with AES-256-GCM, one fresh random nonce per entry.
///
/// Pass it to ``FileSecretStore/init(directory:environment:lockTimeout:encryption:)``, or call
/// ``seal(_:providerID:)`` and ``open(_:providerID:)`` from a store of your own. A sealed entry is:
///
/// | bytes | content |
/// |---|---|
/// | 4 | magic `OAFE` |
/// | 1 | format version, 1 |
/// | 8 | key id (``StoreKey/id``) |
/// | 12 | nonce, random for every seal |
/// | n | ciphertext |
/// | 16 | GCM tag |
///
/// The 13-byte header and the provider id are authenticated as associated data, so a changed
/// header, a changed byte anywhere, a truncated entry, or an entry copied under another
/// provider's name does not open. To rotate keys, make the new key ``key`` and list the old ones
/// in ``previousKeys``: entries sealed with an old key still open, and every save seals with the new one.
public struct EntryEncryption: Sendable {
    /// The key every ``seal(_:providerID:)`` uses.
    public let key: StoreKey
    /// Older keys that ``open(_:providerID:)`` still accepts, for rotation.
    public let previousKeys: [StoreKey]

    static let magic: [UInt8] = Array("OAFE".utf8)
    static let version: UInt8 = 1
    static let headerSize = 4 + 1 + 8
    /// Bytes a sealed entry adds to its plaintext: header, nonce and tag (41).
    public static let overhead = headerSize + AES256GCM.nonceSize + AES256GCM.tagSize

    /// Creates an encryption with a current key and the previous keys still accepted for reading.
    /// - Parameters:
    ///   - key: seals every entry.
    ///   - previousKeys: open entries sealed before a rotation; drop a key once no entry needs it.
    public init(key: StoreKey, previousKeys: [StoreKey] = []) {
        self.key = key
        self.previousKeys = previousKeys
    }

    /// True when `data` starts like a sealed entry (the magic `OAFE`), whether or not it opens.
    ///
    /// Plaintext entries are JSON and start with `{`, so the two never look alike.
    public static func isSealed(_ data: Data) -> Bool {
        data.count >= magic.count && data.prefix(magic.count).elementsEqual(magic)
    }

    /// The id of the key that sealed `data`, or nil when `data` is not a complete sealed header.
    public static func keyID(of data: Data) -> String? {
        guard isSealed(data), data.count >= headerSize else { return nil }
        let bytes = Array(data.prefix(headerSize))
        return hexID(bytes[5..<13])
    }

    /// Encrypts an entry for `providerID` with ``key`` and a fresh random 96-bit nonce.
    ///
    /// The result is what the store writes; open it with ``open(_:providerID:)`` and the same provider id.
    /// - Throws: ``OAuthError`` `.crypto` when the random generator or OpenSSL fails.
    public func seal(_ plaintext: Data, providerID: String) throws(OAuthError) -> Data {
        var header = Self.magic
        header.append(Self.version)
        header += key.idBytes
        let nonce = try SecureRandom.bytes(AES256GCM.nonceSize)
        var input = Array(plaintext)
        defer { wipe(&input) }
        let (ciphertext, tag) = try AES256GCM.seal(
            input, key: key.material, nonce: nonce, associatedData: header + Array(providerID.utf8))
        var sealed = Data(capacity: Self.overhead + ciphertext.count)
        sealed.append(contentsOf: header)
        sealed.append(contentsOf: nonce)
        sealed.append(contentsOf: ciphertext)
        sealed.append(contentsOf: tag)
        return sealed
    }

    /// Decrypts an entry sealed for `providerID`, with ``key`` or one of ``previousKeys``.
    ///
    /// Nothing is written or deleted: on failure the caller still has the sealed bytes.
    /// - Throws: ``OAuthError`` `.storage` naming the provider and the reason: not a sealed entry,
    ///   truncated, an unknown format version, sealed with a key that is not configured (the
    ///   message gives its id), or it fails authentication (altered, corrupted, or copied from another
    ///   provider's entry). The message never holds entry content. Configure the right key, or delete
    ///   the entry and authorize again.
    public func open(_ sealed: Data, providerID: String) throws(OAuthError) -> Data {
        func failure(_ reason: String) -> OAuthError {
            OAuthError(.storage, providerID: providerID, message: "cannot open the encrypted entry for \"\(providerID)\": \(reason)")
        }
        guard Self.isSealed(sealed) else { throw failure("it is not an encrypted entry") }
        let bytes = Array(sealed)
        guard bytes.count >= Self.overhead else {
            throw failure("it is truncated (\(bytes.count) bytes; an encrypted entry has at least \(Self.overhead)); delete it and authorize again")
        }
        guard bytes[4] == Self.version else {
            throw failure("it uses encryption format version \(bytes[4]), which this version of OAuthFlow does not read; upgrade OAuthFlow")
        }
        let header = Array(bytes[0..<Self.headerSize])
        let entryKeyID = Self.hexID(header[5..<13])
        guard let chosen = ([key] + previousKeys).first(where: { $0.id == entryKeyID }) else {
            let known = ([key] + previousKeys).map(\.id).joined(separator: ", ")
            throw failure(
                "it was sealed with store key \(entryKeyID), which is not configured (configured: \(known)); "
                    + "add that key as a previous key, or delete the entry and authorize again")
        }
        let nonceEnd = Self.headerSize + AES256GCM.nonceSize
        let tagStart = bytes.count - AES256GCM.tagSize
        let opened = try AES256GCM.open(
            Array(bytes[nonceEnd..<tagStart]), tag: Array(bytes[tagStart...]), key: chosen.material,
            nonce: Array(bytes[Self.headerSize..<nonceEnd]), associatedData: header + Array(providerID.utf8))
        guard var plaintext = opened else {
            throw failure(
                "it fails authentication with store key \(entryKeyID): it was altered, truncated or corrupted, "
                    + "or it belongs to another provider; it was left as it is. Delete it and authorize again")
        }
        defer { wipe(&plaintext) }
        return Data(plaintext)
    }

    private static func hexID(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }
}

extension EntryEncryption: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key ids, never the keys: `EntryEncryption(key: …, previousKeys: […])`.
    public var description: String {
        "EntryEncryption(key: \(key.id), previousKeys: [\(previousKeys.map(\.id).joined(separator: ", "))])"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror with the key ids only.
    public var customMirror: Mirror { Mirror(self, children: ["key": key.id, "previousKeys": previousKeys.map(\.id)]) }
}

/// Reads and checks a key file without ever blocking on it or printing its content.
private enum KeyFile {
    enum Rule {
        /// Owned by the effective user; no group or other bits.
        case privateFile
        /// systemd's credential copy: owned by the effective user or root; group read allowed, nothing else.
        case systemdCredential
    }

    /// More than this is certainly not a key (64 hex characters and a newline are 65).
    static let sizeLimit = 65

    static func read(_ path: String, rule: Rule) throws(OAuthError) -> KeyMaterial {
        func failure(_ reason: String, errno code: Int32? = nil) -> OAuthError {
            var message = "refusing the store key file \"\(path)\": \(reason)"
            if let code {
                var buffer = [CChar](repeating: 0, count: 256)
                message += ": " + (strerror_r(code, &buffer, buffer.count) == 0
                    ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    : "errno \(code)")
            }
            return OAuthError(.configuration, message: message,
                              underlying: code.flatMap { POSIXErrorCode(rawValue: $0) }.map { POSIXError($0) })
        }
        // O_NONBLOCK: a FIFO or a device in place of the key must not hang the open; fstat refuses it next.
        let fd: FileDescriptor
        do throws(SystemError) {
            fd = try FileDescriptor(opening: path, O_RDONLY | O_NONBLOCK | O_NOCTTY)
        } catch {
            throw failure(error.code == ENOENT ? "it does not exist" : "cannot open it", errno: error.code == ENOENT ? nil : error.code)
        }
        var info = stat()
        guard fstat(fd.raw, &info) == 0 else { throw failure("cannot stat it", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw failure("it is \(kind(info.st_mode)), not a regular file")
        }
        let user = geteuid()
        switch rule {
        case .privateFile:
            guard info.st_uid == user else {
                throw failure("it is owned by uid \(info.st_uid), not by this user (uid \(user)); the key must belong to the user that runs the store")
            }
            guard info.st_mode & 0o077 == 0 else {
                throw failure("it is accessible by group or others (mode \(octal(info.st_mode))); run chmod 600 \"\(path)\", and make a new key if others may have read it")
            }
        case .systemdCredential:
            guard info.st_uid == user || info.st_uid == 0 else {
                throw failure("it is owned by uid \(info.st_uid), neither this user (uid \(user)) nor root")
            }
            guard info.st_mode & 0o027 == 0 else {
                throw failure("it is writable by group or accessible by others (mode \(octal(info.st_mode))); systemd gives credentials mode 0400 or 0440")
            }
        }
        guard info.st_size <= sizeLimit else {
            throw failure("it is \(info.st_size) bytes; a key file holds 32 raw bytes or 64 hexadecimal characters")
        }
        var content = try readAll(fd, failure: failure)
        defer { wipe(&content) }
        if content.count == StoreKey.byteCount { return KeyMaterial(content) }
        var hex = content
        defer { wipe(&hex) }
        if hex.count == 65, hex.last == UInt8(ascii: "\n") { hex.removeLast() }
        guard hex.count == 64 else {
            throw failure("it is \(content.count) bytes; a key file holds 32 raw bytes or 64 hexadecimal characters (optionally with one trailing newline)")
        }
        var key = [UInt8](repeating: 0, count: StoreKey.byteCount)
        defer { wipe(&key) }
        for index in 0..<StoreKey.byteCount {
            guard let high = nibble(hex[2 * index]), let low = nibble(hex[2 * index + 1]) else {
                throw failure("it is 64 bytes long but not hexadecimal; a key file holds 32 raw bytes or 64 hexadecimal characters")
            }
            key[index] = high << 4 | low
        }
        return KeyMaterial(key)
    }

    private static func readAll(_ fd: borrowing FileDescriptor, failure: (String, Int32?) -> OAuthError) throws(OAuthError) -> [UInt8] {
        var content: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: sizeLimit + 1)
        defer { wipe(&chunk) }
        while content.count <= sizeLimit {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd.raw, $0.baseAddress, $0.count) }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                wipe(&content)
                throw failure("cannot read it", code)
            }
            if count == 0 { return content }
            content += chunk[..<count]
        }
        wipe(&content)
        throw failure("it grew past \(sizeLimit) bytes while being read; a key file holds 32 raw bytes or 64 hexadecimal characters", nil)
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: return "a directory"
        case S_IFIFO: return "a FIFO"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "an unusual file"
        }
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
