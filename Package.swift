// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Lifeline",
    products: [
        .library(name: "Lifeline", targets: ["Lifeline"]),
        .library(name: "LifelineLua", targets: ["LifelineLua"]),
        .library(name: "LifelineHTTP", targets: ["LifelineHTTP"]),
        .library(name: "LifelineMetrics", targets: ["LifelineMetrics"]),
        // The C shims, for benchmarks that measure bare Lua beside the host.
        .library(name: "CLuaShims", targets: ["CLuaShims"]),
        // What the tests share: plugins as closures, hosts driven by hand, a watchdog clock moved
        // by hand. For tests of code built on Lifeline, as HummingbirdTesting is for Hummingbird.
        .library(name: "LifelineTesting", targets: ["LifelineTesting"]),
        // The whole command line as a library: a package of one's own builds its own `lifeline`
        // with its own Swift plugins (`Lifeline.main(swiftPlugins:)`), without a fork.
        .library(name: "LifelineCLI", targets: ["LifelineCLI"]),
        // Apple's names (UIApplication, BGTaskScheduler, …) over the Swift plugin API, so code
        // written for iOS compiles with only its imports changed.
        .library(name: "LifelineBackgroundTasks", targets: ["LifelineBackgroundTasks"]),
        .executable(name: "lifeline", targets: ["lifeline"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // Deque and Heap for the main executor's queue and the operation queues.
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        // SHA-256 for verified downloads; async-http-client's TLS stack builds it already.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        // HTTPFields for request and response headers: case-insensitive names, order kept.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        // The metrics page of `lifeline run --metrics`: the Prometheus text format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // Lua 5.4 from the system: apt-get install liblua5.4-dev
        .systemLibrary(
            name: "CLua",
            pkgConfig: "lua5.4",
            providers: [.apt(["liblua5.4-dev"])]
        ),
        // Lua's macros as functions, the sandbox's C parts, the trampolines that raise and yield,
        // and lifeline.json's codec (json.c), which allocates only through Lua.
        .target(name: "CLuaShims", dependencies: ["CLua"]),
        // The rules as pure values, below the core: the lifecycle, events, steps, the profile,
        // the task registry, terminations, the watchdog's and the system's policies, units, host
        // time, JSON values and errors. It depends on nothing of the package, so a rule cannot
        // reach up into the runtime, the scenario language or the report.
        .target(
            name: "LifelineRules",
            // HTTPFields: a transfer's resume rule answers with the headers of its next attempt.
            dependencies: [.product(name: "HTTPTypes", package: "swift-http-types")]),
        // The core: lifecycle, bus, tasks, budgets, watchdog, clock, scenario, report. No Lua.
        .target(
            name: "Lifeline",
            dependencies: [
                "LifelineRules",
                .product(name: "Logging", package: "swift-log"),
                // The state dir's database (the plugins' stores): SQLite, apt libsqlite3-dev.
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            // The HTML page's style and script, compiled into the binary as byte arrays
            // (`PackageResources.report_css`): no bundle is looked up at run time, so a copied
            // binary draws the same page.
            resources: [
                .embedInCode("Pictures/Resources/report.css"),
                .embedInCode("Pictures/Resources/report.js"),
            ]
        ),
        // The Lua bridge: states, sandbox, the `lifeline` module.
        .target(name: "LifelineLua", dependencies: ["Lifeline", "CLuaShims", "CLua"]),
        // The real HTTP transport for `lifeline run`: async-http-client behind the core's interface.
        .target(
            name: "LifelineHTTP",
            dependencies: [
                "Lifeline",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // `lifeline run --metrics`: the host's counters and gauges, served as /metrics on NIO.
        .target(
            name: "LifelineMetrics",
            dependencies: [
                "Lifeline", "LifelineLua",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Swift plugins compiled into the host.
        .target(
            name: "HeartbeatPlugin", dependencies: ["Lifeline"], path: "plugins/heartbeat-swift", exclude: ["scenarios", "plugin.toml"]),
        // The C ABI of native plugins: lifeline_plugin.h, the one header a plugin includes
        // (`lifeline --include-dir` prints its folder).
        .target(name: "CLifelinePlugin"),
        // Native plugins: a shared library loaded with dlopen, driven through the header's table.
        .target(name: "LifelineNative", dependencies: ["Lifeline", "CLifelinePlugin"]),
        // Apple's background-execution names, mapped onto PluginContext.
        .target(name: "LifelineBackgroundTasks", dependencies: ["Lifeline"]),
        // Apple's documented background-task examples, unchanged but for imports, as a plugin.
        .target(
            name: "AppleSamplesPlugin", dependencies: ["LifelineBackgroundTasks"], path: "plugins/apple-samples",
            exclude: ["scenarios", "plugin.toml"]),
        // The CLI as a library: parses, then calls the libraries. The Swift plugins it knows are
        // the ones its `main` is handed.
        .target(
            name: "LifelineCLI",
            dependencies: [
                "Lifeline", "LifelineLua", "LifelineHTTP", "LifelineMetrics", "LifelineNative",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // The editor and lint files `lifeline new` writes (EditorFiles), compiled in as bytes.
            resources: [
                .embedInCode("Editors/luals/library/lifeline.lua"),
                .embedInCode("Editors/luals/config.json"),
                .embedInCode("Editors/luarc.json"),
                .embedInCode("Editors/luacheckrc"),
            ]
        ),
        // The `lifeline` binary: the CLI with the bundled Swift plugins compiled in.
        .executableTarget(
            name: "lifeline",
            dependencies: ["LifelineCLI", "HeartbeatPlugin", "AppleSamplesPlugin"],
            // Not Sources/lifeline: beside Sources/Lifeline, a case-insensitive disk merges them.
            path: "Sources/LifelineMain"
        ),
        // The tests' shared helpers; no Lua, so the core's tests stand without it.
        .target(
            name: "LifelineTesting",
            dependencies: ["Lifeline", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "LifelineTests",
            dependencies: [
                "Lifeline", "LifelineRules", "LifelineTesting", .product(name: "Logging", package: "swift-log"),
                // GRDB: a migration test writes an older host's state database by hand.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        // The rules' own tests: they build against the rules alone, which shows the rules stand
        // without the core.
        .testTarget(name: "LifelineRulesTests", dependencies: ["LifelineRules"]),
        .testTarget(
            name: "LifelineNativeTests",
            dependencies: ["LifelineNative", "Lifeline", "LifelineTesting", "CLifelinePlugin"]),
        .testTarget(
            name: "LifelineBackgroundTasksTests",
            dependencies: ["LifelineBackgroundTasks", "Lifeline", "LifelineTesting", "AppleSamplesPlugin"]),
        .testTarget(
            name: "LifelineLuaTests",
            dependencies: [
                "LifelineLua", "Lifeline", "LifelineTesting", "CLuaShims", "CLua",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(name: "LifelineCLITests", dependencies: ["Lifeline", "LifelineTesting"]),
        .testTarget(
            name: "LifelineMetricsTests",
            dependencies: ["LifelineMetrics", "Lifeline", "LifelineLua", "LifelineTesting"]),
        .testTarget(
            name: "LifelineHTTPTests",
            dependencies: [
                "LifelineHTTP", "Lifeline", "LifelineLua",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
