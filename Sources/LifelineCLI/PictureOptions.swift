import ArgumentParser
import Foundation
import Lifeline

/// The pictures of a run: an HTML page, a Chrome trace, a lane chart on the terminal.
struct PictureOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Write one self-contained HTML page of the run here.", valueName: "FILE"))
    var html: String?

    @Option(
        help: ArgumentHelp(
            "Write Chrome's trace-event JSON here (Perfetto and chrome://tracing open it).", valueName: "FILE"))
    var trace: String?

    @Flag(help: "Print a lane chart of the run: one lane per background task under the app's state.")
    var lanes = false

    func validate() throws {
        checkWritable(html, "--html")
        checkWritable(trace, "--trace")
    }

    /// Whether any picture was asked for: then the host notes every call's real duration.
    var any: Bool { html != nil || trace != nil || lanes }

    /// Writes the pictures asked for. The lane chart goes to stdout, or to stderr when stdout
    /// already carries the report (`--report -`).
    func write(_ runs: [RenderedRun], stdoutTaken: Bool) throws(LifelineError) {
        if let html { try RunOutput.write(ReportPage.html(runs), to: html) }
        if let trace { try RunOutput.write(ChromeTrace.json(runs).serialized() + "\n", to: trace) }
        if lanes {
            let fd: Int32 = stdoutTaken ? 2 : 1
            let text = runs.map { LaneChart.text($0, width: Terminal.width(fd), colour: Terminal.colours(fd)) }
                .joined(separator: "\n")
            FileHandle(fileDescriptor: fd, closeOnDealloc: false).write(Data(text.utf8))
        }
    }
}

/// What the terminal on a file descriptor can show.
enum Terminal {
    /// Its width in columns: the terminal's own, else $COLUMNS, else 100.
    static func width(_ fd: Int32) -> Int {
        var size = winsize()
        if ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let columns = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), columns > 0 {
            return columns
        }
        return 100
    }

    /// Text that may hold a plugin's words, made harmless for a terminal (`TerminalText.safe`).
    static func safe(_ text: String, indent: String = "") -> String { TerminalText.safe(text, indent: indent) }

    /// Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
    static func colours(_ fd: Int32) -> Bool {
        isatty(fd) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true
    }
}
