import CLifelinePlugin
import Foundation
import Lifeline

/// A native plugin's shared library, opened once per process (dlopen with RTLD_NOW | RTLD_LOCAL)
/// and never closed: code from it may still be on a stack, or in a function pointer the host
/// keeps, when a launch ends.
package final class NativeLibrary: @unchecked Sendable {
    typealias InitFunction = @convention(c) (UnsafePointer<lifeline_api>?, OpaquePointer?) -> Int32
    typealias CloseFunction = @convention(c) (OpaquePointer?) -> Void

    /// The path it was asked for (for messages), and the one dlopen was given.
    let path: String
    let abiVersion: UInt32
    let initFunction: InitFunction
    let closeFunction: CloseFunction?

    private init(path: String, abiVersion: UInt32, initFunction: InitFunction, closeFunction: CloseFunction?) {
        self.path = path
        self.abiVersion = abiVersion
        self.initFunction = initFunction
        self.closeFunction = closeFunction
    }

    /// The file's identity: a rebuilt library is a new file (or a new size and time), which dlopen
    /// would not see, as it returns the image it has for a path.
    private struct Identity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64, seconds: Int, nanoseconds: Int
    }

    private struct Cache {
        /// By the path asked for: the file it was when opened, and the library.
        var loaded: [String: (identity: Identity, library: NativeLibrary)] = [:]
        /// Copies made for rebuilt libraries, so that each gets a path dlopen has not seen.
        var copies = 0
    }

    private static let cache = Locked(Cache())

    /// The library at `path`, opened now or earlier in this process. A file that changed since it
    /// was opened (rebuilt for a reload) is copied to a path of its own and opened from there: the
    /// old image stays loaded beside it.
    static func load(_ path: String) throws(LifelineError) -> NativeLibrary {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw .badInput("\(path): cannot open the native library: \(String(cString: strerror(errno)))")
        }
        let identity = Identity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            seconds: Int(info.st_mtim.tv_sec), nanoseconds: Int(info.st_mtim.tv_nsec))
        return try cache.withLock { (cache: inout Cache) throws(LifelineError) -> NativeLibrary in
            if let (known, library) = cache.loaded[path], known == identity { return library }
            guard cache.loaded[path] != nil else {
                let library = try open(path, at: path)
                cache.loaded[path] = (identity, library)
                return library
            }
            cache.copies += 1
            let copied = try copy(path, generation: cache.copies)
            // Once opened, the image is mapped: the copy's file can go at once, so reloads leave
            // nothing behind in the temporary folder.
            defer { try? FileManager.default.removeItem(atPath: copied) }
            let library = try open(path, at: copied)
            cache.loaded[path] = (identity, library)
            return library
        }
    }

    /// Where the copies of rebuilt libraries are made: a temporary folder of this process.
    package static let copiesFolder = (NSTemporaryDirectory() as NSString).appendingPathComponent(
        "lifeline-native-\(getpid())")

    /// A copy of `path` in `copiesFolder`, with a name dlopen has not seen.
    private static func copy(_ path: String, generation: Int) throws(LifelineError) -> String {
        let folder = copiesFolder
        let target = (folder as NSString).appendingPathComponent("\(generation)-\((path as NSString).lastPathComponent)")
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: target)
            try FileManager.default.copyItem(atPath: path, toPath: target)
        } catch {
            throw .badInput("\(path): cannot copy the rebuilt native library to load it again: \(error.localizedDescription)")
        }
        return target
    }

    private static func open(_ path: String, at openPath: String) throws(LifelineError) -> NativeLibrary {
        // dlopen searches the library path for a name without a slash: never do that.
        let absolute = openPath.hasPrefix("/") ? openPath : FileManager.default.currentDirectoryPath + "/" + openPath
        guard let handle = dlopen(absolute, RTLD_NOW | RTLD_LOCAL) else {
            let why = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw .badInput("\(path): cannot load the native library: \(why)")
        }
        let host = UInt32(LIFELINE_PLUGIN_API_VERSION)
        guard let versionSymbol = dlsym(handle, "lifeline_plugin_abi_version") else {
            dlclose(handle)
            throw .badInput(
                "\(path): not a Lifeline native plugin: it does not export lifeline_plugin_abi_version "
                    + "(put LIFELINE_PLUGIN_EXPORT_ABI; in one of its C files, from lifeline_plugin.h)")
        }
        let version = versionSymbol.load(as: UInt32.self)
        guard version >= 1 else {
            dlclose(handle)
            throw .badInput("\(path): lifeline_plugin_abi_version is 0; build it with LIFELINE_PLUGIN_EXPORT_ABI")
        }
        guard version <= host else {
            dlclose(handle)
            throw .badInput(
                "\(path): the plugin was built for plugin ABI version \(version), newer than this lifeline's version "
                    + "\(host); use a newer lifeline, or rebuild the plugin against this one's header "
                    + "(cc -I\"$(lifeline --include-dir)\")")
        }
        guard let initSymbol = dlsym(handle, "lifeline_plugin_init") else {
            dlclose(handle)
            throw .badInput(
                "\(path): the native plugin does not export lifeline_plugin_init; define "
                    + "int lifeline_plugin_init(const lifeline_api *api, lifeline_plugin *self)")
        }
        let closeSymbol = dlsym(handle, "lifeline_plugin_close")
        return NativeLibrary(
            path: path, abiVersion: version, initFunction: unsafeBitCast(initSymbol, to: InitFunction.self),
            closeFunction: closeSymbol.map { unsafeBitCast($0, to: CloseFunction.self) })
    }
}
