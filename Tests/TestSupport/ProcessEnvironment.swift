import Glibc
import Synchronization

/// Sets variables of this process's environment while other threads may be reading it.
///
/// `setenv` is unsafe next to a concurrent `getenv`: adding a variable reallocates the array that
/// `environ` points to and frees the old one, which a reader (libcurl looking up `HTTPS_PROXY` for
/// another test's transfer) may still be walking. Here the array is copied once into one of ours,
/// with room to spare, and `environ` is pointed at it with a single pointer store; from then on a
/// variable is set by storing a new `NAME=value` string into its slot (never freed, never moved),
/// so a reader sees the old value or the new one, nothing in between.
///
/// There is no unset: ``set(_:to:)`` with nil stores `NAME=` (empty), which libcurl treats as
/// unset (`curl_getenv` returns NULL for an empty value).
public enum ProcessEnvironment {
    private struct Table: @unchecked Sendable {   // safe: used only under `table`'s lock
        var slots: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
        var capacity: Int
        var count: Int
        var index: [String: Int]
    }
    private static let table = Mutex<Table?>(nil)
    private static let spare = 64

    /// The address of the C variable `environ`.
    private static var environPointer: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?> {
        guard let symbol = dlsym(nil, "environ") else { fatalError("no environ symbol") }
        return symbol.assumingMemoryBound(to: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?.self)
    }

    /// The current value of `name` (`getenv`).
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Sets `name` to `value` (nil: the empty value) for this process and the children it starts.
    public static func set(_ name: String, to value: String?) {
        let entry = strdup("\(name)=\(value ?? "")")
        table.withLock { table in
            let environ = environPointer
            if table == nil || environ.pointee != table?.slots {
                table = install(environ)
            }
            if let slot = table!.index[name] {
                table!.slots[slot] = entry
            } else {
                precondition(table!.count < table!.capacity, "ProcessEnvironment: no spare slot left")
                table!.slots[table!.count] = entry   // the slot after it stays NULL: the array stays terminated
                table!.index[name] = table!.count
                table!.count += 1
            }
        }
    }

    /// Copies the current environment into a new array with spare slots and points `environ` at it.
    private static func install(_ environ: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Table {
        var count = 0
        if let current = environ.pointee { while current[count] != nil { count += 1 } }
        let capacity = count + spare
        let slots = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: capacity + 1)   // never freed: readers may hold it
        slots.initialize(repeating: nil, count: capacity + 1)
        var index: [String: Int] = [:]
        for position in 0..<count {
            guard let entry = environ.pointee?[position] else { continue }
            slots[position] = entry
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "="), index[String(text[..<equals])] == nil {
                index[String(text[..<equals])] = position
            }
        }
        environ.pointee = slots
        return Table(slots: slots, capacity: capacity, count: count, index: index)
    }

    /// Runs `body` with `variables` set, then sets each back to the value it had (or empty).
    public static func with<T>(_ variables: [String: String?], _ body: () async throws -> T) async rethrows -> T {
        let saved = variables.keys.map { ($0, value($0)) }
        for (name, value) in variables { set(name, to: value) }
        defer { for (name, value) in saved { set(name, to: value) } }
        return try await body()
    }
}
