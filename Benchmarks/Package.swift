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
        // The C baselines: bare Lua loops with no Swift in them.
        .target(
            name: "BenchBaselines",
            dependencies: [.product(name: "CLuaShims", package: "Lifeline")]
        ),
        .executableTarget(
            name: "figures",
            dependencies: [
                "BenchBaselines",
                .product(name: "Lifeline", package: "Lifeline"),
                .product(name: "LifelineLua", package: "Lifeline"),
                .product(name: "CLuaShims", package: "Lifeline"),
                .product(name: "LifelineHTTP", package: "Lifeline"),
                .product(name: "LifelineMetrics", package: "Lifeline"),
                // The raw GET the metrics tests scrape with.
                .product(name: "LifelineTesting", package: "Lifeline"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
