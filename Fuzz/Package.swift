// swift-tools-version:6.0
import PackageDescription

// libFuzzer targets for every parser that reads what an attacker can write. A package of its own, so the main
// build stays as it is: `make fuzz` builds it with -sanitize=fuzzer,address and runs each target.
let package = Package(
    name: "xign-fuzz",
    dependencies: [.package(name: "xign", path: "..")],
    targets: [
        .executableTarget(
            name: "xign-fuzz",
            dependencies: [
                .product(name: "XignClient", package: "xign"),
                .product(name: "XignManagerConfiguration", package: "xign"),
                .product(name: "XignWebAuthn", package: "xign"),
                .product(name: "XignAttestation", package: "xign"),
            ],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        )
    ]
)
