import Foundation
@testable import OAuthFlow
import TestSupport
import Testing

/// CurlTransport against real TLS servers on 127.0.0.1 with a private CA: `caFile`, HTTPS through a
/// CONNECT proxy from `HTTPS_PROXY`, the `NO_PROXY` bypass, and HTTP/2 negotiated by ALPN.
///
/// Serialized: the proxy tests set environment variables of the whole process (through
/// ``ProcessEnvironment``, which is safe against concurrent readers), and restore them after.
/// No other test sends HTTPS through an environment proxy, so none is affected meanwhile.
@Suite("CurlTransport: private CA, HTTPS proxy, HTTP/2", .serialized, .timeLimit(.minutes(1)))
struct CurlProxyAndHTTP2Tests {
    static let needsNghttpd = Testing.ConditionTrait.enabled(
        if: TLSTestServer.hasNghttpd || ProcessInfo.processInfo.environment["CI"] != nil,
        "needs nghttpd (apt-get install nghttp2-server; .ci/run installs it)")

    /// Every variable libcurl reads for an https request's proxy, all empty (libcurl: unset).
    static let noProxyVariables: [String: String?] = [
        "https_proxy": nil, "HTTPS_PROXY": nil, "all_proxy": nil, "ALL_PROXY": nil, "no_proxy": nil, "NO_PROXY": nil,
    ]

    static let tokenJSON = #"{"access_token":"at-h2","token_type":"Bearer","expires_in":3600}"#

    func get(_ url: String) -> HTTPRequest {
        HTTPRequest(method: "GET", url: URL(string: url)!, headers: [("Authorization", "Bearer at-secret")])
    }

    /// Runs `body` with a private CA and a TLS origin whose certificate it signed (for `localhost`
    /// and 127.0.0.1), then stops the origin and removes the certificates.
    func withOrigin<T>(_ kind: TLSTestServer.Kind = .openSSL,
                       _ body: (TestCertificates, TLSTestServer) async throws -> T) async throws -> T {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let server = try await TLSTestServer.start(kind, certificates: certificates)
        defer { server.stop() }
        return try await body(certificates, server)
    }

    /// One GET of `path` from a fresh origin through a default `CurlTransport` (the environment
    /// decides the proxy) trusting the origin's CA, with ``noProxyVariables`` and `variables` set and
    /// `HTTPS_PROXY` naming a fresh CONNECT proxy. Returns the response, the proxy (stopped; what it
    /// saw is kept) and the origin's port.
    func getThroughEnvironmentProxy(_ variables: [String: String] = [:], kind: TLSTestServer.Kind = .openSSL,
                                    path: String = "/") async throws -> (HTTPResponse, ConnectProxy, UInt16) {
        try await withOrigin(kind) { certificates, server in
            let proxy = try ConnectProxy()
            defer { proxy.stop() }
            var environment = Self.noProxyVariables
            environment["HTTPS_PROXY"] = proxy.url
            for (name, value) in variables { environment[name] = value }
            let response = try await ProcessEnvironment.with(environment) {
                try await CurlTransport(timeout: 10, caFile: certificates.caFile).send(get(server.baseURL + path))
            }
            return (response, proxy, server.port)
        }
    }

    // MARK: A private CA (caFile)

    @Test("a server certificate from a private CA is accepted once caFile names that CA; verification stays on")
    func privateCA() async throws {
        try await withOrigin { certificates, server in
            let response = try await CurlTransport(timeout: 10, proxy: .none, caFile: certificates.caFile).send(get(server.baseURL + "/"))

            #expect(response.status == 200)
            let refused = await #expect(throws: OAuthError.self) {
                try await CurlTransport(timeout: 10, proxy: .none).send(get(server.baseURL + "/"))
            }
            #expect(refused?.code == .transport, "without the option the system store does not know the CA")
            let wrongCA = await #expect(throws: OAuthError.self) {
                try await CurlTransport(timeout: 10, proxy: .none, caFile: certificates.otherCAFile).send(get(server.baseURL + "/"))
            }
            #expect(wrongCA?.code == .transport)
            #expect(wrongCA?.message?.contains("TLS") == true, "\(String(describing: wrongCA?.message))")
        }
    }

    @Test("the host name is still checked: a certificate from the trusted CA for another name is refused")
    func hostNameChecked() async throws {
        try await withOrigin { certificates, server in
            let elsewhere = try await TestCertificates.make(subjectAltName: "DNS:elsewhere.test")
            defer { elsewhere.remove() }
            let misnamed = try await TLSTestServer.start(.openSSL, certificates: elsewhere)
            defer { misnamed.stop() }

            let byAddress = try await CurlTransport(timeout: 10, proxy: .none, caFile: certificates.caFile)
                .send(get("https://127.0.0.1:\(server.port)/"))
            let error = await #expect(throws: OAuthError.self) {
                try await CurlTransport(timeout: 10, proxy: .none, caFile: elsewhere.caFile).send(get(misnamed.baseURL + "/"))
            }

            #expect(byAddress.status == 200, "IP:127.0.0.1 is in the certificate")
            #expect(error?.code == .transport)
        }
    }

    @Test("an unreadable caFile fails each HTTPS request with .transport")
    func missingCAFile() async throws {
        try await withOrigin { certificates, server in
            let missing = certificates.directory.appendingPathComponent("missing.pem")

            let error = await #expect(throws: OAuthError.self) {
                try await CurlTransport(timeout: 10, proxy: .none, caFile: missing).send(get(server.baseURL + "/"))
            }

            #expect(error?.code == .transport)
            #expect(CurlTransport(caFile: missing).caFile == missing)
            #expect(CurlTransport().caFile == nil)
        }
    }

    // MARK: HTTPS through a CONNECT proxy

    @Test("HTTPS_PROXY is honoured for https: one CONNECT to the origin, TLS end to end, the token never seen by the proxy")
    func httpsProxyFromEnvironment() async throws {
        let (response, proxy, port) = try await getThroughEnvironmentProxy()

        #expect(response.status == 200)
        #expect(proxy.requestLines == ["CONNECT localhost:\(port) HTTP/1.1"])
        #expect(!proxy.requestHeads.joined().contains("at-secret"), "the Authorization header travels inside the tunnel")
        #expect(ProcessEnvironment.value("HTTPS_PROXY") ?? "" == "", "restored")
    }

    @Test("lower-case https_proxy wins over HTTPS_PROXY, as libcurl reads them")
    func lowerCaseWins() async throws {
        let used = try ConnectProxy()
        defer { used.stop() }

        let (response, ignored, _) = try await getThroughEnvironmentProxy(["https_proxy": used.url])

        #expect(response.status == 200)
        #expect(used.requestLines.count == 1)
        #expect(ignored.connectionCount == 0, "HTTPS_PROXY named this one")
    }

    @Test("NO_PROXY bypasses HTTPS_PROXY for a listed host: the proxy sees no connection", arguments: [
        ("NO_PROXY", "localhost"), ("NO_PROXY", "example.com, localhost"), ("NO_PROXY", "*"), ("no_proxy", "localhost"),
    ])
    func noProxyBypass(variable: String, value: String) async throws {
        let (response, proxy, _) = try await getThroughEnvironmentProxy([variable: value])

        #expect(response.status == 200)
        #expect(proxy.connectionCount == 0)
    }

    @Test("NO_PROXY for another host leaves the proxy in use")
    func noProxyOtherHost() async throws {
        let (_, proxy, _) = try await getThroughEnvironmentProxy(["NO_PROXY": "example.com"])

        #expect(proxy.requestLines.count == 1)
    }

    @Test("Proxy.url tunnels https with CONNECT; NO_PROXY still applies to it; Proxy.none ignores HTTPS_PROXY")
    func explicitProxies() async throws {
        try await withOrigin { certificates, server in
            let proxy = try ConnectProxy()
            defer { proxy.stop() }
            let explicit = CurlTransport(timeout: 10, proxy: .url(URL(string: proxy.url)!), caFile: certificates.caFile)

            let tunnelled = try await ProcessEnvironment.with(Self.noProxyVariables) {
                try await explicit.send(get(server.baseURL + "/")).status
            }
            #expect(tunnelled == 200)
            #expect(proxy.requestLines == ["CONNECT localhost:\(server.port) HTTP/1.1"])

            var bypass = Self.noProxyVariables
            bypass["NO_PROXY"] = "localhost"
            let bypassed = try await ProcessEnvironment.with(bypass) {
                let fresh = CurlTransport(timeout: 10, proxy: .url(URL(string: proxy.url)!), caFile: certificates.caFile)
                return try await fresh.send(get(server.baseURL + "/")).status
            }
            #expect(bypassed == 200)
            #expect(proxy.connectionCount == 1, "NO_PROXY=localhost: the second request went direct")

            var environment = Self.noProxyVariables
            environment["HTTPS_PROXY"] = proxy.url
            let direct = try await ProcessEnvironment.with(environment) {
                try await CurlTransport(timeout: 10, proxy: .none, caFile: certificates.caFile).send(get(server.baseURL + "/")).status
            }
            #expect(direct == 200)
            #expect(proxy.connectionCount == 1, "Proxy.none: the environment's proxy is not used")
        }
    }

    @Test("a proxy that refuses the CONNECT fails the request with .transport; nothing reaches the origin")
    func proxyRefuses() async throws {
        let proxy = try ConnectProxy()
        defer { proxy.stop() }
        let transport = CurlTransport(timeout: 10, proxy: .url(URL(string: proxy.url)!))

        let error = await #expect(throws: OAuthError.self) { try await transport.send(get("https://example.com/")) }

        #expect(error?.code == .transport)
        #expect(proxy.requestLines == ["CONNECT example.com:443 HTTP/1.1"])
    }

    // MARK: HTTP/2

    @Test("HTTP/2 is negotiated over TLS when the server offers it (ALPN h2): GET and POST", needsNghttpd)
    func http2Negotiated() async throws {
        try await withOrigin(.http2(files: ["token.json": Self.tokenJSON])) { certificates, server in
            let transport = CurlTransport(timeout: 10, proxy: .none, caFile: certificates.caFile)

            let response = try await transport.send(get(server.baseURL + "/token.json"))
            let form = "grant_type=client_credentials&scope=read"
            let posted = try await transport.send(HTTPRequest(
                method: "POST", url: URL(string: server.baseURL + "/token.json")!,
                headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Data(form.utf8)))

            #expect(response.status == 200)
            #expect(response.httpVersion == "2")
            #expect(String(decoding: response.body, as: UTF8.self) == Self.tokenJSON)
            #expect(posted.httpVersion == "2")
            #expect(String(decoding: posted.body, as: UTF8.self) == form, "nghttpd echoes the body it received")
        }
    }

    @Test("concurrent requests over HTTP/2 all complete, each with its own response", needsNghttpd)
    func http2Concurrent() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        var files: [String: String] = [:]
        for index in 0..<12 { files["r\(index)"] = #"{"n":\#(index)}"# }
        let server = try await TLSTestServer.start(.http2(files: files), certificates: certificates)
        defer { server.stop() }
        let transport = CurlTransport(timeout: 10, proxy: .none, caFile: certificates.caFile)

        let bodies = try await withThrowingTaskGroup(of: (Int, String, String?).self) { group in
            for index in 0..<12 {
                group.addTask {
                    let response = try await transport.send(HTTPRequest(method: "GET", url: URL(string: server.baseURL + "/r\(index)")!))
                    return (index, String(decoding: response.body, as: UTF8.self), response.httpVersion)
                }
            }
            var all: [Int: (String, String?)] = [:]
            for try await (index, body, version) in group { all[index] = (body, version) }
            return all
        }

        #expect(bodies.count == 12)
        for index in 0..<12 {
            #expect(bodies[index]?.0 == #"{"n":\#(index)}"#)
            #expect(bodies[index]?.1 == "2")
        }
    }

    @Test("HTTP/2 through an HTTPS_PROXY tunnel", needsNghttpd)
    func http2ThroughProxy() async throws {
        let (response, proxy, port) = try await getThroughEnvironmentProxy(kind: .http2(files: ["token.json": Self.tokenJSON]),
                                                                           path: "/token.json")

        #expect(response.httpVersion == "2")
        #expect(String(decoding: response.body, as: UTF8.self) == Self.tokenJSON)
        #expect(proxy.requestLines == ["CONNECT localhost:\(port) HTTP/1.1"])
    }

    @Test("without h2 on offer it stays HTTP/1.x: over TLS (s_server offers no ALPN) and over plain http")
    func http1WithoutH2() async throws {
        try await withOrigin { certificates, server in
            let plain = try TestHTTPServer()
            defer { plain.stop() }
            plain.script("/token", [.token("at")])

            let tls = try await CurlTransport(timeout: 10, proxy: .none, caFile: certificates.caFile).send(get(server.baseURL + "/"))
            let http = try await CurlTransport(timeout: 10, proxy: .none).send(get(plain.baseURL + "/token"))

            #expect(tls.httpVersion?.hasPrefix("1.") == true, "\(String(describing: tls.httpVersion))")
            #expect(http.httpVersion == "1.1")
        }
    }
}
