// swift-tools-version:6.0
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "OAuthFlow",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "OAuthFlow", targets: ["OAuthFlow"]),
        .library(name: "OAuthFlowURLSession", targets: ["OAuthFlowURLSession"]),
        .library(name: "OAuthFlowTesting", targets: ["OAuthFlowTesting"]),
        // The fleet store over the system libpq, a product of its own so the core never links libpq.
        .library(name: "OAuthFlowPostgres", targets: ["OAuthFlowPostgres"]),
        .executable(name: "authflow", targets: ["authflow"]),
    ],
    targets: [
        // Headers only: libcrypto.so.3 is opened with dlopen on first use (see shim.h and
        // Crypto/LibCrypto.swift), so linking OAuthFlow loads no OpenSSL.
        .systemLibrary(
            name: "COpenSSL",
            providers: [.apt(["libssl-dev"])]
        ),
        // Headers only: CurlTransport opens libcurl.so.4 with dlopen on its first request (see shim.h).
        .systemLibrary(
            name: "CCurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "OAuthFlow", dependencies: ["COpenSSL", "CCurl"], swiftSettings: strictSettings),
        // URLSessionTransport: the only code that imports FoundationNetworking.
        .target(name: "OAuthFlowURLSession", dependencies: ["OAuthFlow"], swiftSettings: strictSettings),
        .target(name: "OAuthFlowTesting", dependencies: ["OAuthFlow", "OAuthFlowURLSession"], swiftSettings: strictSettings),
        // Headers only (<postgresql/libpq-fe.h>): OAuthFlowPostgres opens libpq.so.5 with dlopen when
        // the first PostgresSecretStore is made (see shim.h), so linking the product loads nothing.
        .systemLibrary(
            name: "CLibPQ",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(name: "OAuthFlowPostgres", dependencies: ["OAuthFlow", "CLibPQ"], swiftSettings: strictSettings),
        // Headers only (libc): epoll, accept4 and malloc_trim for the agent's socket server, which
        // Swift's Glibc module does not show (see shim.h).
        .systemLibrary(name: "CAgentIO"),
        // The machine agent (Documentation/Agent.md): the socket loops, the protocol, access control,
        // token files, re-authorization, systemd and metrics. `authflow agent` runs it.
        .target(name: "AuthflowAgent", dependencies: ["OAuthFlow", "CAgentIO"], swiftSettings: strictSettings),
        // Not OAuthFlowTesting: that links FoundationNetworking, which `authflow token` must not load.
        .target(name: "AuthflowCLI", dependencies: ["OAuthFlow", "OAuthFlowPostgres", "AuthflowAgent"], swiftSettings: strictSettings),
        .executableTarget(
            name: "authflow",
            dependencies: ["AuthflowCLI"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AuthflowCLITests",
            // "authflow" is listed so that `swift test` builds the binary the Process tests run.
            dependencies: ["AuthflowCLI", "AuthflowAgent", "authflow", "TestSupport", "OAuthFlow", "OAuthFlowTesting"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AuthflowAgentTests",
            dependencies: ["AuthflowAgent", "OAuthFlow", "OAuthFlowTesting", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "oauthflow-bench",
            dependencies: ["OAuthFlow", "CCurl", "COpenSSL", "OAuthFlowPostgres"],
            path: "Benchmarks/oauthflow-bench",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "OAuthFlowTests",
            dependencies: ["OAuthFlow", "OAuthFlowURLSession", "OAuthFlowTesting", "TestSupport"],
            swiftSettings: strictSettings
        ),
        // Test-only: runs the built `authflow` binary and a scripted loopback HTTP server. Not a product.
        .target(name: "TestSupport", dependencies: ["OAuthFlow"], path: "Tests/TestSupport", swiftSettings: strictSettings),
        .testTarget(
            name: "IntegrationTests",
            // "authflow" is listed so that `swift test` builds the binary the CLI integration test runs.
            dependencies: ["OAuthFlow", "OAuthFlowURLSession", "OAuthFlowTesting", "authflow", "TestSupport"],
            exclude: ["Server", "README.md"],
            swiftSettings: strictSettings
        ),
        // Test-only: one fleet member per process for the PostgreSQL store tests. Not a product.
        .executableTarget(
            name: "pg-fleet-member",
            dependencies: ["OAuthFlow", "OAuthFlowPostgres"],
            path: "Tests/PostgresFleetMember",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PostgresTests",
            // "pg-fleet-member" and "authflow" are listed so that `swift test` builds the binaries the tests run.
            dependencies: ["OAuthFlow", "OAuthFlowPostgres", "AuthflowCLI", "TestSupport", "pg-fleet-member", "authflow"],
            swiftSettings: strictSettings
        ),
    ]
)
