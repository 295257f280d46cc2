#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The service manager's notification protocol (`sd_notify`), spoken without libsystemd: each
/// message is one datagram to the Unix socket that `NOTIFY_SOCKET` names, a path or, with a
/// leading `@`, an abstract name.
///
/// ```swift
/// if let notifier = ServiceNotifier() {   // nil unless systemd (or a test) set NOTIFY_SOCKET
///     notifier.ready(status: ServiceNotifier.statusText(state: "active", backgroundTasks: 0, generation: 1))
///     if let every = notifier.watchdogInterval { /* call notifier.watchdogPet() that often */ }
///     notifier.stopping()
/// }
/// ```
///
/// Notifying is best effort, as it is for systemd's own `sd_notify`: a socket that is gone, full
/// or refusing loses the message and nothing else happens. No send raises SIGPIPE.
///
/// Threading: any thread; it holds no state that changes after `init`.
public final class ServiceNotifier: Sendable {
    /// The socket messages leave by, made once; -1 when none could be made (nothing is sent).
    private let fd: Int32
    private let address: sockaddr_un
    /// How many bytes of `address` count: for an abstract name, exactly the family and the name,
    /// since every byte after the leading NUL is part of the name.
    private let addressLength: socklen_t
    /// Seconds between two watchdog pets: half of `WATCHDOG_USEC`, as systemd advises, so that a
    /// pet a little late still lands in time. Nil when the manager asks for none, or asks another
    /// process (`WATCHDOG_PID`).
    public let watchdogInterval: Double?
    /// The last status line sent, so the heartbeat does not repeat what `ready` just said.
    private let lastStatus = Locked<String?>(nil)

    /// The notifier for the socket that `environment`'s `NOTIFY_SOCKET` names; nil when it names
    /// none (unset or empty), or names something that is not a socket address: neither an
    /// absolute path nor `@name`, or longer than a socket address holds.
    public init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let target = environment["NOTIFY_SOCKET"], let (address, length) = Self.address(target) else {
            return nil
        }
        self.address = address
        addressLength = length
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        watchdogInterval = Self.watchdogInterval(environment, pid: getpid())
    }

    deinit { if fd >= 0 { close(fd) } }

    /// `READY=1`: the service is up. After the launch, and again after each reload.
    public func ready(status: String? = nil) { send("READY=1", status: status) }

    /// `RELOADING=1` with `MONOTONIC_USEC`, the time the reload began on CLOCK_MONOTONIC, which
    /// `Type=notify-reload` needs to tell this reload from an older one. `ready` ends it.
    public func reloading(status: String? = nil) {
        send("RELOADING=1\nMONOTONIC_USEC=\(Monotonic.nanoseconds() / 1000)", status: status)
    }

    /// `STOPPING=1`: the service is on its way out.
    public func stopping(status: String? = nil) { send("STOPPING=1", status: status) }

    /// `STATUS=…`: one line that `systemctl status` shows.
    public func status(_ text: String) { send(nil, status: text) }

    /// `WATCHDOG=1`: the service is alive. Sent from the thread whose liveness it vouches for, so
    /// that when that thread is stuck the pets stop and the manager restarts the service.
    public func watchdogPet() { send("WATCHDOG=1", status: nil) }

    /// Starts the pets (when the manager asks for them) and the status line's updates, as a host
    /// job on `executor` that runs again `every` seconds of its clock, at most half of
    /// `WATCHDOG_USEC`: the pets then vouch for the main executor itself. A handler that holds
    /// the executor holds the pets back, and a wedged host stops petting, so the manager restarts
    /// it. Each run of the job sends `STATUS=` with `status()` when it differs from the last one
    /// sent, by the heartbeat or with any other message. Call `stop` on the returned heartbeat
    /// once the executor has stopped.
    public func keepAlive(on executor: MainExecutor, every seconds: Double = 1, status: @escaping () -> String) -> Heartbeat {
        let period = max(Heartbeat.shortest, min(watchdogInterval ?? seconds, seconds))
        return Heartbeat(notifier: self, executor: executor, period: period, status: status)
    }

    /// The job that `keepAlive` started. Threading: the main executor's thread only.
    public final class Heartbeat {
        private let notifier: ServiceNotifier
        private let executor: MainExecutor
        private let period: Double
        private let status: () -> String
        private var job: MainExecutor.JobID?
        /// When the next pet is due: half of `WATCHDOG_USEC` after the last one. The beats that
        /// fall between two pets (a long watchdog, beats every second for the status) send none,
        /// so the manager hears a pet as often as it asked, not at every beat.
        private var nextPet: HostTime?

        fileprivate init(notifier: ServiceNotifier, executor: MainExecutor, period: Double, status: @escaping () -> String) {
            self.notifier = notifier
            self.executor = executor
            self.period = period
            self.status = status
            nextPet = notifier.watchdogInterval.map { executor.now.adding(seconds: max(Self.shortest, $0)) }
            schedule()
        }

        /// The shortest time between two beats, however short a watchdog the manager asks for: a
        /// `WATCHDOG_USEC` of a few microseconds must not keep the main executor busy petting.
        static let shortest = 0.001

        /// The next beat, `period` after now, or the next pet if that is sooner: after a stretch
        /// that held the executor, the late beat runs once and the next one comes a whole period
        /// later, so pets never bunch up.
        private func schedule() {
            var at = executor.now.adding(seconds: period)
            if let nextPet, nextPet < at { at = nextPet }
            job = executor.schedule(at: at) { [self] in beat() }
        }

        private func beat() {
            if let interval = notifier.watchdogInterval, let due = nextPet, executor.now >= due {
                notifier.watchdogPet()
                nextPet = executor.now.adding(seconds: max(Self.shortest, interval))
            }
            let text = status()
            if text != notifier.lastStatus.withLock({ $0 }) { notifier.status(text) }
            schedule()
        }

        /// Cancels the next beat, and with it what the job holds (the status closure and all it
        /// captured).
        public func stop() {
            if let job { executor.cancel(job) }
            job = nil
        }
    }

    /// The app's state as a status line: `active, 2 background tasks, generation 1`.
    public static func statusText(state: String, backgroundTasks: Int, generation: Int) -> String {
        "\(state), \(backgroundTasks) background task\(backgroundTasks == 1 ? "" : "s"), generation \(generation)"
    }

    /// `text` as one status line: each line break (a run of CR and LF) becomes a space, since a
    /// break would start a new assignment in the message, and NUL bytes go, since the manager
    /// would cut the message there.
    static func oneLine(_ text: String) -> String {
        var line = String.UnicodeScalarView()
        var inBreak = false
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n", "\r":
                if !inBreak { line.append(" ") }
                inBreak = true
            case "\0": continue
            default:
                line.append(scalar)
                inBreak = false
            }
        }
        return String(line)
    }

    private func send(_ message: String?, status: String?) {
        var text = message ?? ""
        if let status {
            if !text.isEmpty { text += "\n" }
            text += "STATUS=" + Self.oneLine(status)
            lastStatus.withLock { $0 = status }
        }
        guard fd >= 0, !text.isEmpty else { return }
        var address = address
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { to in
                    // MSG_NOSIGNAL: a datagram socket raises no SIGPIPE, but it costs nothing to
                    // say so. MSG_DONTWAIT: a manager too slow to read loses a message; it never
                    // holds up the main executor. EINTR is tried again; every other error is the
                    // manager's to live with, as sd_notify's are.
                    var sent: Int
                    repeat {
                        sent = sendto(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), to, addressLength)
                    } while sent < 0 && errno == EINTR
                    return sent
                }
            }
        }
    }

    /// `target` as a socket address and its length; nil when it cannot be one.
    static func address(_ target: String) -> (sockaddr_un, socklen_t)? {
        var bytes = Array(target.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@") else { return nil }
        let abstract = first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        var address = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs its closing NUL; an abstract name has none and may fill the whole field.
        guard bytes.count + (abstract ? 0 : 1) <= capacity, bytes.count > (abstract ? 1 : 0) else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            if !abstract { raw[bytes.count] = 0 }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        return (address, socklen_t(pathOffset + bytes.count + (abstract ? 0 : 1)))
    }

    /// Half of `WATCHDOG_USEC` in seconds, when it is a positive whole number of microseconds and
    /// `WATCHDOG_PID`, if set, is `pid`.
    static func watchdogInterval(_ environment: [String: String], pid: pid_t) -> Double? {
        // UInt64.max is systemd's "infinity": no watchdog, as sd_watchdog_enabled reads it.
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0, usec < .max else { return nil }
        if let owner = environment["WATCHDOG_PID"], pid_t(owner) != pid { return nil }
        return Double(usec) / 2 / 1_000_000
    }
}
