#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// A paste-back login: the person signs in on any device, and the browser's redirect never reaches
// this machine, so they paste back the address it ended on (or the code a provider's page shows).
// The URL is read by the same parser as a redirect to the loopback receiver, and checked as
// strictly: the redirect URI it was sent to, then (in AuthFlow) state, iss and error.
extension AuthorizationResponse {
    /// The longest pasted text ``AuthFlow/completeAuthorization(pasted:request:)`` reads, in bytes
    /// once surrounding blanks and line ends are trimmed; a longer one is `.invalidCallback`.
    public static let maximumPastedLength = 8192

    /// What a person pasted back.
    enum Pasted {
        /// The URL the browser ended on, parsed as a redirect to the loopback receiver is.
        case redirect(AuthorizationResponse)
        /// A bare `code`, as a provider's page shows it for a person to copy.
        case code(Secret)
    }

    /// Reads one pasted line: a URL when it starts with a URI scheme (RFC 3986 §3.1), else a bare code.
    ///
    /// Surrounding blanks and line ends are dropped; anything else but printable ASCII (a control
    /// character such as a terminal escape, a space, a non-ASCII character) is refused, as is a line
    /// longer than ``maximumPastedLength``. A URL must be for `redirectURI` (scheme, host, port and
    /// path; a default port may be left out, no user name), carry a query, and send none of `code`,
    /// `state`, `iss`, `error` twice (RFC 6749 §3.1: parameters are not repeated; a loopback
    /// redirect keeps the first and logs the repeat, a pasted line has been through a person's
    /// hands). A bare code must not look like a query (`&`, `?`, `#`, `code=`).
    /// - Throws: ``OAuthError`` `.invalidCallback` (endpoint `.authorization`) naming what is wrong,
    ///   never the pasted text.
    static func pasted(_ text: String, redirectURI: URL) throws(OAuthError) -> Pasted {
        func refuse(_ message: String) -> OAuthError {
            OAuthError(.invalidCallback, endpoint: .authorization, message: message)
        }
        let advice = "paste the whole address from the browser's address bar, or the code the provider's page shows"
        let line = ASCIIText.trimmingBlanksAndNewlines(text)
        guard !line.isEmpty else { throw refuse("nothing was pasted; \(advice)") }
        guard line.utf8.count <= maximumPastedLength else {
            throw refuse("the pasted text is \(line.utf8.count) bytes long; at most \(maximumPastedLength) are read")
        }
        for (offset, scalar) in line.unicodeScalars.enumerated() where !(0x21...0x7E).contains(scalar.value) {
            let what = scalar == " " ? "a space" : DisplayText.isUnsafe(scalar)
                ? "a control character (U+\(String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4)))"
                : "a character that is not ASCII (U+\(String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4)))"
            throw refuse("the pasted text holds \(what) at character \(offset + 1); addresses and codes are printable ASCII: \(advice)")
        }
        guard Self.startsWithScheme(line) else {
            guard !line.contains(where: { "&?#".contains($0) }), !line.hasPrefix("code=") else {
                throw refuse("the pasted text is neither a URL nor a code (it looks like part of a query); \(advice)")
            }
            return .code(Secret(line))
        }
        guard let pasted = URLComponents(string: line), let url = URL(string: line) else {
            throw refuse("the pasted text starts like a URL but is not one; \(advice)")
        }
        if let part = Self.differingPart(pasted, from: redirectURI) {
            throw refuse("the pasted URL is not for this login's redirect URI \(redirectURI.absoluteString): its \(part) differs; "
                + "paste the address of the page the sign-in ended on")
        }
        let response = try AuthorizationResponse(callbackURL: url)
        if let repeated = ["code", "state", "iss", "error"].first(where: { response.duplicates.contains($0) }) {
            throw refuse("the pasted URL carries \(repeated) more than once (RFC 6749 §3.1); "
                + "paste the address exactly as the browser shows it")
        }
        return .redirect(response)
    }

    /// True when `text` starts with `scheme ":"`: a letter, then letters, digits, `+`, `-` or `.`.
    static func startsWithScheme(_ text: String) -> Bool {
        let bytes = text.utf8
        guard let first = bytes.first, ASCIIText.isAlphanumeric(first), !(0x30...0x39).contains(first) else { return false }
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: ":") { return true }
            let symbol = byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            guard ASCIIText.isAlphanumeric(byte) || symbol else { return false }
        }
        return false
    }

    /// The first part of `pasted` that is not `redirectURI`'s ("scheme", "host", "port", "path",
    /// "user name"), or nil when it is the same address. Scheme and host compare without case; a
    /// port left out is the scheme's default (80, 443); an empty http(s) path is `/`.
    static func differingPart(_ pasted: URLComponents, from redirectURI: URL) -> String? {
        guard let expected = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false) else { return "scheme" }
        let scheme = pasted.scheme?.lowercased()
        guard scheme == expected.scheme?.lowercased() else { return "scheme" }
        guard pasted.user == nil, pasted.password == nil else { return "user name" }
        guard pasted.host?.lowercased() == expected.host?.lowercased() else { return "host" }
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        guard (pasted.port ?? defaultPort) == (expected.port ?? defaultPort) else { return "port" }
        let web = scheme == "http" || scheme == "https"
        func path(_ components: URLComponents) -> String {
            web && components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        }
        guard path(pasted) == path(expected) else { return "path" }
        return nil
    }
}

private extension String {
    /// The text with zeros in front up to `width` characters (`1B` → `001B`).
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
