// swift-tools-version:6.0
import PackageDescription

// libFuzzer targets, in a package of their own so the root carries no fuzzing flags. Build and
// run them with scripts/fuzz (see docs/fuzzing.md).
let package = Package(
    name: "LifelineFuzz",
    dependencies: [
        .package(name: "Lifeline", path: "../"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // The state database target damages a real database by hand, as only SQL can.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "LifelineFuzz",
            dependencies: [
                .product(name: "Lifeline", package: "Lifeline"),
                .product(name: "LifelineLua", package: "Lifeline"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
