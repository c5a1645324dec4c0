import Glibc

/// Why a system call failed: the `errno` it left.
package struct SystemError: Error, Sendable, Equatable {
    /// The `errno` value (`ENOENT`, `EACCES`, …).
    package let code: Int32

    /// The error `code`.
    package init(code: Int32) { self.code = code }
}

/// Owns one open file descriptor and closes it exactly once.
///
/// The descriptor is closed when its owner goes (`deinit`), or earlier with ``close()`` where the
/// result of `close(2)` matters (a file just written) or the moment does (a lock to release).
/// ``take()`` ends the ownership without closing, for a descriptor handed to an owner outside Swift
/// (`fdopendir`, whose `closedir` closes it). Functions that use a descriptor take its owner
/// `borrowing`; ``raw`` goes to the system call and is never kept past the owner.
/// ``SharedFileDescriptor`` holds one where a reference is needed: an array element, a value handed
/// from one thread to another.
package struct FileDescriptor: ~Copyable, Sendable {
    /// The descriptor's number, for the system call at hand; valid while this owner lives.
    package let raw: Int32

    /// Owns `raw`, what a system call that makes a descriptor returned.
    /// - Throws: ``SystemError`` with the current `errno` when `raw` is negative (the call failed).
    package init(returnedBy raw: Int32) throws(SystemError) {
        guard raw >= 0 else { throw SystemError(code: errno) }
        self.raw = raw
    }

    /// Opens `path` with `open(2)`; `O_CLOEXEC` is always added to `flags`.
    /// - Throws: ``SystemError`` with `open`'s `errno`.
    package init(opening path: String, _ flags: Int32, mode: UInt32 = 0) throws(SystemError) {
        try self.init(returnedBy: Glibc.open(path, flags | O_CLOEXEC, mode_t(mode)))
    }

    /// Opens `name` relative to `directory` with `openat(2)`; `O_CLOEXEC` is always added to `flags`.
    /// - Throws: ``SystemError`` with `openat`'s `errno`.
    package init(opening name: String, in directory: borrowing FileDescriptor, _ flags: Int32, mode: UInt32 = 0) throws(SystemError) {
        try self.init(returnedBy: openat(directory.raw, name, flags | O_CLOEXEC, mode_t(mode)))
    }

    /// The two ends of a pipe.
    package struct Pipe: ~Copyable, Sendable {
        /// The end that reads.
        package let read: FileDescriptor
        /// The end that writes.
        package let write: FileDescriptor
    }

    /// A new pipe (`pipe(2)`), both ends close-on-exec, with `statusFlags` (such as `O_NONBLOCK`) set on both.
    /// - Throws: ``SystemError`` with `pipe`'s `errno`.
    package static func pipe(_ statusFlags: Int32 = 0) throws(SystemError) -> Pipe {
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { throw SystemError(code: errno) }
        let pipe = Pipe(read: try FileDescriptor(returnedBy: ends[0]), write: try FileDescriptor(returnedBy: ends[1]))
        for end in [pipe.read.raw, pipe.write.raw] {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            let flags = fcntl(end, F_GETFL)
            if statusFlags != 0, flags >= 0 { _ = fcntl(end, F_SETFL, flags | statusFlags) }
        }
        return pipe
    }

    deinit { _ = Glibc.close(raw) }

    /// Closes the descriptor now; the owner is used up.
    /// - Throws: ``SystemError`` with `close`'s `errno` (`EIO`: written data may be lost). The
    ///   descriptor is closed either way; it is never closed twice.
    package consuming func close() throws(SystemError) {
        let raw = self.raw
        discard self
        guard Glibc.close(raw) == 0 else { throw SystemError(code: errno) }
    }

    /// Ends the ownership without closing and returns the number, for the owner that closes it now.
    package consuming func take() -> Int32 {
        let raw = self.raw
        discard self
        return raw
    }
}

/// A ``FileDescriptor`` held by reference: closed when the last reference goes.
///
/// For the places a `~Copyable` owner cannot go: an array (the loopback receiver's listening sockets
/// and connections), a value handed from one thread to another.
package final class SharedFileDescriptor: Sendable {
    /// The owner.
    package let descriptor: FileDescriptor

    /// Holds `descriptor` from now on.
    package init(_ descriptor: consuming FileDescriptor) { self.descriptor = descriptor }

    /// The descriptor's number, for the system call at hand; valid while this object lives.
    package var raw: Int32 { descriptor.raw }
}
