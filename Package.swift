// swift-tools-version:6.0
import PackageDescription

// The client modules (XignProtocol, XignCrypto, XignDevice, XignTerminal, XignCore, XignLogin) end up inside
// pam_xign.so, so they import FoundationEssentials only and stay synchronous (docs/design.md, "The PAM host").
// Each target lists exactly the modules it imports; `make lint` checks it, and the README's module map.
let package = Package(
    name: "xign",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "xign-setup", targets: ["xign-setup"]),
        .executable(name: "xign-manager", targets: ["xign-manager"]),
        .executable(name: "xignd", targets: ["xignd"]),
        // pam_xign.so; `make pam` links it with the static Swift stdlib and pam/pam_xign.map.
        .library(name: "pam_xign", type: .dynamic, targets: ["XignPAM"]),
        // The client's parsers and the manager's config file as libraries for the libFuzzer targets in Fuzz/, a package of its own.
        .library(name: "XignClient", targets: ["XignCore", "XignLogin", "XignDaemon"]),
        .library(name: "XignManagerConfiguration", targets: ["XignManagerConfiguration"]),
        .library(name: "XignWebAuthn", targets: ["XignWebAuthn"]),
        .library(name: "XignAttestation", targets: ["XignAttestation"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/vapor/sql-kit", from: "3.36.0"),
        .package(url: "https://github.com/vapor/postgres-kit", from: "2.17.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
    ],
    targets: [
        // System libraries.
        .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "COpenSSL", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CQREncode", providers: [.apt(["libqrencode-dev"])]),
        .systemLibrary(name: "CPAM", providers: [.apt(["libpam0g-dev"])]),
        .systemLibrary(name: "CTSS2", providers: [.apt(["libtss2-dev"])]),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CEpoll"),
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),

        // Leaf modules.
        .target(name: "XignProtocol", dependencies: ["XignCrypto"]),
        .target(name: "XignCrypto", dependencies: ["COpenSSL"]),
        // libtss2 is opened with dlopen at the first TPM operation (xign_tpm.c), so it is not linked.
        .target(name: "CXignTPM", dependencies: ["CTSS2"]),
        // libdbus is opened with dlopen at the first fingerprint check (xign_dbus.c), so it is not linked.
        .target(name: "CXignDBus", dependencies: ["CDBus"]),
        .target(name: "XignDevice", dependencies: ["XignCrypto", "CXignTPM", "CXignDBus"]),
        // XignProtocol for DisplayText: what reaches the terminal is made safe there.
        .target(name: "XignTerminal", dependencies: ["XignProtocol", "CQREncode"]),

        // The SDK core used by every front end.
        .target(
            name: "XignCore", dependencies: ["XignProtocol", "XignCrypto", "XignDevice", "XignAttestation", "CCurl"]),

        // The login use cases (this machine's key, a confirmation, through xignd) and their typed outcome; xignd's
        // protocol, which its callers without root speak.
        .target(name: "XignLogin", dependencies: ["XignCore", "XignProtocol", "XignTerminal"]),

        // The PAM module: the C entry points in pam/, and the bridge from them to a Login and back to a PAM code.
        .target(
            name: "CXignPAM", dependencies: ["CPAM"], path: "pam", exclude: ["pam_xign.map", "tests"],
            publicHeadersPath: "include"),
        .target(name: "XignPAM", dependencies: ["XignLogin", "XignProtocol", "CXignPAM", "CPAM"]),

        // xignd's server: it holds the state and the TPM and runs logins and approvals for callers without root.
        .target(name: "XignDaemon", dependencies: ["XignLogin", "XignCore", "XignProtocol"]),
        .executableTarget(
            name: "xignd",
            dependencies: [
                "XignDaemon", "XignCore", "XignDevice", "XignProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // TPM key attestation: EK certificates and the CAs that issue them, the credential that proves an attestation key
        // lives beside the EK, and TPM2_Certify of a device or host key by it.
        .target(name: "XignAttestation", dependencies: ["XignCrypto", "COpenSSL"]),
        // WebAuthn's data (CBOR, authenticator data, COSE keys, clientDataJSON) and the checks of a passkey's ceremonies.
        .target(name: "XignWebAuthn", dependencies: ["XignCrypto"]),
        // The manager's web app: server-rendered pages, one script and one stylesheet, under strict headers. It speaks
        // the JSON API from the browser, so it knows no store.
        .target(
            name: "XignWeb",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            // Embedded into the binary (PackageResources), so the manager stays one file that needs no bundle.
            resources: [
                .embedInCode("Resources/app.js"), .embedInCode("Resources/app.css"),
                .embedInCode("Resources/head.mustache"), .embedInCode("Resources/notices.mustache"),
                .embedInCode("Resources/foot.mustache"), .embedInCode("Resources/personalize.mustache"),
                .embedInCode("Resources/approve.mustache"), .embedInCode("Resources/account.mustache"),
                .embedInCode("Resources/console-top.mustache"), .embedInCode("Resources/console-signin.mustache"),
                .embedInCode("Resources/console-denied.mustache"), .embedInCode("Resources/console-accounts.mustache"),
                .embedInCode("Resources/console-account.mustache"), .embedInCode("Resources/console-audit.mustache"),
                .embedInCode("Resources/console-hosts.mustache"), .embedInCode("Resources/console-health.mustache"),
                .embedInCode("Resources/notice.mustache"), .embedInCode("Resources/register.mustache"),
                .embedInCode("Resources/console-waiting.mustache"), .embedInCode("Resources/register-confirm.mustache"),
                .embedInCode("Resources/not-me.mustache"),
            ]),

        // The identity manager: its configuration file apart, so the libFuzzer targets reach it without the server.
        .target(name: "XignManagerConfiguration", dependencies: ["XignProtocol"]),
        // Registration through an organization's identity provider: OpenID Connect discovery, the code exchange, and
        // the ID token checked with jwt-kit.
        .target(
            name: "XignIdentityProviders",
            dependencies: ["XignProtocol", "XignCrypto", "XignCore", .product(name: "JWTKit", package: "jwt-kit")]),
        .target(
            name: "XignManager",
            dependencies: [
                // XignDevice for the TPM-held PIN pepper only.
                "XignManagerConfiguration", "XignProtocol", "XignCrypto", "XignDevice", "XignWebAuthn", "XignWeb",
                "XignAttestation", "XignIdentityProviders",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "SQLKit", package: "sql-kit"),
                "CSQLite",
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),

        // Front ends.
        .executableTarget(
            name: "xign-setup",
            dependencies: [
                "XignCore", "XignDevice", "XignLogin", "XignProtocol", "XignTerminal",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "xign-manager",
            dependencies: [
                "XignDevice", "XignManager", "XignManagerConfiguration", "XignProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `make bench`: figures, never timed tests.
        // `make bench-manager` starts managers and PostgreSQL as the tests do, so it shares their support target.
        .executableTarget(
            name: "xign-bench",
            dependencies: [
                "XignCore", "XignLogin", "XignCrypto", "XignDevice", "XignProtocol", "XignHarness", "CEpoll",
            ]),
        // The real programs the tests and the benchmarks start: the manager, swtpm, PostgreSQL, sshd, any child process.
        .target(name: "XignHarness", dependencies: ["XignProtocol", "XignCrypto", "XignDevice", "XignWebAuthn"]),

        // Tests. The support target drives what users see (browsers, greeters, lockers, terminals) and re-exports the harness.
        .target(
            name: "XignTestSupport",
            dependencies: ["XignHarness", "XignLogin", "XignCore", "XignProtocol", "XignDevice"],
            path: "Tests/XignTestSupport"),
        .testTarget(name: "XignProtocolTests", dependencies: ["XignProtocol", "XignCrypto", "XignHarness"]),
        .testTarget(name: "XignCryptoTests", dependencies: ["XignCrypto", "COpenSSL"]),
        .testTarget(name: "XignWebAuthnTests", dependencies: ["XignWebAuthn", "XignCrypto"]),
        .testTarget(name: "XignDeviceTests", dependencies: ["XignDevice", "XignTestSupport"]),
        .testTarget(
            name: "XignAttestationTests",
            dependencies: ["XignAttestation", "XignDevice", "XignCrypto", "XignTestSupport"]),
        .testTarget(name: "XignTerminalTests", dependencies: ["XignTerminal", "XignTestSupport"]),
        .testTarget(
            name: "XignCoreTests",
            dependencies: ["XignCore", "XignCrypto", "XignDevice", "XignProtocol", "XignTestSupport"]),
        .testTarget(
            name: "XignManagerTests",
            dependencies: [
                "XignManager", "XignManagerConfiguration", "XignCore", "XignCrypto", "XignDevice", "XignProtocol",
                "XignTestSupport", "XignIdentityProviders", .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Yams", package: "Yams"), .product(name: "Logging", package: "swift-log"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "XignDaemonTests",
            dependencies: ["XignDaemon", "XignLogin", "XignProtocol", "XignTestSupport"]),
        .testTarget(
            name: "XignSetupTests",
            dependencies: [
                "xign-setup", "XignCore", "XignProtocol", "XignTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "XignLoginTests", dependencies: ["XignLogin", "XignCore", "XignProtocol", "XignTestSupport"]),
        .testTarget(
            name: "XignPAMTests",
            dependencies: ["XignCore", "XignCrypto", "XignDevice", "XignLogin", "XignProtocol", "XignTestSupport"],
            exclude: ["Golden"]),
    ]
)
