import Foundation
import Lifeline

/// Finds the Lua plugins in a folder (SPEC 2.1, 6.1): every subfolder with an `init.lua`, in name
/// order, with its `plugin.toml` read and checked up front.
public enum LuaPluginLoader {
    /// The descriptors of the plugins in `directory`. Throws (exit 65) when the folder is missing
    /// or a plugin.toml is unreadable or invalid.
    public static func descriptors(in directory: String) throws(LifelineError) -> [PluginDescriptor] {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        guard fm.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .badInput("plugins folder '\(directory)' does not exist or is not a folder")
        }
        let names: [String]
        do {
            names = try fm.contentsOfDirectory(atPath: directory).sorted()
        } catch {
            throw .badInput("cannot read plugins folder '\(directory)': \(error.localizedDescription)")
        }
        var result: [PluginDescriptor] = []
        for name in names where !name.hasPrefix(".") {
            let folder = (directory.hasSuffix("/") ? directory : directory + "/") + name
            guard fm.fileExists(atPath: folder + "/init.lua") else { continue }
            let manifest = try readManifest(folder + "/plugin.toml")
            let memory = manifest.memoryLimit ?? PluginManifest.defaultMemoryLimit
            // Checked when the manifest was parsed.
            let network = (try? NetworkPermissions(manifest.networkPermissions)) ?? .none
            let config = manifest.config
            result.append(
                PluginDescriptor(name: name, kind: .lua, network: network, storeQuota: manifest.storeQuota) {
                    () throws(LifelineError) -> any PluginInstance in
                    try LuaPlugin(name: name, directory: folder, memoryLimit: memory, config: config)
                })
        }
        return result
    }

    /// The manifest at `path`, or an empty one when there is no file.
    static func readManifest(_ path: String) throws(LifelineError) -> PluginManifest {
        guard FileManager.default.fileExists(atPath: path) else { return PluginManifest() }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .badInput("\(path):1: cannot read plugin.toml")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw .badInput("\(path):1: plugin.toml is not valid UTF-8")
        }
        return try PluginManifest.parse(text, fileName: path)
    }
}
