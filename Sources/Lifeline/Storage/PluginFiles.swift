import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The files a plugin owns: `<state-dir>/files/<plugin>/`, the folder its background transfers
/// use too. A plugin writes, reads, lists, sizes and removes files there by relative name.
///
/// - Names follow the rules of transfers (`TransferPath.resolve`): relative, no `..`, no NUL, no
///   link out of the folder, and every step is taken on the open folder (`PluginFolder`), so a
///   link planted after the check leads nowhere.
/// - A quota bounds the bytes of every plain file in the folder, downloads' included. A write
///   that would take the total over it throws and writes nothing. Downloads are the host's and are
///   not stopped by the quota, but what they bring counts against later writes.
/// - A write is atomic: a temporary in the same folder, fsync, then a rename over the name. A
///   failed write leaves the old file as it was and no temporary behind.
///
/// Threading: main executor only.
public final class PluginFiles {
    /// The quota of a plugin whose plugin.toml sets none: 64 MiB.
    public static let defaultQuota = 64 * 1024 * 1024

    public let plugin: String
    /// Bytes the plugin's files folder may hold; a reload sets the changed plugin.toml's.
    public internal(set) var quota: Int
    /// The plugin's files folder.
    let root: String

    init(plugin: String, root: String, quota: Int, maximumEntries: Int = PluginFiles.defaultMaximumEntries) {
        self.plugin = plugin
        self.root = root
        self.quota = quota
        self.maximumEntries = maximumEntries
    }

    /// Writes `data` as the whole content of `name`, replacing what was there. Folders on the way
    /// are made. Throws, and changes nothing, when the folder would hold more than the quota.
    public func write(_ name: String, _ data: [UInt8]) throws(FileError) {
        // withUnsafeBytes rethrows untyped errors, so the typed one is carried out by hand.
        var failure: FileError?
        data.withUnsafeBytes { bytes in
            do throws(FileError) { try write(name, bytes: bytes) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// `write` for bytes the caller holds, such as a Lua string, without a copy.
    public func write(_ name: String, bytes: UnsafeRawBufferPointer) throws(FileError) {
        let path = try TransferPath.resolve(name, in: root)
        // The size of the file this write replaces, which the total no longer counts after it.
        var replaced: Int64?
        if let (folder, leaf) = try PluginFolder.existing(path.name, in: root) { replaced = folder.size(of: leaf) }
        let entries = try entries()
        // The file, unless it replaces one, and the folders the write would make.
        let added = (replaced == nil ? 1 : 0) + (try PluginFolder.missingFolders(path.name, in: root))
        if entries.count + added > maximumEntries {
            throw FileError(
                "plugin '\(plugin)' would keep more than \(maximumEntries) files and folders in its files folder")
        }
        let after = entries.reduce(0) { $0 + $1.size } - (replaced ?? 0) + Int64(bytes.count)
        if after > Int64(quota) {
            throw FileError(
                "plugin '\(plugin)' would keep \(Units.formatBytes(Int(clamping: after))) in its files "
                    + "folder, over its quota of \(Units.formatBytes(quota)) (set another with [limits] files "
                    + "in plugin.toml)")
        }
        let (folder, leaf) = try PluginFolder.holding(path.name, in: root, create: true)
        try folder.replace(leaf, with: bytes)
    }

    /// Throws when `name` breaks the names' rules (`TransferPath.resolve`), changing no file: for
    /// callers that tell a refused name from a folder that failed (the native api's statuses).
    public func checkName(_ name: String) throws(FileError) {
        _ = try TransferPath.resolve(name, in: root)
    }

    /// The content of `name`, or nil when no file has that name.
    public func read(_ name: String) throws(FileError) -> [UInt8]? {
        guard case .bytes(let bytes) = try read(name, limit: .max) else { return nil }
        return bytes
    }

    /// The content of `name` when it holds at most `limit` bytes (see `PluginFolder.read`).
    package func read(_ name: String, limit: Int) throws(FileError) -> BoundedRead {
        let path = try TransferPath.resolve(name, in: root)
        guard let (folder, leaf) = try PluginFolder.existing(path.name, in: root) else { return .missing }
        return try folder.read(leaf, limit: limit)
    }

    /// `name` open to read, with its size; nil when no file has that name.
    package func openForReading(_ name: String) throws(FileError) -> OpenFile? {
        let path = try TransferPath.resolve(name, in: root)
        guard let (folder, leaf) = try PluginFolder.existing(path.name, in: root) else { return nil }
        return try folder.openForReading(leaf)
    }

    /// The size of `name` in bytes, or nil when no plain file has that name.
    public func size(_ name: String) throws(FileError) -> Int64? {
        let path = try TransferPath.resolve(name, in: root)
        guard let (folder, leaf) = try PluginFolder.existing(path.name, in: root) else { return nil }
        return folder.size(of: leaf)
    }

    /// Removes `name`: a file, or an empty folder (so the folders writes made can go too); false
    /// when nothing had that name. A folder with something in it throws.
    @discardableResult
    public func remove(_ name: String) throws(FileError) -> Bool {
        let path = try TransferPath.resolve(name, in: root)
        guard let (folder, leaf) = try PluginFolder.existing(path.name, in: root) else { return false }
        guard unlinkat(folder.fd, leaf, 0) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return false }
            if errno == EISDIR {
                if unlinkat(folder.fd, leaf, AT_REMOVEDIR) == 0 { return true }
                if errno == ENOTEMPTY || errno == EEXIST {
                    throw FileError("'\(path.name)' is a folder with files in it; remove them first")
                }
            }
            throw FileError("cannot remove '\(path.name)': \(String(cString: strerror(errno)))")
        }
        return true
    }

    /// The names of the plugin's files, relative to its folder, in byte order. Folders are not
    /// listed, only the files in them; a write's temporaries never are.
    public func list() throws(FileError) -> [String] {
        try list(nameBytes: .max)!
    }

    /// `list`, or nil when the names would take more than `nameBytes` bytes: the walk stops there,
    /// so a caller that must bound what it holds (`lifeline.files.list`) never holds more.
    package func list(nameBytes: Int) throws(FileError) -> [String]? {
        guard let folder = try PluginFolder.root(root) else { return [] }
        guard let found = folder.files(removingTemporaries: true, nameBytes: nameBytes) else { return nil }
        return found.compactMap(\.name).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The most files and folders a plugin's files folder may hold, unless told otherwise. The
    /// quota counts bytes, so without it empty files and folders would be free, and a plugin could
    /// use up the disk's inodes.
    public static let defaultMaximumEntries = 10_000
    /// The most files and folders this plugin's folder may hold.
    public let maximumEntries: Int

    /// The bytes of the plugin's files, as the quota counts them.
    public func usage() throws(FileError) -> Int64 {
        try entries().reduce(0) { $0 + $1.size }
    }

    /// The plain files of the folder. A temporary found there is left over from a write that
    /// never finished (the host stopped mid-write; writes run on one thread): it is removed.
    /// No names are made: the quota needs only sizes, and 10,000 names would be a list the host
    /// holds for nothing on every write.
    private func entries() throws(FileError) -> [(name: String?, size: Int64, isFolder: Bool)] {
        guard let folder = try PluginFolder.root(root) else { return [] }
        return folder.files(removingTemporaries: true, names: false) ?? []
    }
}

extension StateDatabase {
    /// `<state-dir>/files`: each plugin's files folder is under it.
    var filesRoot: String { directory + "/files" }
}
