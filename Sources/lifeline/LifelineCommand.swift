import ArgumentParser
import Foundation
import HeartbeatPlugin
import Lifeline
import LifelineLua
import Logging

@main
struct LifelineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lifeline",
        abstract: "A plugin host with the app lifecycle and background-execution rules of iOS.",
        subcommands: [Simulate.self, Run.self, Check.self, Transfers.self]
    )
}

/// The Swift plugins compiled into this binary.
enum BuiltInPlugins {
    static let all: [PluginDescriptor] = [Heartbeat.descriptor]
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
    FileHandle.standardError.write(Data("lifeline: \(error.message)\n".utf8))
    exit(error.exitCode)
}

/// Sends the host's log to stderr, once.
func bootstrapLogging(level: Logger.Level) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
}

/// All plugins: the Lua ones in the folder, and the Swift ones built in. Names must be unique.
func loadDescriptors(_ directory: String) throws(LifelineError) -> [PluginDescriptor] {
    let all = try LuaPluginLoader.descriptors(in: directory) + BuiltInPlugins.all
    var seen: Set<String> = []
    for d in all where !seen.insert(d.name).inserted {
        throw .badInput("two plugins are named '\(d.name)': rename the folder in '\(directory)'")
    }
    return all
}

func writeFile(_ text: String, to path: String) throws(LifelineError) {
    if path == "-" {
        FileHandle.standardOutput.write(Data(text.utf8))
        return
    }
    do {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    } catch {
        throw .internalError("cannot write '\(path)': \(error.localizedDescription)")
    }
}
