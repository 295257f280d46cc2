import CLuaShims
import Foundation
import Lifeline

/// Finds the Lua plugins in a folder (SPEC 2.1, 6.1): every subfolder with an `init.lua`, in name
/// order, with its `plugin.toml` read and checked up front.
public enum LuaPluginLoader {
    /// One override of a plugin's [config] for a run (`--config KEY=VALUE`, or `PLUGIN.KEY=VALUE`
    /// for one plugin): it replaces the key's value, or adds the key.
    public struct ConfigOverride: Sendable {
        /// The plugin it is for; nil: every plugin.
        public var plugin: String?
        public var key: String
        public var value: TOMLValue

        public init(plugin: String?, key: String, value: TOMLValue) {
            self.plugin = plugin
            self.key = key
            self.value = value
        }
    }

    /// A subfolder of the plugins folder whose code is compiled, not Lua: one that names a Swift
    /// plugin compiled into the host (plugin.toml's `swift = "NAME"`, and no init.lua), or a
    /// native plugin (`native = "x.so"`: its manifest's `nativeLibrary`; `swiftName` is then the
    /// folder's name).
    public struct CompiledPluginRequest: Sendable {
        /// The subfolder's name.
        public var folder: String
        /// `.swift` or `.native`. For a plugin.toml that cannot be read, what its text seems to
        /// ask for (a `native` key), so that its failure is reported under the right kind.
        public var kind: PluginKind
        /// The compiled-in plugin it asks for.
        public var swiftName: String
        public var manifest: PluginManifest
        /// Why its plugin.toml could not be read, when it could not.
        public var failure: String?
    }

    /// The descriptors of the plugins in `directory`. Throws (exit 65) when the folder is missing
    /// or unreadable. A plugin whose plugin.toml is unreadable or invalid gets a descriptor that
    /// fails to load with that message: one plugin's manifest must not stop the others, or a run
    /// with `--only` that leaves it out.
    public static func descriptors(
        in directory: String, configOverrides: [ConfigOverride] = []
    ) throws(LifelineError) -> [PluginDescriptor] {
        var result: [PluginDescriptor] = []
        for name in try subfolders(of: directory) {
            let folder = (directory.hasSuffix("/") ? directory : directory + "/") + name
            // lstat, not a check that follows init.lua: an init.lua that is a link loop, a
            // dangling link or a link out of the folder makes a plugin that fails to load (65),
            // never one that is silently left out. Only a missing init.lua means "not a plugin".
            var info = stat()
            if lstat(folder + "/init.lua", &info) != 0 {
                let error = errno
                if error == ENOENT || error == ENOTDIR { continue }
                result.append(failing(name, .lua, "cannot open \(folder)/init.lua: \(String(cString: strerror(error)))"))
                continue
            }
            let manifest: PluginManifest
            do {
                manifest = try readManifest(folder + "/plugin.toml", in: folder)
            } catch {
                result.append(failing(name, .lua, error.message))
                continue
            }
            if let swift = manifest.swiftPlugin {
                result.append(
                    failing(
                        name, .lua,
                        "\(folder)/plugin.toml:\(manifest.swiftPluginLine): the folder has an init.lua, so it "
                            + "is a Lua plugin; swift = \"\(swift)\" belongs in a folder of its own, without init.lua"))
                continue
            }
            if let native = manifest.nativeLibrary {
                result.append(
                    failing(
                        name, .lua,
                        "\(folder)/plugin.toml:\(manifest.nativeLibraryLine): the folder has an init.lua, so it "
                            + "is a Lua plugin; native = \"\(native)\" belongs in a folder of its own, without init.lua"))
                continue
            }
            let memory = manifest.memoryLimit ?? PluginManifest.defaultMemoryLimit
            var config = manifest.config
            for o in configOverrides where o.plugin == nil || o.plugin == name {
                if let i = config.entries.firstIndex(where: { $0.key == o.key }) {
                    config.entries[i].value = o.value
                } else {
                    config.entries.append((key: o.key, value: o.value, line: 0))
                }
            }
            let finalConfig = config
            var descriptor = PluginDescriptor(name: name, kind: .lua) { () throws(LifelineError) -> any PluginInstance in
                try LuaPlugin(name: name, directory: folder, memoryLimit: memory, config: finalConfig)
            }
            descriptor.apply(manifest, folder: folder)
            result.append(descriptor)
        }
        return result
    }

    /// The names of the Lua plugins in `directory` (its subfolders with an init.lua), read without
    /// their manifests.
    public static func luaPluginNames(in directory: String) throws(LifelineError) -> [String] {
        try subfolders(of: directory).filter { name in
            var info = stat()
            let path = (directory.hasSuffix("/") ? directory : directory + "/") + name + "/init.lua"
            return lstat(path, &info) == 0 || (errno != ENOENT && errno != ENOTDIR)
        }
    }

    /// A plugin that fails to load with `message` (exit 65 in simulate and check; skipped by run).
    public static func failing(_ name: String, _ kind: PluginKind, _ message: String) -> PluginDescriptor {
        PluginDescriptor(name: name, kind: kind) { () throws(LifelineError) -> any PluginInstance in
            throw .badInput(message)
        }
    }

    /// The subfolders of `directory` that ask for a compiled-in Swift plugin, in name order. A
    /// folder without init.lua whose plugin.toml cannot be read is one too, with its `failure`:
    /// it may have meant to ask, and it fails only itself.
    public static func compiledPluginRequests(in directory: String) throws(LifelineError) -> [CompiledPluginRequest] {
        var result: [CompiledPluginRequest] = []
        for name in try subfolders(of: directory) {
            let folder = (directory.hasSuffix("/") ? directory : directory + "/") + name
            var info = stat()
            // A folder with an init.lua is a Lua plugin; `descriptors` refuses a swift key there.
            guard lstat(folder + "/init.lua", &info) != 0, lstat(folder + "/plugin.toml", &info) == 0 else { continue }
            do {
                let manifest = try readManifest(folder + "/plugin.toml", in: folder)
                if let swift = manifest.swiftPlugin {
                    result.append(CompiledPluginRequest(folder: name, kind: .swift, swiftName: swift, manifest: manifest))
                } else if manifest.nativeLibrary != nil {
                    // A native plugin (native = "x.so") is named after its folder, as a Lua plugin is.
                    result.append(CompiledPluginRequest(folder: name, kind: .native, swiftName: name, manifest: manifest))
                }
            } catch {
                let text = (try? String(contentsOfFile: folder + "/plugin.toml", encoding: .utf8)) ?? ""
                let native = text.split(separator: "\n").contains { line in
                    let key = line.drop { $0 == " " || $0 == "\t" }
                    return key.hasPrefix("native") && key.dropFirst(6).drop { $0 == " " || $0 == "\t" }.hasPrefix("=")
                }
                result.append(
                    CompiledPluginRequest(
                        folder: name, kind: native ? .native : .swift, swiftName: name, manifest: PluginManifest(),
                        failure: error.message))
            }
        }
        return result
    }

    /// Every key of the Lua plugins' [config] tables in `directory`.
    public static func configKeys(in directory: String) throws(LifelineError) -> Set<String> {
        var keys: Set<String> = []
        for name in try luaPluginNames(in: directory) {
            let folder = (directory.hasSuffix("/") ? directory : directory + "/") + name
            // A manifest that cannot be read has no keys; its plugin fails to load on its own.
            guard let manifest = try? readManifest(folder + "/plugin.toml", in: folder) else { continue }
            for entry in manifest.config.entries { keys.insert(entry.key) }
        }
        return keys
    }

    private static func subfolders(of directory: String) throws(LifelineError) -> [String] {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        guard fm.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .badInput("plugins folder '\(directory)' does not exist or is not a folder")
        }
        let names: [String]
        do {
            names = try fm.contentsOfDirectory(atPath: directory).sorted().filter { !$0.hasPrefix(".") }
        } catch {
            throw .badInput("cannot read plugins folder '\(directory)': \(error.localizedDescription)")
        }
        // Pointed at one plugin's own folder, the loader would find no plugin in it and run
        // nothing; a folder of plugins with a stray init.lua beside them is still read.
        let slash = directory.hasSuffix("/") ? directory : directory + "/"
        let holdsPlugins = names.contains {
            fm.fileExists(atPath: slash + $0 + "/init.lua") || fm.fileExists(atPath: slash + $0 + "/plugin.toml")
        }
        if fm.fileExists(atPath: slash + "init.lua"), !holdsPlugins {
            throw .badInput(
                "'\(directory)' is a plugin's own folder (it has an init.lua); give the folder that holds "
                    + "the plugins, as in --plugins \(parentFolder(of: directory))")
        }
        return names
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
        return try PluginManifest.parse(utf8: data, fileName: path)
    }
}
