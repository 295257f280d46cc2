import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The folder that holds a transfer's file, held open: what is done in it (open, rename, remove)
/// happens in that folder, not wherever its path leads by then. Every folder on the way from the
/// plugin's files folder is checked, on the open folder itself, to lie inside the files folder
/// once links are resolved, and the file itself is opened without following a link. So a link
/// swapped in after `TransferPath.resolve` checked the name cannot lead a write outside.
///
/// Messages name files relative to the plugin's files folder, never by their full path: the
/// state dir is a temporary folder in `simulate`, whose report must not depend on it.
///
/// Threading: one thread at a time.
final class TransferFolder {
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
    ) throws(TransferError) -> (folder: TransferFolder, leaf: String) {
        var components = file.split(separator: "/").map(String.init)
        guard let leaf = components.popLast() else { throw TransferError("'\(file)' does not name a file") }
        if create { try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true) }
        // The files folder is the host's own: a link in its place was not made by the host.
        let top = Glibc.open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else {
            if errno == ELOOP || errno == ENOTDIR {
                throw TransferError("the plugin's files folder is a link or a file, not a folder")
            }
            throw TransferError("cannot open the plugin's files folder: \(errnoText())")
        }
        var folder = TransferFolder(fd: top, name: "")
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
            guard next >= 0 else { throw TransferError("cannot open the folder '\(name)': \(errnoText())") }
            folder = TransferFolder(fd: next, name: name)
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
        let file = open(leaf, O_RDONLY)
        guard file >= 0 else { throw TransferError("cannot open '\(relative(leaf))': \(errnoText())") }
        defer { close(file) }
        var st = stat()
        guard fstat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw TransferError("'\(relative(leaf))' is not a plain file")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(st.st_size))
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw TransferError("cannot read '\(relative(leaf))': \(errnoText())") }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return bytes
    }

    /// Writes `bytes` as the whole content of `leaf`.
    func write(_ leaf: String, _ bytes: [UInt8]) throws(TransferError) {
        let file = open(leaf, O_WRONLY | O_CREAT | O_TRUNC)
        guard file >= 0 else { throw TransferError("cannot write '\(relative(leaf))': \(errnoText())") }
        defer { close(file) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(file, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw TransferError("cannot write '\(relative(leaf))': \(errnoText())") }
            offset += n
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

private func errnoText() -> String { String(cString: strerror(errno)) }
