import Foundation
import Testing

/// `lifeline new`: each kind writes a plugin whose scenarios pass at once under `lifeline test`;
/// an existing folder is never written over (73); a name that is not a plugin name is 64; and the
/// stock lifeline, asked for a new Swift package's plugin, says how to build the package's own.
@Suite struct NewCommandTests {
    /// Every file under `folder`, hidden ones included, as relative path → contents.
    private func tree(_ folder: String) -> [String: Data] {
        var result: [String: Data] = [:]
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return result }
        while let path = walker.nextObject() as? String {
            var isFolder: ObjCBool = false
            FileManager.default.fileExists(atPath: folder + "/" + path, isDirectory: &isFolder)
            result[path] =
                isFolder.boolValue ? Data("<folder>".utf8) : FileManager.default.contents(atPath: folder + "/" + path)
        }
        return result
    }

    private func contents(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    @Test func lua_writesAPluginWhoseScenariosPassAtOnce() throws {
        let ws = try Workspace()
        let dir = ws.path + "/mine"  // made by `new`: it does not exist yet
        let made = try CLI.run(["new", "autosave", "--dir", dir])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stdout.contains("created \(dir)/autosave/"))
        for file in [
            "init.lua", "plugin.toml", "scenarios/basic.scenario", "scenarios/expired.scenario",
            "scenarios/twice.scenario",
        ] {
            #expect(made.stdout.contains("\n  \(file)\n"), "\(made.stdout)")
            #expect(FileManager.default.fileExists(atPath: "\(dir)/autosave/\(file)"))
        }
        #expect(made.stdout.hasSuffix("next: lifeline test \(dir)\n"), "\(made.stdout)")

        let tested = try CLI.run(["test", dir])
        #expect(tested.status == 0, "\(tested.stdout)\(tested.stderr)")
        #expect(tested.stdout.contains("ok   autosave/scenarios/basic.scenario"))
        #expect(tested.stdout.contains("ok   autosave/scenarios/expired.scenario"))
        #expect(tested.stdout.contains("ok   autosave/scenarios/twice.scenario"))
        #expect(tested.stdout.contains("3 passed, 0 failed"))
    }

    /// The scenarios hold the plugin to both paths: in `basic` its work ends the task, in `expired`
    /// its expiration handler does, and the app suspends each time. Read off the reports.
    @Test func lua_theTaskEndsOnBothPaths() throws {
        let ws = try Workspace()
        #expect(try CLI.run(["new", "autosave", "--dir", ws.plugins]).status == 0)
        let folder = ws.plugins + "/autosave/scenarios/"
        for (scenario, expired, message) in [
            ("basic", false, "saved (run 1)"), ("expired", true, "out of time: stopped early"),
        ] {
            let r = try CLI.run([
                "simulate", "--plugins", ws.plugins, "--scenario", folder + scenario + ".scenario", "--report", "-",
            ])
            #expect(r.status == 0, "\(r.stderr)")
            let report = try parseReport(r.stdout)
            let ended = events(report, "taskEnded", plugin: "autosave")
            #expect(ended.count == 1 && ended.first?["expired"] as? Bool == expired, "\(scenario)")
            #expect(
                events(report, "log", plugin: "autosave").contains { ($0["message"] as? String) == message },
                "\(scenario)")
            #expect(events(report, "suspended").count == 1, "\(scenario)")
            #expect(events(report, "terminated").isEmpty)
        }
    }

    /// Each file parses as what it is: Lua with luac, TOML and the plugin by `lifeline check`,
    /// JSON with JSONSerialization, scenarios by `lifeline test` (above).
    @Test func lua_everyFileWrittenParses() throws {
        let ws = try Workspace()
        #expect(try CLI.run(["new", "autosave", "--dir", ws.plugins]).status == 0)
        let folder = ws.plugins + "/autosave"
        let checked = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
        #expect(checked.stdout.contains("ok   autosave (lua)"))
        // Lua 5.4's own luac (scripts/setup installs lua5.4): /usr/bin/luac may be 5.1's, which
        // lua-check brings, and would refuse what 5.4 reads.
        let luac = ["/usr/bin/luac5.4"].first { FileManager.default.isExecutableFile(atPath: $0) }
        var seen = 0
        for (path, data) in tree(folder) where data != Data("<folder>".utf8) {
            let full = folder + "/" + path
            if path.hasSuffix(".lua") || path.hasSuffix(".luacheckrc") {
                let luacPath = try #require(luac, "luac5.4 is needed to parse the Lua files (scripts/setup installs lua5.4)")
                let process = Process()
                process.executableURL = URL(fileURLWithPath: luacPath)
                process.arguments = ["-p", full]
                try process.run()
                process.waitUntilExit()
                #expect(process.terminationStatus == 0, "\(path) does not parse as Lua")
                seen += 1
            } else if path.hasSuffix(".json") {
                #expect(throws: Never.self, "\(path)") { try JSONSerialization.jsonObject(with: data) }
                seen += 1
            }
        }
        #expect(seen >= 1)
    }

    /// The path of `tool` on PATH.
    static func onPath(_ tool: String) -> String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(tool)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }
    static let canBuildC = onPath("cc") != nil
    static let hasMake = onPath("make") != nil

    /// `new --native` builds the library with the Makefile it wrote, against this binary's
    /// header, so the plugin's scenarios pass at once, as the Lua ones do.
    @Test(.enabled(if: canBuildC, "cc is needed")) func native_isBuiltAndPassesAtOnce() throws {
        let ws = try Workspace()
        let made = try CLI.run(["new", "notes", "--native", "--dir", ws.plugins])
        #expect(made.status == 0, "\(made.stdout)\(made.stderr)")
        for file in [
            "notes.c", "Makefile", "plugin.toml", "scenarios/basic.scenario", "scenarios/expired.scenario",
            "scenarios/twice.scenario",
        ] {
            #expect(made.stdout.contains("\n  \(file)\n"), "\(made.stdout)")
        }
        if Self.hasMake {
            #expect(made.stdout.contains("make --no-print-directory -C \(ws.plugins)/notes LIFELINE="), "\(made.stdout)")
        }
        #expect(FileManager.default.fileExists(atPath: ws.plugins + "/notes/notes.so"))
        #expect(contents(ws.plugins + "/notes/plugin.toml").contains("native = \"notes.so\""))

        let tested = try CLI.run(["test", ws.plugins])
        #expect(tested.status == 0, "\(tested.stdout)\(tested.stderr)")
        #expect(tested.stdout.contains("ok   notes/scenarios/basic.scenario"))
        #expect(tested.stdout.contains("ok   notes/scenarios/expired.scenario"))
        #expect(tested.stdout.contains("ok   notes/scenarios/twice.scenario"))
        #expect(tested.stdout.contains("3 passed, 0 failed"))
    }

    /// A machine may have a compiler and no make: `new --native` then runs the Makefile's own cc
    /// command, and the plugin still passes at once.
    @Test(.enabled(if: canBuildC, "cc is needed")) func native_withoutMake_isBuiltWithCCAlone() throws {
        let ws = try Workspace()
        // A PATH with the compiler and what it runs (the assembler, the linker), and no make.
        let bin = ws.path + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        for tool in ["cc", "as", "ld"] {
            let found = try #require(Self.onPath(tool), "no \(tool) on PATH")
            let real = URL(fileURLWithPath: found).resolvingSymlinksInPath().path
            try FileManager.default.createSymbolicLink(atPath: bin + "/" + tool, withDestinationPath: real)
        }
        let made = try CLI.run(["new", "notes", "--native", "--dir", ws.plugins], environment: ["PATH": bin])
        #expect(made.status == 0, "\(made.stdout)\(made.stderr)")
        #expect(made.stdout.contains("running: \(bin)/cc -shared -fPIC"), "\(made.stdout)")
        #expect(!made.stdout.contains("--no-print-directory"), "\(made.stdout)")
        #expect(FileManager.default.fileExists(atPath: ws.plugins + "/notes/notes.so"))
        let tested = try CLI.run(["test", ws.plugins])
        #expect(tested.status == 0, "\(tested.stdout)\(tested.stderr)")
        #expect(tested.stdout.contains("3 passed, 0 failed"))
    }

    /// The Makefile has the usual `all`, and rebuilds the library when the header it was built
    /// against changes (a newer lifeline), not only when the C file does.
    @Test(.enabled(if: canBuildC && hasMake, "cc and make are needed"))
    func native_theMakefile_hasAll_andRebuildsForANewHeader() throws {
        let ws = try Workspace()
        #expect(try CLI.run(["new", "notes", "--native", "--dir", ws.plugins]).status == 0)
        // A lifeline whose --include-dir is a folder of this test's, holding a copy of the header.
        let include = ws.path + "/include"
        try FileManager.default.createDirectory(atPath: include, withIntermediateDirectories: true)
        let header = try String(contentsOfFile: CLI.packageRoot + "/Sources/CLifelinePlugin/include/lifeline_plugin.h", encoding: .utf8)
        let fake = try ws.file("fake-lifeline", "#!/bin/sh\necho '\(include)'\n")
        #expect(chmod(fake, 0o755) == 0)
        func make() throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["make", "--no-print-directory", "-C", ws.plugins + "/notes", "all", "LIFELINE=\(fake)"]
            // Into a file, not a pipe: reading a pipe fails with EINTR when a signal arrives.
            let log = ws.path + "/make.log"
            FileManager.default.createFile(atPath: log, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: log)
            process.standardError = FileHandle(forWritingAtPath: log)
            try process.run()
            process.waitUntilExit()
            let output = contents(log)
            #expect(process.terminationStatus == 0, "\(output)")
            return output
        }
        // The copy is newer than the library `new` built: rebuilt against it. The library is
        // made older by hand, as two writes a moment apart may share one timestamp.
        try header.write(toFile: include + "/lifeline_plugin.h", atomically: false, encoding: .utf8)
        var earlier = [timespec(tv_sec: time(nil) - 10, tv_nsec: 0), timespec(tv_sec: time(nil) - 10, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, ws.plugins + "/notes/notes.so", &earlier, 0) == 0)
        #expect(try make().contains("-I\"\(include)\" notes.c -o notes.so"))
        #expect(!(try make()).contains("notes.c -o notes.so"))
        var later = [timespec(tv_sec: time(nil) + 10, tv_nsec: 0), timespec(tv_sec: time(nil) + 10, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, include + "/lifeline_plugin.h", &later, 0) == 0)
        #expect(try make().contains("notes.c -o notes.so"))
    }

    /// Without a compiler the files are written (exit 0) and the next step printed is the build,
    /// not a `lifeline test` that would fail for want of the library.
    @Test func native_withoutACompiler_saysToBuildFirst() throws {
        let ws = try Workspace()
        let made = try CLI.run(
            ["new", "notes", "--native", "--dir", ws.plugins], environment: ["CC": "no-such-cc-here"])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stdout.contains("no no-such-cc-here found to build it"), "\(made.stdout)")
        #expect(made.stdout.hasSuffix("next: make -C \(ws.plugins)/notes, then lifeline test \(ws.plugins)\n"), "\(made.stdout)")
        #expect(!FileManager.default.fileExists(atPath: ws.plugins + "/notes/notes.so"))
    }

    @Test func existingFolder_isExit73_andLeftAsItWas() throws {
        let ws = try Workspace()
        // A folder with files, an empty folder, and a file of the name.
        try FileManager.default.createDirectory(
            atPath: ws.plugins + "/full/scenarios", withIntermediateDirectories: true)
        try ws.file("plugins/full/init.lua", "-- mine\n")
        try ws.file("plugins/full/scenarios/basic.scenario", "0s launch\n")
        try FileManager.default.createDirectory(atPath: ws.plugins + "/empty", withIntermediateDirectories: true)
        try ws.file("plugins/file", "not a folder\n")
        let before = tree(ws.plugins)
        for name in ["full", "empty", "file"] {
            for kind in [[], ["--swift"], ["--native"]] {
                let r = try CLI.run(["new", name, "--dir", ws.plugins] + kind)
                #expect(r.status == 73, "\(name) \(kind): \(r.stderr)")
                #expect(r.stderr.contains("'\(ws.plugins)/\(name)' exists already"), "\(r.stderr)")
                #expect(r.stdout.isEmpty)
            }
        }
        // Nothing changed, and no hidden folder of a write is left behind.
        #expect(tree(ws.plugins) == before)
    }

    @Test func badNames_areExit64_andWriteNothing() throws {
        let ws = try Workspace()
        let dir = ws.path + "/new"
        for name in [
            "", "a/b", "..", ".", ".hidden", "my plugin", " lead", "1st", "-x", "tab\there", "é", "a.b",
            String(repeating: "x", count: 65), "quote\"d", "semi;colon",
        ] {
            // After `--`, so that `-x` reaches the name's check rather than the option parser.
            let r = try CLI.run(["new", "--dir", dir, "--", name])
            #expect(r.status == 64, "'\(name)': \(r.stderr)")
            #expect(r.stderr.contains("NAME"), "'\(name)': \(r.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir))
        // The longest name allowed, and each character allowed, are fine.
        #expect(try CLI.run(["new", "A-b_9" + String(repeating: "x", count: 59), "--dir", dir]).status == 0)
    }

    /// `--dir` is made when missing, but a part of it that is a file is exit 73 naming that part
    /// in plain words (Foundation's own message was "NSCocoaErrorDomain error 512"); an empty
    /// `--dir` is usage.
    @Test func aDirThroughAFile_isExit73NamingThePart_andAnEmptyDirIs64() throws {
        let ws = try Workspace()
        _ = try ws.file("afile", "keep\n")
        let through = try CLI.run(["new", "x", "--dir", ws.path + "/afile/sub"])
        #expect(through.status == 73)
        #expect(
            through.stderr.contains("cannot make the folder '\(ws.path)/afile/sub': '\(ws.path)/afile': it exists and is not a folder"),
            "\(through.stderr)")
        let onFile = try CLI.run(["new", "x", "--dir", "afile"], in: ws.path)
        #expect(onFile.status == 73)
        #expect(onFile.stderr.contains("'afile' is not a folder"), "\(onFile.stderr)")
        #expect(contents(ws.path + "/afile") == "keep\n")
        let empty = try CLI.run(["new", "x", "--dir", ""], in: ws.path)
        #expect(empty.status == 64)
        #expect(empty.stderr.contains("--dir is empty"), "\(empty.stderr)")
        let nested = try CLI.run(["new", "x", "--dir", "a/b/c"], in: ws.path)
        #expect(nested.status == 0, "\(nested.stderr)")
        #expect(FileManager.default.fileExists(atPath: ws.path + "/a/b/c/x/init.lua"))
    }

    /// The commands a new Swift package's README gives parse: the stock lifeline, run with the
    /// same arguments from the package's folder, fails only because the plugin is not compiled
    /// into it (65), never on usage (64). The README's `simulate` once lacked `--scenario`.
    @Test func swift_theReadmesCommands_areValidCommandLines() throws {
        let ws = try Workspace()
        #expect(try CLI.run(["new", "autosave", "--swift", "--dir", ws.plugins]).status == 0)
        let folder = ws.plugins + "/autosave"
        let commands = contents(folder + "/README.md").split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("swift run autosave-lifeline ") }
        #expect(commands.count == 2, "\(commands)")
        for command in commands {
            let words = command.split(separator: "#")[0].split(separator: " ").dropFirst(3).map(String.init)
            let r = try CLI.run(words, in: folder)
            #expect(r.status == 65 || r.status == 1, "\(command): \(r.status) \(r.stderr)")
            #expect((r.stdout + r.stderr).contains("no Swift plugin named 'autosave'"), "\(command): \(r.stderr)")
        }
    }

    @Test func swiftAndNativeTogether_isExit64() throws {
        let ws = try Workspace()
        let r = try CLI.run(["new", "x", "--swift", "--native", "--dir", ws.plugins])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--swift and --native"))
        let p = try CLI.run(["new", "x", "--lifeline-package", CLI.packageRoot, "--dir", ws.plugins])
        #expect(p.status == 64)
        #expect(p.stderr.contains("--lifeline-package goes with --swift"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: ws.plugins).isEmpty)
    }

    /// `new --swift` writes the package against the checkout this lifeline was built from; the
    /// stock lifeline cannot run its plugin, and says which command can. (That the package builds
    /// and runs is SwiftPackageTests, in the slow tier.)
    @Test func swift_writesAPackageOnThisCheckout_andStockLifelineNamesTheCommand() throws {
        let ws = try Workspace()
        let made = try CLI.run(["new", "autosave", "--swift", "--dir", ws.plugins])
        #expect(made.status == 0, "\(made.stderr)")
        let folder = ws.plugins + "/autosave"
        for file in [
            "Package.swift", "plugin.toml", "README.md", "Sources/AutosavePlugin/Autosave.swift",
            "Sources/autosave-lifeline/main.swift", "scenarios/basic.scenario", "scenarios/expired.scenario",
            "scenarios/twice.scenario",
        ] {
            #expect(FileManager.default.fileExists(atPath: folder + "/" + file), "\(file)")
        }
        let manifest = contents(folder + "/Package.swift")
        #expect(manifest.contains("let lifelinePath = \"\(CLI.packageRoot)\""), "\(manifest)")
        #expect(manifest.contains(".executable(name: \"autosave-lifeline\""))
        #expect(
            contents(folder + "/Sources/autosave-lifeline/main.swift").contains(
                "await Lifeline.main(swiftPlugins: [Autosave.self])"))
        #expect(contents(folder + "/plugin.toml").contains("swift = \"autosave\""))
        let command = "swift run --package-path \(folder) autosave-lifeline test \(ws.plugins)"
        #expect(made.stdout.contains("next: \(command)"), "\(made.stdout)")

        // The stock lifeline has no plugin 'autosave': its test fails, naming the command.
        let tested = try CLI.run(["test", ws.plugins])
        #expect(tested.status == 1)
        #expect(
            (tested.stdout + tested.stderr).contains(
                "no Swift plugin named 'autosave' is compiled into lifeline (compiled in: "),
            "\(tested.stdout)\(tested.stderr)")
        #expect(
            (tested.stdout + tested.stderr).contains(
                "); '\(folder)' is a Swift package that builds its own lifeline with it: \(command)"),
            "\(tested.stdout)\(tested.stderr)")
        // A folder asking for a plugin it does not build gets no such hint.
        try FileManager.default.createDirectory(atPath: ws.path + "/other/beats", withIntermediateDirectories: true)
        try ws.file("other/beats/plugin.toml", "swift = \"nosuch\"\n")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let plain = try CLI.run(["simulate", "--plugins", ws.path + "/other", "--scenario", scenario])
        #expect(
            plain.stderr.contains("no Swift plugin named 'nosuch'") && !plain.stderr.contains("swift run"),
            "\(plain.stderr)")
    }

    @Test func swift_namesSwiftPMOrSwiftWouldRefuse_areExit64() throws {
        let ws = try Workspace()
        // A target Lifeline's package has (HeartbeatPlugin), a package it depends on, a type that
        // hides the command line's `Lifeline`, or Swift's `String`, which the template's code
        // names (a package named `string` did not compile: "cannot convert Swift.String to
        // StringPlugin.String").
        for (name, says) in [
            ("heartbeat", "HeartbeatPlugin"), ("swift-nio", "package"), ("lifeline", "Lifeline"), ("string", "String"),
        ] {
            let r = try CLI.run(["new", name, "--swift", "--dir", ws.plugins])
            #expect(r.status == 64, "\(name): \(r.stderr)")
            #expect(r.stderr.contains(says), "\(name): \(r.stderr)")
        }
        let r = try CLI.run(["new", "x", "--swift", "--lifeline-package", ws.path, "--dir", ws.plugins])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--lifeline-package '\(ws.path)': no Package.swift of the package \"Lifeline\""))
        #expect(try FileManager.default.contentsOfDirectory(atPath: ws.plugins).isEmpty)
    }
}
