import Foundation
import Testing

@testable import Lifeline

#if canImport(Glibc)
import Glibc
#endif

/// The service manager's notifications, received on a real Unix datagram socket as systemd would
/// receive them.
@Suite struct ServiceNotifierTests {
    /// A bound datagram socket standing in for the manager's; `target` is what NOTIFY_SOCKET holds.
    final class Manager {
        let fd: Int32
        let target: String
        private let directory: String?

        /// Bound to a path in a fresh temporary folder.
        init() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-notify-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            self.directory = directory
            target = directory + "/notify.sock"
            fd = try Self.bound(Array(target.utf8) + [0])
        }

        /// Bound to an abstract name, `@lifeline-test-…`.
        init(abstract: ()) throws {
            directory = nil
            target = "@lifeline-test-\(UUID().uuidString.prefix(12))"
            fd = try Self.bound([0] + Array(target.utf8.dropFirst()))
        }

        /// A datagram socket bound to `name` (sun_path's bytes), its address exactly that long.
        private static func bound(_ name: [UInt8]) throws -> Int32 {
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw POSIXError(.EIO) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
            let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.count)
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            guard result == 0 else {
                close(fd)
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            var wait = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            return fd
        }

        deinit {
            close(fd)
            if let directory { try? FileManager.default.removeItem(atPath: directory) }
        }

        var environment: [String: String] { ["NOTIFY_SOCKET": target] }

        /// The next datagram, or nil when none came within 5 s.
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n >= 0 else { return nil }
            return String(decoding: buffer[..<n], as: UTF8.self)
        }

        /// Every datagram waiting now, without waiting for more.
        func drain() -> [String] {
            var all: [String] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if n < 0 { return all }
                all.append(String(decoding: buffer[..<n], as: UTF8.self))
            }
        }

        /// Whether a datagram is waiting, without waiting for one.
        var hasPending: Bool {
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_DONTWAIT) | Int32(MSG_PEEK)) >= 0
        }
    }

    @Test func ready_sendsOneDatagram_toAPath() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment))
        notifier.ready()
        #expect(manager.receive() == "READY=1")
        #expect(!manager.hasPending)
    }

    @Test func ready_reachesAnAbstractName_whoseAddressHasNoTrailingBytes() throws {
        // The manager binds exactly "\0lifeline-test-…": had the notifier sent sizeof(sockaddr_un),
        // the trailing zeros would be part of the name, another name, and nothing would arrive.
        let manager = try Manager(abstract: ())
        let notifier = try #require(ServiceNotifier(environment: manager.environment))
        notifier.ready()
        #expect(manager.receive() == "READY=1")
        notifier.watchdogPet()
        #expect(manager.receive() == "WATCHDOG=1")
    }

    @Test func ready_withAStatus_sendsBothInOneDatagram() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment))
        notifier.ready(status: ServiceNotifier.statusText(state: "active", backgroundTasks: 2, generation: 1))
        #expect(manager.receive() == "READY=1\nSTATUS=active, 2 background tasks, generation 1")
        #expect(!manager.hasPending)
    }

    @Test func reloading_sendsTheMonotonicTimeItBegan() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment))
        let before = Self.monotonicMicroseconds()
        notifier.reloading()
        let after = Self.monotonicMicroseconds()
        let message = try #require(manager.receive())
        let lines = message.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2)
        #expect(lines.first == "RELOADING=1")
        let stamp = try #require(lines.last.flatMap { $0.hasPrefix("MONOTONIC_USEC=") ? UInt64($0.dropFirst(15)) : nil })
        #expect(stamp >= before && stamp <= after)
    }

    @Test func stoppingAndWatchdog_sendTheirAssignments() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment))
        notifier.stopping()
        notifier.watchdogPet()
        notifier.stopping(status: "ended")
        #expect(manager.receive() == "STOPPING=1")
        #expect(manager.receive() == "WATCHDOG=1")
        #expect(manager.receive() == "STOPPING=1\nSTATUS=ended")
    }

    @Test func status_isOneLine_withItsLineBreaksAndNulsGone() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment))
        notifier.status("background\nRELOADING=1\r\nsaving\0 now")
        #expect(manager.receive() == "STATUS=background RELOADING=1 saving now")
    }

    @Test func statusText_countsTasksInPlainWords() {
        #expect(ServiceNotifier.statusText(state: "active", backgroundTasks: 2, generation: 1) == "active, 2 background tasks, generation 1")
        #expect(ServiceNotifier.statusText(state: "background", backgroundTasks: 1, generation: 3) == "background, 1 background task, generation 3")
        #expect(ServiceNotifier.statusText(state: "suspended", backgroundTasks: 0, generation: 2) == "suspended, 0 background tasks, generation 2")
    }

    @Test func watchdogInterval_isHalfOfWatchdogUsec_forThisProcess() throws {
        let socket = ["NOTIFY_SOCKET": "/nonexistent/notify.sock"]
        func interval(_ extra: [String: String]) -> Double? {
            ServiceNotifier(environment: socket.merging(extra) { $1 })?.watchdogInterval
        }
        #expect(interval(["WATCHDOG_USEC": "4000000"]) == 2.0)
        #expect(interval(["WATCHDOG_USEC": "200000"]) == 0.1)
        #expect(interval(["WATCHDOG_USEC": "4000000", "WATCHDOG_PID": String(getpid())]) == 2.0)
        #expect(interval(["WATCHDOG_USEC": "4000000", "WATCHDOG_PID": String(getpid() + 1)]) == nil)
        #expect(interval(["WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "nobody"]) == nil)
        #expect(interval(["WATCHDOG_USEC": "0"]) == nil)
        #expect(interval(["WATCHDOG_USEC": "-5"]) == nil)
        #expect(interval(["WATCHDOG_USEC": "2s"]) == nil)
        #expect(interval([:]) == nil)
    }

    @Test func noNotifier_withoutASocketToNotify() {
        #expect(ServiceNotifier(environment: [:]) == nil)
        #expect(ServiceNotifier(environment: ["NOTIFY_SOCKET": ""]) == nil)
        #expect(ServiceNotifier(environment: ["NOTIFY_SOCKET": "@"]) == nil)
        #expect(ServiceNotifier(environment: ["NOTIFY_SOCKET": "relative/notify.sock"]) == nil)
        #expect(ServiceNotifier(environment: ["NOTIFY_SOCKET": "/" + String(repeating: "x", count: 200)]) == nil)
        #expect(ServiceNotifier(environment: ["WATCHDOG_USEC": "4000000"]) == nil)
    }

    @Test func aSocketThatIsGone_losesTheMessage_andNothingElse() throws {
        // A path that never existed, and one whose manager went away: best effort, no crash.
        let missing = try #require(ServiceNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/lifeline/notify.sock"]))
        missing.ready(status: "active")
        missing.reloading()
        missing.watchdogPet()
        missing.stopping()
        var manager: Manager? = try Manager()
        let target = manager!.target
        manager = nil
        let gone = try #require(ServiceNotifier(environment: ["NOTIFY_SOCKET": target]))
        gone.ready()
        gone.stopping()
    }

    // The heartbeat on a virtual clock: when it beats is a matter of the executor's jobs alone.

    @Test func heartbeat_petsEveryHalfOfWatchdogUsec_andSendsTheStatusWhenItChanges() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment.merging(["WATCHDOG_USEC": "200000"]) { $1 }))
        let executor = MainExecutor(clock: VirtualClock())
        var state = "active"
        let heartbeat = notifier.keepAlive(on: executor) { state }
        executor.schedule(at: .seconds(0.45)) { state = "background" }
        // Read halfway too: a Unix datagram socket queues only about ten datagrams.
        executor.run(until: .seconds(0.5), shouldStop: { false })
        var received = manager.drain()
        executor.run(until: .seconds(1), shouldStop: { false })
        received += manager.drain()
        heartbeat.stop()
        let pet = "WATCHDOG=1"
        #expect(received == [
            pet, "STATUS=active", pet, pet, pet,  // 0.1 to 0.4
            pet, "STATUS=background", pet, pet, pet, pet, pet,  // 0.5 to 1.0
        ])
    }

    @Test func heartbeat_withAWatchdogLongerThanTwoSeconds_petsEveryHalfOfIt_notAtEachStatusBeat() throws {
        // WatchdogSec=4s: a pet every 2 s, as the manager asked; the status is still looked at
        // every second. A beat that petted each time would send six pets by 6.5 s, not three.
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment.merging(["WATCHDOG_USEC": "4000000"]) { $1 }))
        let executor = MainExecutor(clock: VirtualClock())
        var pets: [Double] = []
        var beats: [Double] = []
        let heartbeat = notifier.keepAlive(on: executor) {
            beats.append(executor.now.seconds)
            return "active"
        }
        for second in 1...6 {
            executor.run(until: .seconds(Double(second) + 0.5), shouldStop: { false })
            if manager.drain().contains("WATCHDOG=1") { pets.append(Double(second)) }
        }
        heartbeat.stop()
        #expect(pets == [2, 4, 6])
        #expect(beats == [1, 2, 3, 4, 5, 6])
    }

    @Test func heartbeat_withAWatchdogOfMicroseconds_beatsAtMostEveryMillisecond() throws {
        // WATCHDOG_USEC=2: a pet every microsecond cannot be kept; the executor keeps its jobs.
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment.merging(["WATCHDOG_USEC": "2"]) { $1 }))
        let executor = MainExecutor(clock: VirtualClock())
        var beats = 0
        let heartbeat = notifier.keepAlive(on: executor) {
            beats += 1
            return "active"
        }
        executor.run(until: .seconds(0.0055), shouldStop: { false })
        heartbeat.stop()
        #expect(beats == 5)
        #expect(manager.drain().filter { $0 == "WATCHDOG=1" }.count == 5)
    }

    @Test func watchdogUsecOfInfinity_asksForNoPets() {
        // systemd writes USEC_INFINITY, the largest 64-bit number, for "no watchdog".
        let environment = ["NOTIFY_SOCKET": "/nonexistent/notify.sock", "WATCHDOG_USEC": String(UInt64.max)]
        #expect(ServiceNotifier(environment: environment)?.watchdogInterval == nil)
    }

    @Test func heartbeat_doesNotRepeatTheStatusThatReadyCarried() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment.merging(["WATCHDOG_USEC": "200000"]) { $1 }))
        let executor = MainExecutor(clock: VirtualClock())
        notifier.ready(status: "active")
        let heartbeat = notifier.keepAlive(on: executor) { "active" }
        executor.run(until: .seconds(0.25), shouldStop: { false })
        heartbeat.stop()
        #expect(manager.drain() == ["READY=1\nSTATUS=active", "WATCHDOG=1", "WATCHDOG=1"])
    }

    @Test func heartbeat_withoutAWatchdog_sendsOnlyStatusChanges_atMostEverySecond() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment))
        let executor = MainExecutor(clock: VirtualClock())
        var tasks = 0
        var beats: [Double] = []
        let heartbeat = notifier.keepAlive(on: executor) {
            beats.append(executor.now.seconds)
            return ServiceNotifier.statusText(state: "background", backgroundTasks: tasks, generation: 1)
        }
        executor.schedule(at: .seconds(1.5)) { tasks = 2 }
        executor.run(until: .seconds(3.5), shouldStop: { false })
        heartbeat.stop()
        #expect(beats == [1, 2, 3])
        #expect(manager.drain() == [
            "STATUS=background, 0 background tasks, generation 1", "STATUS=background, 2 background tasks, generation 1",
        ])
    }

    @Test func heartbeat_aJobThatHoldsTheExecutor_holdsThePetsBack_andTheyDoNotBunchUpAfter() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment.merging(["WATCHDOG_USEC": "200000"]) { $1 }))
        let clock = VirtualClock()
        let executor = MainExecutor(clock: clock)
        var beats: [Double] = []
        let heartbeat = notifier.keepAlive(on: executor) {
            beats.append(executor.now.seconds)
            return "active"
        }
        // A handler that holds the executor from 0.25 s to 0.85 s.
        executor.schedule(at: .seconds(0.25)) { clock.advance(to: .seconds(0.85)) }
        executor.run(until: .seconds(1), shouldStop: { false })
        heartbeat.stop()
        // None while it held the executor; the late one once, then a whole period later.
        #expect(beats == [0.1, 0.2, 0.85, 0.95])
        #expect(manager.drain().filter { $0 == "WATCHDOG=1" }.count == 4)
    }

    @Test func heartbeat_stop_cancelsTheNextBeat_andLetsGoOfWhatItHolds() throws {
        let manager = try Manager()
        let notifier = try #require(ServiceNotifier(environment: manager.environment.merging(["WATCHDOG_USEC": "200000"]) { $1 }))
        let executor = MainExecutor(clock: VirtualClock())
        final class Held {}
        weak var held: Held?
        do {
            let object = Held()
            held = object
            let heartbeat = notifier.keepAlive(on: executor) { _ = object; return "active" }
            executor.run(until: .seconds(0.15), shouldStop: { false })
            heartbeat.stop()
        }
        #expect(held == nil)
        #expect(!executor.hasPendingJobs)
        executor.run(until: .seconds(1), shouldStop: { false })
        #expect(manager.drain() == ["WATCHDOG=1", "STATUS=active"])
    }

    static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }
}
