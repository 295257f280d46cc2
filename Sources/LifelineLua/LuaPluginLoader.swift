import CLuaShims
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
            // lstat, not a check that follows init.lua: an init.lua that is a link loop, a
            // dangling link or a link out of the folder makes a plugin that fails to load (65),
            // never one that is silently left out. Only a missing init.lua means "not a plugin".
            var info = stat()
            if lstat(folder + "/init.lua", &info) != 0 {
                let error = errno
                if error == ENOENT || error == ENOTDIR { continue }
                let message = "cannot open \(folder)/init.lua: \(String(cString: strerror(error)))"
                result.append(PluginDescriptor(name: name, kind: .lua) { () throws(LifelineError) -> any PluginInstance in
                    throw .badInput(message)
                })
                continue
            }
            let manifest = try readManifest(folder + "/plugin.toml", in: folder)
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

    /// The manifest at `path`, or an empty one when there is no file. Like the plugin's code, it
    /// must lie inside the plugin's `folder` once links are resolved: its [config] reaches the
    /// plugin, so a link must not hand it another plugin's.
    /// The largest plugin.toml the host reads.
    static let maximumManifestBytes = 1024 * 1024

    static func readManifest(_ path: String, in folder: String) throws(LifelineError) -> PluginManifest {
        var info = stat()
        if lstat(path, &info) != 0 && (errno == ENOENT || errno == ENOTDIR) { return PluginManifest() }
        guard let root = realpath(folder, nil) else {
            throw .badInput("\(path):1: cannot read plugin.toml: \(String(cString: strerror(errno)))")
        }
        let fd = lifeline_open_inside(root, path)
        let error = errno
        free(root)
        guard fd >= 0 else {
            if error == EXDEV {
                throw .badInput(
                    "\(path):1: plugin.toml leads outside the plugin's folder (through a link); a plugin's files "
                        + "must be inside its own folder")
            }
            let why = error == EINVAL ? "not a plain file" : String(cString: strerror(error))
            throw .badInput("\(path):1: cannot read plugin.toml: \(why)")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        // The host parses it outside any plugin's memory cap, so its size is bounded here.
        guard let data = try? handle.read(upToCount: maximumManifestBytes + 1) ?? Data() else {
            throw .badInput("\(path):1: cannot read plugin.toml")
        }
        guard data.count <= maximumManifestBytes else {
            throw .badInput("\(path):1: plugin.toml is larger than \(maximumManifestBytes / 1024) KiB, the most the host reads")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw .badInput("\(path):1: plugin.toml is not valid UTF-8")
        }
        return try PluginManifest.parse(text, fileName: path)
    }
}
