import ArgumentParser
import Lifeline
import Logging

/// The profile and every figure of it that can be overridden (SPEC 4.3).
struct ProfileOptions: ParsableArguments {
    @Option(help: "The profile: ios6, ios7 or ios13.")
    var profile: String = "ios13"

    @Option(help: "Background time budget in seconds.")
    var budget: Double?

    @Option(help: "Seconds before the budget runs out that expiration handlers are called.")
    var expirationLead: Double?

    @Option(help: "Watchdog limit in seconds for loading plugins and for didFinishLaunching.")
    var launchLimit: Double?

    @Option(help: "Watchdog limit in seconds for didEnterBackground.")
    var backgroundLimit: Double?

    @Option(help: "Watchdog limit in seconds for other notifications and timers.")
    var transitionLimit: Double?

    @Option(help: "Watchdog limit in seconds for willTerminate.")
    var terminateLimit: Double?

    @Option(help: "Watchdog limit in seconds for each expiration handler.")
    var expirationHandlerLimit: Double?

    @Option(help: "How many background tasks may be active at once.")
    var taskLimit: Int?

    @Option(help: "Log level: debug, info, warning or error.")
    var logLevel: String = "info"

    func validate() throws {
        let figures: [(String, Double?)] = [
            ("--budget", budget), ("--expiration-lead", expirationLead), ("--launch-limit", launchLimit),
            ("--background-limit", backgroundLimit), ("--transition-limit", transitionLimit),
            ("--terminate-limit", terminateLimit), ("--expiration-handler-limit", expirationHandlerLimit),
        ]
        for (flag, value) in figures {
            if let value, !(value.isFinite && value >= 0) {
                throw ValidationError("\(flag) must be a number of seconds >= 0")
            }
        }
        if let taskLimit, taskLimit < 1 { throw ValidationError("--task-limit must be at least 1") }
        if Logger.Level(rawValue: logLevel) == nil && logLevel != "warning" {
            throw ValidationError("--log-level must be debug, info, warning or error")
        }
        do { _ = try Profile.named(profile) } catch { throw ValidationError(error.message) }
    }

    var level: Logger.Level { logLevel == "warning" ? .warning : Logger.Level(rawValue: logLevel) ?? .info }

    func resolved() throws(LifelineError) -> Profile {
        var p = try Profile.named(profile)
        if let budget { p.budget = budget }
        if let expirationLead { p.expirationLead = expirationLead }
        if let launchLimit { p.launchLimit = launchLimit }
        if let backgroundLimit { p.backgroundLimit = backgroundLimit }
        if let transitionLimit { p.transitionLimit = transitionLimit }
        if let terminateLimit { p.terminateLimit = terminateLimit }
        if let expirationHandlerLimit { p.expirationHandlerLimit = expirationHandlerLimit }
        if let taskLimit { p.taskLimit = taskLimit }
        return p
    }
}
