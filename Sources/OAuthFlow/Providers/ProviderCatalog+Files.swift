#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

// Reading the catalog and the files it names (secrets) without blocking on a FIFO or reading
// without bound.
extension ProviderCatalog {
    /// Why a file could not be used, phrased to follow its path.
    struct FileProblem: Error {
        var reason: String
        var underlying: (any Error)?
    }

    /// Reads a regular file of at most `limit` bytes.
    ///
    /// The file is opened `O_NONBLOCK | O_CLOEXEC` and `fstat`ed before anything is read: a FIFO,
    /// socket, device or directory is refused at once instead of blocking the open or the read.
    static func readFile(at url: URL, limit: Int) throws(FileProblem) -> Data {
        let file = try openFile(path: url.path)
        var info = stat()
        guard fstat(file.raw, &info) == 0 else { throw FileProblem(reason: "cannot be examined: \(describe(errno))") }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw FileProblem(reason: "is a directory, not a file")
        case S_IFIFO: throw FileProblem(reason: "is a FIFO, not a regular file")
        case S_IFSOCK: throw FileProblem(reason: "is a socket, not a regular file")
        case S_IFCHR, S_IFBLK: throw FileProblem(reason: "is a device, not a regular file")
        default: throw FileProblem(reason: "is not a regular file")
        }
        guard Int(info.st_size) <= limit else { throw FileProblem(reason: "is larger than \(limit >> 10) KiB") }
        // Sized by fstat, not by the limit: zero-filling a limit-sized buffer costs more than
        // reading a small catalog (it is on `authflow token`'s start-up path). One byte more than
        // expected shows a file that grew; the buffer then grows, up to limit + 1.
        var data = [UInt8](repeating: 0, count: min(max(Int(info.st_size), 0), limit) + 1)
        var count = 0
        while count < limit + 1 {
            if count == data.count { data.append(contentsOf: repeatElement(0, count: min(data.count, limit + 1 - data.count))) }
            let read = data.withUnsafeMutableBytes { Glibc.read(file.raw, $0.baseAddress! + count, $0.count - count) }
            if read < 0, errno == EINTR { continue }
            guard read >= 0 else { throw FileProblem(reason: "cannot be read: \(describe(errno))") }
            if read == 0 { break }
            count += read
        }
        // The file may have grown since fstat; keep the bound.
        guard count <= limit else { throw FileProblem(reason: "is larger than \(limit >> 10) KiB") }
        return Data(data[..<count])
    }

    static func describe(_ code: Int32) -> String {
        switch code {
        case EACCES, EPERM: return "permission denied"
        default: return String(cString: strerror(code))
        }
    }

    /// `path` opened for reading (`O_NONBLOCK`: a FIFO without a writer must not hang the open).
    static func openFile(path: String) throws(FileProblem) -> FileDescriptor {
        do throws(SystemError) {
            return try FileDescriptor(opening: path, O_RDONLY | O_NONBLOCK)
        } catch {
            switch error.code {
            case ENOENT: throw FileProblem(reason: "does not exist")
            case ENOTDIR: throw FileProblem(reason: "does not exist (a parent is not a directory)")
            case ENXIO: throw FileProblem(reason: "is not a regular file (a FIFO or socket without a peer)")
            default: throw FileProblem(reason: "cannot be opened: \(ProviderCatalog.describe(error.code))")
            }
        }
    }
}
