#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow

/// Who may ask the agent for which provider's token.
///
/// The agent's own uid may ask for every provider. A provider's `"agentAllow"` catalog entry opens
/// it to more peers: `"uid:1001"` or `"uid:alice"` (a user), `"group:billing"` or `"gid:1200"` (a
/// group: its members as `/etc/group` (or NSS) lists them, and every process whose effective gid
/// or one of whose supplementary groups (`SO_PEERGROUPS`) is that group). Names are resolved when
/// the catalog is loaded (at start and on SIGHUP), so no
/// name-service lookup runs while a client waits. Peers are identified by `SO_PEERCRED`.
struct AgentAccess: Sendable, Equatable {
    /// The uid the agent runs as.
    var agentUID: UInt32
    /// Extra uids per provider (allowed users and the members of allowed groups).
    var uids: [String: Set<UInt32>] = [:]
    /// Allowed effective gids per provider.
    var gids: [String: Set<UInt32>] = [:]
    /// True when an entry names a user (so the socket must be open to every uid).
    var namesUsers = false

    /// Whether `peer` may have `provider`'s token: the agent's uid, an allowed uid, or an allowed
    /// group as the peer's effective gid or among its supplementary groups.
    func allows(_ peer: Peer, _ provider: String) -> Bool {
        if peer.uid == agentUID || uids[provider]?.contains(peer.uid) == true { return true }
        guard let allowed = gids[provider] else { return false }
        return allowed.contains(peer.gid) || peer.groups.contains(where: allowed.contains)
    }

    /// Whether `peer` may ask anything at all (the metrics are the agent's uid's only).
    func isOwner(_ peer: Peer) -> Bool { peer.uid == agentUID }

    /// The socket file's mode and group: 0600 when only the agent's uid is served; 0660 and the
    /// group when one group is allowed; 0666 when users or several groups are (then
    /// `SO_PEERCRED` alone admits or refuses).
    var socketMode: (mode: mode_t, group: gid_t?) {
        let groups = gids.values.reduce(into: Set<UInt32>()) { $0.formUnion($1) }
        if namesUsers || groups.count > 1 { return (0o666, nil) }
        if let group = groups.first { return (0o660, group) }
        return (0o600, nil)
    }

    /// Reads the `agentAllow` lists of the catalog at `url`.
    /// - Throws: a message naming the provider and the entry that is not understood or names
    ///   nobody known.
    static func load(_ url: URL, agentUID: UInt32) throws(AgentError) -> AgentAccess {
        var access = AgentAccess(agentUID: agentUID)
        let root: JSONValue
        do {
            root = try JSONValue.parse(try Data(contentsOf: url))
        } catch {
            throw .data("cannot read the agentAllow lists of \(url.path)")
        }
        let entries = root.arrayValue ?? root["providers"]?.arrayValue ?? []
        for entry in entries {
            guard let id = entry["id"]?.stringValue, let list = entry["agentAllow"] else { continue }
            guard let items = list.arrayValue else { throw .data("\(url.path): provider \"\(id)\": agentAllow must be an array of strings") }
            for item in items {
                guard let text = item.stringValue else { throw .data("\(url.path): provider \"\(id)\": agentAllow must be an array of strings") }
                let pair = text.split(separator: ":", maxSplits: 1).map(String.init)
                let shown = DisplayText.escape(String(text.prefix(64)))
                guard pair.count == 2 else {
                    throw .data("\(url.path): provider \"\(id)\": agentAllow entry \"\(shown)\" must be uid:USER or group:GROUP")
                }
                switch pair[0] {
                case "uid", "user":
                    guard let uid = userID(pair[1]) else { throw .data("\(url.path): provider \"\(id)\": agentAllow: no user \"\(shown)\"") }
                    access.uids[id, default: []].insert(uid)
                    access.namesUsers = true
                case "group", "gid":
                    guard let (gid, members) = group(pair[1]) else {
                        throw .data("\(url.path): provider \"\(id)\": agentAllow: no group \"\(shown)\"")
                    }
                    access.gids[id, default: []].insert(gid)
                    access.uids[id, default: []].formUnion(members)
                default:
                    throw .data("\(url.path): provider \"\(id)\": agentAllow entry \"\(shown)\" must start with uid: or group:")
                }
            }
        }
        return access
    }

    /// A user's uid from a number or a name.
    static func userID(_ text: String) -> UInt32? {
        if let number = UInt32(text) { return number }
        guard let entry = getpwnam(text) else { return nil }
        return entry.pointee.pw_uid
    }

    /// A group's gid and its listed members' uids, from a number or a name.
    static func group(_ text: String) -> (UInt32, Set<UInt32>)? {
        let entry = UInt32(text).flatMap { getgrgid($0) } ?? getgrnam(text)
        guard let entry else { return UInt32(text).map { ($0, []) } }
        var members: Set<UInt32> = []
        var cursor = entry.pointee.gr_mem
        var names: [String] = []
        while let current = cursor, let name = current.pointee {
            names.append(String(cString: name))
            cursor = current + 1
        }
        let gid = entry.pointee.gr_gid
        for name in names { if let uid = getpwnam(name)?.pointee.pw_uid { members.insert(uid) } }
        return (gid, members)
    }
}
