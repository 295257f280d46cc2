import Foundation
import GRDB
import Lifeline
import LifelineLua
import Logging

/// A damaged state dir: a real state database, made once by `StateDatabase` itself and filled with
/// rows in every table, is copied for each input and damaged as the bytes say (a value of another
/// type in any column of any row, rows deleted and added, tables and columns dropped, migrations
/// forgotten or invented, bytes of the file overwritten). Then it is opened the way the host opens
/// a state dir, its ledgers are read, and a host is started on it with a plugin that reads its
/// store, transfers and task requests and hears the transfers' events.
///
/// Whatever the file holds, the host must refuse it with an error or skip what it cannot read;
/// a trap (a non-optional decode) is the failure this finds.
enum StateDatabaseDamage {
    /// The tables and their columns, as the template has them; and how a row of each is named in
    /// a WHERE clause (the tables WITHOUT ROWID by their primary key).
    struct Table {
        var name: String
        var columns: [String]
        var key: String
    }

    static let tables: [Table] = [
        Table(name: "store", columns: ["plugin", "key", "value"], key: "(plugin, key)"),
        Table(
            name: "transfers",
            columns: [
                "id", "plugin", "kind", "method", "url", "file", "sha256", "state", "received", "total", "attempts",
                "reason", "tag",
            ], key: "rowid"),
        Table(name: "transfer_events", columns: ["seq", "plugin", "transfer", "name", "reason"], key: "rowid"),
        Table(
            name: "system_tasks",
            columns: ["plugin", "identifier", "kind", "earliest", "requires_network", "requires_power", "seq"],
            key: "(plugin, identifier)"),
        Table(name: "grdb_migrations", columns: ["identifier"], key: "rowid"),
        Table(name: "sqlite_sequence", columns: ["name", "seq"], key: "rowid"),
    ]

    /// A value for a column: an SQL expression with at most one argument.
    static func value(_ choice: UInt8, _ payload: [UInt8]) -> (sql: String, argument: DatabaseValue?) {
        let values: [(String, DatabaseValue?)] = [
            ("NULL", nil), ("?", 0.databaseValue), ("?", (-1).databaseValue), ("?", 1.databaseValue),
            ("?", Int64(Int32.max).databaseValue), ("?", Int64.max.databaseValue), ("?", Int64.min.databaseValue),
            ("?", 1.5.databaseValue), ("?", (-0.0).databaseValue), ("?", 1e308.databaseValue),
            ("?", 9.3e18.databaseValue), ("?", (-9.3e18).databaseValue), ("?", 1e-320.databaseValue),
            ("?", "soon".databaseValue), ("?", "".databaseValue), ("?", "maybe".databaseValue),
            ("?", "a\u{0}b".databaseValue), ("?", "\u{0}".databaseValue), ("?", Data([0x00, 0xFF]).databaseValue),
            ("CAST(? AS TEXT)", Data([0xFF, 0xFE, 0x41]).databaseValue), ("CAST(? AS TEXT)", Data([0xC3]).databaseValue),
            ("?", #"{"a":"#.databaseValue), ("?", "1e999".databaseValue), ("?", " 12 ".databaseValue),
            ("?", "0x10".databaseValue), ("?", "queued".databaseValue), ("?", "running".databaseValue),
            ("?", "finished".databaseValue), ("?", "upload".databaseValue), ("?", "transferDidFinish".databaseValue),
            ("?", "processing".databaseValue), ("?", "p".databaseValue), ("?", "q".databaseValue),
            ("?", "t.refresh".databaseValue), ("?", "../x".databaseValue), ("?", "/etc/passwd".databaseValue),
            ("?", "http://127.0.0.1:9/x".databaseValue), ("?", "transfers".databaseValue),
            ("CAST(zeroblob(70000) AS TEXT)", nil), ("zeroblob(70000)", nil), ("printf('%.*c', 70000, 'x')", nil),
            ("?", "9223372036854775808".databaseValue), ("?", "-1.5".databaseValue), ("?", "NaN".databaseValue),
            ("?", #"[1,2,{"b":null}]"#.databaseValue),
            // The input's own bytes, as a blob and as text that need not be UTF-8.
            ("?", Data(payload).databaseValue), ("CAST(? AS TEXT)", Data(payload).databaseValue),
        ]
        return values[Int(choice) % values.count]
    }

    /// Reads the input a byte at a time; past the end, zeros.
    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var at = 0
        var atEnd: Bool { at >= bytes.count }
        mutating func next() -> UInt8 {
            defer { at += 1 }
            return at < bytes.count ? bytes[at] : 0
        }
        mutating func take(_ count: Int) -> [UInt8] {
            let end = min(bytes.count, at + count)
            defer { at = max(at, end) }
            return at < end ? Array(bytes[at..<end]) : []
        }
    }

    static func fuzz(_ bytes: UnsafeRawBufferPointer) {
        let dir = workDirectory
        let path = dir + "/" + StateDatabase.fileName
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        guard copyfile(template, path) else { fatalError("statedb: cannot copy the template to \(path)") }
        var input = Reader(bytes: bytes)
        var overwrites: [(offset: Int, bytes: [UInt8])] = []
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.writeWithoutTransaction { db in
                var steps = 0
                while !input.atEnd, steps < 16 {
                    steps += 1
                    if let (sql, arguments) = mutation(&input) {
                        try? db.execute(sql: sql, arguments: StatementArguments(arguments))
                    } else {
                        let offset = Int(input.next()) << 8 | Int(input.next())
                        overwrites.append((offset * 8, input.take(4)))
                    }
                }
            }
            try queue.close()
        } catch {
            fatalError("statedb: the template's copy cannot be opened: \(error)")
        }
        if !overwrites.isEmpty, let handle = FileHandle(forUpdatingAtPath: path) {
            for (offset, payload) in overwrites {
                try? handle.seek(toOffset: UInt64(offset))
                try? handle.write(contentsOf: payload)
            }
            try? handle.close()
        }
        open(dir)
    }

    /// One change the input asks for, as SQL; nil for an overwrite of the file's bytes.
    static func mutation(_ input: inout Reader) -> (String, [DatabaseValue?])? {
        let op = input.next()
        let table = tables[Int(input.next()) % tables.count]
        let row = Int(input.next()) % 12
        let whereRow = "WHERE \(table.key) IN (SELECT \(table.key) FROM \(table.name) LIMIT 1 OFFSET \(row))"
        switch op % 16 {
        case 0..<7:
            let column = table.columns[Int(input.next()) % table.columns.count]
            let choice = input.next()
            let (sql, argument) = value(choice, input.take(Int(choice >> 4)))
            return ("UPDATE \(table.name) SET \(column) = \(sql) \(whereRow)", argument.map { [$0] } ?? [])
        case 7, 8:
            return ("DELETE FROM \(table.name) \(whereRow)", [])
        case 9, 10:
            var expressions: [String] = []
            var arguments: [DatabaseValue?] = []
            for _ in table.columns {
                let choice = input.next()
                let (sql, argument) = value(choice, input.take(Int(choice >> 5)))
                expressions.append(sql)
                if let argument { arguments.append(argument) }
            }
            return (
                "INSERT OR REPLACE INTO \(table.name) (\(table.columns.joined(separator: ", "))) VALUES (\(expressions.joined(separator: ", ")))",
                arguments
            )
        case 11:
            // A copy of a row with a new key, where the table allows it.
            return ("INSERT INTO \(table.name) SELECT * FROM \(table.name) LIMIT 1 OFFSET \(row)", [])
        case 12:
            let column = table.columns[Int(input.next()) % table.columns.count]
            switch input.next() % 4 {
            case 0: return ("DROP TABLE \(table.name)", [])
            case 1: return ("ALTER TABLE \(table.name) DROP COLUMN \(column)", [])
            case 2: return ("ALTER TABLE \(table.name) RENAME COLUMN \(column) TO \(column)_x", [])
            default: return ("ALTER TABLE \(table.name) ADD COLUMN extra TEXT NOT NULL DEFAULT 'x'", [])
            }
        case 13:
            switch input.next() % 3 {
            case 0: return ("DELETE FROM grdb_migrations \(whereRow)", [])
            case 1: return ("INSERT INTO grdb_migrations VALUES ('from-the-future')", [])
            default: return ("CREATE TABLE IF NOT EXISTS store (x)", [])
            }
        case 14:
            return ("UPDATE \(table.name) SET \(table.columns[0]) = \(table.columns.last!)", [])
        default:
            return nil
        }
    }

    /// Opens the state dir as the host does, reads every ledger, and runs a launch on it.
    static func open(_ dir: String) {
        let database: StateDatabase
        do {
            database = try StateDatabase.open(stateDirectory: dir)
        } catch {
            return  // refused: a clear error is what a database the host cannot use gets
        }
        let ledger = TransferLedger(database: database)
        _ = try? ledger.transfers()
        _ = try? ledger.unfinished()
        _ = try? ledger.pendingEventCount()
        for plugin in (try? ledger.pluginsWithPendingEvents()) ?? [] {
            _ = try? ledger.pendingEvents(plugin: plugin)
        }
        let executor = MainExecutor(clock: VirtualClock())
        var configuration = HostConfiguration(watchdogScale: 1)
        configuration.database = database
        configuration.logger = .init(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }
        configuration.pluginLogger = { .init(label: $0) { _ in SwiftLogNoOpLogHandler() } }
        configuration.epochAtStart = Simulation.fixedEpoch
        configuration.transferJitterSeed = 0
        let network = ScriptedNetwork(rules: rules, executor: executor, fileName: "fuzz.scenario")
        configuration.transport = network
        configuration.transferTransport = network
        let host = LifelineHost(
            configuration: configuration, plugins: [descriptor], executor: executor,
            recorder: Recorder(profile: configuration.profile, keepsTimeline: false))
        defer { host.shutdown() }
        try? host.perform(.launch)
        try? host.perform(.background)
        try? host.perform(.runTasks(.all))
        executor.run(until: HostTime.zero.adding(seconds: 60), shouldStop: { host.isStopped }, afterJob: host.afterJob)
    }

    static let rules = try! Scenario.parse("0s http * * -> 200 ok in 1s", fileName: "fuzz.scenario").network

    /// A plugin that reads everything the state dir holds for it, at load and at each event.
    static let descriptor: PluginDescriptor = {
        let folder = root + "/p"
        try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try! """
        local function all()
          for _, k in ipairs(lifeline.store.keys()) do lifeline.json.encode(lifeline.store.get(k)) end
          for _, t in ipairs(lifeline.transfers.list()) do for _, v in pairs(t) do tostring(v) end end
          for _, r in ipairs(lifeline.tasks.pending()) do for _, v in pairs(r) do tostring(v) end end
          lifeline.store.set('seen', lifeline.now())
        end
        pcall(all)
        for _, name in ipairs{'transferDidFinish', 'transferDidFail', 'didFinishTransferEvents'} do
          lifeline.on(name, function(e) pcall(all); if e.complete then e.complete() end end)
        end
        for _, id in ipairs{'t.refresh', 't.processing'} do
          lifeline.tasks.register(id, function(task) pcall(all); task:setTaskCompleted(true) end)
        end
        """.write(toFile: folder + "/init.lua", atomically: false, encoding: .utf8)
        var descriptor = PluginDescriptor(
            name: "p", kind: .lua, network: (try? NetworkPermissions(["127.0.0.1:*"])) ?? .none
        ) { () throws(LifelineError) -> any PluginInstance in
            try LuaPlugin(name: "p", directory: folder, memoryLimit: 1024 * 1024)
        }
        descriptor.taskIdentifiers = ["t.refresh", "t.processing"]
        return descriptor
    }()

    static let root: String = {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let dir = base + "lifeline-fuzz-statedb-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: StateDatabaseDamage.root) }
        return dir
    }()

    static let workDirectory: String = {
        let dir = root + "/state"
        try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }()

    /// The database every input starts from: made by the host's own `StateDatabase` (so its
    /// tables and migrations are the real ones), with rows in every table, in one file.
    static let template: String = {
        let dir = root + "/template"
        do {
            _ = try StateDatabase.open(stateDirectory: dir)
        } catch {
            fatalError("statedb: cannot make the template: \(error)")
        }
        let path = dir + "/" + StateDatabase.fileName
        let earliest = Simulation.fixedEpoch + 5
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO store (plugin, key, value) VALUES
                          ('p', 'a', '1'), ('p', 'b', '{"x":[1,2,{"y":null}]}'), ('p', 'c', '"text"'),
                          ('p', '', '""'), ('p', 'é', '1.5e300'), ('q', 'a', 'true');
                        INSERT INTO transfers (id, plugin, kind, method, url, file, sha256, state, received, total, attempts, reason, tag) VALUES
                          (1, 'p', 'download', 'GET', 'http://127.0.0.1:9/a', 'a.bin', NULL, 'queued', 0, NULL, 0, NULL, NULL),
                          (2, 'p', 'download', 'GET', 'http://127.0.0.1:9/b', 'd/b.bin', 'ab', 'running', 100, 1000, 1, NULL, 'mine'),
                          (3, 'p', 'download', 'GET', 'http://127.0.0.1:9/c', 'c.bin', NULL, 'finished', 2, 2, 1, NULL, NULL),
                          (4, 'p', 'upload', 'POST', 'http://127.0.0.1:9/d', 'up.bin', NULL, 'failed', 0, NULL, 3, 'boom', NULL),
                          (5, 'p', 'download', 'GET', 'http://127.0.0.1:9/e', 'e.bin', NULL, 'cancelled', 0, NULL, 0, 'cancelled', 'x'),
                          (6, 'p', 'upload', 'PUT', 'http://127.0.0.1:9/f', 'up.bin', NULL, 'queued', 0, NULL, 0, NULL, NULL),
                          (7, 'q', 'download', 'GET', 'http://127.0.0.1:9/g', 'g.bin', NULL, 'running', 0, NULL, 0, NULL, NULL);
                        INSERT INTO transfer_events (plugin, transfer, name, reason) VALUES
                          ('p', 3, 'transferDidFinish', NULL), ('p', 4, 'transferDidFail', 'boom'),
                          ('p', 5, 'transferDidFail', 'cancelled'), ('q', 7, 'transferDidFinish', NULL);
                        """)
                try db.execute(
                    sql: """
                        INSERT INTO system_tasks (plugin, identifier, kind, earliest, requires_network, requires_power, seq) VALUES
                          ('p', 't.refresh', 'refresh', ?, 0, 0, 1), ('p', 't.processing', 'processing', ?, 1, 1, 2),
                          ('q', 'x', 'refresh', 0, 0, 0, 3)
                        """, arguments: [earliest, earliest + 3600])
            }
            try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try queue.close()
        } catch {
            fatalError("statedb: cannot fill the template: \(error)")
        }
        // The template's upload needs its file, and the plugin's files folder exists.
        try? FileManager.default.createDirectory(atPath: dir + "/files/p", withIntermediateDirectories: true)
        return path
    }()

    /// Copies a file; false if it cannot.
    static func copyfile(_ from: String, _ to: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: from) else { return false }
        return FileManager.default.createFile(atPath: to, contents: data)
    }
}
