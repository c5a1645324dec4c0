/// A value type's stored fields behind one reference, copied only when a shared copy changes.
///
/// ``Provider``, ``TokenSet`` and ``OAuthError`` keep their fields in one: each travels down chains
/// of async calls, and every async frame (allocated per task) holds what its function keeps across
/// a suspension. Eight bytes there instead of 120–260, and one retain per copy instead of one per
/// string, URL and array.
struct CopyOnWrite<Fields: Sendable>: Sendable {
    private final class Box: @unchecked Sendable {   // safe: `fields` changes only in `update`, while this copy is the box's only owner, so no other thread can see it change
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    init(_ fields: Fields) { box = Box(fields) }

    /// The fields, for reading.
    var fields: Fields { box.fields }

    /// Changes the fields, copying them first when another value shares them.
    mutating func update(_ change: (inout Fields) -> Void) {
        if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
        change(&box.fields)
    }

    /// True when both hold the same box (copies of one value, unchanged since).
    func isIdentical(to other: CopyOnWrite<Fields>) -> Bool { box === other.box }
}
