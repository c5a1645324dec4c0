#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

// The store's lock: queued in process, then an advisory flock(2) on `<key>.lock` across processes.
extension FileSecretStore {
    /// Runs `body` holding `key`'s lock against other tasks of this process and other processes.
    ///
    /// Tasks in this process queue in order; then the store takes an exclusive `flock(2)` on
    /// `<key>.lock`, polling without blocking a thread until it is free or ``lockTimeout`` passes.
    /// The lock is released when `body` returns or throws. It is advisory: it excludes only
    /// processes that take the same lock (every ``FileSecretStore``, and `flock(1)`).
    /// - Throws: ``OAuthError`` `.timedOut` naming the key when another process holds the lock past
    ///   ``lockTimeout`` (retry later, or find the holder with `lslocks`); `.cancelled` when the
    ///   task is cancelled before it holds the lock (`body` does not run then); `.configuration` for an invalid key; `.storage` when the
    ///   lock file cannot be opened; otherwise what `body` throws.
    public func withExclusiveAccess<T: Sendable>(
        to key: String, _ body: @Sendable () async throws(OAuthError) -> T
    ) async throws(OAuthError) -> T {
        try validate(key)
        let name = lockName(key)
        return try await locks.withLock(key) { () async throws(OAuthError) -> T in
            let lock = try await self.lockFile(key)
            // Marks the lock as held by this task, so a `delete` inside `body` does not wait for itself.
            let result = await Self.$heldLocks.withValue(Self.heldLocks.union([name])) { () async -> Result<T, OAuthError> in
                do throws(OAuthError) { return .success(try await body()) } catch { return .failure(error) }
            }
            try? lock.close()  // closing the descriptor releases the flock
            return try result.get()
        }
    }

    /// The locks the current task holds, as `<directory>/<key>` (a task-local: tasks `body` starts inherit it).
    @TaskLocal static var heldLocks: Set<String> = []

    func lockName(_ key: String) -> String { "\(path)/\(key)" }

    /// Opens `<key>.lock` and takes an exclusive flock on it, held until the descriptor closes.
    private func lockFile(_ key: String) async throws(OAuthError) -> FileDescriptor {
        let file = "\(path)/\(key).lock"
        let fd: FileDescriptor
        do throws(SystemError) {
            // Read-only is enough for flock(2), and opens a lock file whatever its write bits.
            fd = try FileDescriptor(opening: "\(key).lock", in: directoryFD, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, mode: 0o600)
        } catch {
            if error.code == ELOOP { throw Self.failure(key, "refusing the lock file \"\(file)\": it is a symbolic link; delete it") }
            throw Self.failure(key, "cannot open the lock file \"\(file)\"", errno: error.code)
        }
        var info = stat()
        guard fstat(fd.raw, &info) == 0 else { throw Self.failure(key, "cannot stat the lock file \"\(file)\"", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw Self.failure(key, "refusing the lock file \"\(file)\": it is not a regular file; delete it")
        }
        if info.st_uid == geteuid(), info.st_mode & 0o777 != 0o600 {
            fchmod(fd.raw, 0o600)  // a narrow umask or flock(1) may have created it otherwise; it holds no data
        }

        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: lockTimeout)
        var step = Duration.milliseconds(5)
        while true {
            // A task cancelled while queued behind other tasks stops here, before the body runs.
            guard !Task.isCancelled else {
                throw OAuthError(.cancelled, providerID: key, message: "cancelled while waiting for the lock on \"\(file)\"")
            }
            if flock(fd.raw, LOCK_EX | LOCK_NB) == 0 { return fd }
            let code = errno
            if code == EINTR { continue }
            guard code == EWOULDBLOCK else { throw Self.failure(key, "cannot lock \"\(file)\"", errno: code) }
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else {
                throw OAuthError(.timedOut, providerID: key,
                                 message: "gave up after \(lockTimeout) waiting for the lock on \"\(file)\"; another process holds it")
            }
            do {
                try await Task.sleep(for: min(step, remaining))
            } catch {
                throw OAuthError(.cancelled, providerID: key,
                                 message: "cancelled while waiting for the lock on \"\(file)\"", underlying: error)
            }
            step = min(step * 2, .milliseconds(50))
        }
    }
}
