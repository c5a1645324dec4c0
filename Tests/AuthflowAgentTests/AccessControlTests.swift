import Foundation
@testable import AuthflowAgent
import OAuthFlow
import TestSupport
import Testing

/// `agentAllow` lists and the socket's mode (Documentation/Agent.md, "Access control").
@Suite("The agent's access control")
struct AccessControlTests {
    @Test("agentAllow: uids and groups resolved at load; the socket mode follows (0600, 0660 with the group, 0666); unknown names stop the load")
    func accessLists() throws {
        let directory = try TemporaryDirectory("authflow-agent-tests")
        defer { directory.remove() }
        let catalog = directory.url.appendingPathComponent("providers.json")
        func load(_ lists: [String: String]) throws(AgentError) -> AgentAccess {
            let entries = lists.keys.sorted().map { id in
                #"{ "id": "\#(id)", "clientID": "c", "tokenURL": "http://127.0.0.1:9/token", "agentAllow": \#(lists[id]!) }"#
            }
            try? Data(("[" + entries.joined(separator: ",") + "]").utf8).write(to: catalog)
            return try AgentAccess.load(catalog, agentUID: 1000)
        }
        let none = try load([:])
        #expect(none.socketMode.mode == 0o600 && none.socketMode.group == nil)
        #expect(none.allows(Peer(pid: 1, uid: 1000, gid: 1000), "a"))
        #expect(!none.allows(Peer(pid: 1, uid: 0, gid: 0), "a"), "not even root, unless listed")

        let group = try load(["a": #"["group:nogroup"]"#, "b": "[]"])
        #expect(group.socketMode.mode == 0o660 && group.socketMode.group == 65534)
        #expect(group.allows(Peer(pid: 1, uid: 4242, gid: 65534), "a"))
        #expect(!group.allows(Peer(pid: 1, uid: 4242, gid: 65534), "b"))
        #expect(!group.allows(Peer(pid: 1, uid: 4242, gid: 4242), "a"))
        #expect(group.allows(Peer(pid: 1, uid: 4242, gid: 4242, groups: [10, 65534]), "a"), "the group among its supplementary groups")
        #expect(!group.allows(Peer(pid: 1, uid: 4242, gid: 4242, groups: [10, 65534]), "b"))

        let users = try load(["a": #"["uid:nobody", "gid:65534"]"#])
        #expect(users.socketMode.mode == 0o666)
        #expect(users.allows(Peer(pid: 1, uid: 65534, gid: 1), "a"))

        for bad in [#"["uid:no-such-user-\#(UUID().uuidString.prefix(6))"]"#, #"["group:no-such-group-x1"]"#, #"["everyone"]"#, #"["host:x"]"#, #""uid:1""#, "[1]"] {
            #expect(throws: AgentError.self, "\(bad)") { try load(["a": bad]) }
        }
    }
}
