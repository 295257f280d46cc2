import CLua
import Foundation
import Testing

@testable import Lifeline
import LifelineTesting

// The editor files a Lua plugin project gets (Sources/LifelineCLI/Editors): LuaLS's definitions
// and luacheck's std must match the `lifeline` module as it is. With LIFELINE_WRITE_EDITOR_FILES=1
// (scripts/editor-files), `keptFilesAreWhatTheGeneratorWrites` writes them anew instead.

private let repository = Corpora.repository

/// The module, walked once for all the tests of this file.
private let liveShape = Result { try ModuleWalk.shape() }

private func keptFile(_ source: String) throws -> String {
    try String(contentsOf: repository.appendingPathComponent(source), encoding: .utf8)
}

/// What a stub file declares, read back from its text: its functions and methods, and the
/// module's other members with their `---@type`, keyed as `ModuleShape` keys them.
struct StubShape {
    var functions: Set<String> = []
    var members: [String: String] = [:]
    /// Functions declared more than once.
    var duplicates: [String] = []

    init(parsing text: String) {
        var currentClass: String?
        var locals: [String: String] = [:]
        var block: [String] = []  // the `---` lines above the current line
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(raw)
            if line.hasPrefix("---") {
                if line.hasPrefix("---@class ") {
                    currentClass = String(line.dropFirst("---@class ".count).split(separator: " ").first ?? "")
                }
                block.append(line)
                continue
            }
            defer { block = [] }
            if line.hasPrefix("local "), line.hasSuffix(" = {}"), let cls = currentClass {
                locals[String(line.dropFirst("local ".count).dropLast(" = {}".count))] = cls
            } else if line.hasPrefix("function ") {
                // `function Queue:add(`, `function Event.complete(` (a class's, by its local), or
                // `function lifeline.store.get(`.
                let declared = line.dropFirst("function ".count).prefix { $0 != "(" }
                let cut = declared.firstIndex(of: ":") ?? declared.firstIndex(of: ".")
                let name =
                    if let cut, let cls = locals[String(declared[..<cut])] {
                        "\(cls):\(declared[declared.index(after: cut)...])"
                    } else {
                        String(declared)
                    }
                if !functions.insert(name).inserted { duplicates.append(name) }
            } else if line.hasPrefix("lifeline."), let eq = line.range(of: " = ") {
                let path = String(line[..<eq.lowerBound])
                let type = block.last { $0.hasPrefix("---@type ") }.map { String($0.dropFirst("---@type ".count)) }
                members[path] = type ?? "table"
                if block.contains(where: { $0.hasPrefix("---@overload ") }) { functions.insert(path) }
            }
            if !line.isEmpty, !line.hasPrefix("local ") { currentClass = nil }
        }
    }
}

@Suite struct EditorFilesTests {
    @Test func theStubsMatchTheModule() throws {
        let shape = try liveShape.get()
        let stub = StubShape(parsing: try keptFile(EditorFilesGenerator.folder + "/luals/library/lifeline.lua"))
        #expect(stub.duplicates.isEmpty, "lifeline.lua declares these more than once: \(stub.duplicates)")
        for name in shape.functions.subtracting(stub.functions).sorted() {
            Issue.record("\(name) is a function of the lifeline module with no stub in lifeline.lua")
        }
        for name in stub.functions.subtracting(shape.functions).sorted() {
            Issue.record("lifeline.lua has a stub for \(name), which is no function of the lifeline module")
        }
        for (path, kind) in shape.members.sorted(by: { $0.key < $1.key }) {
            guard let declared = stub.members[path] else {
                Issue.record("\(path) (a \(kind)) is in the lifeline module with no stub in lifeline.lua")
                continue
            }
            if kind.hasPrefix("lifeline.") {
                #expect(declared == kind, "\(path) is a \(kind), but lifeline.lua types it \(declared)")
            }
        }
        for path in Set(stub.members.keys).subtracting(shape.members.keys).sorted() {
            Issue.record("lifeline.lua has a stub for \(path), which the lifeline module does not have")
        }
        // The walk itself found the objects' methods and the handed tables' functions.
        #expect(shape.functions.contains("lifeline.Operation:wait"))
        #expect(shape.functions.contains("lifeline.Event:complete"))
        #expect(shape.functions.contains("lifeline.ScheduledTask:setTaskCompleted"))
    }

    /// The parser above finds what the stub declares: a stub for a function the module lacks, and
    /// a function with no stub, are both seen.
    @Test func theStubReaderSeesAnExtraAndAMissingStub() throws {
        let text = try keptFile(EditorFilesGenerator.folder + "/luals/library/lifeline.lua")
        let edited = text.replacingOccurrences(of: "function lifeline.sleep(seconds) end", with: "function lifeline.nap(seconds) end")
            .replacingOccurrences(of: "function Queue:count() end", with: "")
        let stub = StubShape(parsing: edited)
        let shape = try liveShape.get()
        #expect(shape.functions.subtracting(stub.functions) == ["lifeline.sleep", "lifeline.Queue:count"])
        #expect(stub.functions.subtracting(shape.functions) == ["lifeline.nap"])
    }

    @Test func theGeneratorNamesWhatTheTableLacks() throws {
        var shape = try liveShape.get()
        shape.functions.insert("lifeline.store.nosuch")
        shape.functions.remove("lifeline.Queue:add")
        let problems = EditorFilesGenerator.check(shape)
        #expect(problems.contains { $0.hasPrefix("lifeline.store.nosuch is in the lifeline module but has no entry") })
        #expect(problems.contains { $0.hasPrefix("lifeline.Queue:add has an entry in LuaAPI but the lifeline module has no such function") })
    }

    @Test func keptFilesAreWhatTheGeneratorWrites() throws {
        let files = try EditorFilesGenerator.files(for: try liveShape.get())
        let write = ProcessInfo.processInfo.environment["LIFELINE_WRITE_EDITOR_FILES"] == "1"
        for file in files {
            let url = repository.appendingPathComponent(file.source)
            if write {
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(file.contents.utf8).write(to: url)
                continue
            }
            #expect(
                try keptFile(file.source) == file.contents,
                "\(file.source) is not what the generator writes from the module now: run scripts/editor-files")
        }
    }

    /// The definitions are Lua that Lua 5.4 reads, and the settings JSON whose library is the
    /// folder the definitions are written to in a project.
    @Test func theFilesReadAsWhatTheyAre() throws {
        let files = try EditorFilesGenerator.files(for: try liveShape.get())
        let stub = try #require(files.first { $0.project.hasSuffix(".lua") })
        let L = try #require(luaL_newstate())
        defer { lua_close(L) }
        let status = luaL_loadstring(L, stub.contents)
        #expect(status == LUA_OK, "lifeline.lua does not load: \(String(cString: lua_tolstring(L, -1, nil)))")
        let luarc = try #require(files.first { $0.project == ".luarc.json" })
        let settings = try #require(try JSONSerialization.jsonObject(with: Data(luarc.contents.utf8)) as? [String: Any])
        let library = try #require(settings["workspace.library"] as? [String])
        #expect(library.map { $0 + "/lifeline.lua" } == [stub.project])
        #expect(settings["runtime.version"] as? String == "Lua 5.4")
        let addon = try #require(files.first { $0.project.hasSuffix("config.json") })
        #expect((try JSONSerialization.jsonObject(with: Data(addon.contents.utf8)) as? [String: Any])?["name"] as? String == "lifeline")
        // The addon is the folder that holds library/ and config.json.
        #expect(stub.project.hasPrefix((addon.project as NSString).deletingLastPathComponent + "/library/"))
    }

    @Test func theEventsAreTheHostsEvents() throws {
        let stub = try keptFile(EditorFilesGenerator.folder + "/luals/library/lifeline.lua")
        let alias = stub.components(separatedBy: "---@alias lifeline.EventName\n")[1].split(separator: "\n")
            .prefix { $0.hasPrefix("---| ") }
            .map { $0.dropFirst("---| \"".count).prefix { $0 != "\"" } }.map(String.init)
        #expect(alias == LifecycleEventName.allCases.map(\.rawValue))
    }
}

// MARK: - luacheck

/// Debian's luacheck (package lua-check; scripts/setup installs it).
enum Luacheck {
    static let path: String? = ["/usr/bin/luacheck", "/usr/local/bin/luacheck"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    static let missing = "luacheck is not installed: scripts/setup installs it (apt-get install -y lua-check)"

    /// Runs luacheck with the generated .luacheckrc over `files` (paths relative to `directory`).
    static func run(_ files: [String], in directory: String) throws -> (status: Int32, output: String) {
        let rc = FileManager.default.temporaryDirectory.appendingPathComponent("luacheckrc-\(UUID().uuidString)")
        try Data(EditorFilesGenerator.luacheckrc().utf8).write(to: rc)
        defer { try? FileManager.default.removeItem(at: rc) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path!)
        process.arguments = ["--config", rc.path, "--no-color", "--codes"] + files
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

@Suite(.enabled(if: Luacheck.path != nil, Comment(rawValue: Luacheck.missing)))
struct LuacheckStdTests {
    @Test func everyBundledPluginIsClean() throws {
        let plugins = repository.appendingPathComponent("plugins").path
        let files = (FileManager.default.enumerator(atPath: plugins)?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix(".lua") }.sorted().map { "plugins/" + $0 }
        #expect(files.count >= 8, "found only \(files)")
        let r = try Luacheck.run(files, in: repository.path)
        #expect(r.status == 0, "luacheck with the lifeline std:\n\(r.output)")
    }

    /// Every function and member of the live module, named through the global, passes: the std
    /// knows the whole module.
    @Test func theStdKnowsTheWholeModule() throws {
        let shape = try liveShape.get()
        var names = shape.functions.filter { !$0.contains(":") }.union(shape.members.keys)
        for method in shape.functions where method.hasPrefix("lifeline.Queue:") {
            names.insert("lifeline.queue.background." + method.dropFirst("lifeline.Queue:".count))
        }
        let source = names.sorted().map { "print(\($0))" }.joined(separator: "\n") + "\n"
        try withPluginFolder(["all/init.lua": source]) { dir in
            let r = try Luacheck.run(["all/init.lua"], in: dir)
            #expect(r.status == 0, "luacheck:\n\(r.output)")
        }
        #expect(names.count > 50)
    }

    @Test func aGlobalWrittenByAccidentIsAWarning() throws {
        let source = """
            lifeline.on("didEnterBackground", function()
              count = 1
            end)

            """
        try withPluginFolder(["p/init.lua": source]) { dir in
            let r = try Luacheck.run(["p/init.lua"], in: dir)
            #expect(r.status == 1, "luacheck:\n\(r.output)")
            #expect(r.output.contains("p/init.lua:2:3: (W111) setting non-standard global variable 'count'"), "\(r.output)")
        }
    }

    @Test func aFunctionTheModuleLacksIsAWarning() throws {
        let source = """
            lifeline.nosuch("didEnterBackground")
            lifeline.store.fetch("key")
            lifeline.queue.background:push(function() end)
            lifeline.on = nil

            """
        try withPluginFolder(["p/init.lua": source]) { dir in
            let r = try Luacheck.run(["p/init.lua"], in: dir)
            #expect(r.status == 1, "luacheck:\n\(r.output)")
            for expected in [
                "p/init.lua:1:1: (W143) accessing undefined field 'nosuch' of global 'lifeline'",
                "p/init.lua:2:1: (W143) accessing undefined field 'store.fetch' of global 'lifeline'",
                "p/init.lua:3:1: (W143) accessing undefined field 'queue.background.push' of global 'lifeline'",
                "p/init.lua:4:1: (W122) setting read-only field 'on' of global 'lifeline'",
            ] {
                #expect(r.output.contains(expected), "missing '\(expected)' in:\n\(r.output)")
            }
        }
    }

    /// What the sandbox takes away is flagged too.
    @Test func whatTheSandboxRemovesIsAWarning() throws {
        try withPluginFolder(["p/init.lua": "local f = io.open('x')\nprint(f, debug.traceback(), dofile('y'))\n"]) { dir in
            let r = try Luacheck.run(["p/init.lua"], in: dir)
            #expect(r.status == 1, "luacheck:\n\(r.output)")
            for name in ["io", "debug", "dofile"] {
                #expect(r.output.contains("(W113) accessing undefined variable '\(name)'"), "\(name) in:\n\(r.output)")
            }
        }
    }
}
