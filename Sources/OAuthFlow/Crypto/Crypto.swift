internal import COpenSSL
import Foundation

/// SHA-256, random bytes and constant-time comparison over the system's libcrypto.
enum Digest {
    /// SHA-256 of `data` through OpenSSL EVP.
    static func sha256(_ data: [UInt8]) throws(OAuthError) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = data.withUnsafeBufferPointer { buffer in
            EVP_Digest(buffer.baseAddress, buffer.count, &digest, &length, sha256Algorithm.pointer, nil)
        }
        guard ok == 1 else { throw OAuthError(.crypto, message: "SHA-256 failed: \(OpenSSLError.last())") }
        return Array(digest.prefix(Int(length)))
    }
}

/// SHA-256 fetched once: OpenSSL 3 otherwise looks the algorithm up again on every digest.
private let sha256Algorithm = FetchedDigest(name: "SHA256")

/// An `EVP_MD` fetched from the default provider, kept for the process's lifetime.
private final class FetchedDigest: @unchecked Sendable {   // safe: immutable pointer to a thread-safe, read-only EVP_MD
    let pointer: OpaquePointer?

    init(name: String) {
        // Falls back to the built-in (implicitly fetched) table if the explicit fetch fails.
        pointer = EVP_MD_fetch(nil, name, nil) ?? EVP_sha256()
    }
}

enum SecureRandom {
    /// `count` bytes from OpenSSL's CSPRNG (`RAND_bytes`).
    static func bytes(_ count: Int) throws(OAuthError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        guard ok == 1 else { throw OAuthError(.crypto, message: "RAND_bytes failed: \(OpenSSLError.last())") }
        return bytes
    }

    /// A base64url token of `byteCount` random bytes (32 bytes = 256 bits = 43 characters).
    static func token(byteCount: Int = 32) throws(OAuthError) -> String {
        Base64URL.encode(try bytes(byteCount))
    }
}

enum ConstantTime {
    /// True when both byte strings are equal; time depends only on the length.
    static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 }
        }
    }
}

enum OpenSSLError {
    /// The newest OpenSSL error string, drained from the thread's error queue.
    static func last() -> String {
        let code = ERR_get_error()
        guard code != 0 else { return "no OpenSSL error queued" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        ERR_clear_error()
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Base64url without padding (RFC 4648 §5, RFC 7636 Appendix A).
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        let count = (bytes.count * 4 + 2) / 3
        return String(unsafeUninitializedCapacity: count) { out in
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

    static func decode(_ string: String) -> [UInt8]? {
        // Only the URL alphabet, unpadded (RFC 4648 §5, RFC 7515 §2): "+", "/" and "=" are refused.
        guard !string.contains(where: { $0 == "+" || $0 == "/" || $0 == "=" }) else { return nil }
        var base64 = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }
}
