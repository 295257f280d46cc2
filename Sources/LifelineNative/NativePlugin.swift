import CLifelinePlugin
import Foundation
import Lifeline

/// Native plugins: a plugin folder whose plugin.toml says `native = "x.so"`, a shared library
/// built against lifeline_plugin.h (docs/native.md).
public enum NativePlugins {
    /// The descriptor of the native plugin in `folder`, named `name`. A library that is missing,
    /// or lies outside the folder once links are resolved, gives a plugin that fails to load with
    /// plugin.toml's file:line (exit 65, as any plugin that cannot load).
    public static func descriptor(name: String, folder: String, manifest: PluginManifest) -> PluginDescriptor {
        let library = manifest.nativeLibrary ?? ""
        let at = "\(folder)/plugin.toml:\(manifest.nativeLibraryLine)"
        let path = (folder as NSString).appendingPathComponent(library)
        let unsupported = unsupportedKeys(manifest, in: folder)
        var descriptor = PluginDescriptor(name: name, kind: .native) { () throws(LifelineError) -> any PluginInstance in
            if let unsupported { throw .badInput(unsupported) }
            try check(path, in: folder, library: library, at: at)
            return NativePluginInstance(name: name, library: try NativeLibrary.load(path))
        }
        descriptor.apply(manifest, folder: folder)
        return descriptor
    }

    /// What plugin.toml asks of a native plugin that the host cannot give it, said rather than
    /// ignored: `[config]` (the C api has no call that reads it, as `--config` says), and `[limits]
    /// memory` (native code allocates with its own allocator, so no cap could hold).
    private static func unsupportedKeys(_ manifest: PluginManifest, in folder: String) -> String? {
        let file = "\(folder)/plugin.toml"
        if let first = manifest.config.entries.first {
            return "\(file):\(first.line): [config]: a native plugin cannot read [config] (the C api has no call for it); "
                + "remove the table, and build the values into the library or keep them in its files"
        }
        if manifest.memoryLimit != nil {
            return "\(file):\(manifest.memoryLimitLine): [limits] memory: a native plugin's memory cannot be capped (its code allocates with its "
                + "own allocator, docs/guarantees.md); remove the key"
        }
        return nil
    }

    /// The library must be a file inside the folder.
    private static func check(_ path: String, in folder: String, library: String, at: String) throws(LifelineError) {
        guard let root = realpath(folder, nil) else {
            throw .badInput("\(at): cannot open the plugin's folder: \(String(cString: strerror(errno)))")
        }
        defer { free(root) }
        guard let resolved = realpath(path, nil) else {
            let why = errno == ENOENT ? "no such file (build it first, as in cc -shared -fPIC -I\"$(lifeline --include-dir)\" …)"
                : String(cString: strerror(errno))
            throw .badInput("\(at): native = \"\(library)\": \(why)")
        }
        defer { free(resolved) }
        let inside = String(cString: root) + "/"
        // `native = "."` (or "./") resolves to the folder itself, which is no library.
        guard String(cString: resolved) != String(cString: root) else {
            throw .badInput("\(at): native = \"\(library)\" is the plugin's folder, not a library in it")
        }
        guard String(cString: resolved).hasPrefix(inside) else {
            throw .badInput(
                "\(at): native = \"\(library)\" leads outside the plugin's folder (through a link); a plugin's files "
                    + "must be inside its own folder")
        }
        var info = stat()
        guard stat(resolved, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw .badInput("\(at): native = \"\(library)\" is not a plain file")
        }
    }
}

/// One launch of a native plugin: `lifeline_plugin_init` with a fresh handle, then the callbacks
/// it registered, all run by the host's `GuardedCaller` like a Swift plugin's code.
final class NativePluginInstance: PluginInstance {
    let name: String
    private let library: NativeLibrary
    private var handle: NativeHandle?

    init(name: String, library: NativeLibrary) {
        self.name = name
        self.library = library
    }

    var kind: PluginKind { .native }
    /// Native code cannot be stopped while it runs (W3): an overrun terminates the app once the
    /// code returns, or the host ends the process from the watchdog's thread, as for Swift.
    var preemptor: (any Preemptible)? { nil }

    func start(_ context: PluginContext) -> CallOutcome {
        let handle = NativeHandle(pluginName: name, context: context)
        self.handle = handle
        let initFunction = library.initFunction
        let outcome = handle.invoke("lifeline_plugin_init") { initFunction(NativeAPI.table, handle.token) }
        // A load failure's message is all a user sees of it under simulate: say which library's
        // init refused, as the loader's own refusals name the library.
        guard case .raised(let message, let traceback) = outcome else { return outcome }
        let why = message.hasPrefix("lifeline_plugin_init") ? message : "lifeline_plugin_init failed: \(message)"
        return .raised(message: "\(library.path): \(why)", traceback: traceback)
    }

    func resetPreemption() {}

    func close() {
        guard let handle else { return }
        if let closeFunction = library.closeFunction {
            _ = handle.invoke("lifeline_plugin_close") {
                closeFunction(handle.token)
                return Int32(LIFELINE_OK)
            }
        }
        handle.context = nil
        handle.taskExpirations = [:]
        self.handle = nil
    }
}
