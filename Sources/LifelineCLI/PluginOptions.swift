import ArgumentParser
import Foundation
import Lifeline
import LifelineLua
import LifelineNative

/// Which plugins a command runs, and how their [config] is overridden for the run.
struct PluginOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The folder of plugins: every subfolder with an init.lua, every subfolder whose plugin.toml "
                + "names a compiled-in Swift plugin (swift = \"NAME\"), and every one whose plugin.toml names a "
                + "native library (native = \"x.so\"). Nothing else joins the run."))
    var plugins: String

    @Option(
        help: ArgumentHelp(
            "Run only these plugins of the folder (names or folder names, separated by commas).",
            valueName: "NAME[,NAME…]"))
    var only: [String] = []

    @Option(
        name: .customLong("config"),
        help: ArgumentHelp(
            "Override a [config] key of plugin.toml for this run: KEY=VALUE for every plugin, PLUGIN.KEY=VALUE "
                + "for one (repeatable). VALUE is read as TOML (42, true, \"text\"), else as a plain string.",
            valueName: "[PLUGIN.]KEY=VALUE"))
    var config: [String] = []

    /// The names `--only` asks for, split at commas.
    var onlyNames: [String] {
        only.flatMap { $0.split(separator: ",") }.map { String($0).trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    func validate() throws {
        if !only.isEmpty && onlyNames.isEmpty { throw ValidationError("--only needs at least one plugin name") }
        for item in config {
            guard let eq = item.firstIndex(of: "="), item[..<eq].contains(where: { $0 != " " }) else {
                throw ValidationError("--config '\(item)' is not KEY=VALUE or PLUGIN.KEY=VALUE")
            }
        }
    }

    /// The plugins to run: the folder's, cut to `--only`, with `--config` applied. Names must be
    /// unique. A scenario's `uses` lines (`scenario`) name plugins it needs: each must be in the
    /// folder (65 at its line), and joins an `--only` selection, as in `lifeline test`.
    func descriptors(for scenario: Scenario? = nil) throws(LifelineError) -> [PluginDescriptor] {
        let requests = try LuaPluginLoader.compiledPluginRequests(in: plugins)
        let overrides = try configOverrides(
            pluginNames: Set(try LuaPluginLoader.luaPluginNames(in: plugins)),
            swiftNames: Set(requests.flatMap { [$0.folder, $0.swiftName] }))
        var all: [(folder: String, descriptor: PluginDescriptor)] = try LuaPluginLoader.descriptors(
            in: plugins, configOverrides: overrides
        ).map { ($0.name, $0) }
        for request in requests {
            if let failure = request.failure {
                all.append((request.folder, LuaPluginLoader.failing(request.folder, request.kind, failure)))
                continue
            }
            if request.kind == .native {
                let folder = (plugins as NSString).appendingPathComponent(request.folder)
                all.append(
                    (request.folder, NativePlugins.descriptor(name: request.folder, folder: folder, manifest: request.manifest)))
                continue
            }
            guard var descriptor = BuiltInPlugins.all.first(where: { $0.name == request.swiftName }) else {
                let known = BuiltInPlugins.all.map(\.name).sorted().joined(separator: ", ")
                let message =
                    "\(plugins)/\(request.folder)/plugin.toml:\(request.manifest.swiftPluginLine): no Swift plugin "
                    + "named '\(request.swiftName)' is compiled into lifeline (compiled in: \(known))"
                    + NewPlugin.ownLifelineHint(plugins: plugins, folder: request.folder)
                all.append((request.folder, LuaPluginLoader.failing(request.swiftName, .swift, message)))
                continue
            }
            descriptor.apply(request.manifest, folder: (plugins as NSString).appendingPathComponent(request.folder))
            all.append((request.folder, descriptor))
        }
        var seen: Set<String> = []
        for (_, d) in all where !seen.insert(d.name).inserted {
            throw .badInput("two plugins are named '\(d.name)': rename a folder in '\(plugins)'")
        }
        for name in scenario?.uses ?? [] where !all.contains(where: { $0.folder == name || $0.descriptor.name == name }) {
            let line = scenario?.useLines[name].map { ":\($0)" } ?? ""
            let names = all.map(\.descriptor.name).sorted().joined(separator: ", ")
            throw .badInput(
                "\(scenario?.fileName ?? "")\(line): uses: no plugin named '\(name)' in '\(plugins)' (its plugins: \(names))")
        }
        var wanted = onlyNames
        guard !wanted.isEmpty else { return all.map(\.descriptor) }
        for name in scenario?.uses ?? [] where !wanted.contains(name) { wanted.append(name) }
        for name in wanted where !all.contains(where: { $0.folder == name || $0.descriptor.name == name }) {
            let names = all.map(\.descriptor.name).sorted().joined(separator: ", ")
            throw .usage("--only: no plugin named '\(name)' in '\(plugins)' (its plugins: \(names))")
        }
        return all.filter { p in wanted.contains { $0 == p.folder || $0 == p.descriptor.name } }.map(\.descriptor)
    }

    /// `--config` items as overrides. A prefix before the first `.` that names a plugin of the
    /// folder makes the override that plugin's. Any other dotted key must be one a plugin's
    /// [config] has (a quoted TOML key such as "api.url"), else it is refused (64): a misspelt
    /// plugin name must not become a key that no plugin reads.
    private func configOverrides(
        pluginNames: Set<String>, swiftNames: Set<String>
    ) throws(LifelineError) -> [LuaPluginLoader.ConfigOverride] {
        var result: [LuaPluginLoader.ConfigOverride] = []
        var configKeys: Set<String>?  // read once, and only for a dotted key
        for item in config {
            guard let eq = item.firstIndex(of: "=") else { continue }
            var key = item[..<eq].trimmingCharacters(in: .whitespaces)
            let valueText = String(item[item.index(after: eq)...])
            var plugin: String?
            if let dot = key.firstIndex(of: "."), pluginNames.contains(String(key[..<dot])) {
                plugin = String(key[..<dot])
                key = String(key[key.index(after: dot)...])
            }
            guard !key.isEmpty else { throw .usage("--config '\(item)' has no key") }
            if plugin == nil, let dot = key.firstIndex(of: ".") {
                if configKeys == nil { configKeys = try LuaPluginLoader.configKeys(in: plugins) }
                if configKeys?.contains(key) != true {
                    let prefix = String(key[..<dot])
                    if swiftNames.contains(prefix) {
                        let kind = try LuaPluginLoader.compiledPluginRequests(in: plugins)
                            .contains { $0.folder == prefix && $0.kind == .native } ? "native" : "Swift"
                        throw .usage("--config '\(item)': '\(prefix)' is a \(kind) plugin, which has no [config]")
                    }
                    var message = "--config '\(item)': no Lua plugin named '\(prefix)' in '\(plugins)'"
                    if !pluginNames.isEmpty {
                        message += " (its Lua plugins: \(pluginNames.sorted().joined(separator: ", ")))"
                    }
                    throw .usage(message)
                }
            }
            result.append(.init(plugin: plugin, key: key, value: PluginOptions.value(valueText)))
        }
        return result
    }

    /// A TOML value (`42`, `1.5`, `true`, `"text"`, `[1, 2]`) when the text is one, else the text.
    static func value(_ text: String) -> TOMLValue {
        if let table = try? TOML.parse("v = " + text, fileName: "--config"), let value = table["v"] {
            return value
        }
        return .string(text)
    }
}
