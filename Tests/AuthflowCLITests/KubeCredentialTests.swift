@testable import AuthflowCLI
import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow kube-credential`: the ExecCredential in-process, then the real kubectl through its exec plugin.
@Suite("authflow kube-credential", .timeLimit(.minutes(3)))
struct KubeCredentialTests {
    static func info(_ version: String, interactive: Bool? = false) -> String {
        let spec = interactive.map { #","spec":{"interactive":\#($0)}"# } ?? #","spec":{}"#
        return #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/\#(version)"\#(spec)}"#
    }

    @Test("an ExecCredential with status.token and an RFC 3339 expirationTimestamp, in the apiVersion asked for (v1 without KUBERNETES_EXEC_INFO)",
          arguments: [("v1", true), ("v1beta1", true), ("v1", false)])
    func execCredential(version: String, asked: Bool) async throws {
        let h = try Harness(clockStart: Date(timeIntervalSince1970: 1_800_000_000))
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "k8s", base: h.base))
        #expect(await h.deviceLogin("k8s", access: "at-kube-1", refresh: "rt-kube-1") == .success)
        let start = h.clock.date
        let run = await h.run(["kube-credential", "k8s"], environment: asked ? ["KUBERNETES_EXEC_INFO": Self.info(version)] : [:])
        #expect(run.status == .success, "\(run.stderr)")
        #expect(run.stderr.isEmpty)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect(object["apiVersion"] as? String == "client.authentication.k8s.io/\(version)")
        #expect(object["kind"] as? String == "ExecCredential")
        let status = try #require(object["status"] as? [String: Any])
        #expect(status["token"] as? String == "at-kube-1")
        let expected = Date(timeIntervalSince1970: (start.timeIntervalSince1970 + 3600).rounded(.down))
        #expect(status["expirationTimestamp"] as? String == expected.formatted(Date.ISO8601FormatStyle()))
        #expect((status["expirationTimestamp"] as? String)?.hasSuffix("Z") == true)
    }

    @Test("interactive: false with no login never prompts: one line naming authflow login, exit 77, no request")
    func notInteractive() async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "k8s", base: h.base))
        for info in [Self.info("v1", interactive: false), Self.info("v1beta1", interactive: nil)] {
            let run = await h.run(["kube-credential", "k8s"], environment: ["KUBERNETES_EXEC_INFO": info, "NO_COLOR": "1"], terminal: true)
            #expect(run.status == .denied)
            #expect(run.stdout.isEmpty)
            #expect(run.stderr == "authflow: error: not logged in to k8s; run: authflow login k8s\n")
        }
        #expect(h.mock.requests().isEmpty)
    }

    @Test("an apiVersion other than v1 and v1beta1, or KUBERNETES_EXEC_INFO that is not an ExecCredential, is exit 65", arguments: [
        #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1alpha1","spec":{}}"#,
        #"{"kind":"Pod","apiVersion":"v1"}"#, "not json", "[]",
    ])
    func unsupported(info: String) async throws {
        let h = try Harness()
        defer { h.directory.remove() }
        try h.catalog(catalogEntry(id: "k8s", base: h.base))
        #expect(await h.deviceLogin("k8s", access: "at-kube-1", refresh: "rt-kube-1") == .success)
        let run = await h.run(["kube-credential", "k8s"], environment: ["KUBERNETES_EXEC_INFO": info])
        #expect(run.status == .dataError)
        #expect(run.stdout.isEmpty && !run.stderr.contains("at-kube-1"))
    }
}

// MARK: - The real kubectl

/// A stand-in Kubernetes API server over TLS (kubectl runs an exec plugin only for an https server):
/// `GET /api` answers an `APIVersions` when the request carries
/// `Authorization: Bearer <a token listed in TOKENS>`, else 401 with a `Status`. Every request is
/// logged as `METHOD PATH none|valid|refused`. Prints its port, then serves until killed.
private let apiServerScript = #"""
import http.server, json, ssl, sys
tokens_file, log_file, cert_file, key_file = sys.argv[1:5]

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        valid = open(tokens_file).read().split()
        verdict = "none" if not auth else ("valid" if auth.startswith("Bearer ") and auth[7:] in valid else "refused")
        with open(log_file, "a") as log:
            log.write("%s %s %s\n" % (self.command, self.path, verdict))
        if verdict == "valid" and self.path == "/api":
            status, body = 200, {"kind": "APIVersions", "versions": ["v1"],
                                 "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        elif verdict == "valid":
            status, body = 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
        else:
            status, body = 401, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert_file, key_file)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"""#

extension KubeCredentialTests {
    /// The kubectl binaries to test: `AUTHFLOW_TEST_KUBECTL`, Debian's unpacked under
    /// /tmp/oauthflow-cli (see Testing.md), and the one on PATH; each once.
    static var kubectls: [String] {
        var found: [String] = []
        let candidates = [ProcessInfo.processInfo.environment["AUTHFLOW_TEST_KUBECTL"], "/tmp/oauthflow-cli/kubectl/root/usr/bin/kubectl",
                          Tool.find("kubectl")]
        for case let path? in candidates where FileManager.default.isExecutableFile(atPath: path) {
            let real = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)).map {
                URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: path).deletingLastPathComponent()).standardizedFileURL.path
            } ?? path
            if !found.contains(real) { found.append(real) }
        }
        return found
    }

    /// The client's minor version (`kubectl version --client -o json`), 0 when it cannot be read.
    static func minorVersion(_ kubectl: String, environment: [String: String]) async throws -> Int {
        let run = try await Tool.run(kubectl, ["version", "--client", "-o", "json"], environment: environment)
        let object = try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        let minor = (object?["clientVersion"] as? [String: Any])?["minor"] as? String ?? ""
        return Int(minor.prefix { $0.isNumber }) ?? 0
    }

    @Test("the real kubectl runs the exec plugin in the apiVersion it asks for and reaches an API server that checks the bearer token")
    func realKubectl() async throws {
        let kubectls = Self.kubectls
        try #require(!kubectls.isEmpty, "kubectl is not installed (apt-get install kubernetes-client)")
        let python = try #require(Tool.find("python3"), "python3 is not installed")
        let binary = try #require(Binary.url, "authflow not built")
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let tokens = directory.url.appendingPathComponent("tokens")
        let log = directory.url.appendingPathComponent("requests.log")
        try Data("at-kube-real-4Hc9\n".utf8).write(to: tokens)
        try Data().write(to: log)

        let provider = try TestHTTPServer()
        defer { provider.stop() }
        try directory.writeCatalog([catalogEntry(id: "k8s", base: provider.baseURL)])
        provider.script("/device/code", [.deviceCode(user: "ABCD-EFGH", interval: 1)])
        provider.script("/token", [.token("at-kube-real-4Hc9", refresh: "rt-kube-real-8Pn2")])
        let base = ["--config", directory.config.path, "--store", directory.store.path]
        let login = try await runBinary(base + ["login", "k8s", "--device"], environment: cleanEnvironment(directory))
        #expect(login.status == 0, "\(login.stderr)")

        // A self-signed certificate for 127.0.0.1, which the kubeconfig trusts.
        let openssl = try #require(Tool.find("openssl"), "openssl is not installed")
        let cert = directory.url.appendingPathComponent("cert.pem")
        let key = directory.url.appendingPathComponent("key.pem")
        let made = try await Tool.run(openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key.path,
                                                "-out", cert.path, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                                       environment: ["PATH": "/usr/bin:/bin"])
        try #require(made.status == 0, "\(made.stderr)")
        let authority = try Data(contentsOf: cert).base64EncodedString()
        let server = try await BackgroundServer(python, ["-c", apiServerScript, tokens.path, log.path, cert.path, key.path],
                                          environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"])
        defer { server.stop() }
        var environment = cleanEnvironment(directory)
        let kubeconfig = directory.url.appendingPathComponent("kubeconfig")
        environment["KUBECONFIG"] = kubeconfig.path
        func writeKubeconfig(_ version: String) throws {
            // The README's stanza; v1 requires interactiveMode, which kubectl before 1.22 does not know.
            let interactiveMode = version == "v1" ? "\n      interactiveMode: Never" : ""
            try Data("""
            apiVersion: v1
            kind: Config
            clusters:
            - name: loopback
              cluster:
                server: https://127.0.0.1:\(server.port)
                certificate-authority-data: \(authority)
            users:
            - name: authflow
              user:
                exec:
                  apiVersion: client.authentication.k8s.io/\(version)
                  command: \(binary.path)
                  args: ["--config", "\(directory.config.path)", "--store", "\(directory.store.path)", "kube-credential", "k8s"]\(interactiveMode)
            contexts:
            - name: loopback
              context:
                cluster: loopback
                user: authflow
            current-context: loopback

            """.utf8).write(to: kubeconfig)
        }

        var runs = 0
        for kubectl in kubectls {
            let minor = try await Self.minorVersion(kubectl, environment: environment)
            for version in minor >= 22 || minor == 0 ? ["v1", "v1beta1"] : ["v1beta1"] {
                try writeKubeconfig(version)
                let run = try await Tool.run(kubectl, ["get", "--raw", "/api"], environment: environment)
                #expect(run.status == 0, "\(kubectl) 1.\(minor) \(version): \(run.stderr.suffix(1500))")
                #expect(run.stdout.contains("APIVersions"))
                #expect(!run.stderr.contains("at-kube-real-4Hc9"))
                runs += 1
            }
        }
        let verdicts = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        // kubectl 1.32 also asks for /version once; every request carried the valid token.
        #expect(verdicts.filter { $0 == "GET /api valid" }.count == runs && verdicts.allSatisfy { $0.hasSuffix(" valid") }, "\(verdicts)")
        #expect(provider.requests("/token").count == 1, "the stored token is answered without a refresh")

        // Logged out, with kubectl not interactive: the plugin fails with its one line, and nothing reaches the server.
        #expect(try await runBinary(base + ["logout", "k8s", "--local"], environment: cleanEnvironment(directory)).status == 0)
        let kubectl = try #require(kubectls.first)
        try writeKubeconfig("v1beta1")
        let refused = try await Tool.run(kubectl, ["get", "--raw", "/api"], environment: environment)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("run: authflow login k8s"), "\(refused.stderr.suffix(1500))")
        #expect(try String(contentsOf: log, encoding: .utf8).split(separator: "\n").count == verdicts.count)
    }
}
