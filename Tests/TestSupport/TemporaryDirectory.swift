public import Foundation

/// A new private directory, `<prefix>-<UUID>`, for one test's files; removed with everything in it
/// by ``remove()``, and at the latest when the last reference to it goes away, so a test that fails,
/// throws or forgets leaves nothing behind in the temporary directory.
///
/// Keep it in a local (or in a rig that the test keeps) for as long as the files are used, and say
/// `defer { directory.remove() }` right after making it: that names the moment of removal and keeps
/// the directory alive until then. A process killed by a signal runs neither, and leaves it.
public final class TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Makes `<base>/<prefix>-<UUID>` with `permissions` (0700: only this user can look in).
    ///
    /// `base` is the system's temporary directory unless given (`/tmp` where a Unix socket path must
    /// stay short, `/dev/shm` for a tmpfs). Throws the file system's error when it cannot be made.
    public init(_ prefix: String, in base: URL = FileManager.default.temporaryDirectory, permissions: Int = 0o700) throws {
        url = base.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false, attributes: [.posixPermissions: permissions])
    }

    /// The directory's path.
    public var path: String { url.path }

    /// Removes the directory and everything in it; nothing happens when it is already gone.
    public func remove() { try? FileManager.default.removeItem(at: url) }

    deinit { remove() }
}
