internal import COpenSSL

// One owner class per OpenSSL object: each holds the pointer it was created with and frees it in
// `deinit`. Operations that need the pointer are methods on the owners (or take owners as
// arguments), so an object is alive for as long as any call uses it; no bare pointer outlives the
// function that obtained it.

/// Owns one `EVP_PKEY` (a public key, or a key pair in ``SigningKey``).
final class EVPKey: @unchecked Sendable {  // safe: never mutated after creation; OpenSSL 3 allows concurrent read-only use
    let pointer: OpaquePointer

    /// Takes ownership of a key returned by an OpenSSL constructor.
    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { libcrypto.pointee.EVP_PKEY_free(pointer) }

    /// The key's size in bits (the modulus for RSA, the field for EC).
    var bits: Int { Int(libcrypto.pointee.EVP_PKEY_get_bits(pointer)) }

    /// True when the key is of the named type ("RSA", "EC", "ED25519").
    func isA(_ name: String) -> Bool { libcrypto.pointee.EVP_PKEY_is_a(pointer, name) == 1 }

    /// OpenSSL's quick public-key validation (`EVP_PKEY_public_check_quick`; for EC: the point is
    /// on the curve and not at infinity, which is all a prime-order curve needs).
    func passesQuickPublicCheck() throws(OAuthError) -> Bool {
        try PKeyContext(for: self).publicCheckQuick()
    }

    /// A big-number parameter of the key, big-endian, left-padded to `width` bytes when given.
    func bigNumberParameter(_ name: String, width: Int? = nil) throws(OAuthError) -> [UInt8] {
        var raw: OpaquePointer?
        guard libcrypto.pointee.EVP_PKEY_get_bn_param(pointer, name, &raw) == 1, let raw else {
            throw OAuthError(.crypto, message: "reading key parameter \(name) failed: \(OpenSSLError.last())")
        }
        return BigNumber(taking: raw).bytes(width: width)
    }

    /// The raw public key (Ed25519: 32 bytes).
    func rawPublicKey() throws(OAuthError) -> [UInt8] {
        var length = 0
        guard libcrypto.pointee.EVP_PKEY_get_raw_public_key(pointer, nil, &length) == 1 else {
            throw OAuthError(.crypto, message: "reading a raw public key failed: \(OpenSSLError.last())")
        }
        var bytes = [UInt8](repeating: 0, count: length)
        guard libcrypto.pointee.EVP_PKEY_get_raw_public_key(pointer, &bytes, &length) == 1 else {
            throw OAuthError(.crypto, message: "reading a raw public key failed: \(OpenSSLError.last())")
        }
        return Array(bytes.prefix(length))
    }
}

/// Owns one `EVP_MD_CTX`, used for a single sign or verify operation.
final class DigestContext {
    let pointer: OpaquePointer

    init() throws(OAuthError) {
        guard let pointer = try LibCrypto.require().pointee.EVP_MD_CTX_new() else {
            throw OAuthError(.crypto, message: "EVP_MD_CTX_new failed: \(OpenSSLError.last())")
        }
        self.pointer = pointer
    }

    deinit { libcrypto.pointee.EVP_MD_CTX_free(pointer) }

    /// One-shot verification (`EVP_DigestVerifyInit` + `EVP_DigestVerify`). `digest` is nil for
    /// Ed25519; `pss` selects RSASSA-PSS with MGF1 over the same hash and a salt as long as the hash.
    /// False for any failure, a wrong signature included; the OpenSSL error queue is cleared.
    func verify(key: EVPKey, digest: MessageDigest?, pss: Bool, message: [UInt8], signature: [UInt8]) -> Bool {
        defer { libcrypto.pointee.ERR_clear_error() }
        var keyContext: OpaquePointer?  // owned by this EVP_MD_CTX; freed with it
        guard libcrypto.pointee.EVP_DigestVerifyInit(pointer, &keyContext, digest?.pointer, nil, key.pointer) == 1 else { return false }
        if pss {
            guard let keyContext, let digest, Self.configurePSS(keyContext, digest: digest) else { return false }
        }
        return libcrypto.pointee.EVP_DigestVerify(pointer, signature, signature.count, message, message.count) == 1
    }

    /// One-shot signing (`EVP_DigestSignInit` + `EVP_DigestSign`); the signature in OpenSSL's
    /// encoding (DER for ECDSA).
    func sign(key: EVPKey, digest: MessageDigest?, pss: Bool, message: [UInt8]) throws(OAuthError) -> [UInt8] {
        var keyContext: OpaquePointer?  // owned by this EVP_MD_CTX; freed with it
        guard libcrypto.pointee.EVP_DigestSignInit(pointer, &keyContext, digest?.pointer, nil, key.pointer) == 1 else {
            throw OAuthError(.crypto, message: "EVP_DigestSignInit failed: \(OpenSSLError.last())")
        }
        if pss {
            guard let keyContext, let digest, Self.configurePSS(keyContext, digest: digest) else {
                throw OAuthError(.crypto, message: "configuring RSASSA-PSS failed: \(OpenSSLError.last())")
            }
        }
        var length = 0
        guard libcrypto.pointee.EVP_DigestSign(pointer, nil, &length, message, message.count) == 1 else {
            throw OAuthError(.crypto, message: "EVP_DigestSign failed: \(OpenSSLError.last())")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard libcrypto.pointee.EVP_DigestSign(pointer, &signature, &length, message, message.count) == 1 else {
            throw OAuthError(.crypto, message: "EVP_DigestSign failed: \(OpenSSLError.last())")
        }
        return Array(signature.prefix(length))
    }

    /// RFC 7518 §3.5: PSS padding, MGF1 with the signature's hash, salt length = hash length.
    private static func configurePSS(_ keyContext: OpaquePointer, digest: MessageDigest) -> Bool {
        libcrypto.pointee.EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1
            && libcrypto.pointee.EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
            && libcrypto.pointee.EVP_PKEY_CTX_set_rsa_mgf1_md_name(keyContext, digest.name, nil) == 1
    }
}

/// Owns one `EVP_PKEY_CTX` (key import, key generation, key checks).
final class PKeyContext {
    let pointer: OpaquePointer

    /// A context for an algorithm by name ("RSA", "EC", "ED25519").
    init(algorithm name: String) throws(OAuthError) {
        guard let pointer = try LibCrypto.require().pointee.EVP_PKEY_CTX_new_from_name(nil, name, nil) else {
            throw OAuthError(.crypto, message: "libcrypto.pointee.EVP_PKEY_CTX_new_from_name(\(name)) failed: \(OpenSSLError.last())")
        }
        self.pointer = pointer
    }

    /// A context over an existing key.
    init(for key: EVPKey) throws(OAuthError) {
        guard let pointer = try LibCrypto.require().pointee.EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
            throw OAuthError(.crypto, message: "EVP_PKEY_CTX_new_from_pkey failed: \(OpenSSLError.last())")
        }
        self.pointer = pointer
    }

    deinit { libcrypto.pointee.EVP_PKEY_CTX_free(pointer) }

    /// `EVP_PKEY_public_check_quick`; false when the key is invalid (the error queue is cleared).
    func publicCheckQuick() -> Bool {
        defer { libcrypto.pointee.ERR_clear_error() }
        return libcrypto.pointee.EVP_PKEY_public_check_quick(pointer) == 1
    }

    /// Builds a public key from an `OSSL_PARAM` array (`EVP_PKEY_fromdata`); nil when OpenSSL refuses it.
    func publicKey(from parameters: UnsafeMutablePointer<OSSL_PARAM>) -> EVPKey? {
        defer { libcrypto.pointee.ERR_clear_error() }
        guard libcrypto.pointee.EVP_PKEY_fromdata_init(pointer) == 1 else { return nil }
        var key: OpaquePointer?
        guard libcrypto.pointee.EVP_PKEY_fromdata(pointer, &key, c_oauthflow_selection_public_key(), parameters) == 1, let key else { return nil }
        return EVPKey(taking: key)
    }

    /// Generates a key pair; `configure` sets parameters (bits, group) after `EVP_PKEY_keygen_init`.
    func generate(_ configure: (OpaquePointer) -> Int32 = { _ in 1 }) throws(OAuthError) -> EVPKey {
        guard libcrypto.pointee.EVP_PKEY_keygen_init(pointer) == 1, configure(pointer) == 1 else {
            throw OAuthError(.crypto, message: "key generation setup failed: \(OpenSSLError.last())")
        }
        var key: OpaquePointer?
        guard libcrypto.pointee.EVP_PKEY_generate(pointer, &key) == 1, let key else {
            throw OAuthError(.crypto, message: "key generation failed: \(OpenSSLError.last())")
        }
        return EVPKey(taking: key)
    }
}

/// Owns one `BIGNUM`.
final class BigNumber {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { libcrypto.pointee.BN_free(pointer) }

    /// Big-endian bytes, minimal or left-padded to `width`.
    func bytes(width: Int? = nil) -> [UInt8] {
        let minimal = (Int(libcrypto.pointee.BN_num_bits(pointer)) + 7) / 8
        let count = max(width ?? minimal, minimal)
        var out = [UInt8](repeating: 0, count: count)
        _ = libcrypto.pointee.BN_bn2binpad(pointer, &out, Int32(count))
        return out
    }
}

/// Owns one fetched `EVP_MD` (a hash algorithm); the shared ones live for the process.
final class MessageDigest: @unchecked Sendable {  // safe: immutable; a fetched EVP_MD is read-only and thread-safe
    /// The algorithm; nil only when libcrypto cannot be loaded (every user calls
    /// ``LibCrypto/require()`` first and fails there).
    let pointer: OpaquePointer?
    /// The OpenSSL name ("SHA256").
    let name: String
    /// The digest length in bytes.
    let size: Int

    /// Fetches `name` from the default provider; falls back to the built-in table if that fails.
    private init(name: String, builtIn: (UnsafeMutablePointer<c_oauthflow_crypto_api>) -> OpaquePointer?) {
        self.name = name
        guard let api = LibCrypto.loaded else {
            pointer = nil
            ownsPointer = false
            size = 0
            return
        }
        // Fetched once: OpenSSL 3 otherwise looks the algorithm up again on every operation.
        if let fetched = api.pointee.EVP_MD_fetch(nil, name, nil) {
            pointer = fetched
            ownsPointer = true
        } else {
            pointer = builtIn(api)  // the static EVP_sha* tables always exist in libcrypto 3
            ownsPointer = false
        }
        size = Int(api.pointee.EVP_MD_get_size(pointer))
    }

    private let ownsPointer: Bool

    deinit { if ownsPointer { libcrypto.pointee.EVP_MD_free(pointer) } }

    static let sha256 = MessageDigest(name: "SHA256", builtIn: { $0.pointee.EVP_sha256() })
    static let sha384 = MessageDigest(name: "SHA384", builtIn: { $0.pointee.EVP_sha384() })
    static let sha512 = MessageDigest(name: "SHA512", builtIn: { $0.pointee.EVP_sha512() })
}

/// Owns one fetched `EVP_MAC` (HMAC), shared for the process.
final class MACAlgorithm: @unchecked Sendable {  // safe: immutable; a fetched EVP_MAC is read-only and thread-safe
    let pointer: OpaquePointer?

    private init() { pointer = LibCrypto.loaded?.pointee.EVP_MAC_fetch(nil, "HMAC", nil) }

    deinit { if let pointer { libcrypto.pointee.EVP_MAC_free(pointer) } }

    static let hmac = MACAlgorithm()
}

/// Owns one `EVP_MAC_CTX`, used for a single MAC computation.
final class MACContext {
    let pointer: OpaquePointer

    init(_ algorithm: MACAlgorithm) throws(OAuthError) {
        let api = try LibCrypto.require()
        guard let mac = algorithm.pointer, let pointer = api.pointee.EVP_MAC_CTX_new(mac) else {
            throw OAuthError(.crypto, message: "EVP_MAC_CTX_new failed: \(OpenSSLError.last())")
        }
        self.pointer = pointer
    }

    deinit { libcrypto.pointee.EVP_MAC_CTX_free(pointer) }

    /// HMAC of `data` under `key` with `digest`.
    func hmac(digest: MessageDigest, key: [UInt8], data: [UInt8]) throws(OAuthError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length = 0
        let ok = "digest".withCString { parameterName in
            digest.name.withCString { digestName in
                var parameters = [
                    libcrypto.pointee.OSSL_PARAM_construct_utf8_string(parameterName, UnsafeMutablePointer(mutating: digestName), 0),
                    libcrypto.pointee.OSSL_PARAM_construct_end(),
                ]
                return libcrypto.pointee.EVP_MAC_init(pointer, key, key.count, &parameters) == 1
                    && libcrypto.pointee.EVP_MAC_update(pointer, data, data.count) == 1
                    && libcrypto.pointee.EVP_MAC_final(pointer, &out, &length, out.count) == 1
            }
        }
        guard ok else { throw OAuthError(.crypto, message: "HMAC failed: \(OpenSSLError.last())") }
        return Array(out.prefix(length))
    }
}
