public import Foundation
import Glibc

/// A private certificate authority and a server certificate it signed (for `localhost` and
/// `127.0.0.1` unless told otherwise), made with `/usr/bin/openssl` in a temporary directory: what a service with a
/// private CA has. ``otherCAFile`` is a second CA that signed nothing, to show that trusting the
/// wrong CA still fails.
public final class TestCertificates: Sendable {
    /// Where every file is; removed with this object at the latest.
    private let scratch: TemporaryDirectory
    /// The directory holding every file.
    public var directory: URL { scratch.url }
    /// The CA certificate (PEM): give it to the client as its trusted bundle.
    public let caFile: URL
    /// A CA certificate that signed nothing here.
    public let otherCAFile: URL
    /// The server's certificate (PEM), signed by the CA.
    public let certificateFile: URL
    /// The server's private key (PEM).
    public let keyFile: URL

    /// Generates the CAs and the server certificate (P-256 keys, valid for a day) for the names in
    /// `subjectAltName` (OpenSSL's syntax).
    public init(subjectAltName: String = "DNS:localhost,IP:127.0.0.1") throws {
        scratch = try TemporaryDirectory("oauthflow-pki")
        let directory = scratch.url
        caFile = directory.appendingPathComponent("ca.pem")
        otherCAFile = directory.appendingPathComponent("other-ca.pem")
        certificateFile = directory.appendingPathComponent("server.pem")
        keyFile = directory.appendingPathComponent("server.key")
        let caKey = directory.appendingPathComponent("ca.key").path
        let otherKey = directory.appendingPathComponent("other-ca.key").path
        let request = directory.appendingPathComponent("server.csr").path
        let extensions = directory.appendingPathComponent("server.ext")
        try Data("subjectAltName=\(subjectAltName)\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n".utf8)
            .write(to: extensions)
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try Self.openssl(["req", "-x509"] + curve + ["-keyout", caKey, "-out", caFile.path, "-days", "2", "-subj", "/CN=OAuthFlow Test CA"])
        try Self.openssl(["req", "-x509"] + curve + ["-keyout", otherKey, "-out", otherCAFile.path, "-days", "2", "-subj", "/CN=Another CA"])
        try Self.openssl(["req"] + curve + ["-keyout", keyFile.path, "-out", request, "-subj", "/CN=localhost"])
        try Self.openssl(["x509", "-req", "-in", request, "-CA", caFile.path, "-CAkey", caKey, "-set_serial", "2", "-days", "1",
                          "-extfile", extensions.path, "-out", certificateFile.path])
    }

    /// Deletes the directory.
    public func remove() { scratch.remove() }

    private static func openssl(_ arguments: [String]) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
    }
}

/// An HTTPS server on 127.0.0.1 with a ``TestCertificates`` server certificate, run as a child
/// process: `openssl s_server -www` (HTTP/1.x only: it offers no ALPN) or `nghttpd` (HTTP/2 only,
/// from Debian's `nghttp2-server`). Stop it with ``stop()``.
public final class TLSTestServer: Sendable {
    /// Which program serves.
    public enum Kind: Sendable {
        /// `openssl s_server -www`: answers any GET with a status page over HTTP/1.0.
        case openSSL
        /// `openssl s_server -www -Verify 1`: as ``openSSL``, but the handshake fails unless the client
        /// presents a certificate issued by (or equal to) the PEM certificate at `clientCA`.
        case openSSLRequiringClientCertificate(clientCA: String)
        /// `nghttpd`: serves the files given at start over HTTP/2 (ALPN `h2`), echoes POST bodies.
        case http2(files: [String: String])
    }

    /// Where nghttpd is installed (Debian package `nghttp2-server`).
    public static let nghttpdPath = "/usr/sbin/nghttpd"
    /// True when nghttpd is installed.
    public static var hasNghttpd: Bool { FileManager.default.isExecutableFile(atPath: nghttpdPath) }

    /// The port it listens on, on 127.0.0.1.
    public let port: UInt16
    private let process: ChildProcess
    private let documents: URL?

    /// Starts the server with the certificates' server certificate and waits (at most 10 s) until it
    /// accepts connections.
    public convenience init(_ kind: Kind, certificates: TestCertificates) throws {
        try self.init(kind, certificateFile: certificates.certificateFile.path, keyFile: certificates.keyFile.path,
                      directory: certificates.directory)
    }

    /// Starts the server with the certificate and key at these paths (PEM) and waits (at most 10 s)
    /// until it accepts connections. nghttpd's files go in a new folder of `directory`.
    public init(_ kind: Kind, certificateFile: String, keyFile: String, directory: URL) throws {
        port = try LoopbackSocket.closedPort()
        process = ChildProcess()
        let openSSL = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificateFile, "-key", keyFile, "-www", "-quiet"]
        switch kind {
        case .openSSL:
            documents = nil
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = openSSL
        case .openSSLRequiringClientCertificate(let clientCA):
            documents = nil
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = openSSL + ["-Verify", "1", "-CAfile", clientCA]
        case .http2(let files):
            let root = directory.appendingPathComponent("htdocs-\(port)")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            for (path, body) in files { try Data(body.utf8).write(to: root.appendingPathComponent(path)) }
            documents = root
            process.executableURL = URL(fileURLWithPath: Self.nghttpdPath)
            process.arguments = ["--address=127.0.0.1", "--htdocs=\(root.path)", "--echo-upload", "\(port)", keyFile, certificateFile]
        }
        do {
            try LoopbackSocket.runServer(process, port: port)
        } catch {
            stop()
            throw error
        }
    }

    /// `https://localhost:PORT`: the name the certificate holds.
    public var baseURL: String { "https://localhost:\(port)" }

    /// Ends the process and waits for it.
    public func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        if let documents { try? FileManager.default.removeItem(at: documents) }
    }
}

/// Runs `body` on a thread of its own and returns its result: for work that blocks (child
/// processes, `usleep`), which must not hold one of the few threads that run tasks (on a 2-core
/// machine that starves every other test running meanwhile).
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

extension TestCertificates {
    /// ``init(subjectAltName:)`` on a thread of its own (it runs `openssl` four times).
    public static func make(subjectAltName: String = "DNS:localhost,IP:127.0.0.1") async throws -> TestCertificates {
        try await onOwnThread { try TestCertificates(subjectAltName: subjectAltName) }
    }
}

extension TLSTestServer {
    /// ``init(_:certificates:)`` on a thread of its own (it starts a process and waits for its port).
    public static func start(_ kind: Kind, certificates: TestCertificates) async throws -> TLSTestServer {
        try await onOwnThread { try TLSTestServer(kind, certificates: certificates) }
    }
}
