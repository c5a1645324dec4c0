import Glibc
@testable import OAuthFlow
import Testing

/// The descriptor owner: closed once when the owner goes, once by `close()`, never by an owner whose
/// descriptor was taken.
///
/// Tests run in parallel and a closed number is soon reused by another test's file, so "closed" is
/// checked as "the number no longer refers to this file": a pipe's inode (unique while the pipe is
/// open) or nothing at all.
@Suite("FileDescriptor: one owner, closed exactly once")
struct FileDescriptorTests {
    /// The file `number` refers to now (device and inode), nil when it is not open.
    private static func identity(_ number: Int32) -> [UInt64]? {
        var info = stat()
        guard fstat(number, &info) == 0 else { return nil }
        return [UInt64(info.st_dev), UInt64(info.st_ino)]
    }

    @Test("the owner closes its descriptor when it goes")
    func closesWhenTheOwnerGoes() throws {
        let pipe = try FileDescriptor.pipe()
        let file = try #require(Self.identity(pipe.write.raw))
        var number: Int32 = -1
        do {
            let owner = try FileDescriptor(returnedBy: dup(pipe.write.raw))
            number = owner.raw
            #expect(Self.identity(number) == file)
        }
        #expect(number >= 0)
        #expect(Self.identity(number) != file)
        #expect(Self.identity(pipe.write.raw) == file)   // the other owner's descriptor is untouched
    }

    @Test("close() closes at once and reports success")
    func closeClosesNow() throws {
        let pipe = try FileDescriptor.pipe()
        let file = try #require(Self.identity(pipe.read.raw))
        let owner = try FileDescriptor(returnedBy: dup(pipe.read.raw))
        let number = owner.raw
        try owner.close()
        #expect(Self.identity(number) != file)
        #expect(Self.identity(pipe.read.raw) == file)
    }

    @Test("take() ends the ownership without closing: the new owner's close is the only one")
    func takeDoesNotClose() throws {
        let pipe = try FileDescriptor.pipe()
        let file = try #require(Self.identity(pipe.read.raw))
        let owner = try FileDescriptor(returnedBy: dup(pipe.read.raw))
        let number = owner.take()
        // The owner is gone and the descriptor is still open, on the same pipe.
        #expect(Self.identity(number) == file)
        #expect(Glibc.close(number) == 0)   // EBADF here would mean the owner had closed it too
    }

    @Test("a shared owner closes with its last reference")
    func sharedClosesWithTheLastReference() throws {
        let pipe = try FileDescriptor.pipe()
        let file = try #require(Self.identity(pipe.read.raw))
        var held = [SharedFileDescriptor(try FileDescriptor(returnedBy: dup(pipe.read.raw)))]
        var other: SharedFileDescriptor? = held[0]
        let number = held[0].raw
        held.removeAll()
        #expect(Self.identity(number) == file)
        other = nil
        #expect(other == nil)
        #expect(Self.identity(number) != file)
    }

    @Test("opened descriptors are close-on-exec; pipe flags apply to both ends")
    func flags() throws {
        let file = try FileDescriptor(opening: "/dev/null", O_RDONLY)
        #expect(fcntl(file.raw, F_GETFD) & FD_CLOEXEC != 0)
        let pipe = try FileDescriptor.pipe(O_NONBLOCK)
        for end in [pipe.read.raw, pipe.write.raw] {
            #expect(fcntl(end, F_GETFD) & FD_CLOEXEC != 0)
            #expect(fcntl(end, F_GETFL) & O_NONBLOCK != 0)
        }
        let blocking = try FileDescriptor.pipe()
        #expect(fcntl(blocking.read.raw, F_GETFL) & O_NONBLOCK == 0)
    }

    @Test("a failed open throws its errno and owns nothing")
    func failedOpen() {
        #expect(throws: SystemError(code: ENOENT)) {
            _ = try FileDescriptor(opening: "/nonexistent-oauthflow-test/file", O_RDONLY)
        }
        #expect(throws: SystemError(code: EBADF)) {
            errno = EBADF
            _ = try FileDescriptor(returnedBy: -1)
        }
    }
}
