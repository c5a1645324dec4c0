import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Error thrown by ``TestBrowser`` with a human-readable explanation of what went wrong.
internal struct TestBrowserError: Error, CustomStringConvertible, Sendable {
    internal let message: String

    internal init(_ message: String) {
        self.message = message
    }

    internal var description: String { "TestBrowserError: \(message)" }
}

/// A minimal scripted "browser" that plays the human part of OAuth flows against the
/// loopback django-oauth-toolkit test server (see Tests/IntegrationTests/Server/README.md):
/// it keeps its own cookie jar, extracts forms (including Django's `csrfmiddlewaretoken`)
/// from HTML, and follows redirects by hand, stopping at the client's redirect URI
/// without ever connecting to it.
///
/// Each instance is one browser profile (one cookie jar, i.e. one login session).
internal actor TestBrowser {
    /// Safety net against redirect/form loops.
    private static let maxSteps = 25

    private let session: URLSession
    private var cookies: [Cookie] = []

    internal init(timeout: TimeInterval = 20) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout * 3
        session = URLSession(configuration: configuration, delegate: RedirectRefuser(), delegateQueue: nil)
    }

    deinit {
        session.invalidateAndCancel()
    }

    // MARK: - Flows

    /// Opens `url` (an authorization request), logs in with `username`/`password` if asked
    /// to, answers the consent page (allow or deny) and returns the redirect URL that points
    /// into the client, i.e. the first `Location` starting with `redirectURIPrefix`
    /// (with `code`+`state`, or `error=access_denied`, ...). The redirect URI is never
    /// requested. Throws if the server shows an error page or the flow does not end there.
    internal func authorize(
        url: URL,
        username: String,
        password: String,
        redirectURIPrefix: String,
        approve: Bool
    ) async throws -> URL {
        let origin = try Self.origin(of: url)
        var request = PendingRequest(url: url)
        var loginSubmitted = false
        var consentSubmitted = false

        for _ in 0..<Self.maxSteps {
            let page = try await load(request, origin: origin, stopPrefix: redirectURIPrefix)
            let currentURL: URL
            let html: String
            switch page {
            case .stopped(let redirect):
                return redirect
            case .page(let finalURL, let body):
                currentURL = finalURL
                html = body
            }
            let forms = HTMLForm.parse(html)

            if let login = try Self.loginStep(
                forms, html: html, pageURL: currentURL, username: username, password: password, submitted: &loginSubmitted) {
                request = login
                continue
            }

            if let consent = forms.first(where: { $0.isConsentForm }) {
                if consentSubmitted {
                    throw TestBrowserError(
                        "consent form shown again after submitting it at \(currentURL.absoluteString): "
                            + Self.summary(of: html))
                }
                consentSubmitted = true
                // Approve = also send the named "allow" submit button; deny = the unnamed "Cancel".
                let allowValue = consent.submitButtons.first(where: { $0.name == "allow" })?.value ?? "Authorize"
                request = try consent.submission(
                    pageURL: currentURL,
                    overriding: approve ? ["allow": allowValue] : [:],
                    removing: approve ? [] : ["allow"])
                continue
            }

            throw TestBrowserError(
                "authorization did not reach a redirect to '\(redirectURIPrefix)'; stuck at "
                    + "\(currentURL.absoluteString): \(Self.summary(of: html))")
        }
        throw TestBrowserError("authorization exceeded \(Self.maxSteps) steps without reaching '\(redirectURIPrefix)'")
    }

    /// Opens `verificationURI` (`verification_uri` or `verification_uri_complete` of a
    /// device authorization response), logs in if asked to, submits `userCode` and then
    /// accepts (`approve == true`) or denies the device. Returns once the decision was
    /// recorded (the server shows the device grant status page).
    internal func approveDevice(
        verificationURI: URL,
        userCode: String,
        username: String,
        password: String,
        approve: Bool
    ) async throws {
        let origin = try Self.origin(of: verificationURI)
        var request = PendingRequest(url: verificationURI)
        var loginSubmitted = false
        var userCodeSubmitted = false
        var decisionSubmitted = false

        for _ in 0..<Self.maxSteps {
            let page = try await load(request, origin: origin, stopPrefix: nil)
            guard case .page(let currentURL, let html) = page else {
                throw TestBrowserError("unexpected stop while approving device")  // unreachable: no stopPrefix
            }
            if decisionSubmitted {
                // The decision POST redirected to the grant status page ("Device Authorized/Denied").
                let expected = approve ? "authorized" : "denied"
                let text = Self.summary(of: html).lowercased()
                guard text.contains(expected) else {
                    throw TestBrowserError(
                        "device decision not confirmed (expected '\(expected)') at \(currentURL.absoluteString): "
                            + Self.summary(of: html))
                }
                return
            }
            let forms = HTMLForm.parse(html)

            if let login = try Self.loginStep(
                forms, html: html, pageURL: currentURL, username: username, password: password, submitted: &loginSubmitted) {
                request = login
                continue
            }

            if let codeForm = forms.first(where: { $0.hasField("user_code") }) {
                if userCodeSubmitted {
                    throw TestBrowserError(
                        "user code '\(userCode)' was rejected at \(currentURL.absoluteString): "
                            + Self.summary(of: html))
                }
                userCodeSubmitted = true
                request = try codeForm.submission(pageURL: currentURL, overriding: ["user_code": userCode])
                continue
            }

            if let decision = forms.first(where: { form in form.submitButtons.contains { $0.name == "action" } }) {
                let wanted = approve ? "accept" : "deny"
                guard decision.submitButtons.contains(where: { $0.name == "action" && $0.value == wanted }) else {
                    throw TestBrowserError(
                        "device confirmation form at \(currentURL.absoluteString) has no '\(wanted)' button")
                }
                decisionSubmitted = true
                request = try decision.submission(pageURL: currentURL, overriding: ["action": wanted])
                continue
            }

            throw TestBrowserError(
                "unexpected page during device approval at \(currentURL.absoluteString): \(Self.summary(of: html))")
        }
        throw TestBrowserError("device approval exceeded \(Self.maxSteps) steps")
    }

    /// Current cookies as `name=value` pairs (for diagnostics).
    internal func cookieSnapshot() -> [String: String] {
        var result: [String: String] = [:]
        for cookie in cookies { result[cookie.name] = cookie.value }
        return result
    }

    // MARK: - Navigation

    private enum LoadResult {
        /// A redirect whose `Location` starts with the stop prefix; not requested.
        case stopped(URL)
        /// A final (non-redirect) 2xx page.
        case page(URL, String)
    }

    /// Sends `request`, follows same-origin redirects by hand and returns either the stop
    /// redirect or the final 2xx HTML page. Non-2xx final responses throw.
    /// The login form's submission when the page shows one; a second login page means the password was refused.
    private static func loginStep(
        _ forms: [HTMLForm], html: String, pageURL: URL, username: String, password: String, submitted: inout Bool
    ) throws -> PendingRequest? {
        guard let login = forms.first(where: { $0.isLoginForm }) else { return nil }
        if submitted {
            throw TestBrowserError("login as '\(username)' was rejected at \(pageURL.absoluteString): " + summary(of: html))
        }
        submitted = true
        return try login.submission(pageURL: pageURL, overriding: ["username": username, "password": password])
    }

    private func load(_ initial: PendingRequest, origin: String, stopPrefix: String?) async throws -> LoadResult {
        var request = initial
        for _ in 0..<Self.maxSteps {
            if let stopPrefix, request.url.absoluteString.hasPrefix(stopPrefix) {
                return .stopped(request.url)
            }
            guard (try? Self.origin(of: request.url)) == origin else {
                throw TestBrowserError(
                    "refusing to leave \(origin): redirected to \(request.url.absoluteString)"
                        + (stopPrefix.map { " (expected a redirect starting with '\($0)')" } ?? ""))
            }

            let (data, response) = try await send(request)
            let status = response.statusCode

            if (300..<400).contains(status), status != 304 {
                guard let location = response.value(forHTTPHeaderField: "Location"),
                    let next = URL(string: location, relativeTo: request.url)?.absoluteURL
                else {
                    throw TestBrowserError(
                        "HTTP \(status) without a usable Location from \(request.url.absoluteString)")
                }
                if status == 307 || status == 308 {
                    request = PendingRequest(url: next, method: request.method, formBody: request.formBody)
                } else {
                    request = PendingRequest(url: next)
                }
                continue
            }

            let body = String(decoding: data, as: UTF8.self)
            guard (200..<300).contains(status) else {
                throw TestBrowserError(
                    "HTTP \(status) for \(request.method) \(request.url.absoluteString): \(Self.summary(of: body))")
            }
            return .page(request.url, body)
        }
        throw TestBrowserError("too many redirects starting at \(initial.url.absoluteString)")
    }

    private func send(_ pending: PendingRequest) async throws -> (Data, HTTPURLResponse) {
        var request = URLRequest(url: pending.url)
        request.httpMethod = pending.method
        request.httpShouldHandleCookies = false
        request.setValue("text/html,application/xhtml+xml;q=0.9,*/*;q=0.8", forHTTPHeaderField: "Accept")
        request.setValue("OAuthFlow-TestBrowser/1.0", forHTTPHeaderField: "User-Agent")
        if let cookieHeader = cookieHeader(for: pending.url) {
            request.setValue(cookieHeader, forHTTPHeaderField: "Cookie")
        }
        if let body = pending.formBody {
            request.httpBody = Data(body.utf8)
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            // Like a real browser; Django's CSRF check accepts a same-origin Origin header.
            if let origin = try? Self.origin(of: pending.url) {
                request.setValue(origin, forHTTPHeaderField: "Origin")
            }
        }

        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw TestBrowserError("\(pending.method) \(pending.url.absoluteString) failed: \(error)")
        }
        guard let http = response as? HTTPURLResponse else {
            throw TestBrowserError("non-HTTP response for \(pending.url.absoluteString)")
        }
        storeCookies(from: http, requestURL: pending.url)
        return (data, http)
    }

    // MARK: - Cookies

    private struct Cookie: Sendable {
        var name: String
        var value: String
        var host: String
        var path: String
        var expires: Date?
    }

    private func cookieHeader(for url: URL) -> String? {
        let host = (url.host ?? "").lowercased()
        let path = url.path.isEmpty ? "/" : url.path
        let now = Date()
        cookies.removeAll { cookie in cookie.expires.map { $0 <= now } ?? false }
        let matching = cookies.filter { cookie in
            cookie.host == host && Self.pathMatches(requestPath: path, cookiePath: cookie.path)
        }
        guard !matching.isEmpty else { return nil }
        return matching.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    private func storeCookies(from response: HTTPURLResponse, requestURL: URL) {
        for line in Self.setCookieLines(from: response) {
            guard let parsed = Self.parseSetCookie(line, requestURL: requestURL) else { continue }
            cookies.removeAll { $0.name == parsed.name && $0.host == parsed.host && $0.path == parsed.path }
            if let expires = parsed.expires, expires <= Date() {
                continue  // deletion (Max-Age=0 / past Expires)
            }
            cookies.append(parsed)
        }
    }

    /// All Set-Cookie header lines. Foundation may fold repeated headers into one value
    /// joined by ", ", which is ambiguous with the comma in `expires=Sun, 28 Nov ...`;
    /// a comma only starts a new cookie when it is followed by `name=`.
    private static func setCookieLines(from response: HTTPURLResponse) -> [String] {
        var folded: [String] = []
        for (key, value) in response.allHeaderFields {
            guard let name = key as? String, name.lowercased() == "set-cookie", let value = value as? String else {
                continue
            }
            folded.append(value)
        }
        var lines: [String] = []
        for value in folded {
            var current = ""
            var remainder = Substring(value)
            while let comma = remainder.firstIndex(of: ",") {
                let head = remainder[..<comma]
                let tail = remainder[remainder.index(after: comma)...]
                if startsNewCookie(tail) {
                    lines.append(current + head)
                    current = ""
                } else {
                    current += head + ","
                }
                remainder = tail
            }
            lines.append(current + remainder)
        }
        return lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    private static func startsNewCookie(_ text: Substring) -> Bool {
        let trimmed = text.drop(while: { $0 == " " || $0 == "\t" })
        guard let equals = trimmed.firstIndex(of: "=") else { return false }
        let name = trimmed[..<equals]
        return !name.isEmpty && !name.contains(where: { $0 == ";" || $0 == "," || $0 == " " || $0 == "\t" })
    }

    private static func parseSetCookie(_ line: String, requestURL: URL) -> Cookie? {
        let parts = line.split(separator: ";", omittingEmptySubsequences: false)
        guard let first = parts.first, let equals = first.firstIndex(of: "=") else { return nil }
        let name = first[..<equals].trimmingCharacters(in: .whitespaces)
        var value = first[first.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
            value = String(value.dropFirst().dropLast())
        }
        guard !name.isEmpty else { return nil }

        var cookie = Cookie(
            name: name, value: value, host: (requestURL.host ?? "").lowercased(),
            path: defaultCookiePath(for: requestURL), expires: nil)
        var maxAgeSeen = false
        for attribute in parts.dropFirst() {
            let pieces = attribute.split(separator: "=", maxSplits: 1)
            guard let rawKey = pieces.first else { continue }
            let key = rawKey.trimmingCharacters(in: .whitespaces).lowercased()
            let attributeValue = pieces.count > 1 ? pieces[1].trimmingCharacters(in: .whitespaces) : ""
            switch key {
            case "path" where attributeValue.hasPrefix("/"):
                cookie.path = attributeValue
            case "max-age":
                if let seconds = Double(attributeValue) {
                    cookie.expires = Date(timeIntervalSinceNow: seconds)
                    maxAgeSeen = true
                }
            case "expires" where !maxAgeSeen:
                cookie.expires = parseHTTPDate(attributeValue)
            default:
                break  // Domain, Secure, HttpOnly, SameSite: irrelevant for a single loopback host.
            }
        }
        return cookie
    }

    private static func parseHTTPDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        let formats = ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEE, dd-MMM-yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz"]
        for format in formats {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    private static func defaultCookiePath(for url: URL) -> String {
        let path = url.path
        guard path.hasPrefix("/"), let lastSlash = path.lastIndex(of: "/"), lastSlash != path.startIndex else {
            return "/"
        }
        return String(path[..<lastSlash])
    }

    private static func pathMatches(requestPath: String, cookiePath: String) -> Bool {
        if requestPath == cookiePath || cookiePath == "/" { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).hasPrefix("/")
    }

    // MARK: - Helpers

    fileprivate static func origin(of url: URL) throws -> String {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else {
            throw TestBrowserError("not an absolute http(s) URL: \(url.absoluteString)")
        }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }

    /// Visible text of an HTML page, whitespace-collapsed and truncated (for error messages).
    internal static func summary(of html: String, limit: Int = 400) -> String {
        var text = ""
        var inTag = false
        for character in html {
            if character == "<" {
                inTag = true
                text.append(" ")
            } else if character == ">" {
                inTag = false
            } else if !inTag {
                text.append(character)
            }
        }
        let collapsed = HTMLForm.unescape(text)
            .split(whereSeparator: { $0.isWhitespace })
            .joined(separator: " ")
        return collapsed.count > limit ? String(collapsed.prefix(limit)) + "…" : collapsed
    }
}

/// A request the browser is about to make.
private struct PendingRequest: Sendable {
    var url: URL
    var method: String = "GET"
    var formBody: String?
}

/// Refuses every HTTP redirect so that the 3xx response itself is returned to the caller.
private final class RedirectRefuser: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// An HTML `<form>` with its successful controls, scraped with a small tag scanner
/// (enough for Django's server-rendered pages; not a general HTML parser).
private struct HTMLForm: Sendable {
    struct Button: Sendable {
        var name: String?
        var value: String
    }

    var action: String?
    var method: String
    /// Named `<input>` (non-submit, non-button; unchecked checkboxes/radios excluded),
    /// `<textarea>` and `<select>` values, in document order.
    var fields: [(name: String, value: String)]
    var inputTypes: [String: String]
    var submitButtons: [Button]

    var isLoginForm: Bool { inputTypes.values.contains("password") }

    /// DOT's consent page: `<form id="authorizationForm">` with hidden `client_id`,
    /// `redirect_uri`, ... and a submit button named `allow`.
    var isConsentForm: Bool {
        submitButtons.contains { $0.name == "allow" } && hasField("client_id")
    }

    func hasField(_ name: String) -> Bool {
        inputTypes[name] != nil || fields.contains { $0.name == name }
    }

    /// Builds the submission: all successful fields, with `overriding` replacing (or adding)
    /// values and `removing` dropped. Submit buttons are only sent when named in `overriding`.
    func submission(
        pageURL: URL,
        overriding: [String: String],
        removing: Set<String> = []
    ) throws -> PendingRequest {
        var pairs: [(String, String)] = []
        var used = Set<String>()
        for field in fields where !removing.contains(field.name) {
            if let replacement = overriding[field.name] {
                if used.insert(field.name).inserted {
                    pairs.append((field.name, replacement))
                }
            } else {
                pairs.append((field.name, field.value))
            }
        }
        for (name, value) in overriding.sorted(by: { $0.key < $1.key }) where !used.contains(name) {
            if !fields.contains(where: { $0.name == name }) {
                pairs.append((name, value))
            }
        }

        let target: URL
        if let action, !action.isEmpty {
            guard let resolved = URL(string: action, relativeTo: pageURL)?.absoluteURL else {
                throw TestBrowserError("bad form action '\(action)' on \(pageURL.absoluteString)")
            }
            target = resolved
        } else {
            target = pageURL  // no action: submit to the document's own URL (query included)
        }
        let body = pairs.map { "\(Self.formEncode($0.0))=\(Self.formEncode($0.1))" }.joined(separator: "&")
        if method == "GET" {
            guard var components = URLComponents(url: target, resolvingAgainstBaseURL: true) else {
                throw TestBrowserError("bad form target \(target.absoluteString)")
            }
            components.percentEncodedQuery = body
            guard let url = components.url else {
                throw TestBrowserError("bad form target \(target.absoluteString)")
            }
            return PendingRequest(url: url)
        }
        return PendingRequest(url: target, method: "POST", formBody: body)
    }

    // MARK: Parsing

    static func parse(_ html: String) -> [HTMLForm] {
        var forms: [HTMLForm] = []
        var current: HTMLForm?
        var textareaName: String?
        var textareaStart: String.Index?
        var selectName: String?
        var selectFirstOption: String?
        var selectChosen: String?
        var index = html.startIndex

        while let open = html[index...].firstIndex(of: "<") {
            // Skip comments.
            if html[open...].hasPrefix("<!--") {
                guard let end = html.range(of: "-->", range: open..<html.endIndex) else { break }
                index = end.upperBound
                continue
            }
            guard let tag = scanTag(html, from: open) else {
                index = html.index(after: open)
                continue
            }
            index = tag.end

            switch (tag.name, tag.isClosing) {
            case ("form", false):
                current = HTMLForm(
                    action: tag.attributes["action"].map(unescape),
                    method: (tag.attributes["method"] ?? "get").uppercased() == "POST" ? "POST" : "GET",
                    fields: [], inputTypes: [:], submitButtons: [])
            case ("form", true):
                if let form = current { forms.append(form) }
                current = nil
            case ("input", false):
                guard current != nil else { continue }
                let type = (tag.attributes["type"] ?? "text").lowercased()
                let name = tag.attributes["name"].map(unescape)
                let value = unescape(tag.attributes["value"] ?? "")
                switch type {
                case "submit", "image":
                    current?.submitButtons.append(Button(name: name, value: value))
                case "button", "reset", "file":
                    break
                case "checkbox", "radio":
                    if let name {
                        current?.inputTypes[name] = type
                        if tag.attributes["checked"] != nil {
                            current?.fields.append((name, tag.attributes["value"] == nil ? "on" : value))
                        }
                    }
                default:
                    if let name {
                        current?.inputTypes[name] = type
                        current?.fields.append((name, value))
                    }
                }
            case ("button", false):
                guard current != nil else { continue }
                let type = (tag.attributes["type"] ?? "submit").lowercased()
                if type == "submit" {
                    current?.submitButtons.append(
                        Button(
                            name: tag.attributes["name"].map(unescape),
                            value: unescape(tag.attributes["value"] ?? "")))
                }
            case ("textarea", false):
                textareaName = tag.attributes["name"].map(unescape)
                textareaStart = tag.end
            case ("textarea", true):
                if let name = textareaName, let start = textareaStart, current != nil {
                    current?.inputTypes[name] = "textarea"
                    current?.fields.append((name, unescape(String(html[start..<open]))))
                }
                textareaName = nil
                textareaStart = nil
            case ("select", false):
                selectName = tag.attributes["name"].map(unescape)
                selectFirstOption = nil
                selectChosen = nil
            case ("option", false):
                let value = unescape(tag.attributes["value"] ?? "")
                if selectFirstOption == nil { selectFirstOption = value }
                if tag.attributes["selected"] != nil { selectChosen = value }
            case ("select", true):
                if let name = selectName, current != nil, let value = selectChosen ?? selectFirstOption {
                    current?.inputTypes[name] = "select"
                    current?.fields.append((name, value))
                }
                selectName = nil
            default:
                break
            }
        }
        if let form = current { forms.append(form) }  // unterminated form
        return forms
    }

    private struct Tag {
        var name: String
        var isClosing: Bool
        var attributes: [String: String]
        var end: String.Index
    }

    /// Scans the tag starting at `open` ("<"); returns nil if it is not a tag.
    private static func scanTag(_ html: String, from open: String.Index) -> Tag? {
        var i = html.index(after: open)
        var isClosing = false
        if i < html.endIndex, html[i] == "/" {
            isClosing = true
            i = html.index(after: i)
        }
        let nameStart = i
        while i < html.endIndex, html[i].isLetter || html[i].isNumber || html[i] == "-" {
            i = html.index(after: i)
        }
        guard i > nameStart else { return nil }
        let name = html[nameStart..<i].lowercased()
        var attributes: [String: String] = [:]

        func skipSpaces() {
            while i < html.endIndex, html[i].isWhitespace || html[i] == "/" { i = html.index(after: i) }
        }
        while true {
            skipSpaces()
            guard i < html.endIndex else {
                return Tag(name: name, isClosing: isClosing, attributes: attributes, end: i)
            }
            if html[i] == ">" {
                return Tag(name: name, isClosing: isClosing, attributes: attributes, end: html.index(after: i))
            }
            let attrStart = i
            while i < html.endIndex, !html[i].isWhitespace, html[i] != "=", html[i] != ">", html[i] != "/" {
                i = html.index(after: i)
            }
            let attrName = html[attrStart..<i].lowercased()
            while i < html.endIndex, html[i].isWhitespace { i = html.index(after: i) }
            var attrValue = ""
            if i < html.endIndex, html[i] == "=" {
                i = html.index(after: i)
                while i < html.endIndex, html[i].isWhitespace { i = html.index(after: i) }
                if i < html.endIndex, html[i] == "\"" || html[i] == "'" {
                    let quote = html[i]
                    let valueStart = html.index(after: i)
                    guard let close = html[valueStart...].firstIndex(of: quote) else { return nil }
                    attrValue = String(html[valueStart..<close])
                    i = html.index(after: close)
                } else {
                    let valueStart = i
                    while i < html.endIndex, !html[i].isWhitespace, html[i] != ">" { i = html.index(after: i) }
                    attrValue = String(html[valueStart..<i])
                }
            }
            if attrName.isEmpty {
                // Stray character; move on to avoid looping.
                if i < html.endIndex { i = html.index(after: i) }
            } else if attributes[attrName] == nil {
                attributes[attrName] = attrValue
            }
        }
    }

    /// Decodes the character references Django's autoescaping produces (and numeric ones).
    static func unescape(_ text: String) -> String {
        guard text.contains("&") else { return text }
        let named: [String: String] = [
            "amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'", "nbsp": "\u{00A0}",
        ]
        var result = ""
        var i = text.startIndex
        while i < text.endIndex {
            let character = text[i]
            guard character == "&",
                let semicolon = text[i...].prefix(12).firstIndex(of: ";")
            else {
                result.append(character)
                i = text.index(after: i)
                continue
            }
            let entity = String(text[text.index(after: i)..<semicolon])
            var replacement: String?
            if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                replacement = UInt32(entity.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init).map { String($0) }
            } else if entity.hasPrefix("#") {
                replacement = UInt32(entity.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init).map { String($0) }
            } else {
                replacement = named[entity]
            }
            if let replacement {
                result += replacement
                i = text.index(after: semicolon)
            } else {
                result.append(character)
                i = text.index(after: i)
            }
        }
        return result
    }

    /// application/x-www-form-urlencoded encoding (unreserved characters kept, space as %20).
    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        // `alphanumerics` includes non-ASCII letters; only ASCII bytes are checked against it.
        let hexDigits = Array("0123456789ABCDEF")
        var result = ""
        for byte in text.utf8 {
            let scalar = Unicode.Scalar(byte)
            if byte < 0x80, allowed.contains(scalar) {
                result.unicodeScalars.append(scalar)
            } else {
                result.append("%")
                result.append(hexDigits[Int(byte >> 4)])
                result.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return result
    }
}
