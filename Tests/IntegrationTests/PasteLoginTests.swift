import Foundation
import OAuthFlow
import TestSupport
import Testing

extension Integration {
    /// `authflow login --paste` against the real server: the binary on a pseudo-terminal prints the
    /// authorization URL, alice signs in with the test browser (which stops at the redirect, as a
    /// browser on another machine would), and the redirect the server produced is typed back.
    @Suite("authflow login --paste against the server")
    struct PasteLogin {
        /// A scratch directory with a catalog for the public PKCE client (its registered loopback
        /// redirect URI, and the issuer, so the server's RFC 9207 `iss` is checked and the ID token
        /// validated) and a store; the arguments and the environment that name them.
        final class Scratch {
            let directory: TemporaryDirectory
            let store: URL
            let common: [String]
            let environment: [String: String]

            init(_ server: IntegrationServer, redirectURI: String = Fixture.pkceRedirect) throws {
                directory = try TemporaryDirectory("authflow-it")
                let catalog = directory.url.appendingPathComponent("providers.json")
                try Data("""
                    [{
                      "id": "dot-pkce",
                      "clientID": "\(Fixture.publicPKCEClient)",
                      "issuer": "\(server.issuer)",
                      "authorizationURL": "\(server.url("/o/authorize/").absoluteString)",
                      "tokenURL": "\(server.url("/o/token/").absoluteString)",
                      "jwksURL": "\(server.url("/o/.well-known/jwks.json").absoluteString)",
                      "redirectURI": "\(redirectURI)",
                      "scopes": ["openid", "read"]
                    }]
                    """.utf8).write(to: catalog)
                store = directory.url.appendingPathComponent("store")
                common = ["--config", catalog.path, "--store", store.path]
                environment = ["PATH": "/usr/bin:/bin", "HOME": directory.url.path, "NO_COLOR": "1"]
            }

            /// Whether the store holds an entry.
            var stored: Bool {
                ((try? FileManager.default.contentsOfDirectory(atPath: store.path)) ?? []).contains { $0.hasSuffix(".json") }
            }
        }

        /// Starts `login dot-pkce --paste` on a terminal; returns it with the authorization URL it printed.
        static func start(_ common: [String], environment: [String: String]) async throws -> (TerminalSession, URL) {
            let binary = try #require(Binary.url, "authflow not found; set AUTHFLOW_BINARY")
            let session = try TerminalSession(binary, common + ["login", "dot-pkce", "--paste"], environment: environment)
            #expect(await session.waitFor("Address or code: ", timeout: .seconds(30)), "no prompt: \(session.output)")
            let lines = session.output.split(separator: "\n").map(String.init)
            let index = try #require(lines.firstIndex { $0.hasSuffix("open this URL in a browser:") }, "\(session.output)")
            return (session, try #require(URL(string: lines[index + 1])))
        }

        @Test("alice signs in elsewhere; the URL the browser ended on, pasted into authflow, logs in; the server accepts the token")
        func pasteBack() async throws {
            let server = try IntegrationServer.require()
            let scratch = try Scratch(server)
            defer { scratch.directory.remove() }
            let (common, environment) = (scratch.common, scratch.environment)

            let (session, url) = try await Self.start(common, environment: environment)
            #expect(Form.query(url)["redirect_uri"] == Fixture.pkceRedirect)
            #expect(Form.query(url)["code_challenge_method"] == "S256")
            // Nothing listens on the redirect URI: the browser's last step is only its address.
            let ended = try await TestBrowser().authorize(
                url: url, username: Fixture.username, password: Fixture.password, redirectURIPrefix: Fixture.pkceRedirect, approve: true)
            #expect(Form.query(ended)["iss"] == server.issuer, "the server sends RFC 9207 iss")
            #expect(Form.query(ended)["state"] == Form.query(url)["state"])
            session.type(ended.absoluteString + "\n")
            let status = await session.wait(timeout: .seconds(60))
            #expect(status == 0, "login exited \(status): \(session.output)")
            #expect(session.output.contains("Logged in to dot-pkce"))
            #expect(scratch.stored)

            let token = try await runBinary(common + ["token", "dot-pkce"], environment: environment)
            #expect(token.status == 0, "token exited \(token.status); stderr: \(token.stderr)")
            let accessToken = token.stdout.trimmingCharacters(in: .newlines)
            let introspection = try await ServerAPI(server).introspect(accessToken)
            #expect(introspection.active)
            #expect(introspection.clientID == Fixture.publicPKCEClient)
            #expect(introspection.username == Fixture.username)
            #expect(!session.output.contains(accessToken))
            let status2 = try await runBinary(common + ["status", "dot-pkce", "--json"], environment: environment)
            #expect(status2.stdout.contains(#""grant":"authorization_code""#))
        }

        @Test("--listen-port N: the server takes that loopback port (RFC 8252 §7.3); the redirect arriving there, as through ssh -L, logs in")
        func listenPort() async throws {
            let server = try IntegrationServer.require()
            // it-public-pkce also registers http://127.0.0.1/callback, without a port.
            let scratch = try Scratch(server, redirectURI: "http://127.0.0.1/callback")
            defer { scratch.directory.remove() }
            let (common, environment) = (scratch.common, scratch.environment)
            let port = try ServerLauncher.freePort()
            let redirect = "http://127.0.0.1:\(port)/callback"

            let login = try RunningBinary(common + ["login", "dot-pkce", "--listen-port", String(port), "--json"], environment: environment)
            let line = try #require(await login.waitForLine(containing: "\"authorizing\"", timeout: .seconds(30)),
                                    "stderr: \(login.stderr)")
            let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(record["redirect_uri"] as? String == redirect)
            let url = try #require((record["authorization_url"] as? String).flatMap(URL.init(string:)))
            #expect(Form.query(url)["redirect_uri"] == redirect)
            let ended = try await TestBrowser().authorize(
                url: url, username: Fixture.username, password: Fixture.password, redirectURIPrefix: redirect, approve: true)
            // What the laptop's browser does through the tunnel: its GET reaches 127.0.0.1:PORT here.
            let page = try await httpGET(ended)
            #expect(page.status == 200 && page.body.contains("Signed in"))
            let status = await login.wait(timeout: .seconds(60))
            #expect(status == 0, "login exited \(status); stderr: \(login.stderr)")
            let token = try await runBinary(common + ["token", "dot-pkce"], environment: environment)
            #expect(try await ServerAPI(server).introspect(token.stdout.trimmingCharacters(in: .newlines)).active)
        }

        @Test("alice denies consent: the server's access_denied redirect, pasted, exits 77 and stores nothing")
        func denied() async throws {
            let server = try IntegrationServer.require()
            let scratch = try Scratch(server)
            defer { scratch.directory.remove() }

            let (session, url) = try await Self.start(scratch.common, environment: scratch.environment)
            let ended = try await TestBrowser().authorize(
                url: url, username: Fixture.username, password: Fixture.password, redirectURIPrefix: Fixture.pkceRedirect, approve: false)
            #expect(Form.query(ended)["error"] == "access_denied")
            session.type(ended.absoluteString + "\n")
            let status = await session.wait(timeout: .seconds(60))
            #expect(status == 77, "login exited \(status): \(session.output)")
            #expect(session.output.contains("[accessDenied]"))
            #expect(!scratch.stored)
        }
    }
}
