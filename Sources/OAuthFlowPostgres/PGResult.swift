internal import CLibPQ
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Owns one `PGresult`; clears it exactly once.
final class PGResult {
    private let pointer: OpaquePointer
    private let lib: LibPQ

    init(_ pointer: OpaquePointer, lib: LibPQ) {
        self.pointer = pointer
        self.lib = lib
    }

    deinit { lib.call { $0.clear(pointer) } }

    var status: ExecStatusType { lib.call { $0.resultStatus(pointer) } }
    var rowCount: Int { Int(lib.call { $0.ntuples(pointer) }) }

    /// The raw (binary-format) value; nil for SQL NULL or a cell that does not exist.
    func bytes(_ row: Int, _ column: Int) -> Data? {
        lib.call { pq in
            guard row < Int(pq.ntuples(pointer)), column < Int(pq.nfields(pointer)),
                  pq.getisnull(pointer, Int32(row), Int32(column)) == 0,
                  let value = pq.getvalue(pointer, Int32(row), Int32(column)) else { return nil }
            let length = Int(pq.getlength(pointer, Int32(row), Int32(column)))
            return Data(bytes: value, count: max(0, length))
        }
    }

    func text(_ row: Int, _ column: Int) -> String? { bytes(row, column).map { String(decoding: $0, as: UTF8.self) } }

    /// A binary `int8`, `int4` or `int2` as big-endian bytes.
    func integer(_ row: Int, _ column: Int) -> Int64? {
        guard let data = bytes(row, column), [2, 4, 8].contains(data.count) else { return nil }
        var value: Int64 = data.first.map { $0 & 0x80 != 0 ? -1 : 0 } ?? 0
        for byte in data { value = (value << 8) | Int64(byte) }
        return value
    }

    func bool(_ row: Int, _ column: Int) -> Bool? { bytes(row, column).flatMap { $0.count == 1 ? $0[$0.startIndex] != 0 : nil } }

    func field(_ code: UInt8) -> String? { lib.call { $0.resultErrorField(pointer, Int32(code)).map { String(cString: $0) } } }
}
