import ArgumentParser
import Foundation
import Lifeline

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load every plugin, run nothing, and report what fails to load and why.",
        discussion: """
            Example:
              lifeline check --plugins plugins

            Exit codes: 0 every plugin loads, 65 one or more do not (each is listed with file:line).
            """
    )

    @Option(help: "The folder of plugins: every subfolder with an init.lua.")
    var plugins: String

    @OptionGroup var profileOptions: ProfileOptions

    func run() throws {
        bootstrapLogging(level: profileOptions.level)
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let descriptors = try loadDescriptors(plugins)
            let configuration = HostConfiguration(
                profile: try profileOptions.resolved(), loadFailurePolicy: .skip,
                onUnpreemptibleOverrun: { overrun in
                    // A Swift plugin's load cannot be stopped: say so, and end the check here.
                    if case .loadFailed(let error) = overrun { print("FAIL \(error.message)") }
                    exitWithError(.badInput("a plugin failed to load"))
                })
            var failed = 0
            for (plugin, failure) in LifelineHost.check(configuration: configuration, plugins: descriptors) {
                if let failure {
                    failed += 1
                    print("FAIL \(plugin.name) (\(plugin.kind.rawValue)): \(failure)")
                } else {
                    print("ok   \(plugin.name) (\(plugin.kind.rawValue))")
                }
            }
            if failed > 0 { throw .badInput("\(failed) plugin\(failed == 1 ? "" : "s") failed to load") }
            return 0
        }
    }
}
