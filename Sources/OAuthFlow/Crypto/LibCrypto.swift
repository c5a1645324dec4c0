internal import COpenSSL

/// libcrypto (OpenSSL 3), opened with `dlopen` on the first hash, signature, key or cipher of the
/// process and kept open.
///
/// Not linked: a process that never needs it (`authflow token` answering from its file store,
/// a service whose tokens are cached) does not pay its load (about 4,200 symbol relocations and
/// 120 page faults, ~1 ms per process start here). The library is found by its soname,
/// `libcrypto.so.3`, the way the dynamic linker finds a linked library (`LD_LIBRARY_PATH`,
/// the ld.so cache, the default directories).
///
/// Every path into the Crypto files goes through ``require()`` (or ``loaded``) before calling
/// libcrypto: the entry points that create an OpenSSL object or hash bytes check it, and methods
/// of an owner object run only after its creation succeeded.
final class LibCrypto: @unchecked Sendable {  // safe: an immutable table of C function pointers, never freed
    /// The resolved entry points.
    let api: UnsafeMutablePointer<c_oauthflow_crypto_api>

    private init(api: UnsafeMutablePointer<c_oauthflow_crypto_api>) { self.api = api }

    /// The process's libcrypto, or why it cannot be used; loaded on first access.
    static let shared: Result<LibCrypto, OAuthError> = load()

    /// The OpenSSL 3 library's soname.
    static let soname = "libcrypto.so.3"

    /// Opens `soname` and resolves every entry point (tests pass a missing name to see the error).
    static func load(soname: String = LibCrypto.soname) -> Result<LibCrypto, OAuthError> {
        let api = UnsafeMutablePointer<c_oauthflow_crypto_api>.allocate(capacity: 1)
        api.initialize(to: c_oauthflow_crypto_api())
        guard c_oauthflow_crypto_open(api, soname) == 0 else {
            let reason = withUnsafeBytes(of: api.pointee.error) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            api.deallocate()
            return .failure(OAuthError(
                .crypto, message: "\(soname) could not be loaded (\(reason)); install OpenSSL 3 (Debian: apt-get install libssl3)"))
        }
        return .success(LibCrypto(api: api))
    }

    /// The entry points, loading libcrypto on first use.
    /// - Throws: ``OAuthError`` `.crypto` naming the library and the dynamic linker's reason when
    ///   `libcrypto.so.3` (OpenSSL 3) is missing or lacks a function OAuthFlow calls.
    @discardableResult
    static func require() throws(OAuthError) -> UnsafeMutablePointer<c_oauthflow_crypto_api> {
        try shared.get().api
    }

    /// The entry points, or nil when libcrypto cannot be loaded (loads it on first use).
    static var loaded: UnsafeMutablePointer<c_oauthflow_crypto_api>? {
        guard case .success(let library) = shared else { return nil }
        return library.api
    }
}

/// libcrypto's entry points, for code that runs only after ``LibCrypto/require()`` succeeded (see
/// ``LibCrypto``); reaching it otherwise is a programming error and traps.
var libcrypto: UnsafeMutablePointer<c_oauthflow_crypto_api> {
    guard let api = LibCrypto.loaded else { preconditionFailure("libcrypto called before LibCrypto.require() succeeded") }
    return api
}
