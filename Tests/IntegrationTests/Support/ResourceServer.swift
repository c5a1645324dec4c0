import Foundation
import Glibc
@testable import OAuthFlow
import TestSupport
import Testing

/// The protected resource of the registration tests (`Server/resource/resource.py`), on a free
/// loopback port in front of a real authorization server: it publishes RFC 9728 metadata, answers
/// without a token with `401 Bearer resource_metadata=…, scope="openid"`, checks each token with
/// the server that issued it, and wants `api` for `/mcp/admin` (`403 insufficient_scope`).
/// Stopped (SIGTERM, then reaped) by ``stop()`` or when it goes away.
final class ResourceServer: Sendable {
    enum Kind: String, Sendable { case glewlwyd, authlib }

    let port: Int
    private let process: ChildProcess

    /// The resource identifier: `http://127.0.0.1:PORT/mcp`.
    var url: URL { URL(string: "http://127.0.0.1:\(port)/mcp")! }
    /// A path below it.
    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)/mcp\(path)")! }

    /// Starts the resource in front of `issuer` and waits (at most 10 s) until it answers.
    init(kind: Kind, issuer: String, caFile: String? = nil) async throws {
        port = try ServerLauncher.freePort()
        process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [ServerLauncher.serverDirectory.appendingPathComponent("resource/resource.py").path, String(port), kind.rawValue, issuer]
            + (caFile.map { [$0] } ?? [])
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let probe = CurlTransport(timeout: 2, proxy: .none)
        for _ in 0..<200 {
            if let answer = try? await probe.send(HTTPRequest(method: "GET", url: URL(string: "http://127.0.0.1:\(port)/it/seen")!)),
               answer.status == 200 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        stop()
        throw ServerLaunchError(description: "the resource server did not answer on port \(port) within 10 s")
    }

    /// How many requests carried an `Authorization` header so far.
    func authorizedRequests() async throws -> Int {
        let answer = try await CurlTransport(timeout: 5, proxy: .none).send(HTTPRequest(method: "GET", url: URL(string: "http://127.0.0.1:\(port)/it/seen")!))
        return try JSONValue.parse(answer.body)["authorized"]?.integerValue ?? -1
    }

    func stop() {
        guard process.processIdentifier > 0 else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// A running registration server (`Server/registration/`: Authlib, RFC 7591/7592), for the suite
/// that started it.
struct RegistrationServer: Sendable {
    let port: Int
    var issuer: String { "http://127.0.0.1:\(port)" }
    func url(_ path: String) -> URL { URL(string: "\(issuer)\(path)")! }

    /// The registered client IDs (`GET /it/clients`).
    func clients() async throws -> [String] {
        let answer = try await CurlTransport(timeout: 10, proxy: .none).send(HTTPRequest(method: "GET", url: url("/it/clients")))
        return (try JSONValue.parse(answer.body).arrayValue ?? []).compactMap(\.stringValue)
    }

    /// Makes the client's secret expired (`POST /it/expire-secret/ID`).
    func expireSecret(of clientID: String) async throws {
        let answer = try await CurlTransport(timeout: 10, proxy: .none).send(HTTPRequest(method: "POST", url: url("/it/expire-secret/\(clientID)")))
        try #require(answer.status == 200)
    }

    /// The browser step: Authlib's `/authorize` approves at once as alice and redirects to the client.
    func approve(_ authorization: URL) async throws -> URL {
        let answer = try await CurlTransport(timeout: 10, proxy: .none).send(HTTPRequest(method: "GET", url: authorization))
        try #require(answer.status == 302, "Authlib answered \(answer.status): \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
        return try #require(answer.headers["location"].flatMap { URL(string: $0) })
    }

    @TaskLocal static var current: RegistrationServer?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> RegistrationServer {
        try #require(current, "run inside the .registrationServer suite", sourceLocation: sourceLocation)
    }
}

/// The glewlwyd of the CIBA and registration tests (`Server/ciba/`), for the suite that started it.
enum RegistrationGlewlwyd {
    @TaskLocal static var current: GlewlwydServer?

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> GlewlwydServer {
        try #require(current, "run inside the .registrationGlewlwyd suite", sourceLocation: sourceLocation)
    }

    /// The browser step of a code login at glewlwyd, as its login page would do it: alice logs in,
    /// grants the URL's scopes to its client (the consent page), and the URL is opened again with
    /// `g_continue`; returns the redirect to the client.
    static func approve(_ server: GlewlwydServer, _ url: URL) async throws -> URL {
        let (browser, cookie) = try await server.loggedInBrowser()
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        let clientID = try #require(items.first { $0.name == "client_id" }?.value)
        let scope = items.first { $0.name == "scope" }?.value ?? "openid"
        let grant = try await browser.send(HTTPRequest(
            method: "PUT", url: URL(string: "\(server.base)/api/auth/grant/\(clientID)")!,
            headers: [("Content-Type", "application/json"), ("Cookie", cookie)],
            body: Data(JSONValue.object(["scope": .string(scope)]).jsonText.utf8)))
        try #require(grant.status == 200, "the grant answered \(grant.status)")
        let answer = try await browser.send(HTTPRequest(method: "GET", url: URL(string: url.absoluteString + "&g_continue")!,
                                                        headers: [("Cookie", cookie)]))
        try #require(answer.status == 302, "glewlwyd answered \(answer.status)")
        let location = try #require(answer.headers["location"].flatMap { URL(string: $0) })
        try #require(!location.path.hasSuffix("login.html"), "glewlwyd sent the browser to its login page: \(location)")
        return location
    }
}

extension Trait where Self == ScriptedServerTrait {
    /// The suite against one Authlib registration server (Server/registration/start.sh on a free port, stop.sh after).
    static var registrationServer: Self {
        let home = ProcessInfo.processInfo.environment["OAUTHFLOW_REG_HOME"] ?? "/tmp/oauthflow-reg"
        let server = ScriptedServer(directory: "registration", logPrefix: "oauthflow-reg", portVariable: "OAUTHFLOW_REG_PORT",
                                    environment: ["OAUTHFLOW_REG_HOME": home])
        return Self(server: server) { port, suite in
            try await RegistrationServer.$current.withValue(RegistrationServer(port: port)) { try await suite() }
        }
    }

    /// The suite against one glewlwyd provisioned for CIBA and registration (Server/ciba/start.sh on a free port, stop.sh after).
    static var registrationGlewlwyd: Self {
        let home = ProcessInfo.processInfo.environment["OAUTHFLOW_CIBA_HOME"] ?? "/tmp/oauthflow-ciba"
        let server = ScriptedServer(directory: "ciba", logPrefix: "oauthflow-dcr", portVariable: "OAUTHFLOW_CIBA_PORT",
                                    environment: ["OAUTHFLOW_CIBA_HOME": home])
        return Self(server: server) { port, suite in
            try await RegistrationGlewlwyd.$current.withValue(GlewlwydServer(port: port, home: home)) { try await suite() }
        }
    }
}
