/// A value type's stored fields behind one reference, copied only when a shared copy changes.
///
/// ``Provider``, ``TokenSet`` and ``OAuthError`` keep their fields in one and show them through
/// `@dynamicMemberLookup`, so each field is declared once. The reference is there because these
/// values travel down chains of async calls: every async frame (allocated per task) holds what its
/// function keeps across a suspension, and a typed throw reserves room for an ``OAuthError`` in
/// every caller's frame. With the fields inline, those frames grow by the size of the fields and a
/// copy retains every string, URL and array in them; measured, a fresh fetch then runs more
/// instructions, a cached token costs more, and concurrent fetches take more memory.
///
/// It and the `dynamicMember` subscripts over it are inlinable, so that a read such as
/// `provider.tokenURL` in another module compiles to a read of the stored field; otherwise each
/// such read goes through a key path the runtime builds the first time (demangling its types),
/// which `authflow token`, a process that reads a few fields once, pays for every field.
@usableFromInline
struct CopyOnWrite<Fields: Sendable>: Sendable {
    @usableFromInline
    final class Box: @unchecked Sendable {   // safe: `fields` changes only in the `_modify` of `subscript`, while this copy is the box's only owner, so no other thread can see it change
        /// Unchecked at run time: a box is changed only through its one owner (`subscript(field:)`'s
        /// `_modify` copies a shared box first), and the compiler checks that owner's accesses
        /// statically, so no two accesses to a box's fields can overlap. The run-time check would
        /// be paid on every field read, since a `_read` access lasts until its caller is done.
        @exclusivity(unchecked) @usableFromInline var fields: Fields
        @usableFromInline init(_ fields: Fields) { self.fields = fields }
    }

    @usableFromInline var box: Box

    init(_ fields: Fields) { box = Box(fields) }

    /// The fields, for reading.
    var fields: Fields { box.fields }

    /// One field, read in place and changed in place (after a copy when another value shares the box).
    @inlinable
    subscript<Value>(field: WritableKeyPath<Fields, Value>) -> Value {
        _read { yield box.fields[keyPath: field] }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            yield &box.fields[keyPath: field]
        }
    }

    /// True when both hold the same box (copies of one value, unchanged since).
    func isIdentical(to other: CopyOnWrite<Fields>) -> Bool { box === other.box }
}
