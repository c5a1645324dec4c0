import Glibc

/// Who is at the other end of a Unix socket connection, as the kernel recorded it when the peer
/// connected (`SO_PEERCRED`): not something the peer can claim.
package struct Peer: Sendable, Equatable, CustomStringConvertible {
    /// The peer's process id at connect time.
    var pid: Int32
    /// The peer's effective user id.
    var uid: UInt32
    /// The peer's effective group id.
    var gid: UInt32
    /// The peer's supplementary groups when it connected (`SO_PEERGROUPS`); read only for a peer
    /// of another uid than the agent's (the agent's own uid may ask for everything anyway).
    var groups: [UInt32] = []

    /// `uid 1001 gid 1001 pid 4242`.
    package var description: String { "uid \(uid) gid \(gid) pid \(pid)" }

    /// The agent's own uid.
    static let ownUID = geteuid()
    /// `SO_PEERGROUPS` (Linux 4.13; `<asm-generic/socket.h>`, which Swift's Glibc module does not show).
    static let peerGroupsOption: Int32 = 59

    /// The credentials of `fd`'s peer; nil when the kernel gives none (not a Unix socket).
    static func of(_ fd: Int32) -> Peer? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }: three 32-bit fields, no padding.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, length == 12 else { return nil }
        var peer = Peer(pid: credentials.0, uid: credentials.1, gid: credentials.2)
        if peer.uid != ownUID { peer.groups = supplementaryGroups(fd) }
        return peer
    }

    /// The supplementary groups the kernel recorded for `fd`'s peer at connect time (at most 1,024;
    /// none on a kernel without `SO_PEERGROUPS`).
    static func supplementaryGroups(_ fd: Int32) -> [UInt32] {
        var groups = [UInt32](repeating: 0, count: 64)
        for _ in 0..<2 {
            var length = socklen_t(groups.count * 4)
            if getsockopt(fd, SOL_SOCKET, peerGroupsOption, &groups, &length) == 0 { return Array(groups.prefix(Int(length) / 4)) }
            // ERANGE: the buffer was too small; length says how much is needed.
            guard errno == ERANGE, Int(length) / 4 > groups.count, Int(length) / 4 <= 1024 else { return [] }
            groups = [UInt32](repeating: 0, count: Int(length) / 4)
        }
        return []
    }
}
