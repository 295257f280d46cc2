import ArgumentParser
import Foundation
import Lifeline

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load every plugin, run nothing, and report what fails to load and why.",
        discussion: """
            Example:
              lifeline check --plugins plugins

            One line per plugin, in name order:
              ok   NAME (KIND)
              FAIL NAME (KIND): why it did not load

            Each plugin is loaded in a process of its own. A plugin that overruns the launch
            limit and cannot be stopped (Lua stuck inside one C call, or Swift code) gets
            "FAIL NAME (KIND): ... and could not be stopped (...)"; its process is ended and
            the next plugin is checked.

            Exit codes: 0 every plugin loads, 65 one or more do not (each is listed with
            file:line), 70 the check of a plugin ended without a verdict (a host crash).
            """
    )

    @OptionGroup var pluginOptions: PluginOptions

    @OptionGroup var profileOptions: ProfileOptions

    /// Given to the process that checks one plugin (see `ChildProcess`): its name...
    @Option(help: .hidden)
    var onlyPlugin: String?

    /// ...and the state dir for its store, which the parent made and removes.
    @Option(help: .hidden)
    var checkStateDir: String?

    func validate() throws {
        if (onlyPlugin == nil) != (checkStateDir == nil) {
            throw ValidationError("--only-plugin and --check-state-dir go together")
        }
    }

    func run() throws {
        bootstrapLogging(level: profileOptions.level)
        if let onlyPlugin, let checkStateDir { checkOne(onlyPlugin, stateDirectory: checkStateDir) }
        // Ended by a signal, the check still removes its state dirs and the plugin's process.
        ExitOnSignals.install(before: ChildProcess.killRunning)
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let descriptors = try pluginOptions.descriptors().sorted { $0.name < $1.name }
            let profile = try profileOptions.resolved()
            let states = try TemporaryDirectory(prefix: "lifeline-check-")
            defer { states.remove() }
            // The plugin's process gives up on its own a stop grace (1 s) after the launch limit;
            // this is for a process that cannot even do that.
            let timeout = profile.launchLimit + HostConfiguration().stopGrace + 10
            var failed = 0, broken = 0
            for (index, descriptor) in descriptors.enumerated() {
                let stateDirectory = states.path + "/\(index)"
                guard mkdir(stateDirectory, 0o700) == 0 else {
                    throw .internalError("cannot make '\(stateDirectory)': \(String(cString: strerror(errno)))")
                }
                let outcome = ChildProcess.run(
                    Array(CommandLine.arguments.dropFirst())
                        // With "=", a name that starts with "-" is still read as the value.
                        + ["--only-plugin=\(descriptor.name)", "--check-state-dir=\(stateDirectory)"],
                    directory: stateDirectory, timeout: timeout, sharesStderr: true)
                let verdict = Verdict(outcome, of: descriptor, limit: profile.launchLimit)
                writeLine(verdict.text)
                switch verdict.kind {
                case .loaded: break
                case .failed: failed += 1
                case .noVerdict: broken += 1
                }
            }
            if broken > 0 {
                throw .internalError("the check of \(broken) plugin\(broken == 1 ? "" : "s") ended without a verdict")
            }
            if failed > 0 { throw .badInput("\(failed) plugin\(failed == 1 ? "" : "s") failed to load") }
            return 0
        }
    }

    /// Checks the one plugin named `name` and exits: 0 and "ok ..." when it loads, 65 and
    /// "FAIL ..." when it does not, also when the watchdog gives up on it.
    private func checkOne(_ name: String, stateDirectory: String) -> Never {
        do throws(LifelineError) {
            guard let descriptor = try pluginOptions.descriptors().first(where: { $0.name == name }) else {
                throw .internalError("no plugin is named '\(name)'")
            }
            let label = "\(descriptor.name) (\(descriptor.kind.rawValue))"
            var configuration = HostConfiguration(
                profile: try profileOptions.resolved(), loadFailurePolicy: .skip,
                onUnpreemptibleOverrun: { overrun in
                    // The plugin's code is still running and cannot be stopped: give the verdict
                    // and end this process; the check goes on with the next plugin.
                    switch overrun {
                    case .loadFailed(let error): writeLine("FAIL \(label): \(error.message)")
                    case .terminated(let termination, _): writeLine("FAIL \(label): \(termination.reason)")
                    }
                    Foundation.exit(65)
                })
            configuration.database = StateDatabase.lazy(inExistingDirectory: stateDirectory)
            let failure = LifelineHost.check(configuration: configuration, plugins: [descriptor]).first?.failure
            if let failure {
                writeLine("FAIL \(label): \(failure)")
                Foundation.exit(65)
            }
            writeLine("ok   \(label)")
            Foundation.exit(0)
        } catch {
            exitWithError(error)
        }
    }
}

/// What became of one plugin's check, from what its process did.
private struct Verdict {
    enum Kind {
        case loaded
        case failed
        /// The process ended without saying (it crashed, say): a host error, not the plugin's.
        case noVerdict
    }
    var kind: Kind
    /// The line(s) to print: what the process printed, or what the check says in its place.
    var text: String

    init(kind: Kind, text: String) {
        self.kind = kind
        self.text = text
    }

    init(_ outcome: ChildProcess.Outcome, of descriptor: PluginDescriptor, limit: Double) {
        let label = "\(descriptor.name) (\(descriptor.kind.rawValue))"
        if let startError = outcome.startError {
            self.init(kind: .noVerdict, text: "FAIL \(label): the check could not start a process for it: \(startError)")
            return
        }
        if outcome.timedOut {
            let message = "plugin '\(descriptor.name)' did not finish loading within the launch limit "
                + "(\(ReportNumber.seconds(limit)) s) and could not be stopped"
            self.init(kind: .failed, text: "FAIL \(label): \(message)")
            return
        }
        let printed = outcome.stdout.trimmingCharacters(in: .newlines)
        let status = outcome.status ?? 0
        if outcome.exited && status == 0 && printed.hasPrefix("ok ") {
            self.init(kind: .loaded, text: printed)
        } else if outcome.exited && status == 65 && printed.hasPrefix("FAIL ") {
            self.init(kind: .failed, text: printed)
        } else {
            let how = outcome.exited ? "exit status \(status)" : "signal \(status)"
            let said = printed.isEmpty ? "" : printed + "\n"
            self.init(
                kind: .noVerdict, text: said + "FAIL \(label): the check of this plugin ended without a verdict (\(how))")
        }
    }
}

/// Writes lines to stderr at once, made safe for a terminal as `writeLine` does.
func writeErrorLines(_ lines: [String]) {
    let text = lines.map { Terminal.safe($0, indent: "    ") + "\n" }.joined()
    FileHandle.standardError.write(Data(text.utf8))
}

/// Writes one line to stdout at once (unbuffered: the process may end from another thread), made
/// safe for a terminal; a line break in it starts an indented continuation line.
func writeLine(_ line: String) {
    FileHandle.standardOutput.write(Data((Terminal.safe(line, indent: "    ") + "\n").utf8))
}
