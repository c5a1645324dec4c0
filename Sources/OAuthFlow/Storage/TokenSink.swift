#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// A file that holds one provider's current access token, rewritten after every refresh, for
/// programs that can only read a token from a file (the Kubernetes projected-token pattern).
///
/// Make one per file and call ``write(_:)`` with each new ``TokenSet`` (``RefreshScheduler``
/// hands them over in ``RefreshScheduler/Event/authorized(_:)``). The file is replaced
/// atomically: a temporary file in the same directory, `fsync`, `rename`, `fsync` of the directory,
/// so a reader sees the old token or the new one, never a part. A token file is never readable by
/// others: a mode with any permission for others is refused. See
/// [RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750#section-2.1) for the header format.
///
/// ```swift
/// let sink = try TokenSink(providerID: "billing-api", path: "/run/billing/token", mode: 0o640, format: .raw)
/// try sink.write(try await flow.tokenSet(for: "billing-api"))
/// ```
public struct TokenSink: Sendable, Hashable, CustomStringConvertible {
    /// What the file holds.
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// The access token alone, without a newline (what a Kubernetes token file holds).
        case raw
        /// One JSON object and a newline: `access_token`, `token_type`, `expires_at` (seconds since
        /// 1970, or null), `scope`.
        case json
        /// `Authorization: Bearer TOKEN` and a newline, for `curl -H @FILE` (bearer tokens only).
        case header
    }

    /// The provider whose tokens go to the file.
    public let providerID: String
    /// The file's absolute path.
    public let path: String
    /// The file's permission bits (at most 0770; never any permission for others).
    public let mode: UInt32
    /// The file's owner (a uid), or nil to keep the writer's.
    public let owner: UInt32?
    /// The file's group (a gid), or nil to keep the writer's.
    public let group: UInt32?
    /// What the file holds.
    public let format: Format

    /// A sink for `providerID`'s tokens at `path`.
    ///
    /// Nothing is written until ``write(_:)``.
    /// - Throws: ``OAuthError`` `.configuration` when `path` is not an absolute file path or `mode`
    ///   gives others any permission or has bits beyond 0777.
    public init(
        providerID: String, path: String, mode: UInt32 = 0o600, owner: UInt32? = nil, group: UInt32? = nil, format: Format = .raw
    ) throws(OAuthError) {
        guard path.hasPrefix("/"), !path.hasSuffix("/"), !path.utf8.contains(0),
              let name = path.split(separator: "/").last, name != ".", name != ".."
        else {
            throw OAuthError(.configuration, providerID: providerID, message: "a token file needs an absolute file path, not \"\(DisplayText.escape(String(path.prefix(256))))\"")
        }
        guard mode & ~0o777 == 0, mode & 0o007 == 0 else {
            throw OAuthError(.configuration, providerID: providerID,
                             message: "a token file may not be accessible by others (mode 0\(String(mode, radix: 8))); use 0600, 0640 or 0660")
        }
        self.providerID = providerID
        self.path = path
        self.mode = mode
        self.owner = owner
        self.group = group
        self.format = format
    }

    /// `TokenSink(PROVIDER -> PATH, mode 0640, raw)`: no token.
    public var description: String {
        "TokenSink(\(providerID) -> \(path), mode 0\(String(mode, radix: 8)), \(format.rawValue))"
    }

    /// The bytes ``write(_:)`` puts in the file for `set`.
    /// - Throws: ``OAuthError`` `.invalidResponse` for the header format when the token is not a
    ///   bearer token (a DPoP-bound one included) or holds bytes a header cannot carry.
    public static func contents(of set: TokenSet, format: Format) throws(OAuthError) -> [UInt8] {
        switch format {
        case .raw:
            return Array(set.accessToken.reveal().utf8)
        case .header:
            // A DPoP-bound token needs a proof made for each request (RFC 9449 §7.1): a header in a
            // file cannot carry one.
            guard !set.isDPoPBound else {
                throw OAuthError(.invalidResponse, providerID: set.providerID, endpoint: .token,
                                 message: "the token is DPoP-bound and needs a proof for each request; a header file cannot carry one (use format raw or json)")
            }
            return Array(("Authorization: " + (try TokenSource.authorizationValue(for: set)) + "\n").utf8)
        case .json:
            let expiry: JSONValue = set.expiresAt.map { .number(String(Int64(max(min($0.timeIntervalSince1970.rounded(), 1e15), -1e15)))) } ?? .null
            return Array((JSONValue.text(orderedMembers: [
                ("access_token", .string(set.accessToken.reveal())),
                ("token_type", .string(set.tokenType)),
                ("expires_at", expiry),
                ("scope", .string(set.scopes.joined(separator: " "))),
            ]) + "\n").utf8)
        }
    }

    /// Replaces the file with `set`'s token, atomically and durably.
    ///
    /// Blocks on the disk (`fsync`); call it from a task that may wait, as a store save does.
    /// - Throws: ``OAuthError`` `.configuration` when `set` is another provider's; `.storage` with
    ///   the path and the system's reason (no directory, no permission to change the owner, disk
    ///   full); what ``contents(of:format:)`` throws. The previous file is left intact on failure.
    public func write(_ set: TokenSet) throws(OAuthError) {
        guard set.providerID == providerID else {
            throw OAuthError(.configuration, providerID: providerID,
                             message: "the token file \(path) is for \"\(providerID)\", not \"\(set.providerID)\"")
        }
        let bytes = try Self.contents(of: set, format: format)
        do throws(SystemError) {
            try AtomicFile.write(bytes, to: path, mode: mode, owner: owner, group: group)
        } catch {
            throw OAuthError(.storage, providerID: providerID,
                             message: "cannot write the token file \(path): \(String(cString: strerror(error.code)))", underlying: error)
        }
    }
}

/// Replaces a file atomically: a temporary file in the same directory (created `O_EXCL`,
/// `O_NOFOLLOW`, mode 0600 until its owner and mode are set), written, `fsync`ed, renamed over the
/// file, and the directory `fsync`ed. The token sinks, the agent's metrics file and
/// ``FileSecretStore/save(_:for:)`` all write through it.
package enum AtomicFile {
    /// The step of a replacement that failed, so a caller can say what went wrong.
    package enum Step: Sendable {
        case create, chown, chmod, write, flush, close, rename, syncDirectory
    }

    /// A failed replacement: the step, its `errno`, and the temporary file's name (already removed).
    package struct Failure: Error {
        package let step: Step
        package let code: Int32
        package let temporary: String
    }

    /// Writes `bytes` to `path` with `mode` (and `owner`/`group` when given).
    /// - Throws: ``SystemError`` with the failing call's `errno`; the temporary file is removed and
    ///   the previous file stays as it was.
    package static func write(_ bytes: [UInt8], to path: String, mode: UInt32, owner: UInt32? = nil, group: UInt32? = nil) throws(SystemError) {
        let slash = path.lastIndex(of: "/")!
        let directoryPath = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        let directory = try FileDescriptor(opening: directoryPath, O_RDONLY | O_DIRECTORY)
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(Failure) in try replace(name, in: directory, with: buffer, mode: mode, owner: owner, group: group) }
        }
        if case .failure(let failure) = result { throw SystemError(code: failure.code) }
    }

    /// Replaces `name` in the open `directory` with `bytes`; the temporary file is
    /// `.<stem>.<random>.tmp` (`stem` defaults to `name`).
    /// - Throws: ``Failure``; the temporary file is removed and the previous file stays as it was.
    ///   A directory that cannot be flushed (`EINVAL`, `ENOTSUP`: not every file system can) is not a failure.
    package static func replace(
        _ name: String, in directory: borrowing FileDescriptor, with bytes: UnsafeRawBufferPointer,
        mode: UInt32, owner: UInt32? = nil, group: UInt32? = nil, stem: String? = nil
    ) throws(Failure) {
        var temporary = ""
        var created: FileDescriptor?
        var lastError = EEXIST
        for _ in 0..<8 {
            temporary = ".\(stem ?? name).\(String(UInt64.random(in: .min ... .max), radix: 16)).tmp"
            do throws(SystemError) {
                created = try FileDescriptor(opening: temporary, in: directory, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
                break
            } catch {
                lastError = error.code
                if lastError != EEXIST { break }
            }
        }
        guard let file = created.take() else { throw Failure(step: .create, code: lastError, temporary: temporary) }
        let failed = { (step: Step, code: Int32) in Failure(step: step, code: code, temporary: temporary) }
        do throws(Failure) {
            if owner != nil || group != nil {
                guard fchown(file.raw, owner ?? UInt32.max, group ?? UInt32.max) == 0 else { throw failed(.chown, errno) }
            }
            // After fchown, which may clear bits; the umask does not apply to fchmod.
            guard fchmod(file.raw, mode_t(mode)) == 0 else { throw failed(.chmod, errno) }
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(file.raw, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { throw failed(.write, count < 0 ? errno : EIO) }
                offset += count
            }
            guard retrying({ fsync(file.raw) }) == 0 else { throw failed(.flush, errno) }
            do throws(SystemError) { try file.close() } catch { throw failed(.close, error.code) }
            guard renameat(directory.raw, temporary, directory.raw, name) == 0 else { throw failed(.rename, errno) }
        } catch {
            unlinkat(directory.raw, temporary, 0)
            throw error
        }
        if retrying({ fsync(directory.raw) }) != 0, errno != EINVAL, errno != ENOTSUP { throw failed(.syncDirectory, errno) }
    }

    private static func retrying(_ call: () -> Int32) -> Int32 {
        while true {
            let result = call()
            if result == 0 || errno != EINTR { return result }
        }
    }
}
