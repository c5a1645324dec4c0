// token: an HTTP response (status, headers, body) from the token or device authorization endpoint
// turned into a TokenResponse, a DeviceCode or an OAuthError (Model/TokenResponse.swift, HTTP/EndpointClient.swift,
// Grants/DeviceAuthorization.swift), with the retry decision on it (HTTP/Retry.swift: 429/5xx,
// Retry-After) and the other headers a server controls (HTTP/Challenge.swift WWW-Authenticate,
// OIDC/Discovery.swift Cache-Control); then a token answer through the whole grant: stored, and
// read back by a second flow (Storage/StoredEntry.swift).
//
// Input: a first line `STATUS CONTENT-TYPE` (`-` for none); then header lines `Name: value`, ended
// by an empty line or by the first line that is not one; then the body. Without a line break the
// whole input is the body of a `200 application/json` answer.
import Foundation

enum TokenTarget {
    static let provider = Provider(
        id: "fuzz", tokenURL: URL(string: "https://idp.example/token")!,
        deviceAuthorizationURL: URL(string: "https://idp.example/device")!,
        clientID: "fuzz-client", clientSecret: Secret("fuzz-client-secret"), scopes: ["read"])

    static func response(_ bytes: [UInt8]) -> HTTPResponse {
        var (line, rest) = splitFirstLine(bytes)
        guard let line else {
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(bytes))
        }
        let words = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        let status = words.first.flatMap { Int($0) } ?? 200
        let type = words.count > 1 ? String(words[1]) : "-"
        var headers: [String: String] = type == "-" ? [:] : ["Content-Type": type]
        while case (let header?, let after) = splitFirstLine(rest) {
            if header.isEmpty {
                rest = after
                break
            }
            guard !header.hasPrefix("{"), !header.hasPrefix("<"), let colon = header.range(of: ": ") else { break }
            let name = String(header[..<colon.lowerBound])
            if headers[name] == nil { headers[name] = String(header[colon.upperBound...]) }
            rest = after
        }
        return HTTPResponse(status: status, headers: headers, body: Data(rest))
    }

    static func run(_ bytes: [UInt8]) {
        let answer = response(bytes)
        headers(answer)
        blocking {
            await decode(answer)
            await grant(answer)
        }
    }

    /// The parsers of headers a server chooses: none traps, and what they return is bounded.
    static func headers(_ answer: HTTPResponse) {
        if let value = answer.headers["www-authenticate"] {
            for challenge in Challenge.parse(value) { _ = challenge.scheme.lowercased() }
            _ = Challenge.isInvalidBearerToken(value)
            // A resource's step-up challenge (RFC 6750 §3, RFC 9470): what it asks is checked, or refused.
            if let asked = try? ResourceChallenge.parse(status: 403, header: value) {
                invariant(!asked.asked.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "a control character in what a challenge asks")
                invariant((asked.maxAge ?? 0) >= 0 && (asked.maxAge ?? 0) <= ResourceChallenge.maximumMaxAge, "max_age out of range")
            }
        }
        if let value = answer.headers["retry-after"], let wait = Retrier.retryAfter(value, now: fuzzNow) {
            invariant(wait >= .zero, "a negative Retry-After")
        }
        let lifetime = Discovery.lifetime(of: answer)
        invariant((0...Discovery.maximumLifetime).contains(lifetime), "a Cache-Control lifetime out of range")
        _ = answer.description
        _ = EndpointClient.describeBody(answer)
    }

    /// EndpointClient.send, then the §5.1 and RFC 8628 §3.2 decoders, as the grants call them.
    static func decode(_ answer: HTTPResponse) async {
        let transport = ScriptedTransport { _ in answer }
        let policy = RetryPolicy(maximumAttempts: 3)
        let client = EndpointClient(provider: provider, transport: transport, userAgent: "fuzz", log: Logger(sink: nil),
                                    retry: Retrier(policy: policy, clock: InstantClock(), now: { fuzzNow }, jitter: { 0.5 }))
        let object: JSONObject
        defer {
            // Retried only when transient (429, 5xx but 501, no final §5.2 error), at most as often as the policy says.
            let attempts = transport.requests.count
            invariant((1...policy.maximumAttempts).contains(attempts), "\(attempts) attempts under a policy of \(policy.maximumAttempts)")
            if attempts > 1 { invariant(Retrier.isTransient(answer), "a final answer was retried") }
        }
        do {
            object = try await client.post([("grant_type", "client_credentials")], to: provider.tokenURL!,
                                           endpoint: .token, retrying: .transient)
        } catch {
            checkShown(error)
            if answer.body.count > client.maximumBodySize { invariant(error.code == .invalidResponse, "an oversized body is not .invalidResponse") }
            return
        }
        invariant((200..<300).contains(answer.status), "a non-2xx answer was accepted as a token response")
        do {
            let token = try TokenResponse(object)
            invariant(TokenSyntax.isAccessToken(token.accessToken.reveal()), "an access token with a forbidden character was accepted")
            invariant(token.tokenType.lowercased() == "bearer", "a token_type other than Bearer was accepted")
            if let expiresIn = token.expiresIn { invariant((0...TokenResponse.maximumLifetime).contains(expiresIn), "expires_in out of range") }
            let set = TokenSet(token, providerID: provider.id, requestedScopes: ["read"], grant: .clientCredentials, now: fuzzNow)
            let merged = RefreshTokenGrant.merge(token, into: set, now: fuzzNow)
            for candidate in [set, merged] {
                let stored = StoredEntry.encode(candidate)
                do {
                    let back = try StoredEntry.decode(stored, key: provider.id)
                    invariant(back.authorization == candidate.authorization, "a stored entry reads back different")
                } catch {
                    invariant(false, "a token set the library stored cannot be read back: \(error)")
                }
                _ = candidate.isExpired(at: fuzzNow, margin: 60)
                _ = candidate.authorization
                _ = String(reflecting: candidate)
            }
        } catch {
            checkShown(error)
        }
        do {
            let code = try DeviceAuthorizationGrant.decode(object, provider: provider.id, scopes: ["read"], now: fuzzNow)
            invariant(code.interval >= 1, "a device polling interval under 1 s")
            invariant(code.expiresIn >= 1 && code.expiresAt > fuzzNow, "a device code that has already expired")
            _ = code.description
            _ = DisplayText.escape(code.userCode)
            _ = DisplayText.escape(code.verificationURI.absoluteString)
        } catch {
            checkShown(error)
        }
    }

    /// The client credentials grant answered by `answer`: exchange → validate → store → publish;
    /// what it stored must be restored by a second flow over the same store.
    static func grant(_ answer: HTTPResponse) async {
        let store = MemorySecretStore()
        let transport = ScriptedTransport { _ in answer }
        do {
            let flow = try await AuthFlow(providers: [provider], store: store, transport: transport, options: fuzzOptions())
            let authorization: Authorization
            do {
                authorization = try await flow.clientCredentials(provider: provider.id)
            } catch {
                checkShown(error)
                invariant(try await store.load(provider.id) == nil, "a failed grant stored something")
                return
            }
            let second = try await AuthFlow(providers: [provider], store: store, transport: transport, options: fuzzOptions())
            let restored = try await second.restore()
            invariant(restored[provider.id] == authorization, "what the grant stored is not restored as it was")
            invariant(transport.requests.count == 1, "one grant sent \(transport.requests.count) requests")
        } catch {
            invariant(false, "a flow over a memory store failed: \(error)")
        }
    }
}
