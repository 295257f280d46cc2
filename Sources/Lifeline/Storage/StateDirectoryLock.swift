#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// An exclusive `flock` on a file of the state dir, released by `release()` or when the process
/// ends (the kernel drops it with the descriptor, also after SIGKILL, so a dead process never
/// leaves a state dir locked).
///
/// Two locks guard a state dir (docs/storage.md):
/// - `lifeline.lock`: whoever opens the database holds it while it opens and migrates it, then
///   lets go. Without it, two processes starting together on a fresh state dir both see no
///   tables and both create them, and the slower one fails (`table store already exists`).
/// - `run.lock`: a `lifeline run` holds it for its whole life, so a second run on the same state
///   dir is refused at once. Readers (`lifeline transfers`, `simulate --state-dir`) never take it,
///   so they work beside a run.
final class StateDirectoryLock: Sendable {
    /// The lock around opening and migrating the database.
    static let openingFileName = "lifeline.lock"
    /// The lock a live run holds for its life.
    static let runFileName = "run.lock"
    /// How long opening waits for another process to finish migrating: far more than migrating
    /// takes, yet a stopped process that holds the lock does not hang this one.
    static let openingWait = 10.0

    private let fd: Locked<Int32>

    private init(fd: Int32) { self.fd = Locked(fd) }

    deinit { release() }

    /// Lets go of the lock; harmless twice.
    func release() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            close(fd)
            fd = -1
        }
    }

    /// How taking the lock ended.
    enum Outcome {
        case taken(StateDirectoryLock)
        /// Another process holds it.
        case held
    }

    /// Takes the lock on `path`, waiting up to `wait` seconds while another process holds it
    /// (0: not at all). The file is made (mode 0600) when missing; a link or a file of another
    /// kind there is refused, never followed.
    static func take(_ path: String, waiting wait: Double) throws(LifelineError) -> Outcome {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw .badInput("cannot open the lock file '\(path)': \(String(cString: strerror(code)))")
        }
        var status = stat()
        guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw .badInput("the lock file '\(path)' is not a plain file")
        }
        let deadline = Monotonic.nanoseconds() + UInt64(max(0, wait) * 1e9)
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return .taken(StateDirectoryLock(fd: fd)) }
            let code = errno
            if code == EINTR { continue }
            guard code == EWOULDBLOCK else {
                close(fd)
                throw .badInput("cannot lock '\(path)': \(String(cString: strerror(code)))")
            }
            guard Monotonic.nanoseconds() < deadline else {
                close(fd)
                return .held
            }
            usleep(2_000)
        }
    }
}

/// A live run's hold on its state dir (`StateDatabase.claimForRun`).
public final class StateDirectoryClaim: Sendable {
    private let lock: StateDirectoryLock

    init(lock: StateDirectoryLock) { self.lock = lock }

    /// Lets another run have the state dir.
    public func release() { lock.release() }
}
