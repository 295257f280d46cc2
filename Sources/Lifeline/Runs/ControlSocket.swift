#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation

/// The control socket of `lifeline run`: a Unix domain stream socket, `<state-dir>/control.sock`,
/// through which `lifeline ctl` drives the run as a scenario line would. The protocol is one line
/// each way: the client sends an action (`fetch`, `push {json}`, `background`, ...), the run
/// answers `ok` or `error: MESSAGE`, and closes the connection.
public enum ControlSocket {
    public static let fileName = "control.sock"
    /// The longest action a run reads, in bytes, newline excluded: a push's payload fits with room
    /// to spare, and a client cannot make the run buffer without bound.
    public static let maxLineBytes = 4096
    /// `sun_path` holds 108 bytes, the closing NUL among them.
    static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// The socket's path for a state dir.
    public static func path(stateDirectory: String) -> String {
        (stateDirectory as NSString).appendingPathComponent(fileName)
    }

    /// The address of `path`, or an error naming the limit: a path that `sun_path` cannot hold
    /// would otherwise be cut short, and bind or connect would use another file.
    static func address(_ path: String) throws(LifelineError) -> sockaddr_un {
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathBytes else {
            throw .badInput(
                "the control socket '\(path)' is \(bytes.count) bytes long, and a Unix socket's path holds at most "
                    + "\(maxPathBytes): choose a shorter --state-dir")
        }
        guard !bytes.contains(0) else { throw .badInput("the state dir '\(path)' holds a NUL byte") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// Why a connection to `path` failed, or nil when it was made; `fd` is then connected.
    static func connect(_ fd: Int32, to path: String) throws(LifelineError) -> Int32? {
        var address = try Self.address(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0 ? nil : errno
    }

    /// A new socket. `connectTimeout` bounds a connect (a Unix socket's connect waits on the send
    /// timeout): a run that is stopped, its backlog full, must not hang the one connecting.
    static func newSocket(connectTimeout: Double? = nil) throws(LifelineError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .internalError("cannot make a Unix socket: \(errorText(errno))") }
        if let connectTimeout {
            var limit = timeval(tv_sec: Int(connectTimeout), tv_usec: Int((connectTimeout - connectTimeout.rounded(.down)) * 1e6))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        }
        return fd
    }

    static func busy(_ path: String) -> LifelineError {
        .badInput("another lifeline run is listening on \(path): a state dir serves one run at a time")
    }

    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    /// Writes all of `text`; false when the peer is gone. MSG_NOSIGNAL: a peer that hung up must
    /// not end this process with SIGPIPE.
    @discardableResult
    static func send(_ text: String, to fd: Int32, flags: Int32 = 0) -> Bool {
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | flags) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            done += n
        }
        return true
    }

    /// How reading a line ended.
    enum LineRead: Equatable {
        case line([UInt8])
        /// The peer closed the connection before sending anything.
        case nothing
        case tooLong
        case timedOut
        case failed
    }

    /// Reads one line, newline excluded, of at most `limit` bytes, within `timeout` seconds in all
    /// (so a client that sends a byte at a time cannot hold the reader longer). A peer that closes
    /// after some bytes without a newline sent those bytes as its line.
    static func readLine(_ fd: Int32, limit: Int, timeout: Double) -> LineRead {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, timeout) * 1e9)
        var line: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return .timedOut }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min((deadline - now) / 1_000_000 + 1, UInt64(Int32.max))))
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { return .failed }
            if ready == 0 { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                return line.isEmpty ? .failed : .line(line)
            }
            if n == 0 { return line.isEmpty ? .nothing : .line(line) }
            if let newline = chunk[..<n].firstIndex(of: UInt8(ascii: "\n")) {
                line += chunk[..<newline]
                return line.count > limit ? .tooLong : .line(line)
            }
            line += chunk[..<n]
            if line.count > limit { return .tooLong }
        }
    }

    /// Sends `action` to the run listening in `stateDirectory` and returns its answer: `ok`, or
    /// `error: MESSAGE`. Throws `badInput` (65) when no run listens there, `internalError` (70)
    /// when the run gave no answer within `timeout` seconds or the socket failed.
    public static func send(_ action: String, stateDirectory: String, timeout: Double) throws(LifelineError) -> String {
        let path = path(stateDirectory: stateDirectory)
        let fd = try newSocket(connectTimeout: timeout)
        defer { close(fd) }
        if let failure = try connect(fd, to: path) {
            switch failure {
            case ENOENT, ECONNREFUSED, ENOTSOCK:
                throw .badInput(
                    "no lifeline run is listening in \(stateDirectory) "
                        + "(start one with lifeline run --state-dir \(stateDirectory))")
            case EAGAIN, EWOULDBLOCK:
                throw .internalError("the run in \(stateDirectory) did not take the connection within \(seconds(timeout))")
            default:
                throw .badInput("cannot connect to \(path): \(errorText(failure))")
            }
        }
        // One line: a line break inside the action (a payload pasted over several lines) is only
        // whitespace to the parser.
        let line = String(action.map { $0 == "\n" || $0 == "\r\n" ? " " : $0 })
        // A refused write (the run stopped reading an overlong line) still leaves its answer to read.
        send(line + "\n", to: fd)
        switch readLine(fd, limit: 1 << 16, timeout: timeout) {
        case .line(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .timedOut: throw .internalError("the run in \(stateDirectory) did not answer within \(seconds(timeout))")
        case .nothing, .failed, .tooLong:
            throw .internalError("the run in \(stateDirectory) closed the connection without an answer")
        }
    }

    /// `2 s`, `0.5 s`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value)) s" : "\(value) s"
    }
}

/// Listens on the control socket for `lifeline run`: a thread accepts connections, each is served
/// on a thread of its own (a client that sends nothing holds only its own thread, until the read
/// timeout), and `answer` turns each line into the reply. At most `maxConnections` are served at
/// once; the next ones are told so and closed.
///
/// Threading: `init`, `start` and `close` from one thread; `answer` runs on connections' threads.
final class ControlListener: @unchecked Sendable {
    let path: String
    static let maxConnections = 16
    /// How long a client has to send its line once connected.
    static let readTimeout = 2.0

    private let fd: Int32
    /// The socket file's identity, so `close` removes this run's socket, never a successor's.
    private let inode: (dev: UInt64, ino: UInt64)
    private let wake: (read: Int32, write: Int32)
    private let answer: @Sendable (String) -> String
    /// The connections being served, so `close` can stop their reads.
    private let connections = Locked<Set<Int32>>([])
    private let served = DispatchGroup()
    private let acceptorDone = DispatchSemaphore(value: 0)
    private var started = false
    private var closed = false

    /// Binds the socket, only the owner may connect (0600), and listens; connections wait in the
    /// backlog until `start`. A socket left by a run that died is removed; one that a live run
    /// answers on is refused, as is a file of another kind in its place.
    init(path: String, answer: @escaping @Sendable (String) -> String) throws(LifelineError) {
        self.path = path
        self.answer = answer
        _ = try ControlSocket.address(path)
        try Self.clearStale(path)
        fd = try ControlSocket.newSocket()
        do throws(LifelineError) {
            inode = try Self.bindPrivately(fd, at: path)
            guard listen(fd, 64) == 0 else {
                let code = errno
                unlink(path)
                throw .internalError("cannot listen on \(path): \(ControlSocket.errorText(code))")
            }
            var pipeEnds: [Int32] = [0, 0]
            guard pipe(&pipeEnds) == 0 else {
                let code = errno
                unlink(path)
                throw .internalError("cannot make a pipe: \(ControlSocket.errorText(code))")
            }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            wake = (pipeEnds[0], pipeEnds[1])
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    private static func clearStale(_ path: String) throws(LifelineError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw .badInput("'\(path)' is in the way of the control socket: it is not a socket; remove it, or choose another --state-dir")
        }
        let probe = try ControlSocket.newSocket(connectTimeout: readTimeout)
        defer { Glibc.close(probe) }
        switch try ControlSocket.connect(probe, to: path) {
        case nil, .some(EAGAIN), .some(EWOULDBLOCK):
            // Connected, or a run whose backlog is full: either way a run owns it.
            throw ControlSocket.busy(path)
        case .some(ECONNREFUSED):
            unlink(path)  // its run died without removing it
        case let code?:
            throw .badInput("cannot tell whether a run still listens on \(path): \(ControlSocket.errorText(code))")
        }
    }

    /// Binds in a fresh folder only the owner can enter, narrows the socket to 0600, then links it
    /// into place: no moment where another user could connect, and no process-wide umask change.
    /// `link` fails if a run started meanwhile took the path.
    private static func bindPrivately(_ fd: Int32, at path: String) throws(LifelineError) -> (dev: UInt64, ino: UInt64) {
        let folder = (path as NSString).deletingLastPathComponent
        var template = Array((folder + "/.c-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw .internalError("cannot make a folder in \(folder) for the control socket: \(ControlSocket.errorText(errno))")
        }
        let privateFolder = String(cString: made)
        // Shorter than `path` (12 bytes after the folder against 13), so it fits whenever `path` does.
        let staging = privateFolder + "/s"
        defer {
            unlink(staging)
            rmdir(privateFolder)
        }
        var address = try ControlSocket.address(staging)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw .internalError("cannot bind \(staging): \(ControlSocket.errorText(errno))") }
        guard chmod(staging, 0o600) == 0 else {
            throw .internalError("cannot make \(staging) private: \(ControlSocket.errorText(errno))")
        }
        guard link(staging, path) == 0 else {
            if errno == EEXIST { throw ControlSocket.busy(path) }
            throw .internalError("cannot put the control socket at \(path): \(ControlSocket.errorText(errno))")
        }
        var info = stat()
        lstat(path, &info)
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// Starts accepting connections.
    func start() {
        started = true
        let thread = Thread { [self] in
            acceptLoop()
            acceptorDone.signal()
        }
        thread.name = "lifeline.control"
        thread.start()
    }

    private func acceptLoop() {
        while true {
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            let connection = accept(fd, nil, nil)
            guard connection >= 0 else {
                // Out of descriptors: give the connections being served a moment to finish,
                // rather than spin on a backlog that stays readable.
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM { usleep(10_000) }
                continue
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            let admitted = connections.withLock { open in
                guard open.count < Self.maxConnections else { return false }
                open.insert(connection)
                return true
            }
            guard admitted else {
                // Never blocks: a reply this short fits an empty socket buffer.
                ControlSocket.send("error: too many control connections at once\n", to: connection, flags: Int32(MSG_DONTWAIT))
                Glibc.close(connection)
                continue
            }
            served.enter()
            let thread = Thread { [self] in
                serve(connection)
                connections.withLock { open in
                    // Removed and closed under the lock, so `close` never shuts down a number
                    // that a new descriptor already reuses.
                    open.remove(connection)
                    Glibc.close(connection)
                }
                served.leave()
            }
            thread.name = "lifeline.control.connection"
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        let reply: String
        switch ControlSocket.readLine(connection, limit: ControlSocket.maxLineBytes, timeout: Self.readTimeout) {
        case .nothing, .failed:
            return
        case .timedOut:
            reply = "error: no action arrived within \(ControlSocket.seconds(Self.readTimeout))"
        case .tooLong:
            reply = "error: the action is longer than \(ControlSocket.maxLineBytes) bytes"
        case .line(var bytes):
            if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
            if let text = String(validating: bytes, as: UTF8.self) {
                reply = answer(text)
            } else {
                reply = "error: the action is not UTF-8 text"
            }
        }
        // The reply is one line, whatever the message holds.
        ControlSocket.send(reply.replacingOccurrences(of: "\n", with: " ") + "\n", to: connection)
    }

    /// Stops accepting, ends the reads of connections still sending, waits a moment for the
    /// replies under way to be written, and removes the socket file when it is still this run's.
    func close() {
        guard !closed else { return }
        closed = true
        if started {
            _ = Glibc.write(wake.write, "x", 1)
            acceptorDone.wait()
        }
        Glibc.close(fd)
        removeFile()
        connections.withLock { open in for connection in open { shutdown(connection, Int32(SHUT_RD)) } }
        _ = served.wait(timeout: .now() + 2)
        Glibc.close(wake.read)
        Glibc.close(wake.write)
    }

    /// Waits at most `timeout` seconds for the connections being served to be answered, for a
    /// process about to exit without `close` (from any thread: it only waits).
    func waitForReplies(timeout: Double) {
        _ = served.wait(timeout: .now() + timeout)
    }

    /// Removes the socket file at once, for a process about to exit without `close`.
    func removeFile() {
        var info = stat()
        if lstat(path, &info) == 0, UInt64(info.st_dev) == inode.dev, UInt64(info.st_ino) == inode.ino {
            unlink(path)
        }
    }
}
