// The harness: every row measures Lifeline and its baseline in the same process, in alternating
// rounds (Lifeline, baseline, Lifeline, baseline, ...), and keeps the median of each side, so that
// noise on a shared machine falls on both and cancels in the ratio.
//
// Why not ordo-one/package-benchmark: it measures each benchmark on its own, one after the other,
// and compares a run with a baseline saved from an earlier run. It has no notion of a second
// measurement taken beside the first in the same run, nor of their ratio, which is what every row
// here is. See docs/benchmarks.md.
import Foundation
import Lifeline

/// One line of the table and one object of the JSON.
struct Row {
    var name: String
    var unit: String
    var value: Double
    /// What the same work costs without Lifeline, measured in the same run; nil where the issue
    /// gives an absolute target instead.
    var baseline: (name: String, value: Double)?
    /// The target, in words: "≤ 1.5", "≥ 0.8", "≤ 1 ms".
    var target: String
    /// Whether the row meets its target; nil for rows that only report.
    var met: Bool?
    /// Other figures measured beside it (OperationQueue beside DispatchQueue, p50 beside p99).
    var others: [(name: String, value: Double)] = []
    /// Figures shown beside the row with no ratio: an allocation count, a share of a count.
    var notes: [(name: String, value: String)] = []
    /// Instructions per unit of each side, counted by callgrind (`--instructions`).
    var instructions: InstructionFigures?
    /// Whether the counted sides are the timed ones, so that the two ratios should agree; false
    /// where the count answers another question (simulate.long counts the host's share).
    var instructionsMatchTimed = true

    var ratio: Double? { baseline.map { value / $0.value } }

    /// Whether the instruction ratio is within 20 % of the timed ratio.
    var instructionsAgree: Bool? {
        guard let ratio, let instructions, instructionsMatchTimed else { return nil }
        return abs(instructions.ratio - ratio) <= 0.2 * ratio
    }
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func percentile(_ xs: [Double], _ p: Double) -> Double {
    let s = xs.sorted()
    return s[min(s.count - 1, max(0, Int((Double(s.count) * p).rounded(.up)) - 1))]
}

/// Runs each of `sides` once per round, in order, for `rounds` rounds, and gives each side's median.
func interleaved(rounds: Int, _ sides: [() -> Double]) -> [Double] {
    var samples = Array(repeating: [Double](), count: sides.count)
    for _ in 0..<rounds {
        for (i, side) in sides.enumerated() { samples[i].append(side()) }
    }
    return samples.map(median)
}

/// Nanoseconds `body` takes, divided by `per`.
func nanoseconds(per: Int, _ body: () -> Void) -> Double {
    let start = Monotonic.nanoseconds()
    body()
    return Double(Monotonic.nanoseconds() - start) / Double(per)
}

// MARK: - Output

func formatted(_ x: Double) -> String {
    if x >= 100 { return String(format: "%.0f", x) }
    if x >= 10 { return String(format: "%.1f", x) }
    return String(format: "%.3g", x)
}

func table(_ rows: [Row]) -> String {
    let counted = rows.contains { $0.instructions != nil }
    var lines: [[String]] = [["benchmark", "unit", "Lifeline", "baseline", "baseline's figure", "ratio", "target", "met"]]
    if counted { lines[0] += ["instructions/unit", "baseline's", "ratio", "agrees"] }
    for r in rows {
        var line = [
            r.name, r.unit, formatted(r.value), r.baseline?.name ?? "—", r.baseline.map { formatted($0.value) } ?? "—",
            r.ratio.map { String(format: "%.2f", $0) } ?? "—", r.target, r.met.map { $0 ? "yes" : "NO" } ?? "—",
        ]
        if counted {
            line += r.instructions.map { [formatted($0.value), formatted($0.baseline), String(format: "%.2f", $0.ratio)] }
                ?? ["—", "—", "—"]
            line.append(r.instructionsAgree.map { $0 ? "yes" : "NO" } ?? "—")
        }
        lines.append(line)
        for o in r.others {
            let ratio = r.baseline == nil ? "—" : String(format: "%.2f", r.value / o.value)
            lines.append(["", "", "", o.name, formatted(o.value), ratio, "", ""] + (counted ? ["", "", "", ""] : []))
        }
        for n in r.notes {
            lines.append(["", "", "", n.name, n.value, "—", "", ""] + (counted ? ["", "", "", ""] : []))
        }
    }
    let widths = (0..<lines[0].count).map { c in lines.map { $0[c].count }.max()! }
    return lines.enumerated().map { i, cells in
        let line = cells.enumerated().map { c, cell in
            let pad = String(repeating: " ", count: widths[c] - cell.count)
            return (c == 0 || c == 1 || c == 3 || c == 6 || c == 11) ? cell + pad : pad + cell
        }.joined(separator: "  ")
        return i == 0 ? line + "\n" + String(repeating: "-", count: line.count) : line
    }.joined(separator: "\n")
}

/// `{"benchmarks": [{"name", "unit", "value", "baseline": {"name", "value"} | null, "ratio" | null, ...}]}`
func json(_ rows: [Row]) -> String {
    func number(_ x: Double) -> String {
        x.isFinite ? (x == x.rounded() && abs(x) < 1e15 ? String(Int64(x)) : String(format: "%.6g", x)) : "null"
    }
    func string(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
    let objects = rows.map { r -> String in
        var fields = [
            "\"name\": \(string(r.name))", "\"unit\": \(string(r.unit))", "\"value\": \(number(r.value))",
            "\"baseline\": " + (r.baseline.map { "{\"name\": \(string($0.name)), \"value\": \(number($0.value))}" } ?? "null"),
            "\"ratio\": " + (r.ratio.map(number) ?? "null"),
            "\"target\": \(string(r.target))",
            "\"met\": " + (r.met.map { $0 ? "true" : "false" } ?? "null"),
        ]
        if let i = r.instructions {
            fields.append(
                "\"instructions\": {\"value\": \(number(i.value)), \"baseline\": \(number(i.baseline)), "
                    + "\"ratio\": \(number(i.ratio)), \"agrees\": "
                    + (r.instructionsAgree.map { $0 ? "true" : "false" } ?? "null") + "}")
        }
        if !r.notes.isEmpty {
            fields.append(
                "\"notes\": [" + r.notes.map { "{\"name\": \(string($0.name)), \"value\": \(string($0.value))}" }
                    .joined(separator: ", ") + "]")
        }
        if !r.others.isEmpty {
            fields.append(
                "\"others\": [" + r.others.map { "{\"name\": \(string($0.name)), \"value\": \(number($0.value))}" }
                    .joined(separator: ", ") + "]")
        }
        return "    {" + fields.joined(separator: ", ") + "}"
    }
    return "{\"benchmarks\": [\n" + objects.joined(separator: ",\n") + "\n]}\n"
}
