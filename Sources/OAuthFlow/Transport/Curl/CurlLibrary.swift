internal import CCurl
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// libcurl, opened with `dlopen` on the first request of the process and kept open.
///
/// Not linked: a process that never sends a request does not load libcurl and its dependencies.
final class CurlLibrary: @unchecked Sendable {   // safe: an immutable table of C function pointers, never freed
    /// The resolved entry points; the typed `c_oauthflow_curl_*` wrappers take this table.
    let api: UnsafeMutablePointer<c_oauthflow_curl_api>

    private init(api: UnsafeMutablePointer<c_oauthflow_curl_api>) { self.api = api }

    /// The process's libcurl, or why it cannot be used.
    static let shared: Result<CurlLibrary, OAuthError> = load()

    private static func load() -> Result<CurlLibrary, OAuthError> {
        let api = UnsafeMutablePointer<c_oauthflow_curl_api>.allocate(capacity: 1)
        api.initialize(to: c_oauthflow_curl_api())
        guard c_oauthflow_curl_load(api) == 0 else {
            api.deallocate()
            return .failure(OAuthError(
                .configuration, message: "libcurl.so.4 could not be loaded; install libcurl (Debian: apt-get install libcurl4)"))
        }
        // Thread-safe from libcurl 7.84 on; this runs once, under Swift's lazy-global lock, in any case.
        guard api.pointee.global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else {
            return .failure(OAuthError(.configuration, message: "curl_global_init failed"))
        }
        return .success(CurlLibrary(api: api))
    }

    /// libcurl's text for `code` (a static English sentence; it holds no request data).
    func describe(_ code: CURLcode) -> String {
        api.pointee.easy_strerror(code).map { String(cString: $0) } ?? "curl error \(code.rawValue)"
    }
}

/// Owns one `CURL` easy handle; `curl_easy_cleanup` in `deinit`.
///
/// Sendable because a handle is used by one thread at a time: built or taken from the engine's pool
/// by a caller, then used under the engine's driving lock until it goes back to the pool (through a `Mutex`).
final class CurlEasyHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
    private let library: CurlLibrary

    init?(_ library: CurlLibrary) {
        guard let raw = library.api.pointee.easy_init() else { return nil }
        self.raw = raw
        self.library = library
    }

    deinit { library.api.pointee.easy_cleanup(raw) }

    @discardableResult
    func set(_ option: CURLoption, _ value: Int) -> CURLcode {
        c_oauthflow_curl_easy_setopt_long(library.api, raw, option, value)
    }

    @discardableResult
    func set(_ option: CURLoption, offset value: Int64) -> CURLcode {
        c_oauthflow_curl_easy_setopt_off(library.api, raw, option, curl_off_t(value))
    }

    /// A string option; libcurl copies it.
    @discardableResult
    func set(_ option: CURLoption, _ value: String) -> CURLcode {
        value.withCString { c_oauthflow_curl_easy_setopt_pointer(library.api, raw, option, $0) }
    }

    @discardableResult
    func set(_ option: CURLoption, pointer value: UnsafeRawPointer?) -> CURLcode {
        c_oauthflow_curl_easy_setopt_pointer(library.api, raw, option, value)
    }

    @discardableResult
    func set(_ option: CURLoption, callback: curl_write_callback) -> CURLcode {
        c_oauthflow_curl_easy_setopt_write(library.api, raw, option, callback)
    }

    @discardableResult
    func set(opensocket callback: curl_opensocket_callback) -> CURLcode {
        c_oauthflow_curl_easy_setopt_opensocket(library.api, raw, callback)
    }

    @discardableResult
    func set(closesocket callback: curl_closesocket_callback) -> CURLcode {
        c_oauthflow_curl_easy_setopt_closesocket(library.api, raw, callback)
    }

    func info(_ info: CURLINFO) -> Int {
        var value = 0
        _ = c_oauthflow_curl_easy_getinfo_long(library.api, raw, info, &value)
        return value
    }

    func info(offset info: CURLINFO) -> Int64 {
        var value: curl_off_t = 0
        _ = c_oauthflow_curl_easy_getinfo_off(library.api, raw, info, &value)
        return Int64(value)
    }
}

/// Owns one `CURLU`, a URL libcurl has parsed (`curl_url_set`); `curl_url_cleanup` in `deinit`.
///
/// Handed to transfers with `CURLOPT_CURLU` instead of the URL's text with `CURLOPT_URL`: libcurl
/// then copies the parsed parts (`curl_url_dup`) for each transfer rather than parsing the text
/// again (about 5 000 instructions a request). Sendable because it is never changed once parsed:
/// libcurl only reads it, from any number of transfers.
final class CurlParsedURL: @unchecked Sendable {
    let raw: OpaquePointer
    private let library: CurlLibrary

    /// `text` parsed with the flags libcurl itself parses a `CURLOPT_URL` with (`CURLU_GUESS_SCHEME`,
    /// `CURLU_NON_SUPPORT_SCHEME`: libcurl 7.88's `parseurlandfillconn` for a handle that sets
    /// neither `CURLOPT_DISALLOW_USERNAME_IN_URL` nor `CURLOPT_PATH_AS_IS`), so the transfer sees
    /// the same URL either way; nil when this libcurl has no URL API or rejects `text` (the transfer
    /// then sets `CURLOPT_URL`, and libcurl reports the error as it always did).
    init?(_ library: CurlLibrary, _ text: String) {
        let api = library.api.pointee
        guard let make = api.url, let set = api.url_set, let cleanup = api.url_cleanup, let raw = make() else { return nil }
        let flags = UInt32(CURLU_GUESS_SCHEME) | UInt32(CURLU_NON_SUPPORT_SCHEME)
        guard text.withCString({ set(raw, CURLUPART_URL, $0, flags) }) == CURLUE_OK else {
            cleanup(raw)
            return nil
        }
        self.raw = raw
        self.library = library
    }

    deinit { library.api.pointee.url_cleanup?(raw) }
}

/// Owns one `curl_slist` of request headers; `curl_slist_free_all` in `deinit`.
///
/// Sendable because it is never changed once its lines are appended (before it is shared): libcurl
/// only reads it, from any number of transfers.
final class CurlHeaderList: @unchecked Sendable {
    private(set) var raw: UnsafeMutablePointer<curl_slist>?
    private let library: CurlLibrary

    init(_ library: CurlLibrary) { self.library = library }

    deinit { library.api.pointee.slist_free_all(raw) }

    /// Appends one `Name: value` line; false when libcurl could not allocate.
    func append(_ line: String) -> Bool {
        guard let appended = line.withCString({ library.api.pointee.slist_append(raw, $0) }) else { return false }
        raw = appended
        return true
    }
}
