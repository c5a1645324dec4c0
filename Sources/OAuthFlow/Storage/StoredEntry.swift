#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The on-disk form of a token set: versioned JSON, written and read through the one JSON parser.
///
/// ```json
/// {"tokens":{"accessToken":"…","expiresAt":1767225600,"grant":"client_credentials",
///  "issuedAt":1767222000,"needsReauthorization":false,"providerID":"billing","refreshToken":"…",
///  "scopes":["read"],"tokenType":"Bearer"},"version":1}
/// ```
///
/// Members are sorted; absent optionals are left out; times are seconds since 1970. Reading
/// range-checks every number, so a file holding `"expiresAt": 1e300` is a typed `.storage` error,
/// never a trap, and checks every token's syntax (``TokenSyntax``), so an entry whose access token
/// holds CR LF, or whose type is not Bearer, is a `.storage` error too.
enum StoredEntry {
    static let version = 1
    /// ``version`` as written, made once (`String(version)` went through `description` on every save).
    private static let versionText = String(version)

    /// The entry's bytes: written directly into a byte buffer, without a general-purpose encoder
    /// (it runs on every fetch).
    static func encode(_ set: TokenSet) -> Data {
        var out = Writer(capacity: 256 + set.accessToken.reveal().utf8.count + (set.refreshToken?.reveal().utf8.count ?? 0)
            + (set.idToken?.reveal().utf8.count ?? 0))
        out.append("{\"tokens\":{\"accessToken\":")
        out.quote(set.accessToken.reveal())
        if let key = set.dpopKey {
            // The DPoP key the tokens are bound to (RFC 9449): a secret like them, sealed with them.
            out.append(",\"dpopAlgorithm\":")
            out.quote(key.algorithm.rawValue)
            out.append(",\"dpopKey\":")
            out.quote(key.encoded.reveal())
        }
        if let expiresAt = set.expiresAt {
            out.append(",\"expiresAt\":")
            out.number(expiresAt.timeIntervalSince1970)
        }
        out.append(",\"grant\":")
        out.quote(set.grant.rawValue)
        if let idToken = set.idToken {
            out.append(",\"idToken\":")
            out.quote(idToken.reveal())
            // Marks a token that passed validation, so loading rebuilds its claims without verifying
            // the signature again; an entry without it (or one written before validation existed)
            // keeps the raw token but no claims.
            if set.validatedIDToken != nil { out.append(",\"idTokenValidated\":true") }
        }
        out.append(",\"issuedAt\":")
        out.number(set.issuedAt.timeIntervalSince1970)
        if let issuedTokenType = set.issuedTokenType {
            out.append(",\"issuedTokenType\":")
            out.quote(issuedTokenType)
        }
        out.append(set.needsReauthorization ? ",\"needsReauthorization\":true" : ",\"needsReauthorization\":false")
        out.append(",\"providerID\":")
        out.quote(set.providerID)
        if let refreshToken = set.refreshToken {
            out.append(",\"refreshToken\":")
            out.quote(refreshToken.reveal())
        }
        out.append(",\"scopes\":[")
        for (index, scope) in set.scopes.enumerated() {
            if index > 0 { out.append(",") }
            out.quote(scope)
        }
        out.append("],\"tokenType\":")
        out.quote(set.tokenType)
        out.append("},\"version\":")
        out.append(contentsOf: versionText)
        out.append("}")
        return Data(copying: out.bytes)
    }

    /// The bytes of an entry as they are written.
    private struct Writer {
        var bytes: [UInt8] = []

        init(capacity: Int) { bytes.reserveCapacity(capacity) }

        /// A literal. (With an overload taking `String` too, a literal argument would pick that one.)
        mutating func append(_ text: StaticString) {
            text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        }

        mutating func append(contentsOf text: String) {
            var text = text
            text.withUTF8 { bytes.append(contentsOf: $0) }
        }

        /// `text` as a JSON string: copied as it is when it is printable ASCII without `"` or `\`
        /// (every token, type, grant and provider id in practice), else through ``JSONValue/quote(_:into:)``.
        mutating func quote(_ text: String) {
            var text = text
            let plain = text.withUTF8 { utf8 in
                // Every byte looked at, without a branch per byte (the compiler vectorizes it).
                var escapes: UInt8 = 0
                for byte in utf8 {
                    escapes |= (byte &- 0x20 >= 0x5F ? 1 : 0) | (byte == UInt8(ascii: "\"") ? 1 : 0) | (byte == UInt8(ascii: "\\") ? 1 : 0)
                }
                guard escapes == 0 else { return false }
                bytes.append(UInt8(ascii: "\""))
                bytes.append(contentsOf: utf8)
                bytes.append(UInt8(ascii: "\""))
                return true
            }
            if !plain {
                var quoted = ""
                JSONValue.quote(text, into: &quoted)
                append(contentsOf: quoted)
            }
        }

        /// A time in seconds since 1970, as `JSONValue.number(_: Double)` writes it (`null` when
        /// not finite, an integer without a fraction, else the shortest round-trip form), without
        /// the `JSONValue` and the string interpolation.
        mutating func number(_ value: Double) {
            guard value.isFinite else { return append("null") }
            if value.rounded(.towardZero) == value, abs(value) < 1e15 { return append(contentsOf: String(Int64(value))) }
            append(contentsOf: value.description)
        }
    }

    /// Reads an entry stored under `key`.
    /// - Throws: ``OAuthError`` `.storage` naming the key and the member at fault, never a value.
    static func decode(_ data: Data, key: String) throws(OAuthError) -> TokenSet {
        let corrupted: (String) -> OAuthError = { reason in
            OAuthError(.storage, providerID: key, message: "the stored entry \"\(key)\" is corrupted (\(reason))")
        }
        let root: JSONValue
        do {
            root = try JSONValue.parse(Array(data))
        } catch {
            throw corrupted("not valid JSON")
        }
        let envelope = try JSONObject(root, what: "the entry", failure: corrupted)
        guard let version = try envelope.integer("version", in: Int.min...Int.max) else { throw corrupted("missing version") }
        guard version == Self.version else {
            throw OAuthError(.storage, providerID: key, message: "the stored entry \"\(key)\" has unknown version \(version)")
        }
        guard let tokens = try envelope.object("tokens") else { throw corrupted("missing tokens") }
        let fields = JSONObject(members: tokens.members) { reason in corrupted("tokens.\(reason)") }
        let providerID = try fields.requiredString("providerID")
        guard providerID == key else {
            throw OAuthError(.storage, providerID: key, message: "the stored entry \"\(key)\" belongs to provider \"\(providerID)\"")
        }
        guard let grantName = try fields.string("grant"), let grant = GrantType(rawValue: grantName) else {
            throw fields.fail("grant is missing or unknown")
        }
        guard let issuedAt = try fields.date("issuedAt") else { throw fields.fail("issuedAt is missing") }
        let accessToken = try fields.requiredString("accessToken")
        let tokenType = try fields.requiredString("tokenType")
        let refreshToken = try fields.string("refreshToken")
        let rawIDToken = try fields.string("idToken")
        let issuedTokenType = try fields.string("issuedTokenType")
        // Entries written before tokens were checked are checked on the way out: one holding CR LF
        // is refused here, never printed by `authflow token` or put in a header.
        let checkedType = try TokenResponse.checkedTokenType(tokenType, issued: issuedTokenType, fail: fields.fail)
        try TokenSyntax.check(accessToken: accessToken, tokenType: checkedType, refreshToken: refreshToken, idToken: rawIDToken,
                              names: ("accessToken", "tokenType", "refreshToken", "idToken"), allowsDPoP: true, fail: fields.fail)
        let idToken = rawIDToken.map(Secret.init)
        var validated: IDToken?
        if let idToken, try fields.bool("idTokenValidated") == true {
            do { validated = try IDToken(storedToken: idToken) } catch { throw corrupted("tokens.idToken is not a JWT with the required claims") }
        }
        var dpopKey: DPoPKey?
        if let encodedKey = try fields.string("dpopKey") {
            guard let name = try fields.string("dpopAlgorithm"), let algorithm = SigningAlgorithm(rawValue: name),
                  DPoPProof.algorithms.contains(algorithm) else { throw fields.fail("dpopAlgorithm is missing or unknown") }
            do { dpopKey = try DPoPKey.decode(encodedKey, algorithm: algorithm) } catch { throw corrupted("tokens.dpopKey: \(error.message ?? "unreadable")") }
        }
        var set = TokenSet(
            providerID: providerID, accessToken: Secret(accessToken),
            tokenType: tokenType, refreshToken: refreshToken.map(Secret.init),
            idToken: idToken, validatedIDToken: validated, scopes: try fields.strings("scopes") ?? [],
            issuedAt: issuedAt, expiresAt: try fields.date("expiresAt"), grant: grant,
            needsReauthorization: try fields.bool("needsReauthorization") ?? false, issuedTokenType: issuedTokenType)
        set.dpopKey = dpopKey
        return set
    }
}
