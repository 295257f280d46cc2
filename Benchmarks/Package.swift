// swift-tools-version:6.0
import PackageDescription

// Benchmarks live in their own package so the root carries no benchmark dependency.
let package = Package(
    name: "LifelineBenchmarks",
    dependencies: [
        .package(name: "Lifeline", path: "../"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "figures",
            dependencies: [
                .product(name: "Lifeline", package: "Lifeline"),
                .product(name: "LifelineLua", package: "Lifeline"),
                .product(name: "CLuaShims", package: "Lifeline"),
                .product(name: "LifelineHTTP", package: "Lifeline"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
