import Foundation
import OAuthFlow
import OAuthFlowTesting
import TestSupport
import Testing

/// `authflow token` on a cached token loads neither libcurl, libpq nor FoundationNetworking: both C
/// libraries are opened with `dlopen` on first use (a request, a database store), not linked. Nor
/// does it load swift-corelibs-foundation (`libFoundation.so`, with CoreFoundation and ICU): the
/// library, the CLI and the fleet store build on FoundationEssentials alone.
@Suite("CLI start-up: no network or database library for a cached token")
struct LeanStartTests {
    /// The libraries that must stay out of a process that only reads its file store.
    static let heavy = [
        "libcurl", "libpq", "libcrypto", "libFoundationNetworking", "libgssapi", "libldap", "libkrb5",
        "libFoundation.so", "libFoundationInternationalization", "lib_FoundationICU",
    ]

    @Test("`authflow token P` with a fresh token in a file store maps no libcurl, libpq, libFoundationNetworking or libFoundation (LD_DEBUG=libs)")
    func cachedTokenLoadsNoNetworkLibrary() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // A token stored the way the library stores it, valid for an hour.
        let mock = MockProvider()
        mock.script(.token, [.token(access: "at-lean", expiresIn: 3600)])
        let seeding = try await AuthFlow(providers: [mock.provider(id: "gh", clientSecret: "s3cret")], store: FileSecretStore(directory: directory.store),
                                         transport: mock.transport())
        _ = try await seeding.clientCredentials(provider: "gh")
        try directory.writeCatalog([catalogEntry(id: "gh", base: "http://127.0.0.1:9", device: false, secret: "s3cret", revocation: false)])
        let environment = cleanEnvironment(directory, ["AUTHFLOW_CONFIG": directory.config.path, "AUTHFLOW_STORE": directory.store.path,
                                                       "LD_DEBUG": "libs"])

        let result = try await runBinary(["token", "gh"], environment: environment)

        #expect(result.status == 0, "\(result.stderr.suffix(2000))")
        #expect(result.stdout == "at-lean\n")
        // ld.so reports every object it initialises ("calling init: /path/lib.so").
        let loaded = result.stderr.split(separator: "\n").filter { $0.contains("calling init:") }.map(String.init)
        #expect(loaded.contains { $0.contains("libFoundationEssentials.so") }, "LD_DEBUG output missing: \(result.stderr.prefix(500))")
        for library in Self.heavy {
            #expect(!loaded.contains { $0.contains(library) }, "\(library) was loaded: \(loaded.filter { $0.contains(library) })")
        }
    }

    @Test("`ldd authflow` lists neither libpq nor libcurl, FoundationNetworking nor Foundation (only FoundationEssentials)")
    func binaryDoesNotLinkThem() throws {
        let binary = try #require(Binary.url, "authflow not built")
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ldd")
        process.arguments = [binary.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(output.contains("libFoundationEssentials.so"), "\(output)")  // the list is real
        for library in Self.heavy { #expect(!output.contains(library), "\(library) is linked:\n\(output)") }
    }
}
