import CLua
import CLuaShims
import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 6.3: the sandbox. Each test runs a plugin whose init.lua marks what it finds.

// MARK: - Libraries

@Test(arguments: [
    "io", "debug", "package", "dofile", "loadfile", "os.execute", "os.getenv", "os.remove", "os.exit",
    "os.rename", "os.tmpname", "os.setlocale",
])
func sandbox_removedName_isNotAvailable(_ expression: String) throws {
    #expect(try marksOf("mark(type(\(expression)))") == ["nil"])
}

@Test(arguments: ["os", "string", "io", "debug"])
func sandbox_require_resolvesNoStandardLibrary(_ name: String) throws {
    // SPEC 6.3: require resolves `lifeline` and the plugin's own folder, nothing else.
    #expect(try marksOf("local ok, err = pcall(require, '\(name)')\nmark(tostring(ok) .. ' ' .. tostring(err):match('not found') )")
        == ["false not found"])
}

/// pairs' iterator, called by the plugin with something other than a table, is refused as
/// next() refuses it: raw access to a number once ended the host with SIGSEGV.
@Test(arguments: ["5", "nil", "'text'", "true", "function() end"])
func sandbox_pairsIterator_calledWithANonTable_raises(_ value: String) throws {
    let source = """
        local it = pairs({a = 1})
        local ok, err = pcall(it, \(value))
        mark(tostring(ok) .. ' ' .. tostring(err):match('table expected'))
        local k, v = it({a = 2})
        mark(tostring(k) .. ' ' .. tostring(v))
        """
    #expect(try marksOf(source) == ["false table expected", "a 2"])
}

@Test func sandbox_io_isNotAvailable() throws {
    #expect(try marksOf("mark(tostring(io == nil and _G.io == nil))") == ["true"])
}

@Test func sandbox_package_loadlibIsNotReachable() throws {
    // No package library at all, so neither package.loadlib nor package.cpath exist.
    #expect(try marksOf("mark(tostring(package == nil and _G.package == nil))") == ["true"])
}

@Test(arguments: ["os.time", "os.clock", "os.date", "os.difftime"])
func sandbox_allowedOSFunction_isPresent(_ expression: String) throws {
    #expect(try marksOf("mark(type(\(expression)))") == ["function"])
}

@Test func sandbox_os_isReducedToTimeClockDateDifftime() throws {
    let source = """
        local names = {}
        for k in pairs(os) do names[#names + 1] = k end
        table.sort(names)
        mark(table.concat(names, ","))
        """
    #expect(try marksOf(source) == ["clock,date,difftime,time"])
}

@Test func sandbox_osFunctions_work() throws {
    let source = """
        local t = os.time({year = 2020, month = 1, day = 2, hour = 12})
        mark(type(os.clock()))
        mark(os.date("!%Y", 0))
        mark(os.difftime(t + 5, t))
        """
    #expect(try marksOf(source) == ["number", "1970", "5.0"])
}

@Test(arguments: [
    ("string", "string.format('%d-%s', 4, string.upper('x'))", "4-X"),
    ("table", "table.concat({'a', 'b'}, '+')", "a+b"),
    ("math", "math.floor(2.7) + math.max(1, 3)", "5"),
    ("utf8", "utf8.char(72, 228)", "H\u{E4}"),
    ("coroutine", "coroutine.wrap(function() coroutine.yield(7) end)()", "7"),
])
func sandbox_standardLibrary_isPresentAndWorks(_ library: String, _ expression: String, _ expected: String) throws {
    #expect(try marksOf("mark(type(\(library))); mark(\(expression))") == ["table", expected])
}

@Test func sandbox_coroutineCreateResume_work() throws {
    let source = """
        local co = coroutine.create(function(a) local b = coroutine.yield(a + 1); return b * 2 end)
        local ok1, v1 = coroutine.resume(co, 1)
        local ok2, v2 = coroutine.resume(co, 10)
        mark(tostring(ok1) .. v1 .. tostring(ok2) .. v2 .. coroutine.status(co))
        """
    #expect(try marksOf(source) == ["true2true20dead"])
}

@Test func sandbox_coroutineWrap_propagatesErrorsWithPosition() throws {
    let source = """
        local ok, err = pcall(coroutine.wrap(function() error("inside") end))
        mark(tostring(ok)); mark(err)
        """
    let result = try marksOf(source)
    #expect(result.first == "false")
    #expect(result.last?.contains("inside") == true)
}

// MARK: - load

@Test func sandbox_load_acceptsText() throws {
    #expect(try marksOf("mark(load('return 1 + 2')())") == ["3"])
}

@Test func sandbox_load_acceptsTextWithNameAndEnv() throws {
    #expect(try marksOf("mark(load('return x * 2', '=chunk', 't', {x = 21})())") == ["42"])
}

@Test func sandbox_load_acceptsTextFromAReaderFunction() throws {
    let source = """
        local parts = {"return ", "'read'"}
        local i = 0
        mark(load(function() i = i + 1; return parts[i] end)())
        """
    #expect(try marksOf(source) == ["read"])
}

@Test func sandbox_load_reportsSyntaxErrorsAsNilAndMessage() throws {
    #expect(try marksOf("local f, err = load('return +'); mark(tostring(f)); mark(type(err))") == ["nil", "string"])
}

@Test(arguments: [
    "string.dump(function() return 1 end)",
    "string.dump(function() return 1 end), 'x', 'b'",
    "string.dump(function() return 1 end), 'x', 'bt'",
    "'\\27Lua' .. string.rep('\\0', 40)",
    "'\\27Lua', 'x', 'b'",
])
func sandbox_load_rejectsBinaryChunks(_ arguments: String) throws {
    let result = try marksOf("local f, err = load(\(arguments)); mark(tostring(f)); mark(err)")
    #expect(result.count == 2)
    #expect(result.first == "nil")
    #expect(result.last?.contains("binary") == true, "message: \(result.last ?? "none")")
}

@Test func sandbox_load_rejectsBinaryChunkFromAReaderFunction() throws {
    let source = """
        local chunk = string.dump(function() return 1 end)
        local done = false
        local f, err = load(function() if done then return nil end; done = true; return chunk end)
        mark(tostring(f)); mark(err)
        """
    let result = try marksOf(source)
    #expect(result.first == "nil")
    #expect(result.last?.contains("binary") == true)
}

@Test func sandbox_requiredBinaryModule_isRejected() throws {
    let files = plugins(["p": "local ok, err = pcall(require, 'bin'); mark(tostring(ok)); mark(err)"])
    let recorder = try simulate(files, binary: ["p/bin.lua": binaryChunk(of: "return 1")])
    let result = marks(recorder)
    #expect(result.first == "false")
    #expect(result.last?.contains("binary") == true, "message: \(result.last ?? "none")")
}

// MARK: - require

@Test func sandbox_requireLifeline_returnsTheModule() throws {
    #expect(try marksOf("mark(tostring(require('lifeline') == lifeline and type(lifeline.on) == 'function'))") == ["true"])
}

@Test func sandbox_requireModuleInPluginFolder_works() throws {
    var files = plugins(["p": "local h = require('helper'); mark(h.greet('x'))"])
    files["p/helper.lua"] = "return { greet = function(s) return 'hi ' .. s end }"
    #expect(marks(try simulate(files)) == ["hi x"])
}

@Test func sandbox_requireNestedModule_resolvesDotsToFolders() throws {
    var files = plugins(["p": "mark(require('a.b').value)"])
    files["p/a/b.lua"] = "return { value = 'nested' }"
    #expect(marks(try simulate(files)) == ["nested"])
}

@Test func sandbox_requireFolderModule_loadsItsInitLua() throws {
    var files = plugins(["p": "mark(require('pkg').value)"])
    files["p/pkg/init.lua"] = "return { value = 'folder' }"
    #expect(marks(try simulate(files)) == ["folder"])
}

@Test func sandbox_require_loadsAModuleOnce() throws {
    var files = plugins(["p": "local a = require('counter'); local b = require('counter'); mark(tostring(a == b)); mark(a.n)"])
    files["p/counter.lua"] = "count = (count or 0) + 1; return { n = count }"
    #expect(marks(try simulate(files)) == ["true", "1"])
}

@Test func sandbox_require_passesTheModuleNameToTheChunk() throws {
    var files = plugins(["p": "mark(require('named'))"])
    files["p/named.lua"] = "local name = ...; return name"
    #expect(marks(try simulate(files)) == ["named"])
}

@Test func sandbox_requireModuleReturningNothing_givesTrue() throws {
    var files = plugins(["p": "mark(tostring(require('quiet')))"])
    files["p/quiet.lua"] = "local x = 1"
    #expect(marks(try simulate(files)) == ["true"])
}

@Test(arguments: ["../x", "/etc/passwd", "absent", "..x", "x.", ".x", "a/../x", "", "io", "debug"])
func sandbox_requireOutsideThePluginFolder_failsClearly(_ name: String) throws {
    // x.lua sits right next to the plugin's folder, where "../x" would find it if it escaped.
    var files = plugins(["p": "local ok, err = pcall(require, '\(name)'); mark(tostring(ok)); mark(tostring(err))"])
    files["x.lua"] = "return 'escaped'"
    let result = marks(try simulate(files))
    #expect(result.count == 2)
    #expect(result.first == "false")
    let message = result.last ?? ""
    #expect(message.contains("not found"), "message: \(message)")
    #expect(!message.contains("escaped"))
}

@Test func sandbox_requireMissingModule_namesTheModuleAndWhereItLooked() throws {
    let result = try marksOf("local ok, err = pcall(require, 'nothere'); mark(err)")
    let message = try #require(result.first)
    #expect(message.contains("module 'nothere' not found"))
    #expect(message.contains("nothere.lua"))
}

@Test func sandbox_requireNonString_isAnArgumentError() throws {
    let result = try marksOf("local ok, err = pcall(require, {}); mark(err)")
    #expect(result.first?.contains("bad argument #1 to") == true, "message: \(result.first ?? "none")")
}

@Test func sandbox_requireModuleWithSyntaxError_failsWithItsFileAndLine() throws {
    var files = plugins(["p": "local ok, err = pcall(require, 'broken'); mark(tostring(ok)); mark(err)"])
    files["p/broken.lua"] = "local a = 1\nlocal b = = 2\n"
    let result = marks(try simulate(files))
    #expect(result.first == "false")
    #expect(result.last?.contains("broken.lua:2:") == true, "message: \(result.last ?? "none")")
}

@Test func sandbox_requiredModule_hasTheSameSandbox() throws {
    var files = plugins(["p": "mark(require('probe'))"])
    files["p/probe.lua"] = "return type(io) .. type(debug) .. type(dofile) .. type(os.execute)"
    #expect(marks(try simulate(files)) == ["nilnilnilnil"])
}

// MARK: - print

@Test func sandbox_print_doesNotCrashWithAnyArguments() throws {
    let source = """
        print("hello", 1, 2.5, nil, true, {}, print)
        print()
        print(setmetatable({}, {__tostring = function() return "custom" end}))
        lifeline.log.debug("d"); lifeline.log.info("i", 1); lifeline.log.warning("w"); lifeline.log.error("e")
        mark("after-print")
        """
    #expect(try marksOf(source) == ["after-print"])
}

@Test func sandbox_print_withFailingTostring_raisesALuaError() throws {
    let source = """
        local ok, err = pcall(print, setmetatable({}, {__tostring = function() error("no string") end}))
        mark(tostring(ok)); mark(err)
        """
    let result = try marksOf(source)
    #expect(result.first == "false")
    #expect(result.last?.contains("no string") == true)
}

@Test func sandbox_print_goesToTheLogSinkAtInfoLevel() throws {
    // White box: print is the module's log closure (sink, level 1), the one lifeline.log.info is,
    // not the standard print (a light C function with no upvalues) that writes to stdout.
    try withPluginFolder(["p/init.lua": ""]) { dir in
        let plugin = try LuaPlugin(name: "p", directory: dir + "/p", memoryLimit: 1 << 25)
        defer { plugin.close() }
        let L = try #require(plugin.state)
        func upvalues(of path: [String]) -> (sink: UnsafeMutableRawPointer?, level: lua_Integer)? {
            lua_settop(L, 0)
            lua_getglobal(L, path[0])
            for key in path.dropFirst() { lua_getfield(L, -1, key) }
            defer { lua_settop(L, 0) }
            guard lua_getupvalue(L, -1, 1) != nil else { return nil }
            let sink = lua_touserdata(L, -1)
            guard lua_getupvalue(L, -2, 2) != nil else { return nil }
            return (sink, lua_tointegerx(L, -1, nil))
        }
        let printUpvalues = try #require(upvalues(of: ["print"]))
        let info = try #require(upvalues(of: ["lifeline", "log", "info"]))
        let error = try #require(upvalues(of: ["lifeline", "log", "error"]))
        #expect(printUpvalues.sink != nil)
        #expect(printUpvalues.sink == info.sink)
        #expect(printUpvalues.level == 1)
        #expect(info.level == 1)
        #expect(error.level == 3)
        #expect(lua_gettop(L) == 0)
    }
}

@Test func sandbox_eachPlugin_hasItsOwnState() throws {
    let recorder = try simulate(
        plugins([
            "a": "shared = 'from a'; mark(tostring(shared))",
            "b": "mark(tostring(shared))",
        ]))
    #expect(markEvents(recorder).map { "\($0.plugin)=\($0.mark)" } == ["a=from a", "b=nil"])
}

@Test func sandbox_stringMetatable_doesNotLeakAcrossPlugins() throws {
    let recorder = try simulate(
        plugins([
            "a": "getmetatable('').__index.shout = function(s) return s:upper() end; mark(('x'):shout())",
            "b": "mark(type(string.shout))",
        ]))
    #expect(markEvents(recorder).map { "\($0.plugin)=\($0.mark)" } == ["a=X", "b=nil"])
}
