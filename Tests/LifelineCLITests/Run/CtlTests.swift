import Foundation
import Lifeline
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `lifeline ctl` against a real `lifeline run` in a subprocess, over its real control socket.
/// Each step waits for the run's own output, never for a fixed time.
@Suite struct CtlTests {
    /// A run on a fresh state dir, with a plugin that answers fetches and logs what it sees.
    final class Driven {
        let ws: Workspace
        let state: String
        let live: RunTests.Live
        var socket: String { state + "/control.sock" }

        init(_ extra: [String] = [], plugin: String? = nil) throws {
            ws = try Workspace()
            state = ws.path + "/state"
            try ws.plugin("fetcher", plugin ?? """
                lifeline.on("performFetch", function(event)
                  lifeline.log.info("fetching")
                  event.complete("newData")
                end)
                lifeline.on("didReceiveMemoryWarning", function() lifeline.log.info("warned") end)
                """)
            live = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state] + extra)
            // The socket is in place before the app launches.
            #expect(live.stderr.waitFor("didBecomeActive"))
        }

        func ctl(_ words: String...) throws -> CLI.Result {
            try CLI.run(["ctl", "--state-dir", state] + words)
        }
    }

    @Test func ctl_drivesTheRun_likeAScenario_andTheSocketIsPrivate_andRemovedAtTheEnd() throws {
        let ws = try Workspace()
        let report = ws.path + "/report.json"
        let run = try Driven(["--report", report])

        var info = stat()
        #expect(lstat(run.socket, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFSOCK)
        #expect(info.st_mode & 0o777 == 0o600)

        for step in [["background"], ["fetch"], ["charging", "on"], ["push", #"{"aps":{"content-available":1},"feed":"news"}"#]] {
            let r = try CLI.run(["ctl", "--state-dir", run.state] + step)
            #expect(r.status == 0, "\(step): \(r.stderr)")
            #expect(r.stdout == "ok\n")
        }
        #expect(run.live.stderr.text().contains("-- ctl: background"))
        #expect(run.live.stderr.text().contains("-- ctl: fetch"))
        #expect(run.live.stderr.text().contains("-- ctl: charging on"))
        #expect(run.live.stderr.text().contains("fetching"))
        let end = try run.ctl("terminate")
        #expect(end.status == 0, "\(end.stderr)")
        #expect(run.live.wait() == 0)

        #expect(!FileManager.default.fileExists(atPath: run.socket))
        let parsed = try parseReport(String(contentsOfFile: report, encoding: .utf8))
        #expect(events(parsed, "performFetch").count == 1)
        #expect(events(parsed, "fetchCompleted").first?["result"] as? String == "newData")
        #expect(events(parsed, "charging").first?["on"] as? Bool == true)
        #expect(events(parsed, "didReceiveRemoteNotification").count == 1)
    }

    @Test func ctl_refusedSteps_areErrorAnswers_exit65_andTheRunGoesOn() throws {
        let run = try Driven()

        let again = try run.ctl("foreground")
        #expect(again.status == 65)
        #expect(again.stderr.contains("error: 'foreground' is not allowed while the app is active"))

        let unknown = try run.ctl("dance")
        #expect(unknown.status == 65)
        #expect(unknown.stderr.contains("error: unknown action 'dance'; the actions are: launch"))

        let badArgument = try run.ctl("charging", "maybe")
        #expect(badArgument.status == 65)
        #expect(badArgument.stderr.contains("error: 'charging' takes 'on' or 'off'"))

        let badPayload = try run.ctl("push", "[1, 2]")
        #expect(badPayload.status == 65)
        #expect(badPayload.stderr.contains("'push' takes a JSON object"))

        let none = try CLI.run(["ctl", "--state-dir", run.state])
        #expect(none.status == 64)
        #expect(none.stderr.contains("no action given"))

        let warned = try run.ctl("memory-warning")
        #expect(warned.status == 0, "\(warned.stderr)")
        #expect(run.live.stderr.waitFor("warned"))
        run.live.signal(SIGTERM)
        #expect(run.live.wait() == 0)
    }

    @Test func ctl_aStepTheProfileLacks_isAnErrorAnswer() throws {
        let run = try Driven(["--profile", "ios6"])

        let fetch = try run.ctl("fetch")
        #expect(fetch.status == 65)
        #expect(fetch.stderr.contains("error: 'fetch' needs background fetch and silent pushes, which profile ios6 lacks"))
        let tasks = try run.ctl("run-tasks", "refresh")
        #expect(tasks.status == 65)
        #expect(tasks.stderr.contains("'run-tasks' needs BGTaskScheduler"))
        #expect(!run.live.stderr.text().contains("fetching"))

        #expect(try run.ctl("terminate").status == 0)
        #expect(run.live.wait() == 0)
    }

    @Test func ctl_withNoRunListening_exits65_andARunClearsAStaleSocket() throws {
        let ws = try Workspace()
        let state = ws.path + "/state"
        let nothing = try CLI.run(["ctl", "--state-dir", state, "fetch"])
        #expect(nothing.status == 65)
        #expect(nothing.stderr == "lifeline ctl: no lifeline run is listening in \(state) "
            + "(start one with lifeline run --state-dir \(state))\n")

        // A socket file whose run died: nothing accepts on it.
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let dead = try RawControl.bind(state + "/control.sock")
        close(dead)
        let stale = try CLI.run(["ctl", "--state-dir", state, "fetch"])
        #expect(stale.status == 65)
        #expect(stale.stderr.contains("no lifeline run is listening"))

        try ws.plugin("quiet", "-- nothing")
        let live = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(live.stderr.waitFor("didBecomeActive"))
        #expect(try CLI.run(["ctl", "--state-dir", state, "terminate"]).status == 0)
        #expect(live.wait() == 0)
    }

    @Test func run_refusesAStateDirThatALiveRunServes() throws {
        let run = try Driven()
        let second = try RunTests.Live(["--plugins", run.ws.plugins, "--state-dir", run.state])
        #expect(second.wait() == 65)
        #expect(second.stderr.text(waitingForEOF: true).contains("another lifeline run is listening on \(run.socket)"))
        // The first run still has its socket, and answers.
        #expect(try run.ctl("fetch").status == 0)
        #expect(try run.ctl("terminate").status == 0)
        #expect(run.live.wait() == 0)
    }

    @Test func aStateDirTooLongForASocketPath_isAClearError() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "-- nothing")
        let state = ws.path + "/" + String(repeating: "s", count: 120 - ws.path.utf8.count)
        let run = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(run.wait() == 65)
        let message = "is \(state.utf8.count + 13) bytes long, and a Unix socket's path holds at most 107: choose a shorter --state-dir"
        #expect(run.stderr.text(waitingForEOF: true).contains(message))
        let ctl = try CLI.run(["ctl", "--state-dir", state, "fetch"])
        #expect(ctl.status == 65)
        #expect(ctl.stderr.contains(message))
    }

    /// The longest path a socket takes (107 bytes) works: the run binds it where the user said,
    /// and no staging name of the host's own is longer.
    @Test func aControlSocketPathOfExactly107Bytes_works() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "-- nothing")
        let state = ws.path + "/" + String(repeating: "s", count: 107 - 13 - ws.path.utf8.count - 1)
        #expect((state + "/control.sock").utf8.count == 107)
        let run = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(run.stderr.waitFor("didBecomeActive"))
        let ctl = try CLI.run(["ctl", "--state-dir", state, "terminate"])
        #expect(ctl.status == 0, "\(ctl.stderr)")
        #expect(run.wait() == 0, "\(run.stderr.text())")
    }

    /// A run that exits at once because the watchdog cut code loose still answers the clients
    /// waiting for a step: 65 with the documented message, not a closed connection (70).
    @Test func aClientWaitingWhenTheWatchdogEndsTheRun_hearsTheAppEnded() throws {
        let run = try Driven(["--transition-limit", "0.2"], plugin: """
            lifeline.on("didReceiveMemoryWarning", function()
              lifeline.log.info("stuck in C")
              -- One C call the watchdog cannot stop: a backtracking pattern over a long string.
              string.find(string.rep("a", 200000), ".-.-.-.-.-b")
            end)
            """)
        let stuck = try run.ctl("memory-warning")
        #expect(stuck.status == 65, "\(stuck.status) \(stuck.stderr)")
        #expect(stuck.stderr.contains("error: the app ended before it carried out the step"), "\(stuck.stderr)")
        #expect(run.live.wait() == 1)
    }

    @Test func garbage_oversizedLines_silentClients_andCrowds_doNotHurtTheRun() throws {
        let run = try Driven()

        #expect(try RawControl.exchange(run.socket, Data([0xFF, 0xFE, 0x00, 0x41, 0x0A])) == "error: the action is not UTF-8 text\n")
        #expect(try RawControl.exchange(run.socket, Data("run-tasks \u{1B}[31m\u{07}\n".utf8)) == "error: the action holds a control character\n")
        #expect(try RawControl.exchange(run.socket, Data("fly me to the moon\n".utf8)).hasPrefix("error: unknown action 'fly me to the moon'"))
        #expect(try RawControl.exchange(run.socket, Data("\n".utf8)).hasPrefix("error: no action given"))
        #expect(try RawControl.exchange(run.socket, Data(repeating: 0x61, count: 10_000)) == "error: the action is longer than 4096 bytes\n")
        // A line without its newline, then the end of the connection: the line is taken.
        #expect(try RawControl.exchange(run.socket, Data("memory-warning".utf8), closeWriting: true) == "ok\n")
        // Clients that hang up early, before or after sending.
        for bytes in [Data(), Data("fet".utf8), Data("fetch\n".utf8)] {
            let fd = try RawControl.connect(run.socket)
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            close(fd)
        }
        // A client that connects and never sends holds nobody else up, and is answered in time.
        let silent = try RawControl.connect(run.socket)
        let meanwhile = try run.ctl("charging", "on")
        #expect(meanwhile.status == 0, "\(meanwhile.stderr)")
        var poller = pollfd(fd: silent, events: Int16(POLLIN), revents: 0)
        #expect(poll(&poller, 1, 0) == 0, "the silent client was answered before the other one")
        #expect(RawControl.read(silent, timeout: 10) == "error: no action arrived within 2 s\n")
        close(silent)
        // Many at once: each is answered, ok or told to come back.
        // Many open at once: all connect first, then all send, so the run holds them together.
        let crowd = try (0..<40).map { _ in try RawControl.connect(run.socket) }
        for fd in crowd { _ = send(fd, "network on\n", 11, Int32(MSG_NOSIGNAL)) }
        let all = crowd.map { fd in
            defer { close(fd) }
            return RawControl.read(fd, timeout: 10)
        }
        #expect(all.allSatisfy { $0 == "ok\n" || $0 == "error: too many control connections at once\n" }, "\(all)")
        #expect(all.contains("ok\n"))

        #expect(try run.ctl("terminate").status == 0)
        #expect(run.live.wait() == 0)
    }

    @Test func aStepTheHostDoesNotFinishInTime_isAnsweredWithATimeout() throws {
        let run = try Driven(["--ctl-timeout", "0.3"], plugin: """
            -- The handler holds the host until the test writes "release" (or 8 s, under the
            -- 10 s limit), so the second client surely arrives while it runs, however slowly
            -- a sanitizer starts the ctl process.
            lifeline.on("didReceiveMemoryWarning", function()
              lifeline.log.info("slow warning started")
              local t0 = os.clock()
              while os.clock() - t0 < 8 and not lifeline.files.size("release") do end
              lifeline.log.info("slow warning done")
            end)
            """)
        let slow = try run.ctl("memory-warning")
        #expect(slow.status == 65)
        #expect(slow.stderr.contains("error: the host did not answer within 0.3 s; the step is under way"))
        // A step sent while the handler still runs has not begun when its client gives up: it is
        // then never carried out, so a client that tries again does not get it twice.
        let queued = try run.ctl("charging on")
        #expect(queued.status == 65)
        #expect(queued.stderr.contains("error: the host did not answer within 0.3 s; the step was not carried out"))
        #expect(!run.live.stderr.text().contains("slow warning done"), "the handler ended before the test released it")
        try FileManager.default.createDirectory(atPath: run.state + "/files/fetcher", withIntermediateDirectories: true)
        try Data("go".utf8).write(to: URL(fileURLWithPath: run.state + "/files/fetcher/release"))
        #expect(run.live.stderr.waitFor("slow warning done"))
        #expect(try run.ctl("terminate").status == 0)
        #expect(run.live.wait() == 0)
        #expect(!run.live.stderr.text().contains("-- ctl: charging on"))
    }
}

/// A client of the control socket that sends raw bytes, for what `lifeline ctl` never sends.
enum RawControl {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    private static func withAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = address(path)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard withAddress(path, { Glibc.connect(fd, $0, $1) }) == 0 else {
            close(fd)
            throw Failure(description: "connect \(path): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// A bound socket that listens on nothing: what a dead run leaves.
    static func bind(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard withAddress(path, { Glibc.bind(fd, $0, $1) }) == 0 else {
            throw Failure(description: "bind \(path): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// Everything the run sends until it closes, or what came within `timeout`.
    static func read(_ fd: Int32, timeout: Double) -> String {
        var received = Data()
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { break }
            if poller.revents == 0 { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            received.append(contentsOf: buffer[..<n])
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Sends `bytes` on a new connection and returns the answer.
    static func exchange(_ path: String, _ bytes: Data, closeWriting: Bool = false) throws -> String {
        let fd = try connect(path)
        defer { close(fd) }
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if closeWriting { shutdown(fd, Int32(SHUT_WR)) }
        return read(fd, timeout: 10)
    }
}
