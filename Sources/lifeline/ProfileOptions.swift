import ArgumentParser
import Lifeline
import Logging

/// The profile and every figure of it that can be overridden (SPEC 4.3).
struct ProfileOptions: ParsableArguments {
    @Option(help: "The profile: ios6, ios7 or ios13.")
    var profile: String = "ios13"

    @Option(help: ArgumentHelp("Background time budget in seconds.", valueName: "SECONDS"), transform: seconds("--budget"))
    var budget: Double?

    @Option(help: ArgumentHelp("Seconds before the budget runs out that expiration handlers are called.", valueName: "SECONDS"), transform: seconds("--expiration-lead"))
    var expirationLead: Double?

    @Option(help: ArgumentHelp("Watchdog limit in seconds for loading plugins and for didFinishLaunching.", valueName: "SECONDS"), transform: seconds("--launch-limit"))
    var launchLimit: Double?

    @Option(help: ArgumentHelp("Watchdog limit in seconds for didEnterBackground.", valueName: "SECONDS"), transform: seconds("--background-limit"))
    var backgroundLimit: Double?

    @Option(help: ArgumentHelp("Watchdog limit in seconds for other notifications and timers.", valueName: "SECONDS"), transform: seconds("--transition-limit"))
    var transitionLimit: Double?

    @Option(help: ArgumentHelp("Watchdog limit in seconds for willTerminate.", valueName: "SECONDS"), transform: seconds("--terminate-limit"))
    var terminateLimit: Double?

    @Option(help: ArgumentHelp("Watchdog limit in seconds for each expiration handler.", valueName: "SECONDS"), transform: seconds("--expiration-handler-limit"))
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

/// Reads a command-line number of seconds: a plain number (`30`, `0.25`), or a duration as a
/// scenario writes one (`500ms`, `2m`, `5m10s`), since every duration Lifeline reads takes the
/// same forms. Range checks are the option's own.
func seconds(_ flag: String) -> @Sendable (String) throws -> Double {
    { text in
        if let value = Double(text) { return value }
        do throws(LifelineError) {
            return try Scenario.parseTime(text, at: flag).seconds
        } catch {
            throw ValidationError(error.message)
        }
    }
}
