import Foundation
import Lifeline

/// Writes the editor files (see Sources/LifelineCLI/Editors/EditorFiles.swift) from the annotation
/// table (LuaAPI), for the module as it is (ModuleWalk): it stops, naming each culprit, when the
/// module has a function the table does not annotate, or the table annotates one the module lacks.
/// `scripts/editor-files` runs it; EditorFilesTests holds the checked-in files equal to its output.
enum EditorFilesGenerator {
    /// Each file: where it is kept in this repository, where a project gets it, and its text.
    struct File {
        var source: String
        var project: String
        var contents: String
    }

    struct Mismatch: Error, CustomStringConvertible {
        var problems: [String]
        var description: String { problems.joined(separator: "\n") }
    }

    /// The folder of the kept files, relative to the package root.
    static let folder = "Sources/LifelineCLI/Editors"

    static func files(for shape: ModuleShape) throws -> [File] {
        let problems = check(shape)
        guard problems.isEmpty else { throw Mismatch(problems: problems) }
        return [
            File(source: folder + "/luals/library/lifeline.lua", project: ".lifeline/luals/library/lifeline.lua", contents: stub()),
            File(source: folder + "/luals/config.json", project: ".lifeline/luals/config.json", contents: addonConfig()),
            File(source: folder + "/luarc.json", project: ".luarc.json", contents: luarc()),
            File(source: folder + "/luacheckrc", project: ".luacheckrc", contents: luacheckrc()),
        ]
    }

    // MARK: - The annotation table against the module

    /// What does not match between the table and the module, one line each.
    static func check(_ shape: ModuleShape) -> [String] {
        var problems: [String] = []
        var annotated = Set(LuaAPI.functions.map(\.path))
        for table in LuaAPI.tables where table.callable != nil { annotated.insert(table.path) }
        for name in shape.functions.subtracting(annotated).sorted() {
            problems.append("\(name) is in the lifeline module but has no entry in LuaAPI.functions (Tests/LifelineLuaTests/Editors/LuaAPI.swift)")
        }
        for name in annotated.subtracting(shape.functions).sorted() {
            problems.append("\(name) has an entry in LuaAPI but the lifeline module has no such function")
        }
        var members: [String: String] = [:]
        for table in LuaAPI.tables where table.path != "lifeline" { members[table.path] = "table" }
        for value in LuaAPI.values { members[value.path] = value.type }
        for (path, kind) in shape.members.sorted(by: { $0.key < $1.key }) {
            guard let annotatedType = members[path] else {
                problems.append("\(path) (a \(kind)) is in the lifeline module but has no entry in LuaAPI.tables or LuaAPI.values")
                continue
            }
            if kind.hasPrefix("lifeline."), annotatedType != kind {
                problems.append("\(path) is a \(kind) in the module, but LuaAPI gives it the type \(annotatedType)")
            }
        }
        for path in Set(members.keys).subtracting(shape.members.keys).sorted() {
            problems.append("\(path) has an entry in LuaAPI but the lifeline module has no such member")
        }
        let events = LifecycleEventName.allCases.map(\.rawValue)
        for name in events where LuaAPI.eventDocs[name] == nil {
            problems.append("the event \(name) has no line in LuaAPI.eventDocs")
        }
        for name in Set(LuaAPI.eventDocs.keys).subtracting(events).sorted() {
            problems.append("LuaAPI.eventDocs has a line for \(name), which is not an event")
        }
        // String literals the host reads by name: the same names as its own enums.
        func literals(_ type: String) -> [String] {
            type.split(separator: "|").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\" ()?")) }
        }
        func aliasCases(_ name: String) -> [String] { LuaAPI.aliases.first { $0.name == name }?.cases.map(\.value) ?? [] }
        let unique = LuaAPI.classes.first { $0.name == "lifeline.OperationOptions" }?.fields.first { $0.name == "unique?" }
        for (what, annotated, host) in [
            ("lifeline.TaskKind", aliasCases("lifeline.TaskKind"), SystemTaskKind.allCases.map(\.rawValue)),
            ("lifeline.FetchResult", aliasCases("lifeline.FetchResult"), FetchResult.allCases.map(\.rawValue)),
            ("lifeline.OperationOptions.unique", literals(unique?.type ?? ""), UniquenessPolicy.allCases.map(\.rawValue)),
        ] where annotated != host {
            problems.append("LuaAPI gives \(what) the names \(annotated), but the host's are \(host)")
        }
        return problems
    }

    // MARK: - The LuaLS definitions

    static let generatedBy = "Generated from the module itself by scripts/editor-files; do not edit."

    static func stub() -> String {
        var out = """
            ---@meta lifeline
            -- The `lifeline` module of Lifeline's Lua plugins, for LuaLS (lua-language-server):
            -- completion, hover and type checks. See docs/lua-api.md and docs/editors.md.
            -- \(generatedBy)


            """
        out += alias(
            LuaAlias(
                name: "lifeline.EventName", doc: "The notifications `lifeline.on` takes.",
                cases: LifecycleEventName.allCases.map { ($0.rawValue, LuaAPI.eventDocs[$0.rawValue] ?? "") }))
        for a in LuaAPI.aliases { out += alias(a) }
        for cls in LuaAPI.classes { out += classBlock(cls) }
        for table in LuaAPI.tables { out += tableBlock(table) }
        out += "return lifeline\n"
        return out
    }

    private static func alias(_ a: LuaAlias) -> String {
        var out = "---\(a.doc)\n"
        if let type = a.type { return out + "---@alias \(a.name) \(type)\n\n" }
        out += "---@alias \(a.name)\n"
        for c in a.cases { out += "---| \"\(c.value)\"" + (c.doc.isEmpty ? "" : " # \(c.doc)") + "\n" }
        return out + "\n"
    }

    /// The local name a class's methods hang on in the stub: "lifeline.Queue" -> "Queue".
    static func localName(_ cls: String) -> String { String(cls.split(separator: ".").last!) }

    private static func classBlock(_ cls: LuaClass) -> String {
        let own = LuaAPI.functions.filter { $0.path.hasPrefix(cls.name + ":") }
        var out = "---\(cls.doc)\n---@class \(cls.name)\n"
        for field in cls.fields { out += "---@field \(field.name) \(field.type)" + suffix(field.doc) + "\n" }
        guard !own.isEmpty else { return out + "\n" }
        let local = localName(cls.name)
        out += "local \(local) = {}\n\n"
        for fn in own {
            out += functionBlock(fn, declared: local + (fn.dot ? "." : ":") + fn.path.dropFirst(cls.name.count + 1))
        }
        return out
    }

    private static func tableBlock(_ table: LuaTable) -> String {
        var out = "---\(table.doc)\n---@class \(table.cls)\n"
        if let callable = table.callable { out += "---@overload \(callable)\n" }
        out += "\(table.path) = {}\n\n"
        let prefix = table.path + "."
        // Its own functions: not those of its tables, nor the classes' methods ("lifeline.Queue:add").
        for fn in LuaAPI.functions
        where fn.path.hasPrefix(prefix) && !fn.path.dropFirst(prefix.count).contains(where: { $0 == "." || $0 == ":" }) {
            out += functionBlock(fn, declared: fn.path)
        }
        for value in LuaAPI.values where value.path.hasPrefix(prefix) && !value.path.dropFirst(prefix.count).contains(".") {
            out += "---\(value.doc)\n---@type \(value.type)\n\(value.path) = nil\n\n"
        }
        return out
    }

    private static func functionBlock(_ fn: LuaFunction, declared: String) -> String {
        var out = "---\(fn.doc)\n"
        if fn.async { out += "---@async\n" }
        for param in fn.params { out += "---@param \(param.name) \(param.type)" + suffix(param.doc) + "\n" }
        for ret in fn.returns {
            out += "---@return \(ret.type)"
            if !ret.name.isEmpty { out += " \(ret.name)" + (ret.doc.isEmpty ? "" : " \(ret.doc)") }
            else if !ret.doc.isEmpty { out += " # \(ret.doc)" }
            out += "\n"
        }
        for overload in fn.overloads { out += "---@overload \(overload)\n" }
        let names = fn.params.map { $0.name.hasSuffix("?") ? String($0.name.dropLast()) : $0.name }
        return out + "function \(declared)(\(names.joined(separator: ", "))) end\n\n"
    }

    private static func suffix(_ doc: String) -> String { doc.isEmpty ? "" : " \(doc)" }

    // MARK: - LuaLS settings

    /// The sandbox's missing libraries that LuaLS can leave out (`os` is reduced, not gone, and
    /// `require` is LuaLS's `package` library, so both stay).
    static let disabledBuiltins = ["debug", "io"]

    static func luarc() -> String {
        """
        {
          "runtime.version": "Lua 5.4",
          "runtime.builtin": {
        \(disabledBuiltins.map { "    \"\($0)\": \"disable\"" }.joined(separator: ",\n"))
          },
          "workspace.library": [".lifeline/luals/library"]
        }

        """
    }

    static func addonConfig() -> String {
        """
        {
          "name": "lifeline",
          "words": ["lifeline%.%a+"],
          "settings": {
            "Lua.runtime.version": "Lua 5.4",
            "Lua.runtime.builtin": {
        \(disabledBuiltins.map { "      \"\($0)\": \"disable\"" }.joined(separator: ",\n"))
            }
          }
        }

        """
    }

    // MARK: - luacheck

    /// The globals Lua 5.4 has and the sandbox takes away (docs/lua-api.md, "The sandbox").
    static let removedGlobals = ["debug", "dofile", "io", "loadfile", "package"]

    /// A node of the module's tree of fields.
    private final class Node {
        var children: [String: Node] = [:]
        var otherFields = false
        func child(_ name: String) -> Node {
            if let c = children[name] { return c }
            let c = Node()
            children[name] = c
            return c
        }
    }

    static func luacheckrc() -> String {
        let root = Node()
        func node(_ path: String) -> Node {
            path.split(separator: ".").dropFirst().reduce(root) { $0.child(String($1)) }
        }
        for fn in LuaAPI.functions where fn.path.hasPrefix("lifeline.") && !fn.path.contains(":") { _ = node(fn.path) }
        for table in LuaAPI.tables { _ = node(table.path) }
        for value in LuaAPI.values {
            let n = node(value.path)
            if value.type.hasPrefix("table") { n.otherFields = true }
            // An object's fields and methods, so `lifeline.queue.background:nosuch()` is caught.
            if let cls = LuaAPI.classes.first(where: { $0.name == value.type }) {
                for field in cls.fields { _ = n.child(field.name.replacingOccurrences(of: "?", with: "")) }
                for fn in LuaAPI.functions where fn.path.hasPrefix(cls.name + ":") {
                    _ = n.child(String(fn.path.dropFirst(cls.name.count + 1)))
                }
            }
        }
        func render(_ n: Node, indent: String) -> String {
            if n.otherFields { return "{other_fields = true}" }
            if n.children.isEmpty { return "{}" }
            var out = "{\n\(indent)  fields = {\n"
            for (name, child) in n.children.sorted(by: { $0.key < $1.key }) {
                out += "\(indent)    \(name) = \(render(child, indent: indent + "    ")),\n"
            }
            return out + "\(indent)  },\n\(indent)}"
        }
        return """
            -- luacheck's view of a Lifeline plugin: Lua 5.4, with the `lifeline` module as a read-only
            -- global whose fields are all known, so that a global written by accident and a call of a
            -- function the module lacks (`lifeline.nosuch`) are warnings. See docs/editors.md.
            -- \(generatedBy)
            std = "lua54+lifeline"
            -- LuaLS's definitions are not plugin code.
            exclude_files = {".lifeline/**"}
            -- The sandbox has no io, debug or package, and no dofile or loadfile (docs/lua-api.md).
            not_globals = {\(removedGlobals.map { "\"\($0)\"" }.joined(separator: ", "))}
            stds.lifeline = {
              read_globals = {
                lifeline = \(render(root, indent: "    ")),
              },
            }

            """
    }
}
