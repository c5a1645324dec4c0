internal import COpenSSL
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// AES-256-GCM (NIST SP 800-38D) through OpenSSL EVP: 256-bit key, 96-bit nonce, 128-bit tag.
///
/// The caller chooses the nonce; ``EntryEncryption`` draws a fresh random one for every seal.
enum AES256GCM {
    /// Key length in bytes.
    static let keySize = 32
    /// Nonce (IV) length in bytes: 96 bits, GCM's native size.
    static let nonceSize = 12
    /// Authentication tag length in bytes: the full 128 bits.
    static let tagSize = 16

    /// Encrypts `plaintext` and authenticates it together with `associatedData`.
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL fails (never for valid inputs).
    static func seal(
        _ plaintext: [UInt8], key: KeyMaterial, nonce: [UInt8], associatedData: [UInt8]
    ) throws(OAuthError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        precondition(nonce.count == nonceSize, "AES-GCM nonce must be 12 bytes")
        let context = try CipherContext()
        try context.check(
            key.withBytes { keyBytes in
                libcrypto.pointee.EVP_EncryptInit_ex2(context.pointer, aes256GCM.pointer, keyBytes, nonce, nil)
            }, "EVP_EncryptInit_ex2")
        try context.authenticate(associatedData, encrypt: true)
        let ciphertext = try context.transform(plaintext, encrypt: true)
        var finalLength: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)  // GCM is a stream mode: final writes nothing
        try context.check(libcrypto.pointee.EVP_EncryptFinal_ex(context.pointer, &scratch, &finalLength), "EVP_EncryptFinal_ex")
        guard finalLength == 0 else { throw OAuthError(.crypto, message: "AES-GCM final step produced unexpected output") }
        var tag = [UInt8](repeating: 0, count: tagSize)
        try context.check(libcrypto.pointee.EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), &tag), "EVP_CTRL_GCM_GET_TAG")
        return (ciphertext, tag)
    }

    /// Decrypts `ciphertext` and checks `tag` over it and `associatedData`.
    ///
    /// Returns nil when the tag does not verify (wrong key, altered bytes, other associated data);
    /// no plaintext is returned then.
    /// - Throws: ``OAuthError`` `.crypto` when OpenSSL fails for another reason.
    static func open(
        _ ciphertext: [UInt8], tag: [UInt8], key: KeyMaterial, nonce: [UInt8], associatedData: [UInt8]
    ) throws(OAuthError) -> [UInt8]? {
        precondition(nonce.count == nonceSize && tag.count == tagSize, "AES-GCM nonce must be 12 bytes and the tag 16")
        let context = try CipherContext()
        try context.check(
            key.withBytes { keyBytes in
                libcrypto.pointee.EVP_DecryptInit_ex2(context.pointer, aes256GCM.pointer, keyBytes, nonce, nil)
            }, "EVP_DecryptInit_ex2")
        try context.authenticate(associatedData, encrypt: false)
        var plaintext = try context.transform(ciphertext, encrypt: false)
        var expected = tag
        try context.check(libcrypto.pointee.EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagSize), &expected), "EVP_CTRL_GCM_SET_TAG")
        var finalLength: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        guard libcrypto.pointee.EVP_DecryptFinal_ex(context.pointer, &scratch, &finalLength) == 1 else {
            libcrypto.pointee.ERR_clear_error()
            wipe(&plaintext)
            return nil
        }
        return plaintext
    }
}

/// AES-256-GCM fetched once: OpenSSL 3 otherwise looks the algorithm up again on every init.
private let aes256GCM = FetchedCipher(name: "AES-256-GCM")

/// Owns one `EVP_CIPHER` fetched from the default provider (the shared one lives for the process)
/// and frees it in `deinit`; the built-in fallback table is static and never freed.
private final class FetchedCipher: @unchecked Sendable {  // safe: immutable pointer to a thread-safe, read-only EVP_CIPHER
    let pointer: OpaquePointer?
    private let ownsPointer: Bool

    init(name: String) {
        guard let api = LibCrypto.loaded else {  // only when libcrypto is missing: CipherContext() failed first
            pointer = nil
            ownsPointer = false
            return
        }
        if let fetched = api.pointee.EVP_CIPHER_fetch(nil, name, nil) {
            pointer = fetched
            ownsPointer = true
        } else {
            // The built-in (implicitly fetched) table, if the explicit fetch fails.
            pointer = api.pointee.EVP_aes_256_gcm()
            ownsPointer = false
        }
    }

    deinit { if ownsPointer, let pointer { libcrypto.pointee.EVP_CIPHER_free(pointer) } }
}

/// Owns one `EVP_CIPHER_CTX`; frees it in `deinit`. Used by one function call at a time.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws(OAuthError) {
        guard let pointer = try LibCrypto.require().pointee.EVP_CIPHER_CTX_new() else {
            throw OAuthError(.crypto, message: "EVP_CIPHER_CTX_new failed: \(OpenSSLError.last())")
        }
        self.pointer = pointer
    }

    deinit { libcrypto.pointee.EVP_CIPHER_CTX_free(pointer) }

    func check(_ result: Int32, _ step: String) throws(OAuthError) {
        guard result == 1 else { throw OAuthError(.crypto, message: "AES-GCM \(step) failed: \(OpenSSLError.last())") }
    }

    /// Feeds associated data: authenticated, not encrypted.
    func authenticate(_ data: [UInt8], encrypt: Bool) throws(OAuthError) {
        guard !data.isEmpty else { return }
        try checkSize(data.count)
        var written: Int32 = 0
        let result = data.withUnsafeBufferPointer { source in
            encrypt
                ? libcrypto.pointee.EVP_EncryptUpdate(pointer, nil, &written, source.baseAddress, Int32(source.count))
                : libcrypto.pointee.EVP_DecryptUpdate(pointer, nil, &written, source.baseAddress, Int32(source.count))
        }
        try check(result, encrypt ? "EVP_EncryptUpdate (associated data)" : "EVP_DecryptUpdate (associated data)")
    }

    /// Encrypts or decrypts `input`; GCM output has the input's length.
    func transform(_ input: [UInt8], encrypt: Bool) throws(OAuthError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: input.count)
        guard !input.isEmpty else { return output }
        try checkSize(input.count)
        var written: Int32 = 0
        let result = input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                encrypt
                    ? libcrypto.pointee.EVP_EncryptUpdate(pointer, target.baseAddress, &written, source.baseAddress, Int32(source.count))
                    : libcrypto.pointee.EVP_DecryptUpdate(pointer, target.baseAddress, &written, source.baseAddress, Int32(source.count))
            }
        }
        try check(result, encrypt ? "EVP_EncryptUpdate" : "EVP_DecryptUpdate")
        guard Int(written) == input.count else {
            throw OAuthError(.crypto, message: "AES-GCM processed \(written) of \(input.count) bytes")
        }
        return output
    }

    private func checkSize(_ count: Int) throws(OAuthError) {
        guard count <= Int(Int32.max) else { throw OAuthError(.crypto, message: "AES-GCM input of \(count) bytes is too large") }
    }
}

/// Key bytes in memory of their own, wiped (`explicit_bzero`) when the last reference goes.
///
/// Copies of the bytes are made only for the length of one cipher call.
final class KeyMaterial: @unchecked Sendable {  // safe: the bytes are written once in init and only read afterwards
    private let buffer: UnsafeMutableRawBufferPointer

    /// Copies `bytes` into memory owned by this object.
    init(_ bytes: some Collection<UInt8>) {
        buffer = .allocate(byteCount: max(bytes.count, 1), alignment: 16)
        _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        count = bytes.count
    }

    /// The number of key bytes.
    let count: Int

    deinit {
        c_oauthflow_wipe(buffer.baseAddress, buffer.count)
        buffer.deallocate()
    }

    /// Runs `body` with a pointer to the key bytes, valid only during the call.
    func withBytes<R>(_ body: (UnsafePointer<UInt8>) throws(OAuthError) -> R) throws(OAuthError) -> R {
        try body(UnsafePointer(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)))
    }

    /// SHA-256 of the key bytes.
    func sha256() throws(OAuthError) -> [UInt8] {
        try LibCrypto.require()
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard libcrypto.pointee.EVP_Digest(buffer.baseAddress, count, &digest, &length, libcrypto.pointee.EVP_sha256(), nil) == 1 else {
            throw OAuthError(.crypto, message: "SHA-256 failed: \(OpenSSLError.last())")
        }
        return Array(digest.prefix(Int(length)))
    }
}

/// Overwrites `bytes` with zeros in a way the optimizer keeps (`explicit_bzero`, as `OPENSSL_cleanse` does).
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { c_oauthflow_wipe($0.baseAddress, $0.count) }
}
