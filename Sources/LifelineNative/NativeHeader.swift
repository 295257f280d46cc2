import CLifelinePlugin
import Foundation
import Lifeline

/// Where a plugin author's `cc -I` finds lifeline_plugin.h (`lifeline --include-dir`).
public enum NativeHeader {
    /// The header this lifeline was built with.
    public static var text: String {
        var length = 0
        let pointer = lifeline_plugin_header_text(&length)!
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self)
    }

    /// The sources' include folder, when it still holds the header this lifeline was built with
    /// (a build from a checkout); else a cache folder the built-in header is written to
    /// (`$XDG_CACHE_HOME/lifeline/include-vN-HASH`, or under `~/.cache`), written once.
    public static func includeDirectory() throws(LifelineError) -> String {
        let environment = ProcessInfo.processInfo.environment
        let cache =
            environment["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) as NSString).appendingPathComponent(".cache")
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("CLifelinePlugin/include").path
        return try includeDirectory(sources: sources, cache: cache)
    }

    /// The same, with the sources' include folder and the cache folder given (for tests).
    package static func includeDirectory(sources: String, cache: String) throws(LifelineError) -> String {
        let text = text
        if let onDisk = FileManager.default.contents(atPath: sources + "/lifeline_plugin.h"), onDisk == Data(text.utf8) {
            return sources
        }
        // FNV-1a of the text: a header that differs gets a folder of its own.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let folder = (cache as NSString).appendingPathComponent(
            "lifeline/include-v\(LIFELINE_PLUGIN_API_VERSION)-\(String(hash, radix: 16))")
        let path = folder + "/lifeline_plugin.h"
        if FileManager.default.contents(atPath: path) == Data(text.utf8) { return folder }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            // Atomically: another lifeline may be writing the same file.
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw .internalError("cannot write lifeline_plugin.h to '\(folder)': \(error.localizedDescription)")
        }
        return folder
    }
}
