import Foundation
@testable import Lifeline
import Testing

/// A state dir the CLI is pointed at, damaged by hand: the commands skip the rows they cannot
/// read (a warning names each) or refuse the database (65), and never crash. And runs that start
/// together on one state dir: one serves it, the others are told so.
@Suite struct StateDirectoryTests {
    /// A plugin that keeps a store value and a pending task request, so every table has a row.
    private static func workspace() throws -> Workspace {
        let ws = try Workspace()
        try ws.plugin(
            "p",
            """
            lifeline.store.set("k", {1, 2})
            lifeline.tasks.submit{identifier = "nightly", kind = "refresh", earliestBegin = 3600}
            print("value", lifeline.store.get("k") and "set" or "missing")
            """, toml: "[background]\nidentifiers = [\"nightly\"]\n")
        try ws.file("s.scenario", "0s launch\n2s background\n")
        return ws
    }

    private static func simulate(_ ws: Workspace, _ state: String) throws -> CLI.Result {
        try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", ws.path + "/s.scenario", "--state-dir", state])
    }

    /// A state dir made by a first simulation, then changed with `sql`.
    private static func damaged(_ ws: Workspace, _ sql: String) throws -> String {
        let state = ws.path + "/state-\(UUID().uuidString)"
        let first = try simulate(ws, state)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(!first.stderr.contains("warning"), "an undamaged state dir gives no warning: \(first.stderr)")
        let database = try StateDatabase(path: state + "/" + StateDatabase.fileName)
        try database.execute(sql: sql)
        return state
    }

    @Test(arguments: [
        (
            "UPDATE system_tasks SET earliest = 'soon'",
            "skipped system_tasks row (plugin 'p', identifier 'nightly'): earliest is text instead of a number"
        ),
        (
            "UPDATE system_tasks SET earliest = 1e300",
            "skipped system_tasks row (plugin 'p', identifier 'nightly'): earliest is 1e+300, outside"
        ),
        (
            "UPDATE system_tasks SET requires_network = 'maybe'",
            "skipped system_tasks row (plugin 'p', identifier 'nightly'): requires_network is 'maybe' instead of 0 or 1"
        ),
        (
            "UPDATE system_tasks SET plugin = CAST(x'ff' AS TEXT)",
            "skipped system_tasks row (plugin x'ff', identifier 'nightly'): plugin is not valid UTF-8"
        ),
        (
            "UPDATE system_tasks SET plugin = x'70'",
            "skipped system_tasks row (plugin x'70', identifier 'nightly'): plugin is a blob instead of text"
        ),
        (
            "UPDATE system_tasks SET identifier = CAST(x'6e696768746c7900' AS TEXT)",
            "skipped system_tasks row (plugin 'p', identifier x'6e696768746c7900'): identifier holds a NUL byte"
        ),
        (
            "UPDATE system_tasks SET kind = 'someday'",
            "skipped system_tasks row (plugin 'p', identifier 'nightly'): kind is 'someday', a name this Lifeline does not know"
        ),
    ])
    func simulate_skipsADamagedTaskRequest_withAWarning(_ sql: String, _ warning: String) throws {
        let ws = try Self.workspace()
        let state = try Self.damaged(ws, sql)
        let result = try Self.simulate(ws, state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("warning"), "\(result.stderr)")
        #expect(result.stderr.contains(warning), "\(result.stderr)")
        #expect(!result.stderr.contains("Fatal error"))
    }

    @Test func simulate_skipsADamagedStoreRow_andSetReplacesIt() throws {
        let ws = try Self.workspace()
        try ws.plugin("q", "print('q sees', lifeline.store.get('k') == nil and 'nothing' or 'a value', #lifeline.store.keys())")
        // q's value holds a NUL (its JSON would be cut at it); q also has a key that is not UTF-8.
        let state = try Self.damaged(
            ws,
            """
            INSERT INTO store VALUES ('q', 'k', CAST(x'5b315d0078' AS TEXT));
            INSERT INTO store VALUES ('q', CAST(x'ff' AS TEXT), '1');
            """)
        let result = try Self.simulate(ws, state)
        #expect(result.status == 0, "\(result.stderr)")
        // `get` skips the row whose value it cannot read; `keys` still lists its key, which can be
        // read (and `set` replaces), but not the key that is not UTF-8.
        #expect(result.stderr.contains("q sees\tnothing\t1"), "\(result.stderr)")
        #expect(result.stderr.contains("skipped store row (plugin 'q', key 'k'): value holds a NUL byte"), "\(result.stderr)")
        #expect(result.stderr.contains("skipped store row (plugin 'q', key x'ff'): key is not valid UTF-8"), "\(result.stderr)")
        // p's own row is untouched, and p's set replaced nothing of q's.
        #expect(result.stderr.contains("value\tset"), "\(result.stderr)")
    }

    @Test func transfers_skipsADamagedRow_andListsTheRest() throws {
        let ws = try Self.workspace()
        let state = try Self.damaged(
            ws,
            """
            INSERT INTO transfers (plugin, kind, method, url, file, state, received, total, attempts)
            VALUES ('p', 'download', 'GET', 'http://127.0.0.1:9/a', 'a.bin', 'queued', 10, 100, 0);
            INSERT INTO transfers (plugin, kind, method, url, file, state, received, total, attempts)
            VALUES ('p', 'download', 'GET', 'http://127.0.0.1:9/b', 'b.bin', 'queued', 'lots', 100, 0);
            INSERT INTO transfers (plugin, kind, method, url, file, state, received, total, attempts)
            VALUES ('p', 'download', 'GET', 'http://127.0.0.1:9/c', 'c.bin', 'queued', -5, 4611686018427387904, -1);
            INSERT INTO transfer_events (plugin, transfer, name) VALUES (CAST(x'ff' AS TEXT), 1, 'transferDidFinish');
            """)
        let listed = try CLI.run(["transfers", "--state-dir", state])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("p/1") && listed.stdout.contains("http://127.0.0.1:9/a"), "\(listed.stdout)")
        #expect(!listed.stdout.contains("/b") && !listed.stdout.contains("/c"), "\(listed.stdout)")
        #expect(listed.stderr.contains("skipped transfers row id 2: received is text instead of an integer"), "\(listed.stderr)")
        #expect(listed.stderr.contains("skipped transfers row id 3: received is -5, outside 0..."), "\(listed.stderr)")

        // A host resuming the transfers and delivering the events skips the same rows.
        let result = try Self.simulate(ws, state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("skipped transfers row id 2"), "\(result.stderr)")
        #expect(result.stderr.contains("skipped transfer_events row seq 1: plugin is not valid UTF-8"), "\(result.stderr)")
    }

    @Test(arguments: [
        ("INSERT INTO grdb_migrations VALUES ('tomorrow')", "it records the migration 'tomorrow', which this Lifeline does not know"),
        ("INSERT INTO grdb_migrations VALUES (x'ff')", "its table grdb_migrations has a row whose identifier is a blob instead of text"),
        (
            "DROP TABLE grdb_migrations; CREATE TABLE grdb_migrations (identifier, extra)",
            "its table grdb_migrations has the columns"
        ),
        ("ALTER TABLE transfers DROP COLUMN tag", "its table transfers has the columns"),
        ("DROP TABLE system_tasks", "it has no table system_tasks"),
    ])
    func aDatabaseTheHostCannotUse_isRefusedWith65(_ sql: String, _ message: String) throws {
        let ws = try Self.workspace()
        let state = try Self.damaged(ws, sql)
        for arguments in [
            ["simulate", "--plugins", ws.plugins, "--scenario", ws.path + "/s.scenario", "--state-dir", state],
            ["transfers", "--state-dir", state],
        ] {
            let result = try CLI.run(arguments)
            #expect(result.status == 65, "\(arguments[0]): \(result.stderr)")
            #expect(result.stderr.contains("cannot use the state database"), "\(result.stderr)")
            #expect(result.stderr.contains(message), "\(result.stderr)")
        }
    }

    @Test func aFileThatIsNotADatabase_isRefusedWith65() throws {
        let ws = try Self.workspace()
        let state = ws.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try String(repeating: "not a database\n", count: 100).write(
            toFile: state + "/" + StateDatabase.fileName, atomically: true, encoding: .utf8)
        for arguments in [
            ["simulate", "--plugins", ws.plugins, "--scenario", ws.path + "/s.scenario", "--state-dir", state],
            ["transfers", "--state-dir", state],
        ] {
            let result = try CLI.run(arguments)
            #expect(result.status == 65, "\(result.stderr)")
            #expect(result.stderr.contains("cannot open the state database"), "\(result.stderr)")
            #expect(result.stderr.contains("not a database"), "\(result.stderr)")
        }
        let run = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(run.wait() == 65)
        #expect(run.stderr.text(waitingForEOF: true).contains("not a database"))
    }

    // MARK: - Starts together

    /// Starts `count` processes of lifeline with `arguments` at once.
    private static func startTogether(_ count: Int, _ arguments: [String]) throws -> [RunTests.Live] {
        try (0..<count).map { _ in try RunTests.Live(arguments) }
    }

    @Test func eightRunsStartingTogether_oneServesTheStateDir_theOthersAreToldSo() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "-- nothing")
        var rounds: [String] = []
        for round in 0..<50 {
            let state = ws.path + "/state-\(round)"
            // `run` is prefixed by Live: these are `lifeline run --plugins … --state-dir …`.
            let runs = try Self.startTogether(8, ["--plugins", ws.plugins, "--state-dir", state])
            // The losers end by themselves; the winner runs until it is told to stop.
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, runs.filter({ $0.process.isRunning }).count > 1 { usleep(5_000) }
            let winner = runs.first { $0.process.isRunning }
            #expect(winner != nil, "round \(round): no run serves the state dir")
            if let winner {
                #expect(winner.stderr.waitFor("didBecomeActive"), "round \(round): \(winner.stderr.text())")
                winner.signal(SIGTERM)
                #expect(winner.wait() == 0, "round \(round)")
            }
            for run in runs where run !== winner {
                let status = run.wait()
                let stderr = run.stderr.text(waitingForEOF: true)
                if status != 65 || !stderr.contains("another lifeline run is listening on \(state)/control.sock") {
                    rounds.append("round \(round): exit \(status): \(stderr)")
                }
                #expect(!stderr.contains("SQLite error"), "round \(round): \(stderr)")
            }
        }
        #expect(rounds.isEmpty, "\(rounds.joined(separator: "\n"))")
    }

    @Test func simulationsStartingTogether_onAFreshStateDir_allMigrateIt() throws {
        let ws = try Self.workspace()
        var failures: [String] = []
        for round in 0..<20 {
            let state = ws.path + "/state-\(round)"
            // All eight started before any is waited for (a thread pool would run two at a time).
            let processes = try (0..<8).map { _ in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: CLI.binary)
                process.arguments = ["simulate", "--plugins", ws.plugins, "--scenario", ws.path + "/s.scenario", "--state-dir", state]
                let err = Pipe()
                process.standardOutput = FileHandle.nullDevice
                process.standardError = err
                try process.run()
                return (process, Captured(err))
            }
            for (process, stderr) in processes {
                process.waitUntilExit()
                if process.terminationStatus != 0 {
                    failures.append("round \(round): exit \(process.terminationStatus): \(stderr.text(waitingForEOF: true))")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test func readersWorkBesideARun() throws {
        let ws = try Self.workspace()
        let state = ws.path + "/state"
        let live = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(live.stderr.waitFor("didBecomeActive"))
        let listed = try CLI.run(["transfers", "--state-dir", state])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout == "no transfers\n")
        let simulated = try Self.simulate(ws, state)
        #expect(simulated.status == 0, "\(simulated.stderr)")
        #expect(live.process.isRunning)
        live.signal(SIGTERM)
        #expect(live.wait() == 0)
        // Once the run is over, the state dir serves the next one.
        let next = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(next.stderr.waitFor("didBecomeActive"))
        next.signal(SIGTERM)
        #expect(next.wait() == 0)
    }
}
