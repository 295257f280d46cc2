#if canImport(Glibc)
import Glibc
#endif
import Crypto
import Foundation

/// What a reload compares to tell a changed plugin from an unchanged one: a SHA-256 over the
/// plugin folder's files, their paths and their bytes. A file added, removed, renamed or edited
/// anywhere in the folder changes it, `require`d modules and plugin.toml included.
///
/// Left out, so that what is not the plugin's code does not reload it:
/// - names that start with a dot (an editor's swap file, `.git`), and what is under them;
/// - the `scenarios` folder at the top, which only `lifeline test` reads.
///
/// A symbolic link counts by what it says (its target's path), not by what it points to: the
/// loader refuses links out of the folder, and a link is never followed here.
public enum PluginFingerprint {
    /// The fingerprint of `folder`, or nil when the folder cannot be read: a plugin without one is
    /// always taken as changed.
    public static func of(folder: String) -> String? {
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        guard add(folder, relative: "", to: &hasher, buffer: &buffer, top: true) else { return nil }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    private static func add(
        _ folder: String, relative: String, to hasher: inout SHA256, buffer: inout [UInt8], top: Bool
    ) -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return false }
        for name in names.sorted() {
            if name.hasPrefix(".") || (top && name == "scenarios") { continue }
            let path = folder + "/" + name
            let shown = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else { return false }
            // Each entry is framed by its kind, its path's length and its path, so no two trees hash alike.
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                hasher.update(data: Array("d\(shown.utf8.count):\(shown)".utf8))
                guard add(path, relative: shown, to: &hasher, buffer: &buffer, top: false) else { return false }
            case S_IFLNK:
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? ""
                hasher.update(data: Array("l\(shown.utf8.count):\(shown)\(target.utf8.count):\(target)".utf8))
            case S_IFREG:
                hasher.update(data: Array("f\(shown.utf8.count):\(shown)\(info.st_size):".utf8))
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { return false }
                defer { close(fd) }
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    guard n >= 0 else { return false }
                    if n == 0 { break }
                    buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[..<n])) }
                }
            default:
                hasher.update(data: Array("o\(shown.utf8.count):\(shown)".utf8))
            }
        }
        return true
    }
}
