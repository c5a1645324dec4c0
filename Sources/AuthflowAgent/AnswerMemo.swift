import Glibc
import OAuthFlow
import Synchronization

extension AgentServer {
    /// What keeps an answer right: the token set it was made from, and the catalog it was made under.
    struct Reuse: Sendable {
        var token: AuthFlow.TokenStamp
        var catalog: UInt64
        let epoch: Epoch

        /// True while the flow holds the same fresh set and no other catalog has been loaded.
        var isCurrent: Bool { epoch.current == catalog && token.isCurrent }
    }

    /// A counter raised whenever the agent starts serving another catalog (SIGHUP): answers
    /// remembered under the previous one are not given again. Read it before the catalog, and
    /// raise it after the new catalog is in place.
    final class Epoch: Sendable {
        private let value = Atomic<UInt64>(0)
        var current: UInt64 { value.load(ordering: .acquiring) }
        func advance() { value.wrappingAdd(1, ordering: .releasing) }
    }

    /// A loop's remembered answers: at most ``capacity`` request lines, each with the uid it was
    /// answered for. They hold tokens, as the flow's own cache does; one that is no longer current
    /// is dropped when its line comes again, and all that are not current by ``dropStale()``
    /// (when the loop trims its memory after a burst).
    struct Memo {
        static let capacity = 16
        struct Entry {
            var uid: UInt32
            var line: [UInt8]
            var answer: [UInt8]
            var reuse: Reuse
        }
        private(set) var entries: [Entry] = []
        private var next = 0

        /// The remembered answer of the request line in `line` for `uid`, while it is current.
        mutating func answer(_ line: UnsafeRawBufferPointer, uid: UInt32) -> [UInt8]? {
            for index in entries.indices where entries[index].uid == uid && entries[index].line.count == line.count {
                let same = entries[index].line.withUnsafeBytes { memcmp($0.baseAddress!, line.baseAddress!, line.count) == 0 }
                guard same else { continue }
                if entries[index].reuse.isCurrent { return entries[index].answer }
                entries.remove(at: index)
                next = 0
                return nil
            }
            return nil
        }

        /// Remembers `answer` for `line` from `uid`, in place of that line's earlier answer,
        /// else in a free place, else in place of the oldest one kept.
        mutating func keep(_ line: [UInt8], _ answer: [UInt8], _ reuse: Reuse, uid: UInt32) {
            let entry = Entry(uid: uid, line: line, answer: answer, reuse: reuse)
            if let index = entries.firstIndex(where: { $0.uid == uid && $0.line == line }) {
                entries[index] = entry
            } else if entries.count < Self.capacity {
                entries.append(entry)
            } else {
                entries[next] = entry
                next = (next + 1) % Self.capacity
            }
        }

        /// Drops the answers that are no longer current.
        mutating func dropStale() {
            entries.removeAll { !$0.reuse.isCurrent }
            next = 0
        }
    }
}
