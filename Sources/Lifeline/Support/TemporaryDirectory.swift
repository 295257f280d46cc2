#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A folder made for one run and removed when the run is over: simulate's and check's state dirs
/// when no `--state-dir` is given.
///
/// `remove()` removes it on the ordinary path. If the process ends by `exit()` first (the
/// watchdog's exit for code it cannot stop, an error exit, a signal the CLI turns into an exit),
/// an `atexit` handler removes every folder not yet removed. Only a SIGKILL can leave one behind.
///
/// Threading: any thread.
public final class TemporaryDirectory: Sendable {
    /// The folder's absolute path.
    public let path: String

    /// Makes a new folder `<prefix>XXXXXX` in the temporary folder (`$TMPDIR`, else /tmp).
    public init(prefix: String) throws(LifelineError) {
        var template = Array((NSTemporaryDirectory() as NSString).appendingPathComponent(prefix + "XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw .internalError("cannot make a temporary folder: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
        TemporaryDirectory.register(path)
    }

    deinit { remove() }

    /// Removes the folder and everything in it; later calls do nothing.
    public func remove() {
        let owned = TemporaryDirectory.live.withLock { $0.remove(path) != nil }
        if owned { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Folders made and not yet removed.
    private static let live = Locked<Set<String>>([])

    private static let exitHandler: Void = {
        atexit {
            // Another thread may still be inside the run (stuck in plugin code): take the paths
            // first, then remove them outside the lock.
            let paths = TemporaryDirectory.live.withLock { paths in
                defer { paths.removeAll() }
                return paths
            }
            for path in paths { try? FileManager.default.removeItem(atPath: path) }
        }
    }()

    private static func register(_ path: String) {
        _ = exitHandler
        _ = live.withLock { $0.insert(path) }
    }
}
