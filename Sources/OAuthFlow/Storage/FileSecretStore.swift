#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Glibc

/// A ``SecretStore`` that keeps one JSON file per key in a private directory, safe across processes.
///
/// Each entry is `<key>.json`, mode 0600, in a directory of mode 0700 owned by the current user.
/// ``save(_:for:)`` replaces an entry atomically (temporary file, `fsync`, `rename`, `fsync` of the
/// directory), so a crash leaves either the old entry or the new one, never a torn file.
/// ``withExclusiveAccess(to:_:)`` holds an advisory `flock(2)` on `<key>.lock`, so services and
/// `authflow` commands that share the directory refresh a provider one at a time and never lose
/// each other's rotated refresh token.
///
/// ```swift
/// let store = try FileSecretStore()            // $XDG_STATE_HOME/oauthflow or ~/.local/state/oauthflow
/// let flow = try await AuthFlow(providers: providers, store: store)
/// ```
///
/// The store refuses, rather than repairs, anything it did not expect: a directory or entry that
/// group or others can access, one owned by another user, a symbolic link, an oversized file. The
/// error names the path and the fix. See `Documentation/Storage.md` for the layout and threat model.
///
/// Pass an ``EntryEncryption`` to keep entries encrypted at rest (AES-256-GCM, off by default):
///
/// ```swift
/// let key = try StoreKey(contentsOf: URL(fileURLWithPath: "/etc/myservice/store.key"))
/// let store = try FileSecretStore(encryption: EntryEncryption(key: key))
/// ```
///
/// File I/O runs on the calling task's thread and is short; waiting for a lock never blocks a thread.
public final class FileSecretStore: SecretStore {
    /// The directory that holds the entries.
    public let directory: URL
    /// How long ``withExclusiveAccess(to:_:)`` waits for another process to release a key's lock.
    public let lockTimeout: Duration
    /// The largest entry, in bytes, that ``save(_:for:)`` writes and ``load(_:)`` reads (1 MiB).
    ///
    /// With ``encryption`` the limit applies to the sealed file, which is
    /// ``EntryEncryption/overhead`` bytes longer than the entry.
    public static let maximumEntrySize = 1 << 20
    /// Seals every saved entry and opens every loaded one; nil keeps entries as plaintext JSON.
    public let encryption: EntryEncryption?

    let path: String
    /// The directory, opened once: every file operation is relative to it, so a path swapped
    /// after ``init(directory:environment:lockTimeout:encryption:)`` checked it cannot redirect the store.
    let directoryFD: FileDescriptor
    let locks = KeyedAsyncLock()

    /// Opens the store, creating its directory (mode 0700) when it does not exist.
    ///
    /// Missing parent directories are created with mode 0700 too; existing ones are left as they are.
    /// Pass `directory` to choose the place, for example
    /// `try FileSecretStore.defaultDirectory(name: "myapp")`.
    /// - Parameters:
    ///   - directory: where entries live; `nil` means ``defaultDirectory(name:environment:)``.
    ///   - environment: consulted for `XDG_STATE_HOME` and `HOME` when `directory` is `nil`.
    ///   - lockTimeout: how long ``withExclusiveAccess(to:_:)`` waits for another process.
    ///   - encryption: encrypts entries at rest (see ``EntryEncryption``); nil, the default, stores
    ///     plaintext JSON. With it, plaintext entries already in the directory are still read and
    ///     are encrypted when they are next saved.
    /// - Throws: ``OAuthError`` `.configuration` when no default directory can be derived or the URL
    ///   is not a file URL; `.storage` when the directory cannot be created or opened, is not a
    ///   directory, is owned by another user, or grants group or others any permission (run
    ///   `chmod 700` on it; the store does not loosen or tighten modes it did not set).
    public init(
        directory: URL? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        lockTimeout: Duration = .seconds(30),
        encryption: EntryEncryption? = nil
    ) throws(OAuthError) {
        let chosen = directory
        let directory: URL
        if let chosen { directory = chosen } else { directory = try Self.defaultDirectory(environment: environment) }
        guard directory.isFileURL else {
            throw OAuthError(.configuration, message: "the secret store directory must be a file URL, not \"\(directory.scheme ?? "")\"")
        }
        let path = directory.standardizedFileURL.path
        let created = try Self.makeDirectories(path)
        let fd: FileDescriptor
        do throws(SystemError) {
            fd = try FileDescriptor(opening: path, O_RDONLY | O_DIRECTORY)
        } catch {
            throw Self.failure(nil, "cannot open the secret store directory \"\(path)\"", errno: error.code)
        }
        if created, fchmod(fd.raw, 0o700) != 0 {
            throw Self.failure(nil, "cannot set mode 0700 on \"\(path)\"", errno: errno)
        }
        try Self.checkDirectory(fd, path: path, key: nil)
        self.directory = URL(fileURLWithPath: path, isDirectory: true)
        self.path = path
        self.directoryFD = fd
        self.lockTimeout = lockTimeout
        self.encryption = encryption
    }

    /// The XDG state directory for `name`: `$XDG_STATE_HOME/<name>`, else `$HOME/.local/state/<name>`.
    ///
    /// A relative `XDG_STATE_HOME` is ignored, as the XDG Base Directory specification requires.
    /// The directory is not created; ``init(directory:environment:lockTimeout:encryption:)`` does that.
    /// - Parameters:
    ///   - name: the application's directory, a single path component (`authflow` for the CLI).
    ///   - environment: the variables to read.
    /// - Throws: ``OAuthError`` `.configuration` when `name` is not a single component, or when
    ///   neither `XDG_STATE_HOME` nor `HOME` is an absolute path; pass a directory explicitly then.
    public static func defaultDirectory(
        name: String = "oauthflow", environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(OAuthError) -> URL {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.utf8.contains(0) else {
            throw OAuthError(.configuration, message: "the store name \"\(name)\" must be a single path component")
        }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return URL(fileURLWithPath: state, isDirectory: true).appendingPathComponent(name, isDirectory: true)
        }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return URL(fileURLWithPath: home, isDirectory: true)
                .appendingPathComponent(".local/state", isDirectory: true)
                .appendingPathComponent(name, isDirectory: true)
        }
        throw OAuthError(.configuration, message: "neither XDG_STATE_HOME nor HOME is an absolute path; pass the store a directory")
    }

    /// True when `key` can name an entry: 1 to 128 ASCII letters, digits, `.`, `_` or `-`, not starting with `.`.
    ///
    /// These are the rules for provider ids, so every valid provider id is a valid key.
    public static func isValidKey(_ key: String) -> Bool {
        let bytes = key.utf8
        guard (1...128).contains(bytes.count), bytes.first != UInt8(ascii: ".") else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                return true
            default:
                return false
            }
        }
    }

    // MARK: SecretStore

    /// The bytes of `<key>.json`, or nil when there is no entry.
    ///
    /// The file must be a regular file (not a symbolic link), owned by the current user, with no
    /// group or other permission bits, and at most ``maximumEntrySize`` bytes.
    /// With ``encryption``, a sealed entry is opened and its plaintext returned; a plaintext entry
    /// (written before encryption was turned on) is returned as it is and sealed at its next save.
    /// Without it, a sealed entry is refused. A failed load never changes the file.
    /// - Throws: ``OAuthError`` `.configuration` for an invalid key; `.storage` naming the path and
    ///   the reason when the entry cannot be read, fails a check, or (encrypted) does not open:
    ///   sealed with a key that is not configured, altered, truncated, or copied from another
    ///   provider's entry (fix the file or the key as the message says, or delete it and authorize again).
    public func load(_ key: String) async throws(OAuthError) -> Data? {
        try loadSynchronously(key)
    }

    /// ``load(_:)`` without the `async`: every check, the same result and the same errors. For
    /// `authflow token`'s answer from the store, which runs before any task exists.
    package func loadSynchronously(_ key: String) throws(OAuthError) -> Data? {
        try validate(key)
        try Self.checkDirectory(directoryFD, path: path, key: key)
        let file = "\(path)/\(key).json"
        // O_NONBLOCK: a FIFO planted in place of the entry must not hang the open.
        let fd: FileDescriptor
        do throws(SystemError) {
            fd = try FileDescriptor(opening: "\(key).json", in: directoryFD, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            switch error.code {
            case ENOENT: return nil
            case ELOOP: throw Self.failure(key, "refusing \"\(file)\": it is a symbolic link; replace it with a regular file or delete it")
            default: throw Self.failure(key, "cannot open \"\(file)\"", errno: error.code)
            }
        }
        var info = stat()
        guard fstat(fd.raw, &info) == 0 else { throw Self.failure(key, "cannot stat \"\(file)\"", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw Self.failure(key, "refusing \"\(file)\": it is not a regular file; delete it")
        }
        guard info.st_uid == geteuid() else {
            throw Self.failure(key, "refusing \"\(file)\": it is owned by uid \(info.st_uid), not by this user (uid \(geteuid())); delete it")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw Self.failure(key, "refusing \"\(file)\": it is readable or writable by group or others (mode \(Self.octal(info.st_mode))); run chmod 600 \"\(file)\" and consider revoking the tokens")
        }
        guard info.st_size <= Self.maximumEntrySize else {
            throw Self.failure(key, "refusing \"\(file)\": it is \(info.st_size) bytes, over the \(Self.maximumEntrySize)-byte limit; delete it")
        }
        return try unseal(try readAll(fd, key: key, file: file), key: key, file: file)
    }

    /// Replaces `<key>.json` with `data` atomically and durably.
    ///
    /// Writes a temporary file `.<key>.<random>.tmp` (mode 0600 whatever the umask), `fsync`s it,
    /// renames it over the entry, and `fsync`s the directory. On failure the temporary file is
    /// removed and the previous entry is left intact. With ``encryption`` the file holds `data`
    /// sealed with the current key (a fresh nonce each time), bound to `key`.
    /// - Throws: ``OAuthError`` `.configuration` for an invalid key; `.storage` with the path and the
    ///   system's reason (disk full, read-only file system, …), or when the file would exceed
    ///   ``maximumEntrySize``; `.crypto` when sealing fails.
    public func save(_ data: Data, for key: String) async throws(OAuthError) {
        try validate(key)
        let file = "\(path)/\(key).json"
        guard data.count <= Self.maximumEntrySize else {
            throw Self.failure(key, "cannot save \"\(file)\": the entry is \(data.count) bytes, over the \(Self.maximumEntrySize)-byte limit")
        }
        var data = data
        if let encryption {
            data = try encryption.seal(data, providerID: key)
            guard data.count <= Self.maximumEntrySize else {
                throw Self.failure(key, "cannot save \"\(file)\": the encrypted entry is \(data.count) bytes, over the \(Self.maximumEntrySize)-byte limit")
            }
        }
        try Self.checkDirectory(directoryFD, path: path, key: key)
        let result = data.withUnsafeBytes { buffer in
            Result { () throws(AtomicFile.Failure) in try AtomicFile.replace("\(key).json", in: directoryFD, with: buffer, mode: 0o600, stem: key) }
        }
        if case .failure(let error) = result {
            let temporary = "\(path)/\(error.temporary)"
            let message = switch error.step {
            case .create: "cannot create a temporary file in \"\(path)\" to save \"\(key)\""
            case .chown, .chmod: "cannot set mode 0600 on \"\(temporary)\""
            case .write: "cannot write \"\(temporary)\""
            case .flush: "cannot flush \"\(temporary)\" to disk"
            case .close: "cannot close \"\(temporary)\""
            case .rename: "cannot replace \"\(file)\""
            case .syncDirectory: "saving \"\(file)\" succeeded, but flushing the directory \"\(path)\" failed"
            }
            throw Self.failure(key, message, errno: error.code)
        }
    }

    /// Removes `<key>.json` under `key`'s lock; removing a missing entry is not an error.
    ///
    /// The delete takes the lock of ``withExclusiveAccess(to:_:)`` (or runs inside it when the
    /// calling task already holds it), so it waits for a refresh another task or process is
    /// running and then removes what that refresh saved: a logout is never undone by a refresh
    /// that was already in flight. The lock file `<key>.lock` stays: removing it could let two
    /// processes lock different files under the same name. It holds no data.
    /// - Throws: ``OAuthError`` `.configuration` for an invalid key; `.storage` with the path and the
    ///   system's reason; `.timedOut` when another process holds the lock past ``lockTimeout``.
    public func delete(_ key: String) async throws(OAuthError) {
        try validate(key)
        guard Self.heldLocks.contains(lockName(key)) else {
            return try await withExclusiveAccess(to: key) { () async throws(OAuthError) in try self.unlinkEntry(key) }
        }
        try unlinkEntry(key)
    }

    private func unlinkEntry(_ key: String) throws(OAuthError) {
        let file = "\(path)/\(key).json"
        if unlinkat(directoryFD.raw, "\(key).json", 0) != 0 {
            let code = errno
            if code == ENOENT { return }
            throw Self.failure(key, "cannot delete \"\(file)\"", errno: code)
        }
        try syncDirectory(key: key, after: "deleting \"\(file)\"")
    }

    /// The keys that have a `<key>.json` entry, sorted; temporary, lock and other files are skipped.
    /// - Throws: ``OAuthError`` `.storage` when the directory cannot be read.
    public func keys() async throws(OAuthError) -> [String] {
        try keysSynchronously()
    }

    /// ``keys()`` without the `async`, for the same callers as ``loadSynchronously(_:)``.
    package func keysSynchronously() throws(OAuthError) -> [String] {
        let fd: FileDescriptor
        do throws(SystemError) {
            fd = try FileDescriptor(opening: ".", in: directoryFD, O_RDONLY | O_DIRECTORY)
        } catch {
            throw Self.failure(nil, "cannot open \"\(path)\" to list it", errno: error.code)
        }
        guard let stream = fdopendir(fd.raw) else {
            throw Self.failure(nil, "cannot list \"\(path)\"", errno: errno)
        }
        _ = fd.take()  // the stream owns the descriptor now: closedir closes it
        defer { closedir(stream) }
        var keys: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                let code = errno
                if code != 0 { throw Self.failure(nil, "cannot list \"\(path)\"", errno: code) }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasSuffix(".json") else { continue }
            let key = String(name.dropLast(5))
            if Self.isValidKey(key) { keys.append(key) }
        }
        return keys.sorted()
    }

    // MARK: Helpers

    /// The entry's plaintext: opened when sealed and the store has a key, as it is when plaintext.
    private func unseal(_ data: Data, key: String, file: String) throws(OAuthError) -> Data {
        let sealed = EntryEncryption.isSealed(data)
        guard let encryption else {
            guard !sealed else {
                let id = EntryEncryption.keyID(of: data) ?? "unknown"
                throw Self.failure(
                    key, "refusing \"\(file)\": it is encrypted (store key \(id)) and this store has no key; "
                        + "configure the store key (authflow: --store-key-file or AUTHFLOW_STORE_KEY_FILE)")
            }
            return data
        }
        // A plaintext entry predates encryption: read it; the next save seals it.
        guard sealed else { return data }
        do {
            return try encryption.open(data, providerID: key)
        } catch {
            var located = error
            located.message = (error.message ?? "cannot open the encrypted entry") + " (file \"\(file)\")"
            throw located
        }
    }

    func validate(_ key: String) throws(OAuthError) {
        guard Self.isValidKey(key) else {
            throw OAuthError(.configuration, providerID: key,
                             message: "\"\(key)\" is not a valid store key: use 1 to 128 ASCII letters, digits, '.', '_' or '-', not starting with '.'")
        }
    }

    private func readAll(_ fd: borrowing FileDescriptor, key: String, file: String) throws(OAuthError) -> Data {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd.raw, $0.baseAddress, $0.count) }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                throw Self.failure(key, "cannot read \"\(file)\"", errno: code)
            }
            if count == 0 { return data }
            data.append(contentsOf: chunk[..<count])
            // The file may have grown since fstat; keep the bound.
            guard data.count <= Self.maximumEntrySize else {
                throw Self.failure(key, "refusing \"\(file)\": it is over the \(Self.maximumEntrySize)-byte limit; delete it")
            }
        }
    }
}
