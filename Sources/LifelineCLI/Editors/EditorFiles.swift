import Foundation

/// The editor and lint files a Lua plugin project gets (`lifeline new` writes them), compiled into
/// the binary, so a copied `lifeline` writes the same files:
///
/// - `.lifeline/luals/library/lifeline.lua`: LuaLS's `---@meta` definitions of the whole
///   `lifeline` module (completion, hover, type checks);
/// - `.lifeline/luals/config.json`: the same folder as a LuaLS addon, for editors that install it;
/// - `.luarc.json`: points LuaLS at the library, Lua 5.4, the sandbox's missing libraries;
/// - `.luacheckrc`: luacheck's `stds.lifeline`, the module's fields as read-only globals.
///
/// Paths are relative to the project's root, the folder an editor opens. The files are generated
/// from the module itself (`scripts/editor-files`); tests hold them equal to it, so a function
/// added to the module without its stub fails a test. docs/editors.md says how to use them.
enum EditorFiles {
    static let files: [(path: String, contents: String)] = [
        (".lifeline/luals/library/lifeline.lua", text(PackageResources.lifeline_lua)),
        (".lifeline/luals/config.json", text(PackageResources.config_json)),
        (".luarc.json", text(PackageResources.luarc_json)),
        (".luacheckrc", text(PackageResources.luacheckrc)),
    ]

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}
