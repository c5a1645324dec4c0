internal import COpenSSL
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// SHA-2 digests over the system's libcrypto.
enum Digest {
    /// SHA-256 of `data`.
    static func sha256(_ data: [UInt8]) throws(OAuthError) -> [UInt8] {
        try LibCrypto.require()
        var digest = [UInt8](repeating: 0, count: 32)
        let ok = data.withUnsafeBytes { input in
            digest.withUnsafeMutableBytes { sha256(input, into: $0) }
        }
        guard ok else { throw OAuthError(.crypto, message: "SHA256 failed: \(OpenSSLError.last())") }
        return digest
    }

    /// SHA-256 of `data` into the first 32 bytes of `out` (libcrypto's one-shot SHA-256, no EVP
    /// context to allocate); false when libcrypto failed or cannot be loaded.
    static func sha256(_ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(out.count >= 32)
        guard let api = LibCrypto.loaded else { return false }
        var context = SHA256_CTX()
        defer { withUnsafeMutableBytes(of: &context) { c_oauthflow_wipe($0.baseAddress, $0.count) } }
        return api.pointee.SHA256_Init(&context) == 1 && api.pointee.SHA256_Update(&context, data.baseAddress, data.count) == 1
            && api.pointee.SHA256_Final(out.baseAddress!.assumingMemoryBound(to: UInt8.self), &context) == 1
    }

    /// The digest of `data` with one of the shared, pre-fetched hash algorithms (`EVP_Digest`).
    static func hash(_ data: [UInt8], with algorithm: MessageDigest) throws(OAuthError) -> [UInt8] {
        try LibCrypto.require()
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard libcrypto.pointee.EVP_Digest(data, data.count, &digest, &length, algorithm.pointer, nil) == 1 else {
            throw OAuthError(.crypto, message: "\(algorithm.name) failed: \(OpenSSLError.last())")
        }
        return Array(digest.prefix(Int(length)))
    }
}

enum SecureRandom {
    /// `count` bytes from the system CSPRNG (see ``fill(_:)``).
    static func bytes(_ count: Int) throws(OAuthError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard bytes.withUnsafeMutableBytes(tryFill) else { throw failure() }
        return bytes
    }

    /// Fills `buffer` from the kernel's CSPRNG (`getrandom(2)`, what OpenSSL seeds its own
    /// generator from): one system call, no lock, fork-safe, no libcrypto. Falls back to OpenSSL's
    /// `RAND_bytes` where `getrandom` is missing.
    /// - Throws: ``OAuthError`` `.crypto` when neither could deliver.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(OAuthError) {
        guard tryFill(buffer) else { throw failure() }
    }

    private static func tryFill(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return true }
        if c_oauthflow_getrandom(base, buffer.count) == 0 { return true }
        guard let api = LibCrypto.loaded else { return false }
        return api.pointee.RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1
    }

    private static func failure() -> OAuthError {
        OAuthError(.crypto, message: "getrandom and RAND_bytes failed: \(OpenSSLError.last())")
    }

    /// A base64url token of `byteCount` random bytes (32 bytes = 256 bits = 43 characters).
    static func token(byteCount: Int = 32) throws(OAuthError) -> String {
        let token = withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 1) { buffer -> String? in
            tryFill(buffer) ? Base64URL.encode(UnsafeRawBufferPointer(buffer)) : nil
        }
        guard let token else { throw failure() }
        return token
    }

    /// ``token(byteCount:)`` of 32 bytes, and SHA-256 of its text: a PKCE verifier and the digest
    /// of its challenge, with only the string allocated. Nil when randomness or the digest failed.
    static func verifierAndChallenge() -> (verifier: String, challenge: String)? {
        withUnsafeTemporaryAllocation(byteCount: 32, alignment: 16) { scratch -> (String, String)? in
            guard tryFill(scratch) else { return nil }
            var verifier = Base64URL.encode(UnsafeRawBufferPointer(scratch))
            guard verifier.withUTF8({ Digest.sha256(UnsafeRawBufferPointer($0), into: scratch) }) else { return nil }
            return (verifier, Base64URL.encode(UnsafeRawBufferPointer(scratch)))
        }
    }
}

enum ConstantTime {
    /// True when both byte strings are equal; time depends only on the length.
    ///
    /// Every byte pair is compared, the differences OR-ed together and tested once at the end (what
    /// `CRYPTO_memcmp` does), in Swift: comparing secrets needs no libcrypto.
    static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { a in b.withUnsafeBytes { b in equals(a, b) } }
    }

    /// The same over raw bytes: eight at a time, then the rest one by one.
    static func equals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        var wide: UInt64 = 0
        var index = 0
        while index + 8 <= a.count {
            wide |= a.loadUnaligned(fromByteOffset: index, as: UInt64.self) ^ b.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        var narrow: UInt8 = 0
        while index < a.count {
            narrow |= a[index] ^ b[index]
            index += 1
        }
        return wide | UInt64(narrow) == 0
    }
}

enum OpenSSLError {
    /// The newest OpenSSL error string, drained from the thread's error queue (or why libcrypto
    /// could not be loaded).
    static func last() -> String {
        if case .failure(let error) = LibCrypto.shared { return error.message ?? "libcrypto.so.3 could not be loaded" }
        let code = libcrypto.pointee.ERR_get_error()
        guard code != 0 else { return "no OpenSSL error queued" }
        var buffer = [CChar](repeating: 0, count: 256)
        libcrypto.pointee.ERR_error_string_n(code, &buffer, buffer.count)
        libcrypto.pointee.ERR_clear_error()
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Base64url without padding (RFC 4648 §5, RFC 7636 Appendix A).
enum Base64URL {
    private static let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

    static func encode(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { encode($0) }
    }

    /// Encodes `bytes` straight into the string's storage.
    static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        let count = (bytes.count * 4 + 2) / 3
        return alphabet.withUTF8Buffer { alphabet in
            String(unsafeUninitializedCapacity: count) { out in
                var o = 0
                var i = 0
                while i + 3 <= bytes.count {
                    let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    out[o] = alphabet[Int(n >> 18 & 63)]
                    out[o + 1] = alphabet[Int(n >> 12 & 63)]
                    out[o + 2] = alphabet[Int(n >> 6 & 63)]
                    out[o + 3] = alphabet[Int(n & 63)]
                    o += 4
                    i += 3
                }
                let rest = bytes.count - i
                if rest > 0 {
                    let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
                    out[o] = alphabet[Int(n >> 18 & 63)]
                    out[o + 1] = alphabet[Int(n >> 12 & 63)]
                    o += 2
                    if rest == 2 {
                        out[o] = alphabet[Int(n >> 6 & 63)]
                        o += 1
                    }
                }
                return o
            }
        }
    }

    /// Decodes unpadded base64url (RFC 4648 §5, RFC 7515 §2). Nil for any character outside the URL
    /// alphabet ("+", "/", "=" and whitespace included), an impossible length, or non-zero trailing
    /// bits (so each byte string has exactly one accepted encoding).
    static func decode(_ string: String) -> [UInt8]? {
        decode(utf8: Array(string.utf8))
    }

    /// ``decode(_:)`` over the encoded UTF-8 bytes.
    static func decode<Bytes: Collection<UInt8>>(utf8 input: Bytes) -> [UInt8]? {
        let remainder = input.count % 4
        guard remainder != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in input {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }  // non-canonical: unused low bits set
        return out
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}
