import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The folder that holds a transfer's file or one of `PluginFiles`, held open: what is done in it
/// (open, rename, remove) happens in that folder, not wherever its path leads by then. Every folder on the way from the
/// plugin's files folder is checked, on the open folder itself, to lie inside the files folder
/// once links are resolved, and the file itself is opened without following a link. So a link
/// swapped in after `TransferPath.resolve` checked the name cannot lead a write outside.
///
/// Messages name files relative to the plugin's files folder, never by their full path: the
/// state dir is a temporary folder in `simulate`, whose report must not depend on it.
///
/// Threading: one thread at a time.
final class PluginFolder {
    let fd: Int32
    /// The folder, relative to the plugin's files folder ("" for the files folder itself).
    let name: String

    private init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
    }

    deinit { close(fd) }

    /// Opens the folder that holds `file` (a name `TransferPath.resolve` accepted) under `root`,
    /// the plugin's files folder, and returns it with the file's last component. With `create`,
    /// the files folder and the folders on the way are made when missing.
    static func holding(
        _ file: String, in root: String, create: Bool
    ) throws(TransferError) -> (folder: PluginFolder, leaf: String) {
        // With `missing: nil`, a folder that is not there throws rather than giving nil.
        try locate(file, in: root, create: create, missing: nil)!
    }

    /// As `holding` without `create`, but nil when the files folder or a folder on the way is not
    /// there (or is a file): then no file of that name exists either.
    static func existing(
        _ file: String, in root: String
    ) throws(TransferError) -> (folder: PluginFolder, leaf: String)? {
        try locate(file, in: root, create: false, missing: [ENOENT, ENOTDIR])
    }

    /// How many folders on the way to `file` are not there yet: what a write to it would make.
    static func missingFolders(_ file: String, in root: String) throws(TransferError) -> Int {
        let folders = file.split(separator: "/").dropLast()
        var path = root
        for (i, folder) in folders.enumerated() {
            path += "/" + folder
            var st = stat()
            if lstat(path, &st) != 0 { return folders.count - i }
        }
        return 0
    }

    /// The plugin's files folder itself, or nil when it is not there yet.
    static func root(_ root: String) throws(TransferError) -> PluginFolder? {
        let top = Glibc.open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else {
            if errno == ENOENT { return nil }
            throw rootError()
        }
        return PluginFolder(fd: top, name: "")
    }

    /// Why the files folder could not be opened, from errno.
    private static func rootError() -> TransferError {
        if errno == ELOOP || errno == ENOTDIR {
            return TransferError("the plugin's files folder is a link or a file, not a folder")
        }
        return TransferError("cannot open the plugin's files folder: \(errnoText())")
    }

    /// The walk of `holding` and `existing`: nil when an open fails with an errno in `missing`.
    private static func locate(
        _ file: String, in root: String, create: Bool, missing: Set<Int32>?
    ) throws(TransferError) -> (folder: PluginFolder, leaf: String)? {
        var components = file.split(separator: "/").map(String.init)
        guard let leaf = components.popLast() else { throw TransferError("'\(file)' does not name a file") }
        if create { try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true) }
        // The files folder is the host's own: a link in its place was not made by the host.
        let top = Glibc.open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else {
            if missing?.contains(errno) == true && errno != ENOTDIR { return nil }
            throw rootError()
        }
        var folder = PluginFolder(fd: top, name: "")
        guard let realRoot = realPath(of: top, named: root) else {
            throw TransferError("cannot tell where the plugin's files folder is: \(errnoText())")
        }
        var path = root
        for component in components {
            let name = folder.name.isEmpty ? component : folder.name + "/" + component
            path += "/" + component
            var next = openat(folder.fd, component, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if next < 0, errno == ENOENT, create {
                if mkdirat(folder.fd, component, 0o755) != 0 && errno != EEXIST {
                    throw TransferError("cannot make the folder '\(name)': \(errnoText())")
                }
                next = openat(folder.fd, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            guard next >= 0 else {
                if missing?.contains(errno) == true { return nil }
                throw TransferError("cannot open the folder '\(name)': \(errnoText())")
            }
            folder = PluginFolder(fd: next, name: name)
            guard let real = realPath(of: next, named: path), real == realRoot || real.hasPrefix(realRoot + "/")
            else { throw TransferError("'\(file)' leads outside the plugin's files folder (through a link)") }
        }
        return (folder, leaf)
    }

    /// The name of `leaf` in this folder, relative to the plugin's files folder, for messages.
    func relative(_ leaf: String) -> String { name.isEmpty ? leaf : name + "/" + leaf }

    /// Opens `leaf` in this folder; a link there is refused (ELOOP), never followed.
    func open(_ leaf: String, _ flags: Int32, mode: mode_t = 0o644) -> Int32 {
        openat(fd, leaf, flags | O_NOFOLLOW | O_CLOEXEC, mode)
    }

    /// The size of the plain file `leaf`, or nil.
    func size(of leaf: String) -> Int64? {
        var st = stat()
        guard fstatat(fd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    /// The whole content of the plain file `leaf`.
    func read(_ leaf: String) throws(TransferError) -> [UInt8] {
        switch try read(leaf, limit: .max) {
        case .bytes(let bytes): return bytes
        case .missing: throw TransferError("cannot open '\(relative(leaf))': \(String(cString: strerror(ENOENT)))")
        case .tooLarge: throw TransferError("'\(relative(leaf))' is too large to read")
        }
    }

    /// The content of the plain file `leaf`, when it holds at most `limit` bytes: a caller that
    /// must bound what it holds is never made to hold more, even by a file that grows meanwhile.
    func read(_ leaf: String, limit: Int) throws(TransferError) -> BoundedRead {
        guard let file = try openForReading(leaf) else { return .missing }
        guard file.size <= limit else { return .tooLarge(file.size) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(file.size))
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(file.fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw file.readError() }
            if n == 0 { break }
            guard bytes.count + n <= limit else { return .tooLarge(Int64(bytes.count + n)) }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return .bytes(bytes)
    }

    /// Opens the plain file `leaf` to read, and sizes it; nil when there is none of that name.
    /// For a caller that reads the descriptor itself (`lifeline.files.read` reads it straight into
    /// a Lua string).
    func openForReading(_ leaf: String) throws(TransferError) -> OpenFile? {
        // Non-blocking: a FIFO put there from outside must not hang the host at the open.
        let file = open(leaf, O_RDONLY | O_NONBLOCK)
        guard file >= 0 else {
            if errno == ENOENT { return nil }
            throw TransferError("cannot open '\(relative(leaf))': \(errnoText())")
        }
        let opened = OpenFile(fd: file, name: relative(leaf))
        var st = stat()
        guard fstat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw TransferError("'\(relative(leaf))' is not a plain file")
        }
        opened.size = Int64(st.st_size)
        return opened
    }

    /// Writes `bytes` as the whole content of `leaf`.
    func write(_ leaf: String, _ bytes: [UInt8]) throws(TransferError) {
        let file = open(leaf, O_WRONLY | O_CREAT | O_TRUNC)
        guard file >= 0 else { throw TransferError("cannot write '\(relative(leaf))': \(errnoText())") }
        defer { close(file) }
        // withUnsafeBytes rethrows untyped errors, so the typed one is carried out by hand.
        var failure: TransferError?
        bytes.withUnsafeBytes { buffer in
            do throws(TransferError) { try writeAll(file, buffer, leaf) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func writeAll(_ file: Int32, _ bytes: UnsafeRawBufferPointer, _ leaf: String) throws(TransferError) {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(file, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw TransferError("cannot write '\(relative(leaf))': \(errnoText())") }
            offset += n
        }
    }


    /// Replaces `leaf` with `bytes` atomically: they go to a temporary in this folder, reach the
    /// disk (fsync), and the temporary is renamed over `leaf`. A failure at any step removes the
    /// temporary and leaves `leaf` as it was; after a crash, the temporary is what is left over,
    /// never a cut `leaf`.
    func replace(_ leaf: String, with bytes: UnsafeRawBufferPointer) throws(TransferError) {
        var temporary = ""
        var file: Int32 = -1
        for _ in 0..<8 where file < 0 {
            temporary = TransferPath.temporaryPrefix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            file = open(temporary, O_WRONLY | O_CREAT | O_EXCL)
            if file < 0 && errno != EEXIST { break }
        }
        guard file >= 0 else { throw TransferError("cannot write '\(relative(leaf))': \(errnoText())") }
        do throws(TransferError) {
            defer { close(file) }
            try writeAll(file, bytes, leaf)
            guard fsync(file) == 0 else { throw TransferError("cannot write '\(relative(leaf))': \(errnoText())") }
            guard renameat(fd, temporary, fd, leaf) == 0 else {
                let why = errno == EISDIR ? "it is a folder" : errnoText()
                throw TransferError("cannot write '\(relative(leaf))': \(why)")
            }
        } catch {
            remove(temporary)
            throw error
        }
        // The rename itself reaches the disk with the folder.
        fsync(fd)
    }

    /// Every plain file under this folder, with its size and its name relative to this folder,
    /// and every folder under it, with no name and `isFolder` (the quota counts them too).
    /// Links are neither followed nor listed; a name that is not UTF-8 (no plugin call makes one)
    /// is counted with no name. With `removingTemporaries`, the temporaries of `replace` are
    /// removed, not listed: the caller knows no write is under way.
    ///
    /// Without `names`, no name is made (the quota needs only sizes). With `nameBytes`, the walk
    /// stops, giving nil, once the names would take more bytes than that: a caller that must
    /// bound what it holds never holds a longer list.
    func files(
        removingTemporaries: Bool, names: Bool = true, nameBytes: Int = .max
    ) -> [(name: String?, size: Int64, isFolder: Bool)]? {
        var found: [(name: String?, size: Int64, isFolder: Bool)] = []
        var budget = nameBytes
        PluginFolder.walk(
            dup(fd), prefix: names ? "" : nil, depth: 0, removingTemporaries: removingTemporaries, budget: &budget,
            into: &found)
        return budget < 0 ? nil : found
    }

    /// Folders deeper than this are not walked: no plugin call makes them (a name has at most
    /// `TransferPath.maximumParts` parts).
    private static let maximumDepth = 64

    /// Walks the folder open as `fd`, which it closes.
    private static func walk(
        _ fd: Int32, prefix: String?, depth: Int, removingTemporaries: Bool, budget: inout Int,
        into found: inout [(name: String?, size: Int64, isFolder: Bool)]
    ) {
        guard fd >= 0 else { return }
        guard let dir = fdopendir(fd) else {
            close(fd)
            return
        }
        defer { closedir(dir) }
        while budget >= 0, let entry = readdir(dir) {
            let raw = withUnsafeBytes(of: entry.pointee.d_name) { buffer in Array(buffer.prefix { $0 != 0 }) }
            if raw == [UInt8(ascii: ".")] || raw == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            let cName = raw.map { CChar(bitPattern: $0) } + [0]
            var st = stat()
            guard fstatat(dirfd(dir), cName, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            let leaf = String(validating: raw, as: UTF8.self)
            let name = prefix.flatMap { p in leaf.map { p.isEmpty ? $0 : p + "/" + $0 } }
            switch st.st_mode & S_IFMT {
            case S_IFREG:
                if removingTemporaries, leaf?.hasPrefix(TransferPath.temporaryPrefix) == true {
                    unlinkat(dirfd(dir), cName, 0)
                    continue
                }
                if let name { budget -= name.utf8.count }
                found.append((name, Int64(st.st_size), false))
            case S_IFDIR where depth < maximumDepth:
                found.append((nil, 0, true))
                let child = openat(dirfd(dir), cName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                walk(
                    child, prefix: name, depth: depth + 1, removingTemporaries: removingTemporaries, budget: &budget,
                    into: &found)
            default: continue
            }
        }
    }

    /// Renames `from` to `to`, both in this folder.
    func rename(_ from: String, to: String) throws(TransferError) {
        guard renameat(fd, from, fd, to) == 0 else {
            throw TransferError("cannot rename '\(relative(from))' to '\(relative(to))': \(errnoText())")
        }
    }

    /// Removes `leaf` from this folder, if it is there.
    func remove(_ leaf: String) { unlinkat(fd, leaf, 0) }

    /// The real path of an open folder, as the kernel names it; without /proc, the real path of
    /// `path`, if that is still the same folder.
    private static func realPath(of fd: Int32, named path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, Int(PATH_MAX))
        if n > 0 { return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        var named = stat(), open = stat()
        guard stat(real, &named) == 0, fstat(fd, &open) == 0, named.st_dev == open.st_dev, named.st_ino == open.st_ino
        else { return nil }
        return String(cString: real)
    }
}

/// A plain file open to read; closed when this is freed.
package final class OpenFile {
    /// The descriptor, open read-only.
    package let fd: Int32
    /// Its name relative to the plugin's files folder, for messages.
    package let name: String
    /// Its size when it was opened (it may change while it is read).
    package internal(set) var size: Int64 = 0

    init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
    }

    deinit { close(fd) }

    /// Goes back to its start and sizes it again (a file that grew while it was read).
    package func rewind() -> Bool {
        var st = stat()
        guard lseek(fd, 0, SEEK_SET) == 0, fstat(fd, &st) == 0 else { return false }
        size = Int64(st.st_size)
        return true
    }

    /// Why reading it failed, from errno.
    package func readError() -> TransferError { TransferError("cannot read '\(name)': \(errnoText())") }
}

/// What a read bounded by a limit found.
package enum BoundedRead {
    case bytes([UInt8])
    /// No file has that name.
    case missing
    /// The file holds more than the limit (this many bytes, at least); nothing of it was kept.
    case tooLarge(Int64)
}

private func errnoText() -> String { String(cString: strerror(errno)) }
