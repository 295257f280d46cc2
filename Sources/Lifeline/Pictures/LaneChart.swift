/// A run as a compact lane chart for a terminal (`--lanes`): one character per column of time.
///
/// ```
/// time               0s        10s       20s
/// app                iAbbbbbbbbbbbbbbbbbsssss
/// budget             ---------------!--|
/// sync upload #1     ==============!x
/// sync               |  *    |   *
/// events             T
/// ```
///
/// Every line is at most `width` columns whatever the report holds: names are cut, control
/// characters and wide scripts are replaced, and the legend is cut too.
///
/// The label column is as wide as the longest label (and a space), up to two fifths of the width,
/// so that time keeps the rest. A label longer than that keeps what tells it from the others: the
/// part they share is cut (`bg-d~photos-2024 #1`), and when what differs is itself too long, its
/// middle (`~photos-from-t~ #1`).
public enum LaneChart {
    /// The chart, lines joined by newlines, with a trailing newline.
    ///
    /// - Parameters:
    ///   - run: the run to draw.
    ///   - width: the terminal's width in columns; the chart never exceeds it.
    ///   - colour: whether to colour the chart with ANSI SGR sequences.
    public static func text(_ run: RenderedRun, width: Int, colour: Bool) -> String {
        guard width > 0 else { return "" }
        let lanes = RunLanes(run)
        let names = ["time", "app", "budget", "events"] + Chart.taskNames(lanes) + lanes.plugins
        let labelWidth = labelWidth(names.map { LaneChart.safe($0).count }.max() ?? 0, width: width)
        let columns = width - labelWidth
        let chart = Chart(
            lanes: lanes, columns: columns, labelWidth: labelWidth, colour: colour,
            labels: LaneChart.labels(names.map(LaneChart.safe), room: max(labelWidth - 1, 0)))
        var lines: [String] = []
        lines.append(chart.title(run.title, width: width))
        lines.append(chart.axis())
        lines.append(chart.stateRow())
        if !lanes.budgets.isEmpty { lines.append(chart.budgetRow()) }
        lines += chart.taskRows(limit: Chart.taskLimit)
        lines += chart.pluginRows()
        lines.append(chart.markerRow())
        lines += chart.failures(width: width)
        lines.append(contentsOf: chart.legend(width: width))
        return lines.joined(separator: "\n") + "\n"
    }

    /// The drawing: a row of cells per lane, each cell one character and its colour.
    /// The label column for labels of at most `longest` characters: the longest and a space, up to
    /// two fifths of `width`; none below 10 columns, where time needs every one.
    static func labelWidth(_ longest: Int, width: Int) -> Int {
        guard width >= 10 else { return 0 }
        return min(longest + 1, width * 2 / 5)
    }

    /// Each label as shown in `room` characters, keyed by the label: whole when it fits, else cut
    /// where it says least (see `cut`).
    static func labels(_ texts: [String], room: Int) -> [String: String] {
        // In sorted order, the label sharing the longest start with a label is next to it, so two
        // neighbours tell how much of it is shared, however many lanes there are. `safe` text
        // has one scalar per character, so scalars sort and compare as the characters do.
        let sorted = Set(texts).map { Array($0.unicodeScalars) }.sorted {
            $0.lexicographicallyPrecedes($1) { $0.value < $1.value }
        }
        func common(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
            var n = 0
            while n < a.count, n < b.count, a[n] == b[n] { n += 1 }
            return n
        }
        var shown: [String: String] = [:]
        for (i, scalars) in sorted.enumerated() where scalars.count > room {
            let shared = max(
                i > 0 ? common(scalars, sorted[i - 1]) : 0, i + 1 < sorted.count ? common(scalars, sorted[i + 1]) : 0)
            let text = String(String.UnicodeScalarView(scalars))
            shown[text] = cut(Array(text), room: room, from: shared)
        }
        return shown
    }

    /// `text` in `room` characters, keeping what tells it from labels that share its first `from`
    /// characters: the tail from the word where it differs, after as much of its head as fits
    /// (`bg-d~photos #1`). A tail that does not fit, or a label unlike any other from its start,
    /// keeps its beginning and its end around a `~` (`~photos-from-t~ #1`, `upload-all-t~ #1`).
    static func cut(_ text: [Character], room: Int, from: Int) -> String {
        guard text.count > room else { return String(text) }
        guard room >= 4 else { return String(text.prefix(max(room - 1, 0))) + (room > 0 ? "~" : "") }
        let separators: Set<Character> = [" ", "-", "_", ".", "/", ":"]
        // Back to the start of the word where it differs, so the word is read whole; past the
        // separators when it differs there.
        var start = min(from, text.count)
        if start < text.count, separators.contains(text[start]) {
            while start < text.count, separators.contains(text[start]) { start += 1 }
        } else {
            while start > 0, !separators.contains(text[start - 1]) { start -= 1 }
        }
        let tail = text[start...]
        if start > 0 && tail.count + 2 <= room {
            return String(text.prefix(room - 1 - tail.count)) + "~" + String(tail)
        }
        let lead = start > 0 ? "~" : ""
        let body = Array(start > 0 ? tail : text[...])
        let space = room - lead.count
        guard body.count > space else { return lead + String(body) }
        // The end keeps its last word (an id such as `#12`), up to a third of the room.
        var last = 0
        while last < body.count, !separators.contains(body[body.count - 1 - last]) { last += 1 }
        let end = min(last + 1, (space - 1) / 3)
        return lead + String(body.prefix(space - 1 - end)) + "~" + String(body.suffix(end))
    }

    private struct Chart {
        let lanes: RunLanes
        let columns: Int
        let labelWidth: Int
        let colour: Bool
        /// Labels too long for the column, as shown.
        let labels: [String: String]

        /// The task rows drawn, at most `limit` of them.
        static let taskLimit = 20

        /// The task lanes' names, in order: the plugin's name, unless the task's name already
        /// says it.
        static func taskNames(_ lanes: RunLanes) -> [String] {
            lanes.spans.filter { $0.kind == .task || $0.kind == .system }.prefix(taskLimit).map { task in
                task.label.contains(task.plugin) ? task.label : "\(task.plugin) \(task.label)"
            }
        }

        struct Cell {
            var char: Character = " "
            var sgr: String = ""
        }

        /// The column a time falls in, within the chart.
        func column(_ t: Double) -> Int {
            let x = (t - lanes.start) / lanes.duration * Double(columns)
            return Int(RunLanes.clamp(x, 0, Double(columns - 1)))
        }

        /// The columns from `a` to `b`, at least the one of `a`.
        func columns(_ a: Double, _ b: Double) -> ClosedRange<Int> {
            let first = column(a)
            return first...max(first, column(b))
        }

        /// The time in the middle of a column.
        func time(_ column: Int) -> Double {
            lanes.start + (Double(column) + 0.5) / Double(columns) * lanes.duration
        }

        func paint(_ cells: [Cell]) -> String {
            var out = ""
            var current = ""
            for cell in cells {
                if colour && cell.sgr != current {
                    out += current.isEmpty ? "" : "\u{1B}[0m"
                    if !cell.sgr.isEmpty { out += "\u{1B}[\(cell.sgr)m" }
                    current = cell.sgr
                }
                out.append(cell.char)
            }
            if colour && !current.isEmpty { out += "\u{1B}[0m" }
            return out
        }

        func row(_ name: String, _ cells: [Cell]) -> String {
            label(name) + paint(cells)
        }

        /// A name cut or padded to the label column, with one space kept before the chart.
        func label(_ text: String) -> String {
            let room = max(labelWidth - 1, 0)
            let safe = LaneChart.safe(text)
            let shown = labels[safe] ?? LaneChart.cut(Array(safe), room: room, from: 0)
            return shown + String(repeating: " ", count: max(labelWidth - shown.count, 0))
        }

        func title(_ text: String, width: Int) -> String {
            let s = Array(LaneChart.safe(text))
            let cut = s.count > width ? String(s.prefix(width)) : String(s)
            return colour ? "\u{1B}[1m\(cut)\u{1B}[0m" : cut
        }

        func axis() -> String {
            var chars = [Character](repeating: " ", count: columns)
            // A label every ~10 columns at a round step, written only where it fits whole.
            let step = LaneChart.niceStep(lanes.duration / Double(max(columns / 10, 1)))
            var t = (lanes.start / step).rounded(.up) * step
            var count = 0
            while t <= lanes.start + lanes.duration && count < 1000 {
                let c = column(t)
                let text = Array(LaneChart.seconds(t))
                if c + text.count <= columns && (c == 0 || chars[c - 1] == " ") && chars[c] == " " {
                    let free = chars[c..<c + text.count].allSatisfy { $0 == " " }
                    if free {
                        for (k, ch) in text.enumerated() { chars[c + k] = ch }
                    }
                }
                t += step
                count += 1
            }
            let cells = chars.map { Cell(char: $0, sgr: "2") }
            return row("time", cells)
        }

        func stateRow() -> String {
            let cells = (0..<columns).map { c -> Cell in
                switch lanes.state(at: time(c)) {
                case .active: return Cell(char: "A", sgr: "32")
                case .inactive: return Cell(char: "i", sgr: "33")
                case .background: return Cell(char: "b", sgr: "34")
                case .suspended: return Cell(char: "s", sgr: "35")
                case .notRunning: return Cell(char: ".", sgr: "2")
                }
            }
            return row("app", cells)
        }

        /// `-` while the budget lasts, `!` at the expiration moment, `|` where it runs out.
        func budgetRow() -> String {
            var cells = [Cell](repeating: Cell(), count: columns)
            for b in lanes.budgets {
                for c in columns(b.start, min(b.runsOut, b.until)) { cells[c] = Cell(char: "-", sgr: "34") }
            }
            // Moments after stretches, so that a budget starting where another expires hides nothing.
            for b in lanes.budgets {
                if b.runsOut <= b.until { cells[column(b.runsOut)] = Cell(char: "|", sgr: "31") }
                if b.expiration <= b.until { cells[column(b.expiration)] = Cell(char: "!", sgr: "1;33") }
            }
            return row("budget", cells)
        }

        func taskRows(limit: Int) -> [String] {
            // Background tasks, and the tasks the system ran for plugins.
            let tasks = lanes.spans.filter { $0.kind == .task || $0.kind == .system }
            var rows: [String] = []
            for (task, name) in zip(tasks.prefix(limit), Chart.taskNames(lanes)) {
                var cells = [Cell](repeating: Cell(), count: columns)
                let sgr = task.failed ? "31" : "36"
                for c in columns(task.from, task.to) { cells[c] = Cell(char: "=", sgr: sgr) }
                for m in task.marks { cells[column(m.t)] = Cell(char: "!", sgr: "1;33") }
                if task.outcome == "expired" { cells[column(task.to)] = Cell(char: "x", sgr: "1;31") }
                if !task.ended { cells[column(task.to)] = Cell(char: ">", sgr: "36") }
                rows.append(row(name, cells))
            }
            if tasks.count > limit {
                rows.append(label("") + LaneChart.safeCut("… \(tasks.count - limit) more tasks", columns))
            }
            return rows
        }

        /// A row per plugin: `|` handler calls, `*` log lines, `W` warnings and `E` errors, the
        /// worst winning a shared column.
        func pluginRows() -> [String] {
            var rows: [String] = []
            for plugin in lanes.plugins {
                var cells = [Cell](repeating: Cell(), count: columns)
                var rank = [Int](repeating: 0, count: columns)
                func put(_ t: Double, _ cell: Cell, _ r: Int) {
                    let c = column(t)
                    if r >= rank[c] {
                        cells[c] = cell
                        rank[c] = r
                    }
                }
                for call in lanes.calls where call.plugin == plugin {
                    put(call.time.seconds, Cell(char: "|", sgr: "2"), 1)
                }
                for log in lanes.logs where log.text("plugin") == plugin {
                    switch log.text("level") {
                    case "error": put(log.t, Cell(char: "E", sgr: "1;31"), 4)
                    case "warning": put(log.t, Cell(char: "W", sgr: "33"), 3)
                    default: put(log.t, Cell(char: "*", sgr: "37"), 2)
                    }
                }
                for m in lanes.markers where m.text("plugin") == plugin && m.event == .pluginError {
                    put(m.t, Cell(char: "E", sgr: "1;31"), 4)
                }
                if rank.allSatisfy({ $0 == 0 }) { continue }
                rows.append(row(plugin, cells))
            }
            return rows
        }

        /// Terminations `T`, kills `K`, the app's ordinary end `e` (a `terminate`, suspended or
        /// not), plugin errors `E`, watchdogs `W`, memory warnings `m`, relaunches `R`, anything
        /// else `+`.
        func markerRow() -> String {
            var cells = [Cell](repeating: Cell(), count: columns)
            for m in lanes.markers {
                let cell: Cell
                switch (RunLanes.ending(m.event), m.event) {
                case (.terminated, _): cell = Cell(char: "T", sgr: "1;41;37")
                case (.killed, _): cell = Cell(char: "K", sgr: "1;31")
                case (.ordinary, _): cell = Cell(char: "e", sgr: "1")
                case (nil, .pluginError): cell = Cell(char: "E", sgr: "1;31")
                case (nil, .watchdog): cell = Cell(char: "W", sgr: "1;33")
                case (nil, .relaunch): cell = Cell(char: "R", sgr: "32")
                case (nil, .memoryWarning), (nil, .didReceiveMemoryWarning): cell = Cell(char: "m", sgr: "35")
                default: cell = Cell(char: "+", sgr: "2")
                }
                let c = column(m.t)
                if cells[c].char != "T" { cells[c] = cell }
            }
            return row("events", cells)
        }

        /// A line per failed expectation and for the termination, under the chart.
        func failures(width: Int) -> [String] {
            var texts: [String] = []
            if let term = lanes.termination {
                let parts = ["kind", "plugin", "reason"].compactMap { key in
                    term[key].map { "\(key) \(RunLanes.display($0))" }
                }
                let at = term["t"].map { " at \(RunLanes.display($0))s" } ?? ""
                texts.append("TERMINATED\(at): " + parts.joined(separator: ", "))
            }
            for e in lanes.failedExpectations {
                let line = e["line"].map { "line \(RunLanes.display($0)): " } ?? ""
                texts.append("FAILED \(line)\(e["text"].map(RunLanes.display) ?? e.serialized())")
            }
            return texts.map { text in
                let cut = LaneChart.safeCut(text, width)
                return colour ? "\u{1B}[1;31m\(cut)\u{1B}[0m" : cut
            }
        }

        /// Every mark the chart uses, wrapped to `width` rather than cut, so none goes unexplained.
        func legend(width: Int) -> [String] {
            let items = [
                "A active", "i inactive", "b background", "s suspended", ". not running", "= task", "! expiring",
                "x expired", "> never ended", "- budget", "| call (red: budget ends)", "* log", "W warning or watchdog",
                "E error", "T terminated", "K killed or force-quit", "e ended (terminate)", "m memory warning", "R relaunch", "+ other event",
            ]
            var lines: [String] = []
            var line = ""
            for item in items {
                if !line.isEmpty, line.count + 2 + item.count > width {
                    lines.append(line)
                    line = ""
                }
                line += (line.isEmpty ? "" : "  ") + item
            }
            if !line.isEmpty { lines.append(line) }
            return lines.map { text in
                let cut = LaneChart.safeCut(text, width)
                return colour ? "\u{1B}[2m\(cut)\u{1B}[0m" : cut
            }
        }
    }

    /// Text that takes one column per character: controls (escape sequences from a report
    /// included) and characters outside Latin scripts, which a terminal may draw two columns wide
    /// or not at all, become `?`.
    static func safe(_ text: String) -> String {
        text.replacingScalars { s in
            let v = s.value
            let printable = (v >= 0x20 && v < 0x7F) || (v >= 0xA0 && v < 0x300) || v == 0x2026
            return printable ? nil : "?"
        }
    }

    /// `safe(text)` cut to `width` characters.
    static func safeCut(_ text: String, _ width: Int) -> String {
        String(Array(safe(text)).prefix(max(width, 0)))
    }

    /// A round step (1, 2 or 5 times a power of ten) at least `raw` seconds.
    static func niceStep(_ raw: Double) -> Double {
        var step = 0.001
        while step < raw && step < 1e12 {
            if step * 2 >= raw { return step * 2 }
            if step * 5 >= raw { return step * 5 }
            step *= 10
        }
        return step
    }

    /// Seconds for an axis: `0s`, `2.5s`, `120s`.
    static func seconds(_ t: Double) -> String {
        ReportNumber.seconds(RunLanes.clamp(t, -1e9, 1e9)) + "s"
    }
}
