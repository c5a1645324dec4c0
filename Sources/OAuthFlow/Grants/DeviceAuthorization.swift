#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The device authorization grant ([RFC 8628](https://www.rfc-editor.org/rfc/rfc8628)).
enum DeviceAuthorizationGrant {
    /// Requests a device code and user code (RFC 8628 §3.1–3.2), with the client's authentication.
    static func requestCode(scopes: [String], client: EndpointClient, url: URL, now: Date) async throws(OAuthError) -> DeviceCode {
        var fields: [(String, String)] = []
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        let object = try await client.post(fields, to: url, endpoint: .deviceAuthorization)
        return try decode(object, provider: client.provider.id, scopes: scopes, now: now)
    }

    /// The token request for `code`: the token endpoint polls with it (``TokenEndpoint``, reading
    /// each refusal with ``Poll``, Grants/Polling.swift).
    static func request(polling code: DeviceCode) -> GrantRequest {
        GrantRequest(.poll(.device(code)), grant: .deviceCode, requestedScopes: code.scopes)
    }

    /// What each poll sends (RFC 8628 §3.4): the grant type and the device code.
    static func fields(polling code: DeviceCode) -> [(String, String)] {
        [("grant_type", GrantType.deviceCode.rawValue), ("device_code", code.deviceCode.reveal())]
    }

    /// The longest `user_code` accepted, in Unicode scalars; real ones are 8 or 9 characters.
    static let maximumUserCodeLength = 64

    /// Decodes a §3.2 response received at `now`; numbers are range-checked and `interval` is
    /// raised to at least 1 s. A `user_code` longer than ``maximumUserCodeLength`` or holding a
    /// character ``DisplayText/isUnsafe(_:)`` flags is `.invalidResponse`.
    static func decode(_ object: JSONObject, provider: String, scopes: [String], now: Date) throws(OAuthError) -> DeviceCode {
        let deviceCode = try object.requiredString("device_code")
        let userCode = try object.requiredString("user_code")
        // A person reads and types it: no control character, line break or bidi override that could
        // put the server's own words on the screen around it, and no page of text (RFC 8628 §6.1).
        guard userCode.unicodeScalars.count <= maximumUserCodeLength else {
            throw object.fail("user_code is longer than \(maximumUserCodeLength) characters")
        }
        guard !userCode.unicodeScalars.contains(where: DisplayText.isUnsafe) else {
            throw object.fail("user_code holds a control character, a line break or a bidi control")
        }
        // Google sends verification_url; RFC 8628 names it verification_uri.
        let uriKey = object.contains("verification_uri") ? "verification_uri" : "verification_url"
        guard let uri = try object.url(uriKey) else { throw object.fail("verification_uri is missing") }
        let completeKey = object.contains("verification_uri_complete") ? "verification_uri_complete" : "verification_url_complete"
        let complete = try object.url(completeKey)
        let (expiresIn, interval) = try Poll.timing(object)
        return DeviceCode(
            providerID: provider, deviceCode: Secret(deviceCode), userCode: userCode, verificationURI: uri,
            verificationURIComplete: complete, expiresAt: now.addingTimeInterval(TimeInterval(expiresIn)),
            expiresIn: expiresIn, interval: interval, scopes: scopes)
    }

    static func expired(_ code: DeviceCode) -> OAuthError {
        OAuthError(.expired, providerID: code.providerID, endpoint: .token,
                   message: "the device code expired before the user approved it (RFC 8628 §3.5)")
    }

    static func cancelled(_ code: DeviceCode) -> OAuthError {
        OAuthError(.cancelled, providerID: code.providerID, endpoint: .token, message: "device authorization polling was cancelled")
    }
}
