import Foundation
import Testing

/// Native plugins end to end: C compiled with the system's cc against `lifeline --include-dir`,
/// run by the lifeline binary.
@Suite struct NativePluginCLITests {
    /// The header folder the binary prints, checked once per test that builds a plugin.
    static func includeDirectory() throws -> String {
        let r = try CLI.run(["--include-dir"])
        try #require(r.status == 0, "lifeline --include-dir: \(r.stderr)")
        return r.stdout.trimmingCharacters(in: .newlines)
    }

    /// Compiles `source` into plugins/NAME/NAME.so of `ws`, with a plugin.toml naming it.
    static func plugin(_ ws: Workspace, _ name: String, _ source: String, toml: String = "") throws {
        let folder = ws.plugins + "/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try ("native = \"\(name).so\"\n" + toml).write(toFile: folder + "/plugin.toml", atomically: true, encoding: .utf8)
        try source.write(toFile: folder + "/\(name).c", atomically: true, encoding: .utf8)
        // Built beside it and renamed into place: a running lifeline may have the old file mapped.
        try cc(["-I", try includeDirectory(), folder + "/\(name).c", "-o", folder + "/.\(name).so.tmp"])
        try #require(rename(folder + "/.\(name).so.tmp", folder + "/\(name).so") == 0)
    }

    static func cc(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["cc", "-shared", "-fPIC", "-Wall", "-Werror"] + arguments
        // Into a file, not a pipe: reading a pipe fails with EINTR when a signal arrives.
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("cc-\(UUID().uuidString).log").path
        FileManager.default.createFile(atPath: log, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: log) }
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
        process.waitUntilExit()
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        try #require(process.terminationStatus == 0, "cc: \(output)")
    }

    /// What the sqlite3 shell prints for `sql` on the database at `path`.
    static func sqlite(_ path: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", path, sql]
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-\(UUID().uuidString).out").path
        FileManager.default.createFile(atPath: out, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: out) }
        process.standardOutput = FileHandle(forWritingAtPath: out)
        try process.run()
        process.waitUntilExit()
        return (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
    }

    static let prelude = """
        #include <lifeline_plugin.h>
        #include <stdio.h>
        #include <string.h>
        LIFELINE_PLUGIN_EXPORT_ABI;
        static const lifeline_api *api;
        #define S(t) t, sizeof(t) - 1

        """

    /// The fenced block of docs/native.md that starts after the line `after` (and the fence
    /// "```TAG"), without its fences.
    static func docBlock(after marker: String, tag: String) throws -> String {
        let doc = try String(contentsOfFile: CLI.packageRoot + "/docs/native.md", encoding: .utf8)
        let from = try #require(doc.range(of: marker), "docs/native.md has no \(marker)")
        let open = try #require(doc.range(of: "```\(tag)\n", range: from.upperBound..<doc.endIndex))
        let close = try #require(doc.range(of: "\n```\n", range: open.upperBound..<doc.endIndex))
        return String(doc[open.upperBound..<close.lowerBound]) + "\n"
    }

    /// docs/native.md's smallest plugin, as written there, passes its scenario.
    @Test func docs_theSmallestCompletePlugin_passesItsTest() throws {
        let ws = try Workspace()
        let folder = ws.plugins + "/hello"
        try FileManager.default.createDirectory(atPath: folder + "/scenarios", withIntermediateDirectories: true)
        try Self.docBlock(after: "## The smallest complete plugin", tag: "c").write(
            toFile: folder + "/hello.c", atomically: true, encoding: .utf8)
        try Self.docBlock(after: "`plugin.toml`:", tag: "toml").write(
            toFile: folder + "/plugin.toml", atomically: true, encoding: .utf8)
        try Self.docBlock(after: "`scenarios/basic.scenario`:", tag: "").write(
            toFile: folder + "/scenarios/basic.scenario", atomically: true, encoding: .utf8)
        try Self.cc(["-I", try Self.includeDirectory(), folder + "/hello.c", "-o", folder + "/hello.so"])
        let r = try CLI.run(["test", ws.plugins])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("1 passed, 0 failed"))
    }

    static var cplusplus: String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { $0 + "/c++" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The same plugin compiled as C++, and with -fvisibility=hidden: the header's declarations
    /// give lifeline_plugin_abi_version C linkage and default visibility. Before, C++ made the
    /// const internal, so the library did not export it and was refused as "not a plugin".
    @Test(.enabled(if: cplusplus != nil, "no c++ on this machine"))
    func docs_theSmallestPlugin_compiledAsCPlusPlus_orWithHiddenVisibility_passes() throws {
        for (language, flags) in [("c++", ["-x", "c++"]), ("c", ["-fvisibility=hidden"])] {
            let ws = try Workspace()
            let folder = ws.plugins + "/hello"
            try FileManager.default.createDirectory(atPath: folder + "/scenarios", withIntermediateDirectories: true)
            try Self.docBlock(after: "## The smallest complete plugin", tag: "c").write(
                toFile: folder + "/hello.c", atomically: true, encoding: .utf8)
            try "native = \"hello.so\"\n".write(toFile: folder + "/plugin.toml", atomically: true, encoding: .utf8)
            try Self.docBlock(after: "`scenarios/basic.scenario`:", tag: "").write(
                toFile: folder + "/scenarios/basic.scenario", atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: language == "c++" ? try #require(Self.cplusplus) : "/usr/bin/cc")
            process.arguments = ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I", try Self.includeDirectory()]
                + flags + [folder + "/hello.c", "-o", folder + "/hello.so"]
            try process.run()
            process.waitUntilExit()
            try #require(process.terminationStatus == 0, "\(language) failed")
            let r = try CLI.run(["test", ws.plugins])
            #expect(r.status == 0, "\(language): \(r.stdout)\(r.stderr)")
        }
    }

    /// Under simulate, a load failure's message is all a user sees: an init that fails names its
    /// library. `native = "."` is the folder, not a link out of it.
    @Test func anInitThatFails_namesItsLibrary_andDotIsTheFolderItself() throws {
        let ws = try Workspace()
        try Self.plugin(
            ws, "refuses",
            Self.prelude + """
                int lifeline_plugin_init(const lifeline_api *host, lifeline_plugin *self) {
                    api = host;
                    api->fail(self, S("no config"));
                    return LIFELINE_ERR_ARGUMENT;
                }
                """)
        let scenario = try ws.file("s.scenario", "0s launch\n1s terminate\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", scenario])
        #expect(r.status == 65)
        #expect(
            r.stderr.contains("\(ws.plugins)/refuses/refuses.so: lifeline_plugin_init failed: no config"), "\(r.stderr)")
        try FileManager.default.createDirectory(atPath: ws.plugins + "/dot", withIntermediateDirectories: true)
        _ = try ws.file("plugins/dot/plugin.toml", "native = \".\"\n")
        let c = try CLI.run(["check", "--plugins", ws.plugins, "--only", "dot"])
        #expect(c.status == 65)
        #expect(c.stdout.contains("plugin.toml:1: native = \".\" is the plugin's folder, not a library in it"), "\(c.stdout)")
    }

    static var rustc: String? {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":" + NSHomeDirectory() + "/.cargo/bin"
        return path.split(separator: ":").map { $0 + "/rustc" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// docs/native.md's Rust plugin, built with rustc where there is one, passes a scenario.
    @Test(.enabled(if: rustc != nil, "no rustc on this machine"))
    func docs_theRustPlugin_buildsWithRustc_andRuns() throws {
        let ws = try Workspace()
        let folder = ws.plugins + "/rusty"
        try FileManager.default.createDirectory(atPath: folder + "/scenarios", withIntermediateDirectories: true)
        try Self.docBlock(after: "## Rust, Zig and others", tag: "rust").write(
            toFile: folder + "/rusty.rs", atomically: true, encoding: .utf8)
        try "native = \"rusty.so\"\n".write(toFile: folder + "/plugin.toml", atomically: true, encoding: .utf8)
        try """
            0s launch
            1s background
            10s terminate

            expect outcome completed
            expect taskEnded plugin=rusty name=save expired=false at 1s
            expect log plugin=rusty contains "saved from Rust on didEnterBackground"

            """.write(toFile: folder + "/scenarios/basic.scenario", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.rustc))
        process.arguments = ["--edition", "2021", "--crate-type", "cdylib", "-O", folder + "/rusty.rs", "-o", folder + "/rusty.so"]
        process.currentDirectoryURL = URL(fileURLWithPath: folder)
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "rustc failed")
        let r = try CLI.run(["test", ws.plugins])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
    }

    /// A library rebuilt while `lifeline run` has it loaded is the new code after `ctl reload`:
    /// dlopen would give the old image for the same path, so the host loads a copy.
    @Test func aReload_runsTheRebuiltLibrary() throws {
        let ws = try Workspace()
        func build(_ version: String) throws {
            try Self.plugin(
                ws, "live",
                Self.prelude + """
                    int lifeline_plugin_init(const lifeline_api *host, lifeline_plugin *self) {
                        api = host;
                        return api->log(self, LIFELINE_LOG_INFO, S("native \(version) loaded"));
                    }
                    """)
        }
        try build("v1")
        let state = ws.path + "/state"
        let live = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(live.stderr.waitFor("native v1 loaded"))
        try build("v2, rebuilt")
        let answer = try CLI.run(["ctl", "--state-dir", state, "reload"])
        #expect(answer.status == 0, "\(answer.stderr)")
        #expect(live.stderr.waitFor("native v2, rebuilt loaded"))
        live.signal(SIGTERM)
        #expect(live.wait() == 0)
    }

    @Test func includeDir_printsTheHeadersFolder_andTheExampleBuiltAgainstItPassesItsTest() throws {
        let dir = try Self.includeDirectory()
        #expect(FileManager.default.fileExists(atPath: dir + "/lifeline_plugin.h"))
        let ws = try Workspace()
        let folder = ws.plugins + "/notes-c"
        try FileManager.default.createDirectory(atPath: folder + "/scenarios", withIntermediateDirectories: true)
        for file in ["notes.c", "plugin.toml", "scenarios/notes.scenario"] {
            try FileManager.default.copyItem(atPath: CLI.packageRoot + "/plugins/notes-c/" + file, toPath: folder + "/" + file)
        }
        try Self.cc(["-I", dir, folder + "/notes.c", "-o", folder + "/notes.so"])
        let r = try CLI.run(["test", ws.plugins])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("1 passed, 0 failed"))
    }

    /// A value store_set wrote is in the state dir's SQLite file once the call returns: a SIGKILL
    /// of `lifeline run` right after loses none, a later run reads it, and Lua reads it as a string.
    @Test func storeWritesSurviveASIGKILL_inTheStateDirsSQLiteFile() throws {
        let ws = try Workspace()
        try Self.plugin(
            ws, "counter",
            Self.prelude + """
                static int n;
                static char line[64];
                static int step(lifeline_plugin *self, void *u) {
                    (void)u;
                    n++;
                    int len = snprintf(line, sizeof line, "%d", n);
                    if (api->store_set(self, S("n"), line, (size_t)len) != LIFELINE_OK) return 1;
                    len = snprintf(line, sizeof line, "set %d", n);
                    api->log(self, LIFELINE_LOG_INFO, line, (size_t)len);
                    return api->after(self, 0.001, step, NULL, NULL);
                }
                int lifeline_plugin_init(const lifeline_api *host, lifeline_plugin *self) {
                    api = host;
                    const char *value = "none";
                    size_t len = 4;
                    api->store_get(self, S("n"), &value, &len);
                    int m = snprintf(line, sizeof line, "found %.*s", (int)len, value);
                    api->log(self, LIFELINE_LOG_INFO, line, (size_t)m);
                    return api->after(self, 0.001, step, NULL, NULL);
                }
                """)
        let state = ws.path + "/state"
        let first = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(first.stderr.waitFor("set 40"))
        first.signal(SIGKILL)
        _ = first.wait()
        let lastSet = first.stderr.text(waitingForEOF: true).split(separator: "\n")
            .compactMap { line in line.range(of: "plugin.counter: set ").map { Int(line[$0.upperBound...]) ?? 0 } }.max() ?? 0
        #expect(lastSet >= 40)
        // The file is SQLite's, and the value a JSON string in it, as a Lua plugin's string is.
        let header = try #require(FileManager.default.contents(atPath: state + "/lifeline.sqlite")?.prefix(16))
        #expect(header == Data("SQLite format 3\0".utf8))
        let query = try Self.sqlite(state + "/lifeline.sqlite", "SELECT value FROM store WHERE plugin = 'counter' AND key = 'n'")
        let stored = Int(query.trimmingCharacters(in: CharacterSet(charactersIn: "\"\n"))) ?? -1
        #expect(query.hasPrefix("\"") && stored >= lastSet, "the store holds \(query), but \(lastSet) was set before the kill")

        let scenario = try ws.file("s.scenario", "0s launch\n1s terminate\n")
        let second = try CLI.run(["simulate", "--plugins", ws.plugins, "--state-dir", state, "--scenario", scenario])
        let found = second.stderr.split(separator: "\n")
            .compactMap { line in line.range(of: "plugin.counter: found ").map { Int(line[$0.upperBound...]) ?? -1 } }.first ?? -1
        #expect(found >= lastSet, "stored \(found), but \(lastSet) was set before the kill")

        // A Lua plugin of the same name reads the value as a string.
        try FileManager.default.removeItem(atPath: ws.plugins + "/counter")
        try ws.plugin("counter", "local v = lifeline.store.get('n'); print(type(v) .. ' ' .. v)")
        let lua = try CLI.run(["simulate", "--plugins", ws.plugins, "--state-dir", state, "--scenario", scenario])
        #expect(lua.stderr.contains("plugin.counter: string "), "\(lua.stderr)")
    }

    @Test func aSpinningHandler_isDetected_andTheAppTerminatedWithAReport() throws {
        let ws = try Workspace()
        try Self.plugin(
            ws, "spinner",
            Self.prelude + """
                static volatile int forever = 1;
                static int on_background(lifeline_plugin *self, const lifeline_event *e, void *u) {
                    (void)self, (void)e, (void)u;
                    while (forever) {}
                    return 0;
                }
                int lifeline_plugin_init(const lifeline_api *host, lifeline_plugin *self) {
                    api = host;
                    return api->subscribe(self, S("didEnterBackground"), on_background, NULL, NULL);
                }
                """)
        let s = try ws.file("s.scenario", "0s launch\n2s background\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-", "--watchdog-scale", "25"])
        #expect(r.status == 1)
        let report = try parseReport(r.stdout)
        let termination = try #require(report["termination"] as? [String: Any])
        #expect(termination["kind"] as? String == "watchdog")
        #expect(termination["code"] as? String == "0x8badf00d")
        #expect(termination["plugin"] as? String == "spinner")
        #expect(termination["t"] as? Double == 2)
        #expect(events(report, "watchdog", plugin: "spinner").count == 1)
        let plugins = try #require(report["plugins"] as? [[String: Any]])
        #expect(plugins.first?["kind"] as? String == "native")
        // Without --report, stderr says why it ended (the process exits from the watchdog's
        // thread, so the host's own line is never logged; it used to end with exit 1 and nothing).
        let quiet = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--watchdog-scale", "25"])
        #expect(quiet.status == 1)
        #expect(
            quiet.stderr.contains(
                "lifeline: app terminated (watchdog, 0x8badf00d): plugin 'spinner' was still running its "
                    + "didEnterBackground handler"), "\(quiet.stderr)")
    }

    @Test func anInitThatSpins_isALoadFailure() throws {
        let ws = try Workspace()
        try Self.plugin(
            ws, "stuck",
            """
                #include <lifeline_plugin.h>
                LIFELINE_PLUGIN_EXPORT_ABI;
                static volatile int forever = 1;
                int lifeline_plugin_init(const lifeline_api *host, lifeline_plugin *self) {
                    (void)host, (void)self;
                    while (forever) {}
                    return 0;
                }
                """)
        let s = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--watchdog-scale", "25"])
        #expect(r.status == 65)
        #expect(r.stderr.contains("stuck"), "\(r.stderr)")
    }

    @Test func aPluginBuiltForANewerABI_isRefused_namingBothVersions() throws {
        let ws = try Workspace()
        try Self.plugin(
            ws, "future",
            """
            #include <lifeline_plugin.h>
            LIFELINE_EXPORT const uint32_t lifeline_plugin_abi_version = LIFELINE_PLUGIN_API_VERSION + 1;
            int lifeline_plugin_init(const lifeline_api *api, lifeline_plugin *self) { (void)api, (void)self; return 0; }
            """)
        let s = try ws.file("s.scenario", "0s launch\n1s terminate\n")
        let message =
            "future.so: the plugin was built for plugin ABI version 2, newer than this lifeline's version 1; "
            + "use a newer lifeline, or rebuild the plugin against this one's header"
        let simulate = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s])
        #expect(simulate.status == 65)
        #expect(simulate.stderr.contains(message), "\(simulate.stderr)")
        let check = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(check.status == 65)
        #expect(check.stdout.contains("FAIL future (native): ") && check.stdout.contains(message), "\(check.stdout)")
    }

    @Test func aLibraryThatIsNotAPlugin_isRefusedWithWhatIsMissing() throws {
        let ws = try Workspace()
        // Not a shared library at all.
        try FileManager.default.createDirectory(atPath: ws.plugins + "/text", withIntermediateDirectories: true)
        try "native = \"text.so\"\n".write(toFile: ws.plugins + "/text/plugin.toml", atomically: true, encoding: .utf8)
        try "not ELF".write(toFile: ws.plugins + "/text/text.so", atomically: true, encoding: .utf8)
        // A library without the ABI version, and one without the entry point.
        try Self.plugin(ws, "noversion", "int lifeline_plugin_init(void) { return 0; }\n")
        try Self.plugin(ws, "noinit", "#include <lifeline_plugin.h>\nLIFELINE_PLUGIN_EXPORT_ABI;\n")
        let s = try ws.file("s.scenario", "0s launch\n1s terminate\n")
        func failure(_ name: String) throws -> String {
            let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--only", name, "--scenario", s])
            #expect(r.status == 65)
            return r.stderr
        }
        #expect(try failure("text").contains("text.so: cannot load the native library: "))
        #expect(
            try failure("noversion").contains(
                "noversion.so: not a Lifeline native plugin: it does not export lifeline_plugin_abi_version"))
        #expect(try failure("noinit").contains("noinit.so: the native plugin does not export lifeline_plugin_init"))
    }

    @Test func aManifestThatLeadsOutOfTheFolder_orNamesNoFile_isRefusedAtItsLine() throws {
        let ws = try Workspace()
        for (name, toml) in [("up", "description = \"x\"\nnative = \"../up.so\"\n"), ("none", "native = \"none.so\"\n")] {
            try FileManager.default.createDirectory(atPath: ws.plugins + "/" + name, withIntermediateDirectories: true)
            try toml.write(toFile: ws.plugins + "/\(name)/plugin.toml", atomically: true, encoding: .utf8)
        }
        let s = try ws.file("s.scenario", "0s launch\n1s terminate\n")
        let up = try CLI.run(["simulate", "--plugins", ws.plugins, "--only", "up", "--scenario", s])
        #expect(up.status == 65)
        #expect(up.stderr.contains("up/plugin.toml:2: native = \"../up.so\" leads out of the plugin's folder"), "\(up.stderr)")
        let none = try CLI.run(["simulate", "--plugins", ws.plugins, "--only", "none", "--scenario", s])
        #expect(none.status == 65)
        #expect(none.stderr.contains("none/plugin.toml:1: native = \"none.so\": no such file"), "\(none.stderr)")
        // `check` names the kind the folder asked for: native, not Swift.
        let check = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(check.status == 65)
        #expect(check.stdout.contains("FAIL up (native):"), "\(check.stdout)")
        #expect(check.stdout.contains("FAIL none (native):"), "\(check.stdout)")
    }
}
