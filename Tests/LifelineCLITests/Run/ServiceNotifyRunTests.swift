import Foundation
import Lifeline
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `lifeline run` under a service manager: a real run in a subprocess tells a Unix datagram
/// socket the test bound, as systemd's would be, what it is doing (sd_notify).
@Suite struct ServiceNotifyRunTests {
    /// The manager's end: a datagram socket in a fresh folder, read on a thread of its own, each
    /// message stamped with CLOCK_MONOTONIC when it arrived.
    final class Manager: @unchecked Sendable {
        let path: String
        private let directory: String
        private let fd: Int32
        private let received = Locked<[(at: UInt64, text: String)]>([])
        private let stopped = Locked(false)
        private let done = DispatchSemaphore(value: 0)

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-sd-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            path = directory + "/notify.sock"
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw POSIXError(.EIO) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let name = Array(path.utf8) + [0]
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard bound == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            // The reader wakes now and then to see whether the test is done with it.
            var wait = timeval(tv_sec: 0, tv_usec: 100_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            let reader = Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !stopped.withLock({ $0 }) {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    guard n > 0 else { continue }
                    let message = (at: Self.monotonicMicroseconds(), text: String(decoding: buffer[..<n], as: UTF8.self))
                    received.withLock { $0.append(message) }
                }
                done.signal()
            }
            reader.start()
        }

        deinit {
            stopped.withLock { $0 = true }
            done.wait()
            close(fd)
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Every message so far, in the order it arrived.
        var messages: [(at: UInt64, text: String)] { received.withLock { $0 } }

        /// Waits until `count` messages hold the assignment `line`, or 20 s pass.
        @discardableResult
        func waitFor(_ line: String, count: Int = 1, timeout: TimeInterval = 20) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if messages.filter({ Self.lines($0.text).contains(Substring(line)) }).count >= count { return true }
                usleep(5_000)
            }
            return false
        }

        static func lines(_ text: String) -> [Substring] { text.split(separator: "\n") }

        static func monotonicMicroseconds() -> UInt64 {
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
        }
    }

    /// `lifeline run` with NOTIFY_SOCKET and WATCHDOG_USEC set as systemd sets them.
    static func service(_ arguments: [String], manager: Manager, watchdogUsec: Int) throws -> RunTests.Live {
        try RunTests.Live(
            arguments, environment: ["NOTIFY_SOCKET": manager.path, "WATCHDOG_USEC": String(watchdogUsec)],
            unset: ["WATCHDOG_PID"])
    }

    @Test func run_tellsTheManager_ready_watchdog_reloading_ready_stopping_inOrder() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", #"lifeline.on("didBecomeActive", function() end)"#)
        let manager = try Manager()
        // WATCHDOG_USEC 0.2 s: a pet every 0.1 s.
        let service = try Self.service(["--plugins", ws.plugins, "--state-dir", ws.path + "/state"], manager: manager, watchdogUsec: 200_000)
        try #require(manager.waitFor("READY=1"))
        try #require(manager.waitFor("WATCHDOG=1", count: 3))

        let beforeReload = Manager.monotonicMicroseconds()
        service.signal(SIGHUP)
        try #require(manager.waitFor("RELOADING=1"))
        try #require(manager.waitFor("READY=1", count: 2))
        let afterReload = Manager.monotonicMicroseconds()
        let petsSoFar = manager.messages.filter { Manager.lines($0.text).contains("WATCHDOG=1") }.count
        #expect(manager.waitFor("WATCHDOG=1", count: petsSoFar + 2))

        service.signal(SIGTERM)
        #expect(service.wait() == 0, "\(service.stderr.text())")
        #expect(manager.waitFor("STOPPING=1"))

        let messages = manager.messages.map { Manager.lines($0.text) }
        // The lifecycle's messages, in the order they arrived; the pets and bare STATUS aside.
        let steps = messages.compactMap { lines in
            lines.first { ["READY=1", "RELOADING=1", "STOPPING=1"].contains($0) }.map(String.init)
        }
        #expect(steps == ["READY=1", "RELOADING=1", "READY=1", "STOPPING=1"])
        // RELOADING=1 comes with the time the reload began, on the machine's monotonic clock.
        let reloading = try #require(messages.first { $0.contains("RELOADING=1") })
        let stamp = try #require(reloading.first { $0.hasPrefix("MONOTONIC_USEC=") }.flatMap { UInt64($0.dropFirst(15)) })
        #expect(stamp >= beforeReload && stamp <= afterReload)
        // Pets before the reload and after it: the run keeps petting across a reload.
        let firstReady = try #require(messages.firstIndex { $0.contains("READY=1") })
        let reloadIndex = try #require(messages.firstIndex { $0.contains("RELOADING=1") })
        let stopIndex = try #require(messages.firstIndex { $0.contains("STOPPING=1") })
        try #require(firstReady < reloadIndex && reloadIndex < stopIndex)
        #expect(messages[firstReady..<reloadIndex].filter { $0.contains("WATCHDOG=1") }.count >= 3)
        #expect(messages[reloadIndex..<stopIndex].filter { $0.contains("WATCHDOG=1") }.count >= 2)
        // Every message is assignments, one a line.
        for lines in messages {
            #expect(lines.allSatisfy { $0.contains("=") }, "\(lines)")
        }
    }

    @Test func run_stopsPetting_whileAHandlerBlocksTheMainExecutor() throws {
        let ws = try Workspace()
        // A timer that holds the main executor for 3 s of real time; the transition limit is
        // lifted above that, so the host's own watchdog lets it finish.
        try ws.plugin("spinner", """
            lifeline.after(1, function()
              lifeline.log.info("spin begins")
              local began = lifeline.now()
              while lifeline.now() - began < 3 do end
              lifeline.log.info("spin ends")
            end)
            """)
        let manager = try Manager()
        let service = try Self.service(
            ["--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--transition-limit", "10"],
            manager: manager, watchdogUsec: 200_000)
        try #require(manager.waitFor("READY=1"))
        try #require(service.stderr.waitFor("spin begins"))
        let began = Manager.monotonicMicroseconds()
        try #require(service.stderr.waitFor("spin ends", timeout: 30))
        let ended = Manager.monotonicMicroseconds()
        let petsBefore = manager.messages.filter { $0.text == "WATCHDOG=1" }.count
        #expect(manager.waitFor("WATCHDOG=1", count: petsBefore + 3))
        service.signal(SIGTERM)
        #expect(service.wait() == 0, "\(service.stderr.text())")

        try #require(ended - began >= 2_500_000, "the handler blocked for \(Double(ended - began) / 1e6) s")
        let pets = manager.messages.filter { Manager.lines($0.text).contains("WATCHDOG=1") }.map(\.at)
        // Petting went on before the handler and again after it…
        #expect(pets.filter { $0 < began }.count >= 3)
        #expect(pets.filter { $0 > ended }.count >= 3)
        // …but not while it blocked the main executor. The margins allow for a pet already in
        // the socket when "spin begins" reached the test, and for the first pet after the spin
        // reaching the test before "spin ends" did.
        let blocked = (began + 300_000)...(ended - 300_000)
        #expect(pets.filter { blocked.contains($0) }.isEmpty, "pets at \(pets.map { Double($0) / 1e6 }), blocked \(blocked)")
        // The longest silence spans the blocked stretch.
        let gaps = zip(pets, pets.dropFirst()).map { $1 - $0 }
        #expect((gaps.max() ?? 0) >= 2_500_000, "gaps \(gaps)")
    }
}
