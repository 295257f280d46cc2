import ArgumentParser
import Foundation
import Lifeline

struct Transfers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the background transfers in a state dir, with a progress bar each.",
        discussion: """
            Reads the state dir's database; a live `lifeline run` on the same dir may be writing it.

            Example:
              lifeline transfers --state-dir /tmp/lifeline
              lifeline transfers --state-dir /tmp/lifeline --watch   # refresh until all are over

            Exit codes: 0 listed, 64 bad usage, 65 no state database in that dir.
            """
    )

    @Option(help: "The state dir of a `lifeline run` (or a `simulate --state-dir`).")
    var stateDir: String

    @Option(help: "Only this plugin's transfers.")
    var plugin: String?

    @Flag(help: "Print the list again every half second until no transfer is left unfinished.")
    var watch = false

    func run() throws {
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let path = stateDir + "/" + StateDatabase.fileName
            guard FileManager.default.fileExists(atPath: path) else {
                throw .badInput("no state database in '\(stateDir)': no host has used it yet")
            }
            let ledger = TransferLedger(database: try StateDatabase(path: path))
            let tty = isatty(STDOUT_FILENO) == 1
            while true {
                let records: [TransferRecord]
                let waiting: Int
                do throws(StoreError) {
                    records = try ledger.transfers(plugin: plugin)
                    waiting = try ledger.pendingEventCount()
                } catch {
                    throw .internalError("cannot read the transfers: \(error.message)")
                }
                if watch && tty { FileHandle.standardOutput.write(Data("\u{1B}[H\u{1B}[2J".utf8)) }
                FileHandle.standardOutput.write(Data(TransferTable.render(records, undelivered: waiting).utf8))
                guard watch, records.contains(where: { !$0.state.isFinal }) else { return 0 }
                if !tty { FileHandle.standardOutput.write(Data("\n".utf8)) }
                usleep(500_000)
            }
        }
    }
}

/// The text `lifeline transfers` prints.
enum TransferTable {
    static func render(_ records: [TransferRecord], undelivered: Int) -> String {
        guard !records.isEmpty else { return "no transfers\n" }
        var out = ""
        let width = records.map { $0.plugin.count + 1 + $0.publicID.count }.max() ?? 0
        for r in records {
            let id = "\(r.plugin)/\(r.publicID)"
            var line = pad(id, width) + " " + pad(r.kind.rawValue, 8) + " " + pad(r.state.rawValue, 9) + " "
            line += bar(received: r.received, total: r.total) + " " + amount(r.received, r.total) + "  " + r.url
            if let reason = r.reason { line += "  (\(reason))" }
            out += line + "\n"
        }
        if undelivered > 0 {
            out += "\(undelivered) event\(undelivered == 1 ? "" : "s") waiting for the app to run\n"
        }
        return out
    }

    /// `[##########----------]  50%`, or a bar of `?` when the size is not known yet.
    static func bar(received: Int64, total: Int64?, width: Int = 20) -> String {
        guard let total, total > 0 else { return "[" + String(repeating: "?", count: width) + "]   ?%" }
        let share = max(0, min(1, Double(received) / Double(total)))  // a damaged ledger row may hold anything
        let filled = Int((share * Double(width)).rounded(.down))
        let percent = String(Int((share * 100).rounded(.down)))
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
            + String(repeating: " ", count: max(0, 3 - percent.count)) + percent + "%"
    }

    static func amount(_ received: Int64, _ total: Int64?) -> String {
        pad(megabytes(received) + " / " + (total.map(megabytes) ?? "?"), 19)
    }

    static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
