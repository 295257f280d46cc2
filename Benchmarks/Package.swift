// swift-tools-version:6.0
import PackageDescription

// Benchmarks live in their own package so the root carries no benchmark dependency.
let package = Package(
    name: "LifelineBenchmarks",
    dependencies: [.package(name: "Lifeline", path: "../")],
    targets: [
        .executableTarget(
            name: "figures",
            dependencies: [
                .product(name: "Lifeline", package: "Lifeline"),
                .product(name: "LifelineLua", package: "Lifeline"),
                .product(name: "CLuaShims", package: "Lifeline"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
