#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

// The store's directory: created 0700, checked on every access, synced after a rename or an
// unlink; and the `.storage` errors that name a path and the system's reason.
extension FileSecretStore {
    /// Makes a rename or unlink durable. File systems that cannot sync directories are tolerated.
    func syncDirectory(key: String, after action: String) throws(OAuthError) {
        guard Self.retryingInterrupts({ fsync(directoryFD.raw) }) == 0 else {
            let code = errno
            if code == EINVAL || code == ENOTSUP { return }
            throw Self.failure(key, "\(action) succeeded, but flushing the directory \"\(path)\" failed", errno: code)
        }
    }

    private static func retryingInterrupts(_ call: () -> Int32) -> Int32 {
        while true {
            let result = call()
            if result == 0 || errno != EINTR { return result }
        }
    }

    /// Creates `path` and its missing parents with mode 0700; true when `path` itself was created.
    static func makeDirectories(_ path: String) throws(OAuthError) -> Bool {
        var info = stat()
        if stat(path, &info) == 0 { return false }
        var prefix = ""
        var createdLast = false
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            if stat(prefix, &info) == 0 {
                createdLast = false
                continue
            }
            if mkdir(prefix, 0o700) == 0 {
                createdLast = true
                // The umask may have removed owner bits; parents we create are exactly 0700.
                chmod(prefix, 0o700)
                continue
            }
            let code = errno
            if code == EEXIST {  // another process created it meanwhile
                createdLast = false
                continue
            }
            throw failure(nil, "cannot create the directory \"\(prefix)\"", errno: code)
        }
        return createdLast
    }

    static func checkDirectory(_ fd: borrowing FileDescriptor, path: String, key: String?) throws(OAuthError) {
        var info = stat()
        guard fstat(fd.raw, &info) == 0 else { throw failure(key, "cannot stat \"\(path)\"", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw failure(key, "refusing \"\(path)\": it is not a directory")
        }
        guard info.st_uid == geteuid() else {
            throw failure(key, "refusing the secret store directory \"\(path)\": it is owned by uid \(info.st_uid), not by this user (uid \(geteuid()))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw failure(key, "refusing the secret store directory \"\(path)\": it is accessible by group or others (mode \(octal(info.st_mode))); run chmod 700 \"\(path)\"")
        }
    }

    static func octal(_ mode: mode_t) -> String {
        let digits = String(mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// A `.storage` error with the system's reason; messages carry paths and reasons, never data.
    static func failure(_ key: String?, _ message: String, errno code: Int32? = nil) -> OAuthError {
        guard let code else { return OAuthError(.storage, providerID: key, message: message) }
        var buffer = [CChar](repeating: 0, count: 256)
        let reason = strerror_r(code, &buffer, buffer.count) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            : "errno \(code)"
        return OAuthError(.storage, providerID: key, message: "\(message): \(reason)",
                          underlying: POSIXErrorCode(rawValue: code).map { POSIXError($0) })
    }
}
