import Foundation
@testable import OAuthFlow
import OAuthFlowTesting
import Testing

/// The fast paths of a fetch and of a cached lookup give the same answers as the general code:
/// JSON strings without escapes, stored-entry strings that need no escaping, the provider slot
/// search for few and for many providers.
@Suite("Hot paths agree with the general code", .timeLimit(.minutes(1)))
struct HotPathTests {
    // MARK: JSON strings

    @Test("a string without escapes and one with escapes decode to the same text", arguments: [
        (#""plain-token.0123""#, "plain-token.0123"),
        (#""prefix \"quoted\" and \\ back""#, #"prefix "quoted" and \ back"#),
        (#""caf\u00e9 then more""#, "café then more"),
        ("\"caf\u{e9} raw UTF-8\"", "café raw UTF-8"),
        (#""""#, ""),
        (#""ends with an escape\n""#, "ends with an escape\n"),
    ])
    func jsonStrings(json: String, text: String) throws {
        #expect(try JSONValue.parse(Data(json.utf8)) == .string(text))
        #expect(try JSONValue.parse(Data("{\"k\":\(json),\"n\":1}".utf8))["k"] == .string(text))
    }

    @Test("invalid UTF-8 and control characters are refused whether or not an escape came first", arguments: [
        ([0x22, 0x61, 0xFF, 0x62, 0x22], "not valid UTF-8"),
        ([0x22, 0x5C, 0x6E, 0x61, 0xFF, 0x22], "not valid UTF-8"),
        ([0x22, 0x61, 0x0A, 0x62, 0x22], "control characters"),
        ([0x22, 0x5C, 0x74, 0x61, 0x0A, 0x22], "control characters"),
        ([0x22, 0x61, 0x62], "a string is not closed"),
        ([0x22, 0x5C, 0x74, 0x61], "a string is not closed"),
    ] as [([UInt8], String)])
    func jsonStringErrors(bytes: [UInt8], reason: String) {
        let error = #expect(throws: OAuthError.self) { try JSONValue.parse(Data(bytes)) }
        #expect(error?.message?.contains(reason) == true, "\(error?.message ?? "no message")")
    }

    @Test("an object's members are found by name the same way with few members (compared) and many (hashed)", arguments: [3, 12])
    func jsonMembers(count: Int) throws {
        var members = (0..<count).map { #""m\#($0)":\#($0)"# }
        members.append(#""caf\u00e9":"precomposed""#)
        members.append(#""empty":null"#)
        let object = try JSONObject(JSONValue.parse(Data("{\(members.joined(separator: ","))}".utf8)), what: "the test", failure: {
            OAuthError(.invalidResponse, message: $0)
        })
        for index in 0..<count { #expect(object.value("m\(index)") == .number("\(index)")) }
        #expect(object.value("m\(count)") == nil)
        #expect(object.value("empty") == nil, "null counts as absent")
        #expect(object.contains("m0") && !object.contains("M0"))
        #expect(try object.string("caf\u{65}\u{301}") == "precomposed", "canonically equivalent names are equal Strings, as for a Dictionary")
    }

    @Test("Data(utf8Of:) holds the same bytes as Data(text.utf8)", arguments: ["", "grant_type=client_credentials", "ünï€😀", String(repeating: "x", count: 300)])
    func utf8Data(text: String) {
        #expect(Data(utf8Of: text) == Data(text.utf8))
        #expect(Data(utf8Of: text.lowercased() + text) == Data((text.lowercased() + text).utf8))
    }

    // MARK: Stored entries

    @Test("an entry round-trips whether its strings go out as they are or escaped", arguments: [
        ("plain-access-token", "Bearer", ["read", "write"]),
        (#"quote"and\backslash"#, "bearer", ["scope:\"x\"", "ünïcode", "tab\there"]),
    ])
    func storedEntryRoundTrip(access: String, type: String, scopes: [String]) throws {
        let set = TokenSet(
            providerID: "p", accessToken: Secret(access), tokenType: type, refreshToken: Secret("refresh with space\\"),
            scopes: scopes, issuedAt: Date(timeIntervalSince1970: 1_767_222_000),
            expiresAt: Date(timeIntervalSince1970: 1_767_225_600), grant: .clientCredentials)
        let data = StoredEntry.encode(set)
        #expect(throws: Never.self) { try JSONValue.parse(data) }
        let back = try StoredEntry.decode(data, key: "p")
        #expect(back.accessToken.reveal() == access)
        #expect(back.tokenType == type)
        #expect(back.refreshToken?.reveal() == "refresh with space\\")
        #expect(back.scopes == scopes)
        #expect(back.issuedAt == set.issuedAt)
        #expect(back.expiresAt == set.expiresAt)
    }

    @Test("the entry format is exactly the documented one (sorted members, absent optionals left out)")
    func storedEntryBytes() {
        let set = TokenSet(providerID: "billing", accessToken: Secret("at"), scopes: ["read"],
                           issuedAt: Date(timeIntervalSince1970: 1_767_222_000), expiresAt: Date(timeIntervalSince1970: 1_767_225_600),
                           grant: .clientCredentials)
        let expected = #"{"tokens":{"accessToken":"at","expiresAt":1767225600,"grant":"client_credentials","issuedAt":1767222000,"#
            + #""needsReauthorization":false,"providerID":"billing","scopes":["read"],"tokenType":"Bearer"},"version":1}"#
        #expect(String(decoding: StoredEntry.encode(set), as: UTF8.self) == expected)
    }

    @Test("an entry's times are written as JSONValue writes numbers: whole seconds as integers, fractions in the shortest round-trip form",
          arguments: [1_767_222_000, 1_767_222_000.5, 1_796_183_423.123456, 0.1, 86_400.25, 253_402_296_000.75])
    func storedEntryTimes(seconds: Double) throws {
        let set = TokenSet(providerID: "p", accessToken: Secret("at"), issuedAt: Date(timeIntervalSince1970: seconds),
                           expiresAt: Date(timeIntervalSince1970: seconds + 3600), grant: .clientCredentials)
        var issued = ""
        JSONValue.number(set.issuedAt.timeIntervalSince1970).write(into: &issued)
        var expires = ""
        JSONValue.number(set.expiresAt!.timeIntervalSince1970).write(into: &expires)
        let text = String(decoding: StoredEntry.encode(set), as: UTF8.self)
        #expect(text.contains(#""issuedAt":\#(issued),"#) && text.contains(#""expiresAt":\#(expires),"#), "\(text)")
        let back = try StoredEntry.decode(StoredEntry.encode(set), key: "p")
        #expect(back.issuedAt == set.issuedAt && back.expiresAt == set.expiresAt)
    }

    // MARK: Client authentication

    @Test("client_secret_basic: the value AuthFlow makes once per provider is the one made per request, on every fetch")
    func basicCredentialsOnce() async throws {
        let mock = MockProvider()
        mock.script(.token, [.token(access: "at-1"), .token(access: "at-2")])
        let provider = mock.provider(id: "svc", clientID: "client id/1", clientSecret: "top secret:1+ü")
        let flow = try await AuthFlow(providers: [provider], transport: mock.transport())
        _ = try await flow.clientCredentials(provider: "svc")
        _ = try await flow.clientCredentials(provider: "svc")

        let expected = "Basic " + Data("client+id%2F1:top+secret%3A1%2B%C3%BC".utf8).base64EncodedString()
        #expect(ClientAuthenticator.basicAuthorization(clientID: provider.clientID, secret: provider.clientSecret) == expected)
        #expect(mock.requests(.token).map { $0.header("Authorization") } == [expected, expected])
        #expect(mock.requests(.token).map { $0.basicCredentials?.secret } == ["top secret:1+ü", "top secret:1+ü"])
    }

    // MARK: The store's lock

    @Test("the in-process store lock: free, it is taken at once; held, callers wait and run one at a time")
    func storeLock() async throws {
        actor Occupancy {
            var now = 0, most = 0, done = 0
            func enter() {
                now += 1
                most = max(most, now)
            }
            func leave() {
                now -= 1
                done += 1
            }
        }
        let lock = KeyedAsyncLock()
        let occupancy = Occupancy()
        #expect(try await lock.withLock("k") { () async throws(OAuthError) in 1 } == 1)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    _ = try? await lock.withLock("k") { () async throws(OAuthError) in
                        await occupancy.enter()
                        for _ in 0..<3 { await Task.yield() }
                        await occupancy.leave()
                    }
                }
            }
        }
        let (now, most, done) = await (occupancy.now, occupancy.most, occupancy.done)
        #expect(now == 0 && most == 1 && done == 20)
        // Another key is independent, and the first is free again.
        #expect(try await lock.withLock("other") { () async throws(OAuthError) in try await lock.withLock("k") { () async throws(OAuthError) in 2 } } == 2)
        let thrown = await #expect(throws: OAuthError.self) {
            try await lock.withLock("k") { () async throws(OAuthError) -> Int in throw OAuthError(.storage, message: "x") }
        }
        #expect(thrown?.code == .storage)
        #expect(try await lock.withLock("k") { () async throws(OAuthError) in 3 } == 3, "a throwing body releases the lock")
    }

    // MARK: Provider slots

    @Test("tokens come from the right provider's slot with few providers (a scan) and many (a table)", arguments: [3, 12])
    func slots(count: Int) async throws {
        let mock = MockProvider()
        let providers = (0..<count).map { mock.provider(id: "p\($0)", clientSecret: "s") }
        var entries: [String: Data] = [:]
        for index in 0..<count where index % 2 == 0 {
            entries["p\(index)"] = StoredEntry.encode(TokenSet(
                providerID: "p\(index)", accessToken: Secret("at-\(index)"), issuedAt: Date(),
                expiresAt: Date().addingTimeInterval(3600), grant: .authorizationCode))
        }
        let flow = try await AuthFlow(providers: providers, store: MemorySecretStore(entries), transport: mock.transport())
        for index in 0..<count {
            let source = flow.tokenSource(for: "p\(index)")
            if index % 2 == 0 {
                #expect(try await source.token().reveal() == "at-\(index)")
                #expect(try await flow.accessToken(for: "p\(index)").reveal() == "at-\(index)")
                #expect(try await flow.tokenSet(for: "p\(index)").accessToken.reveal() == "at-\(index)")
            } else {
                let error = await #expect(throws: OAuthError.self) { try await source.token() }
                #expect(error?.code == .reauthorizationRequired)
            }
        }
        let unknown = await #expect(throws: OAuthError.self) { try await flow.tokenSource(for: "p\(count)").token() }
        #expect(unknown?.code == .configuration)
        #expect(mock.requests().isEmpty, "every answer came from memory or the store")
    }

    // MARK: The freshness clock

    @Test("the coarse system clock is used only while Options.now is the system clock")
    func systemClockFlag() {
        #expect(AuthFlow.Options().readsSystemClock)
        #expect(!AuthFlow.Options(now: { Date() }).readsSystemClock)
        var options = AuthFlow.Options()
        options.now = { Date(timeIntervalSince1970: 0) }
        #expect(!options.readsSystemClock)
        // Read between two readings of the wall clock, so a pause between the reads (a busy machine)
        // cannot make it fail (issue 21): never ahead of the wall clock (1 ms for its rounding), and
        // less than 1 s behind.
        let before = Date().timeIntervalSince1970
        let coarse = SystemClock.coarseSeconds()
        let after = Date().timeIntervalSince1970
        #expect(coarse > before - 1 && coarse <= after + 0.001, "CLOCK_REALTIME_COARSE is the wall clock, a tick behind at most: \(before) \(coarse) \(after)")
    }

    @Test("with the system clock, a token valid for an hour is answered from memory and an expired one is renewed")
    func systemClockFreshness() async throws {
        let mock = MockProvider()
        let now = Date()
        let fresh = TokenSet(providerID: "fresh", accessToken: Secret("at-fresh"), issuedAt: now, expiresAt: now.addingTimeInterval(3600),
                             grant: .authorizationCode)
        let stale = TokenSet(providerID: "stale", accessToken: Secret("at-stale"), issuedAt: now.addingTimeInterval(-3600),
                             expiresAt: now.addingTimeInterval(-1), grant: .authorizationCode)
        let store = MemorySecretStore(["fresh": StoredEntry.encode(fresh), "stale": StoredEntry.encode(stale)])
        let flow = try await AuthFlow(providers: [mock.provider(id: "fresh"), mock.provider(id: "stale")], store: store,
                                      transport: mock.transport())
        #expect(flow.options.readsSystemClock)
        #expect(try await flow.tokenSource(for: "fresh").token().reveal() == "at-fresh")
        #expect(try await flow.accessToken(for: "fresh").reveal() == "at-fresh")
        let error = await #expect(throws: OAuthError.self) { try await flow.tokenSource(for: "stale").token() }
        #expect(error?.code == .reauthorizationRequired, "expired, and no refresh token to renew it with")
        #expect(mock.requests().isEmpty)
    }
}
