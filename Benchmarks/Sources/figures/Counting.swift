// Steady figures for a shared machine: callgrind counts the instructions of both sides of the
// CPU-bound rows. A count does not move when another process takes the cores, so it checks the
// timed ratio: the two must agree within 20 % (docs/benchmarks.md).
//
// Each side runs in a child process under callgrind twice, with `steps` and with `2 * steps` steps
// of its work. The difference of the two totals is the work of `steps` steps alone: start-up,
// loading the plugins and shutting down cancel out.
import Foundation

/// A row whose two sides can be counted: each runs `steps` steps of its work, of `unitsPerStep`
/// units each (handler calls, operations, plugins).
struct CountedRow {
    var name: String
    var unitsPerStep: Int
    var steps: Int
    var lifeline: (Int) -> Void
    var baseline: (Int) -> Void
    /// What the count adds to the row, where its target is counted too (simulate.long's host share).
    var judge: ((inout Row, InstructionFigures) -> Void)? = nil
}

/// Instructions per unit of each side, and their ratio.
struct InstructionFigures {
    var value: Double
    var baseline: Double
    var ratio: Double { value / baseline }
}

/// Runs one side of a counted row in this process: `figures count NAME lifeline|baseline STEPS`.
@MainActor func runCountedSide(_ arguments: [String]) -> Bool {
    guard arguments.count == 4, arguments[0] == "count", let row = countedRows.first(where: { $0.name == arguments[1] }),
        let steps = Int(arguments[3]), steps > 0
    else { return false }
    switch arguments[2] {
    case "lifeline": row.lifeline(steps)
    case "baseline": row.baseline(steps)
    default: return false
    }
    return true
}

/// Counts both sides of `row` under callgrind.
func countInstructions(_ row: CountedRow) -> InstructionFigures {
    let binary = strippedBinary
    func perUnit(_ side: String) -> Double {
        let once = callgrindTotal(binary, [row.name, side, String(row.steps)])
        let twice = callgrindTotal(binary, [row.name, side, String(2 * row.steps)])
        return Double(twice - once) / Double(row.steps * row.unitsPerStep)
    }
    return InstructionFigures(value: perUnit("lifeline"), baseline: perUnit("baseline"))
}

/// This program without its debug information: Valgrind 3.19 cannot read the DWARF 5 that Swift
/// writes (the symbols stay). Made once per run.
private let strippedBinary: String = {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("figures-counted-\(getpid())").path
    let objcopy = Process()
    objcopy.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    objcopy.arguments = ["objcopy", "--strip-debug", CommandLine.arguments[0], path]
    do { try objcopy.run() } catch { fail("cannot run objcopy: \(error)") }
    objcopy.waitUntilExit()
    if objcopy.terminationStatus != 0 { fail("objcopy --strip-debug failed") }
    atexit { unlink(FileManager.default.temporaryDirectory.appendingPathComponent("figures-counted-\(getpid())").path) }
    return path
}()

/// The instructions callgrind collected over a whole run of `figures count ARGS`, every thread.
func callgrindTotal(_ binary: String, _ arguments: [String]) -> Int {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    child.arguments = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary, "count"] + arguments
    let err = Pipe()
    child.standardError = err
    child.standardOutput = FileHandle.nullDevice
    do { try child.run() } catch { fail("cannot run valgrind: \(error)") }
    let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    // "==1234== Collected : 123456789"
    guard child.terminationStatus == 0,
        let line = text.split(separator: "\n").last(where: { $0.contains("Collected :") }),
        let total = Int(line.split(separator: ":").last!.trimmingCharacters(in: .whitespaces))
    else { fail("callgrind could not count figures count \(arguments.joined(separator: " ")):\n\(text)") }
    return total
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("figures: \(message)\n".utf8))
    exit(70)
}
