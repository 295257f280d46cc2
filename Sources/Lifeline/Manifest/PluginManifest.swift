/// What plugin.toml says (SPEC 6.1): version, description, permissions, limits, config.
public struct PluginManifest: Equatable, Sendable {
    /// The plugin's version, as written; nothing compares versions.
    public var version: String?
    /// A one-line description for listings.
    public var description: String?
    /// Per-plugin memory cap in bytes, from [limits] memory; nil means the host default.
    public var memoryLimit: Int?
    /// The line of `[limits] memory`, for messages.
    public var memoryLimitLine = 0
    /// Per-plugin store quota in bytes, from [limits] store; nil means `PluginStore.defaultQuota`.
    public var storeQuota: Int?
    /// Per-plugin files quota in bytes, from [limits] files; nil means `PluginFiles.defaultQuota`.
    public var filesQuota: Int?
    /// [permissions] network: the HOST:PORT patterns of `NetworkPermissions`, checked when parsed.
    public var networkPermissions: [String]
    /// The free-form [config] table.
    public var config: TOMLTable
    /// [background] identifiers: the task identifiers the plugin may register and submit, as
    /// iOS's `BGTaskSchedulerPermittedIdentifiers`.
    public var taskIdentifiers: [String] = []
    /// `swift = "NAME"`: this folder asks for the Swift plugin NAME compiled into the host. A
    /// compiled-in plugin joins a run only when a folder asks for it, so `--plugins DIR` runs what
    /// DIR holds and nothing else.
    public var swiftPlugin: String?
    /// The line of the `swift` key, for messages.
    public var swiftPluginLine = 0
    /// `native = "PATH"`: this folder is a native plugin, the shared library at PATH, a path
    /// relative to the folder and inside it. Checked here for its shape; the loader checks the file.
    public var nativeLibrary: String?
    /// The line of the `native` key, for messages.
    public var nativeLibraryLine = 0

    /// The memory cap of a plugin whose manifest sets none: 32 MiB.
    public static let defaultMemoryLimit = 32 * 1024 * 1024
    /// The largest [limits] memory the host accepts unless told otherwise: 256 MiB.
    public static let maximumMemoryLimit = 256 * 1024 * 1024
    /// The smallest [limits] memory accepted: less than 64 KiB is almost surely a unit mistake.
    public static let minimumMemoryLimit = 64 * 1024

    /// An empty manifest: no version, no description, default memory, no permissions, empty config.
    public init() {
        version = nil
        description = nil
        memoryLimit = nil
        storeQuota = nil
        filesQuota = nil
        networkPermissions = []
        config = TOMLTable()
        swiftPlugin = nil
    }

    /// Parses and checks plugin.toml's bytes, which must be UTF-8 (`TOML.parse(utf8:fileName:)`).
    public static func parse(
        utf8 bytes: some Collection<UInt8>, fileName: String,
        maximumMemoryLimit: Int = PluginManifest.maximumMemoryLimit
    ) throws(LifelineError) -> PluginManifest {
        let table = try TOML.parse(utf8: bytes, fileName: fileName)
        return try check(table, fileName: fileName, maximumMemoryLimit: maximumMemoryLimit)
    }

    /// Parses and checks plugin.toml. Every problem, TOML syntax included, throws
    /// `.badInput("fileName:line: message")`; a memory limit above `maximumMemoryLimit` is one of them.
    public static func parse(
        _ text: String, fileName: String, maximumMemoryLimit: Int = PluginManifest.maximumMemoryLimit
    ) throws(LifelineError) -> PluginManifest {
        try check(TOML.parse(text, fileName: fileName), fileName: fileName, maximumMemoryLimit: maximumMemoryLimit)
    }

    private static func check(
        _ table: TOMLTable, fileName: String, maximumMemoryLimit: Int
    ) throws(LifelineError) -> PluginManifest {
        let reader = Reader(fileName: fileName, maximumMemoryLimit: maximumMemoryLimit)
        var manifest = PluginManifest()
        for (key, value, line) in table.entries {
            switch key {
            case "version": manifest.version = try reader.string(value, "version", line)
            case "description": manifest.description = try reader.string(value, "description", line)
            case "permissions":
                for (key, value, line) in try reader.table(value, "permissions", line).entries {
                    guard key == "network" else {
                        throw reader.unknown(key, value, in: "permissions", line, valid: ["network"])
                    }
                    manifest.networkPermissions = try reader.strings(value, "[permissions] network", line)
                    do {
                        _ = try NetworkPermissions(manifest.networkPermissions)
                    } catch {
                        throw reader.fail(line, error.message)
                    }
                }
            case "limits":
                for (key, value, line) in try reader.table(value, "limits", line).entries {
                    switch key {
                    case "memory":
                        manifest.memoryLimit = try reader.bytes(
                            value, "memory", line, minimum: PluginManifest.minimumMemoryLimit,
                            maximum: reader.maximumMemoryLimit)
                        manifest.memoryLimitLine = line
                    case "store":
                        manifest.storeQuota = try reader.bytes(value, "store", line, minimum: 1, maximum: Int.max)
                    case "files":
                        manifest.filesQuota = try reader.bytes(value, "files", line, minimum: 1, maximum: Int.max)
                    default:
                        throw reader.unknown(key, value, in: "limits", line, valid: ["memory", "store", "files"])
                    }
                }
            case "background":
                for (key, value, line) in try reader.table(value, "background", line).entries {
                    guard key == "identifiers" else {
                        throw reader.unknown(key, value, in: "background", line, valid: ["identifiers"])
                    }
                    let identifiers = try reader.strings(value, "[background] identifiers", line)
                    if let bad = identifiers.first(where: { !SystemTaskRequest.isValidIdentifier($0) }) {
                        throw reader.fail(
                            line, "[background] identifiers: '\(bad)' is not an identifier; use letters, digits, '.', '-' "
                                + "and '_', as in \"com.example.refresh\"")
                    }
                    manifest.taskIdentifiers = identifiers
                }
            case "config": manifest.config = try reader.table(value, "config", line)
            case "swift":
                let name = try reader.string(value, "swift", line)
                guard !name.isEmpty else { throw reader.fail(line, "swift must name a Swift plugin, as in swift = \"heartbeat\"") }
                manifest.swiftPlugin = name
                manifest.swiftPluginLine = line
            case "native":
                let path = try reader.string(value, "native", line)
                guard !path.isEmpty else {
                    throw reader.fail(line, "native must name a shared library in the plugin's folder, as in native = \"notes.so\"")
                }
                guard !path.hasPrefix("/") else {
                    throw reader.fail(line, "native = \"\(path)\" is an absolute path; give a path inside the plugin's folder, "
                        + "as in native = \"notes.so\"")
                }
                guard !path.split(separator: "/", omittingEmptySubsequences: false).contains("..") else {
                    throw reader.fail(line, "native = \"\(path)\" leads out of the plugin's folder ('..'); a plugin's files "
                        + "must be inside its own folder")
                }
                guard !path.utf8.contains(0) else { throw reader.fail(line, "native must not contain a NUL byte") }
                manifest.nativeLibrary = path
                manifest.nativeLibraryLine = line
            default:
                let what = if case .table = value { "table [\(key)]" } else { "key '\(key)'" }
                throw reader.fail(line, "unknown \(what); plugin.toml may contain version, description, swift, native, "
                    + "[permissions], [limits], [background] and [config]")
            }
        }
        if let swift = manifest.swiftPlugin, let native = manifest.nativeLibrary {
            let line = max(manifest.swiftPluginLine, manifest.nativeLibraryLine)
            throw reader.fail(line, "swift = \"\(swift)\" and native = \"\(native)\" both name the plugin's code; a folder "
                + "holds one plugin, so keep one of them")
        }
        return manifest
    }
}

/// The checks, kept apart so that `parse` reads as the shape of the file.
private struct Reader {
    let fileName: String
    let maximumMemoryLimit: Int

    func fail(_ line: Int, _ message: String) -> LifelineError { .badInput("\(fileName):\(line): \(message)") }

    func unknown(_ key: String, _ value: TOMLValue, in table: String, _ line: Int, valid: [String]) -> LifelineError {
        let what = if case .table = value { "table [\(table).\(key)]" } else { "key '\(key)' in [\(table)]" }
        let keys = valid.count == 1 ? "the only key there is \(valid[0])" : "the keys there are \(valid.joined(separator: ", "))"
        return fail(line, "unknown \(what); \(keys)")
    }

    func string(_ value: TOMLValue, _ name: String, _ line: Int) throws(LifelineError) -> String {
        guard case .string(let string) = value else { throw fail(line, "\(name) must be a string") }
        return string
    }

    func strings(_ value: TOMLValue, _ name: String, _ line: Int) throws(LifelineError) -> [String] {
        let message = "\(name) must be an array of strings, like [\"example.com:443\"]"
        guard case .array(let items) = value else { throw fail(line, message) }
        var strings: [String] = []
        for item in items {
            guard case .string(let string) = item else { throw fail(line, message) }
            strings.append(string)
        }
        return strings
    }

    func table(_ value: TOMLValue, _ name: String, _ line: Int) throws(LifelineError) -> TOMLTable {
        guard case .table(let table) = value else { throw fail(line, "[\(name)] must be a table") }
        return table
    }

    /// Bytes from an integer, or from a string with a unit such as "64MiB": `[limits] KEY`.
    func bytes(_ value: TOMLValue, _ key: String, _ line: Int, minimum: Int, maximum: Int) throws(LifelineError) -> Int {
        let bytes: Int
        switch value {
        case .integer(let integer):
            guard let exact = Int(exactly: integer) else { throw fail(line, "[limits] \(key) is too large") }
            bytes = exact
        case .string(let text):
            bytes = try size(text, key, line)
        default:
            throw fail(line, "[limits] \(key) must be a number of bytes or a string like \"64MiB\"")
        }
        guard bytes > 0 else { throw fail(line, "[limits] \(key) must be more than 0 bytes") }
        guard bytes >= minimum else {
            throw fail(line, "[limits] \(key) is \(Units.formatBytes(bytes)), below the minimum of "
                + Units.formatBytes(minimum))
        }
        guard bytes <= maximum else {
            throw fail(line, "[limits] \(key) is \(Units.formatBytes(bytes)), above the host maximum of "
                + Units.formatBytes(maximum))
        }
        return bytes
    }

    func size(_ text: String, _ key: String, _ line: Int) throws(LifelineError) -> Int {
        do throws(Units.ByteCountError) {
            return try Units.parseByteCount(text)
        } catch .tooLarge {
            throw fail(line, "[limits] \(key) \"\(text)\" is too large")
        } catch {
            throw fail(line, "[limits] \(key) \"\(text)\" is not a size; write a whole number with an optional "
                + "unit (B, KiB, MiB, GiB, KB, MB, GB), like \"64MiB\"")
        }
    }
}
