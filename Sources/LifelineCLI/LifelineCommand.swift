import ArgumentParser
import Foundation
import Lifeline
import LifelineLua
import LifelineNative
import Logging

/// The whole command line, for a binary's `main`. `lifeline` itself is
///
/// ```swift
/// await Lifeline.main(swiftPlugins: [Heartbeat.self])
/// ```
///
/// and a package of one's own builds its own `lifeline` the same way, with its own plugins: every
/// subcommand then knows them by name (`swift = "NAME"` in a plugin.toml).
public enum Lifeline {
    /// Parses the process's arguments and runs the command; never returns.
    public static func main(swiftPlugins: [any SwiftPlugin.Type] = []) async -> Never {
        await main(plugins: swiftPlugins.map { $0.descriptor })
    }

    /// The same, with plugins as descriptors (a plugin made without `SwiftPlugin`).
    public static func main(plugins: [PluginDescriptor]) async -> Never {
        BuiltInPlugins.all = plugins
        LifelineCommand.main()
        exit(0)
    }
}

struct LifelineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lifeline",
        abstract: "A plugin host with the app lifecycle and background-execution rules of iOS.",
        subcommands: [Simulate.self, Run.self, Ctl.self, Check.self, Transfers.self, TestCommand.self, Explore.self, New.self]
    )

    @Flag(
        help: ArgumentHelp(
            "Print the folder that holds lifeline_plugin.h, the C header of native plugins, and exit: "
                + "cc -shared -fPIC -I\"$(lifeline --include-dir)\" plugin.c -o plugin.so"))
    var includeDir = false

    func run() throws {
        // Without the flag, what a command of subcommands does by default: its help.
        guard includeDir else { throw CleanExit.helpRequest(self) }
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            print(try NativeHeader.includeDirectory())
            return 0
        }
    }
}

/// The Swift plugins compiled into this binary: set once by `Lifeline.main`, before any command
/// runs and before any other thread starts.
enum BuiltInPlugins {
    nonisolated(unsafe) static var all: [PluginDescriptor] = []
}

/// Runs a command body, turning a LifelineError into its message and exit code.
func runReportingErrors(_ body: () throws(LifelineError) -> Int32) throws -> Never {
    do {
        let code = try body()
        exit(code)
    } catch {
        exitWithError(error)
    }
}

/// Prints the error's message and exits with its code.
func exitWithError(_ error: LifelineError) -> Never {
    FileHandle.standardError.write(Data("lifeline: \(Terminal.safe(error.message))\n".utf8))
    exit(error.exitCode)
}

/// Sends the host's log to stderr, once, on the host's clock.
func bootstrapLogging(level: Logger.Level) {
    let colour = Terminal.colours(2)
    LoggingSystem.bootstrap { label in
        var handler = ClockedLogHandler(label: label, colour: colour)
        handler.logLevel = level
        return handler
    }
}

/// One line per log message on stderr, stamped with the host's time the way the timeline is
/// (`[    2.000s] info plugin.flush-log: flushed 3 lines`), so a run's output has one clock. The
/// host puts its time in the metadata `t`; a line from outside any host has no stamp.
struct ClockedLogHandler: LogHandler {
    let label: String
    let colour: Bool
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata.merging(event.metadata ?? [:]) { $1 }
        let time = all.removeValue(forKey: "t").flatMap { Double("\($0)") }
        let stamp = time.map { "[\(TimelineEvent.paddedSeconds($0))s]" } ?? String(repeating: " ", count: 12)
        let level = event.level == .warning ? "warning" : event.level.rawValue
        var line = "\(stamp) \(level) \(label): \(event.message)"
        if !all.isEmpty {
            line += " " + all.keys.sorted().map { "\($0)=\(all[$0]!)" }.joined(separator: " ")
        }
        line = Terminal.safe(line, indent: String(repeating: " ", count: stamp.count + 1))
        if colour {
            let code =
                switch event.level {
                case .error, .critical: "31"
                case .warning: "33"
                case .debug, .trace: "2"
                default: "36"
                }
            line = "\u{1B}[\(code)m\(line)\u{1B}[0m"
        }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

/// Refuses an output path that cannot be written, before the command runs: its folder is
/// missing or not writable, or the path is a folder. The exit code (70) and the start of the
/// message are those of a write that fails at the end, and a long `run` or `test` cannot end by
/// losing its report to a typo.
func checkWritable(_ path: String?, _ flag: String) {
    guard let path, path != "-" else { return }
    var isFolder: ObjCBool = false
    let problem: String
    if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
        problem = "it is a folder"
    } else {
        let parent = parentFolder(of: path)
        if !FileManager.default.fileExists(atPath: parent, isDirectory: &isFolder) || !isFolder.boolValue {
            problem = "there is no folder '\(parent)'"
        } else if access(parent, W_OK) != 0 {
            problem = "the folder '\(parent)' is not writable"
        } else {
            return
        }
    }
    exitWithError(.internalError("cannot write '\(path)' (\(flag)): \(problem)"))
}
