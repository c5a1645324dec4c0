internal import CCurl

extension CurlEasyHandle {
    /// The HTTP version of the last response on this handle (`CURLINFO_HTTP_VERSION`): "1.0",
    /// "1.1", "2" or "3"; nil before a response or for a version libcurl adds later.
    var negotiatedHTTPVersion: String? {
        switch info(CURLINFO_HTTP_VERSION) {
        case Int(CURL_HTTP_VERSION_1_0): "1.0"
        case Int(CURL_HTTP_VERSION_1_1): "1.1"
        case Int(CURL_HTTP_VERSION_2_0): "2"
        case Int(CURL_HTTP_VERSION_3): "3"
        default: nil
        }
    }
}
