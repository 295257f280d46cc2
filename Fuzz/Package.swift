// swift-tools-version:6.0
import PackageDescription

// libFuzzer targets, in a package of their own so the root carries no fuzzing flags. Build and
// run them with scripts/fuzz (see docs/fuzzing.md).
let package = Package(
    name: "LifelineFuzz",
    dependencies: [
        .package(name: "Lifeline", path: "../"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .executableTarget(
            name: "LifelineFuzz",
            dependencies: [
                .product(name: "Lifeline", package: "Lifeline"),
                .product(name: "LifelineLua", package: "Lifeline"),
                .product(name: "Logging", package: "swift-log"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
