#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// Reads key and certificate files for client authentication, with the checks a private key needs.
///
/// A private key file must be a regular file (a symbolic link to one is followed) with no group
/// or other permission bits (`chmod 600`, or a systemd credential), at most 64 KiB. A certificate
/// or CA file is public and only needs to be a regular file. Failures are ``Problem``s whose reason
/// follows the file's path ("is readable by group or others (mode 0644); …"); they never hold the
/// file's contents.
enum CredentialFile {
    /// The largest key, certificate chain or CA bundle read.
    static let maximumBytes = 256 * 1024

    /// Why a file could not be used.
    struct Problem: Error {
        let reason: String
    }

    /// The bytes of the file at `path`; with `isPrivate`, refused unless only its owner may read it.
    static func read(_ path: String, isPrivate: Bool) throws(Problem) -> [UInt8] {
        let file = try openForReading(path)
        var info = stat()
        guard fstat(file.raw, &info) == 0 else { throw Problem(reason: "cannot be examined: \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Problem(reason: "is not a regular file") }
        let permissions = info.st_mode & 0o777
        if isPrivate, permissions & 0o077 != 0 {
            throw Problem(reason: "is readable or writable by group or others (mode \(octal(permissions))); "
                + "a private key must be mode 0600 or 0400 (chmod 600 it)")
        }
        guard Int(info.st_size) <= maximumBytes else { throw Problem(reason: "is larger than \(maximumBytes >> 10) KiB") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(file.raw, $0.baseAddress! + count, $0.count - count) }
            if read < 0, errno == EINTR { continue }
            guard read >= 0 else { throw Problem(reason: "cannot be read: \(String(cString: strerror(errno)))") }
            if read == 0 { break }
            count += read
        }
        guard count <= Int(info.st_size) else {
            wipe(&bytes)
            throw Problem(reason: "changed while it was read")
        }
        let contents = Array(bytes[..<count])
        wipe(&bytes)
        guard !contents.isEmpty else { throw Problem(reason: "is empty") }
        return contents
    }

    /// The JSON object in the file at `path` (a service-account key, an `external_account` file),
    /// read as ``read(_:isPrivate:)`` reads it, its bytes wiped once parsed; `failure` builds the
    /// error of a member read from it later.
    /// - Throws: ``OAuthError`` `.configuration`: `label` followed by why the file cannot be read,
    ///   or that it is not a JSON object; never its contents.
    static func jsonObject(
        _ path: String, isPrivate: Bool, label: String, failure: @escaping (String) -> OAuthError
    ) throws(OAuthError) -> JSONObject {
        var bytes: [UInt8]
        do {
            bytes = try read(path, isPrivate: isPrivate)
        } catch {
            throw OAuthError(.configuration, message: "\(label) \(error.reason)")
        }
        defer { wipe(&bytes) }
        do {
            return try JSONObject(try JSONValue.parse(Data(bytes)), what: label, failure: failure)
        } catch {
            throw OAuthError(.configuration, message: "\(label) is not a JSON object (\(error.message ?? "unreadable"))")
        }
    }

    /// Opens `path` read-only and non-blocking (a FIFO never blocks the open).
    private static func openForReading(_ path: String) throws(Problem) -> FileDescriptor {
        do {
            return try FileDescriptor(opening: path, O_RDONLY | O_NONBLOCK)
        } catch {
            switch error.code {
            case ENOENT: throw Problem(reason: "does not exist")
            case ENOTDIR: throw Problem(reason: "does not exist (a parent is not a directory)")
            case EACCES, EPERM: throw Problem(reason: "cannot be opened: permission denied")
            case ENXIO: throw Problem(reason: "is not a regular file (a FIFO or socket without a peer)")
            case let code: throw Problem(reason: "cannot be opened: \(String(cString: strerror(code)))")
            }
        }
    }

    /// `0644`: permission bits as `chmod` takes them.
    static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// PEM (RFC 7468) blocks: the label and the decoded DER of each `-----BEGIN label-----` block.
struct PEMBlock {
    /// `PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE KEY`, `CERTIFICATE`, …
    let label: String
    /// True when the block has RFC 1421 headers saying it is encrypted (`Proc-Type: 4,ENCRYPTED`).
    let isLegacyEncrypted: Bool
    /// The decoded contents.
    var der: [UInt8]

    /// Every block in `text`, in order; text outside blocks is ignored (as OpenSSL does).
    /// - Throws: ``CredentialFile/Problem`` for a block without its END line or with invalid base64.
    static func parse(_ bytes: [UInt8]) throws(CredentialFile.Problem) -> [PEMBlock] {
        var blocks: [PEMBlock] = []
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        var index = 0
        let begin = Array("-----BEGIN ".utf8), end = Array("-----END ".utf8), dashes = Array("-----".utf8)
        while index < lines.count {
            let line = Array(lines[index])
            index += 1
            guard line.starts(with: begin), line.count > begin.count + dashes.count, Array(line.suffix(dashes.count)) == dashes else {
                continue
            }
            let label = String(decoding: line[begin.count..<(line.count - dashes.count)], as: UTF8.self)
            let closing = end + Array(label.utf8) + dashes
            var body: [UInt8] = []
            var encrypted = false
            var closed = false
            while index < lines.count {
                let inner = Array(lines[index])
                index += 1
                if inner == closing { closed = true; break }
                if inner.contains(UInt8(ascii: ":")) {  // an RFC 1421 header (Proc-Type, DEK-Info)
                    if ASCIIText.firstRange(of: "ENCRYPTED", in: Substring(String(decoding: inner, as: UTF8.self))) != nil { encrypted = true }
                    continue
                }
                body += inner.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
            }
            guard closed else { throw CredentialFile.Problem(reason: "has a PEM block (\(label)) without its END line") }
            guard let der = Data(base64Encoded: Data(body)) else {
                wipe(&body)
                throw CredentialFile.Problem(reason: "has a PEM block (\(label)) that is not valid base64")
            }
            wipe(&body)
            blocks.append(PEMBlock(label: label, isLegacyEncrypted: encrypted, der: Array(der)))
        }
        return blocks
    }
}
