import Foundation
@testable import OAuthFlow
import TestSupport

/// Keys, certificates and checks made by the `openssl` command line in a temporary directory:
/// what a person following `Documentation/Catalog.md` would run, and an implementation that
/// shares no code with OAuthFlow's for verifying signatures.
struct KeyFiles: Sendable {
    private let scratch: TemporaryDirectory
    var directory: URL { scratch.url }

    init() throws { scratch = try TemporaryDirectory("oauthflow-keys") }

    func remove() { scratch.remove() }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// The ways a test makes a private key.
    enum Recipe: String, Sendable, CaseIterable, CustomStringConvertible {
        case rsa2048PKCS8, rsa2048PKCS1, rsa3072PKCS8, p256SEC1, p256PKCS8, p384SEC1, p521SEC1, ed25519PKCS8

        var description: String { rawValue }

        /// `openssl` arguments writing the key to `out`.
        func arguments(out: String) -> [[String]] {
            switch self {
            case .rsa2048PKCS8: return [["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", out]]
            case .rsa2048PKCS1: return [["genrsa", "-traditional", "-out", out, "2048"]]
            case .rsa3072PKCS8: return [["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072", "-out", out]]
            case .p256SEC1: return [["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", out]]
            case .p256PKCS8: return [["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", out]]
            case .p384SEC1: return [["ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", out]]
            case .p521SEC1: return [["ecparam", "-name", "secp521r1", "-genkey", "-noout", "-out", out]]
            case .ed25519PKCS8: return [["genpkey", "-algorithm", "ED25519", "-out", out]]
            }
        }

        /// The PEM label the recipe writes.
        var label: String {
            switch self {
            case .rsa2048PKCS1: return "RSA PRIVATE KEY"
            case .p256SEC1, .p384SEC1, .p521SEC1: return "EC PRIVATE KEY"
            default: return "PRIVATE KEY"
            }
        }
    }

    /// Makes a key with `recipe` as `name`, mode 0600.
    @discardableResult
    func key(_ recipe: Recipe, name: String = "key.pem") throws -> String {
        let out = path(name)
        for arguments in recipe.arguments(out: out) { try Self.openssl(arguments) }
        try chmod(name, 0o600)
        return out
    }

    /// A self-signed certificate for the key at `keyPath`.
    @discardableResult
    func certificate(for keyPath: String, name: String = "cert.pem") throws -> String {
        let out = path(name)
        try Self.openssl(["req", "-x509", "-new", "-key", keyPath, "-subj", "/CN=oauthflow-client", "-days", "1", "-out", out])
        return out
    }

    func chmod(_ name: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path(name))
    }

    func write(_ name: String, _ text: String, mode: Int = 0o600) throws -> String {
        try Data(text.utf8).write(to: directory.appendingPathComponent(name))
        try chmod(name, mode)
        return path(name)
    }

    func read(_ name: String) throws -> String { try String(contentsOfFile: path(name), encoding: .utf8) }

    /// True when `openssl` verifies `signature` (JWS bytes) over `input` with the public half of
    /// the key at `keyPath`.
    func opensslVerifies(keyPath: String, algorithm: SigningAlgorithm, input: [UInt8], signature: [UInt8]) throws -> Bool {
        let publicKey = path("verify-pub.pem"), inputFile = path("verify-input.bin"), signatureFile = path("verify-sig.bin")
        try Self.openssl(["pkey", "-in", keyPath, "-pubout", "-out", publicKey])
        try Data(input).write(to: URL(fileURLWithPath: inputFile))
        var bytes = signature
        switch algorithm {
        case .es256, .es384, .es512:
            // openssl wants DER ECDSA-Sig-Value; the JWS form is r ‖ s.
            let size = algorithm == .es256 ? 32 : algorithm == .es384 ? 48 : 66
            guard let der = ECDSASignature.der(fromJWS: signature, coordinateSize: size) else { return false }
            bytes = der
        default: break
        }
        try Data(bytes).write(to: URL(fileURLWithPath: signatureFile))
        let hash: String
        switch algorithm {
        case .rs256, .ps256, .es256: hash = "-sha256"
        case .rs384, .ps384, .es384: hash = "-sha384"
        case .rs512, .ps512, .es512: hash = "-sha512"
        case .edDSA:
            return (try? Self.openssl(["pkeyutl", "-verify", "-pubin", "-inkey", publicKey, "-rawin", "-in", inputFile, "-sigfile", signatureFile])) != nil
        case .hs256, .hs384, .hs512: return false
        }
        var arguments = ["dgst", hash, "-verify", publicKey, "-signature", signatureFile]
        if [.ps256, .ps384, .ps512].contains(algorithm) {
            arguments += ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"]
        }
        return (try? Self.openssl(arguments + [inputFile])) != nil
    }

    /// The HMAC of `input` under `key`, hex, as `openssl dgst -mac HMAC` computes it.
    func opensslHMAC(_ algorithm: SigningAlgorithm, key: String, input: [UInt8]) throws -> String {
        let inputFile = path("hmac-input.bin")
        try Data(input).write(to: URL(fileURLWithPath: inputFile))
        let hash = algorithm == .hs256 ? "-sha256" : algorithm == .hs384 ? "-sha384" : "-sha512"
        let output = try Self.openssl(["dgst", hash, "-mac", "HMAC", "-macopt", "key:\(key)", "-r", inputFile])
        return String(output.prefix { $0 != " " })
    }

    /// The SHA-256 fingerprint of the certificate at `path`, as bytes (`openssl x509 -fingerprint`).
    func opensslFingerprint(_ certificatePath: String) throws -> [UInt8] {
        let output = try Self.openssl(["x509", "-in", certificatePath, "-noout", "-fingerprint", "-sha256"])
        let hex = output.split(separator: "=").last.map { $0.filter { $0.isHexDigit } } ?? ""
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }

    struct OpenSSLFailed: Error, CustomStringConvertible {
        let arguments: [String]
        let status: Int32
        var description: String { "openssl \(arguments.joined(separator: " ")) exited \(status)" }
    }

    /// Runs `/usr/bin/openssl` with `arguments`; its standard output.
    @discardableResult
    static func openssl(_ arguments: [String]) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw OpenSSLFailed(arguments: arguments, status: process.terminationStatus) }
        return String(decoding: data, as: UTF8.self)
    }
}
