import ArgumentParser
import Lifeline
import Logging

/// The profile and every figure of it that can be overridden (SPEC 4.3).
struct ProfileOptions: ParsableArguments {
    @Option(help: "The profile: ios6, ios7 or ios13 (default: a scenario's profile line, else ios13); over a scenario's profile line.")
    var profile: String?

    @Option(help: SecondsOption.budget.help)
    var budget: Profile.Seconds?

    @Option(help: SecondsOption.expirationLead.help)
    var expirationLead: Profile.Seconds?

    @Option(help: SecondsOption.launchLimit.help)
    var launchLimit: Profile.Seconds?

    @Option(help: SecondsOption.backgroundLimit.help)
    var backgroundLimit: Profile.Seconds?

    @Option(help: SecondsOption.transitionLimit.help)
    var transitionLimit: Profile.Seconds?

    @Option(help: SecondsOption.terminateLimit.help)
    var terminateLimit: Profile.Seconds?

    @Option(help: SecondsOption.expirationHandlerLimit.help)
    var expirationHandlerLimit: Profile.Seconds?

    @Option(help: "How many background tasks may be active at once.")
    var taskLimit: Int?

    @Option(help: SecondsOption.fetchLimit.help)
    var fetchLimit: Profile.Seconds?

    @Option(help: SecondsOption.refreshTaskLimit.help)
    var refreshTaskLimit: Profile.Seconds?

    @Option(help: SecondsOption.processingTaskLimit.help)
    var processingTaskLimit: Profile.Seconds?

    @Option(help: SecondsOption.transferEventsLimit.help)
    var transferEventsLimit: Profile.Seconds?

    @Option(
        help: ArgumentHelp(
            "When the system runs scheduled tasks: earliest (at their earliestBegin, the default), delay:DURATION (that long after it), or manual (only on run-tasks); over a scenario's task-policy line.",
            valueName: "POLICY"))
    var taskPolicy: String?

    @Option(help: "Log level: debug, info, warning or error.")
    var logLevel: String = "info"

    func validate() throws {
        _ = try figuresInSeconds()
        if let taskLimit, taskLimit < 1 { throw ValidationError("--task-limit must be at least 1") }
        if Logger.Level(rawValue: logLevel) == nil && logLevel != "warning" {
            throw ValidationError("--log-level must be debug, info, warning or error")
        }
        if let profile {
            do { _ = try Profile.named(profile) } catch { throw ValidationError(error.message) }
        }
        if let taskPolicy {
            do { _ = try TaskPolicy.parse(taskPolicy, at: "--task-policy") } catch { throw ValidationError(error.message) }
        }
    }

    /// The scheduled tasks' policy, when the flag is given; `validate()` has read it.
    var policy: TaskPolicy? { taskPolicy.flatMap { try? TaskPolicy.parse($0, at: "--task-policy") } }

    var level: Logger.Level { logLevel == "warning" ? .warning : Logger.Level(rawValue: logLevel) ?? .info }

    /// The profile in force: the flag's, else the scenario's `profile` line's, else ios13; then the
    /// scenario's `limit` lines; then the figure flags, which win over both.
    func resolved(scenario: Scenario? = nil) throws(LifelineError) -> Profile {
        var p: Profile
        if let scenario {
            p = try scenario.profile(named: profile)
        } else {
            p = try Profile.named(profile ?? Profile.ios13.name)
        }
        // validate() has read them all.
        guard let figures = try? figuresInSeconds() else { throw .internalError("a profile figure was not validated") }
        for (figure, seconds) in figures { p[keyPath: figure] = seconds }
        if let taskLimit { p.taskLimit = taskLimit }
        return p
    }

    /// The figures given in seconds, each read: one that is not a number of seconds gets
    /// ArgumentParser's message for a value it cannot read, one out of range ours.
    private func figuresInSeconds() throws -> [(WritableKeyPath<Profile, Double>, Double)] {
        let given: [(SecondsOption, Profile.Seconds?, WritableKeyPath<Profile, Double>)] = [
            (.budget, budget, \.budget), (.expirationLead, expirationLead, \.expirationLead),
            (.launchLimit, launchLimit, \.launchLimit), (.backgroundLimit, backgroundLimit, \.backgroundLimit),
            (.transitionLimit, transitionLimit, \.transitionLimit), (.terminateLimit, terminateLimit, \.terminateLimit),
            (.expirationHandlerLimit, expirationHandlerLimit, \.expirationHandlerLimit),
            (.fetchLimit, fetchLimit, \.fetchLimit), (.refreshTaskLimit, refreshTaskLimit, \.refreshTaskLimit),
            (.processingTaskLimit, processingTaskLimit, \.processingTaskLimit),
            (.transferEventsLimit, transferEventsLimit, \.transferEventsLimit),
        ]
        var figures: [(WritableKeyPath<Profile, Double>, Double)] = []
        for (option, text, figure) in given {
            guard let seconds = try option.value(text) else { continue }
            guard seconds.isFinite && seconds >= 0 else {
                throw ValidationError("\(option.flag) must be a number of seconds >= 0")
            }
            figures.append((figure, seconds))
        }
        return figures
    }
}

extension Profile.Seconds: ExpressibleByArgument {
    /// Takes any text: it is read in `validate`, where the flag is known, so that the message can
    /// name the flag and say what is wrong (`SecondsOption.value`).
    public init?(argument: String) { self.init(argument) }
}

/// An option given in seconds (`Profile.Seconds`): its flag and help, and its value, read with the
/// message ArgumentParser gives a value it cannot read, the reason and the help line included.
struct SecondsOption: Sendable {
    let flag: String
    let abstract: String

    static let budget = SecondsOption(flag: "--budget", abstract: "Background time budget in seconds.")
    static let expirationLead = SecondsOption(
        flag: "--expiration-lead", abstract: "Seconds before the budget runs out that expiration handlers are called.")
    static let launchLimit = SecondsOption(
        flag: "--launch-limit", abstract: "Watchdog limit in seconds for loading plugins and for didFinishLaunching.")
    static let backgroundLimit = SecondsOption(
        flag: "--background-limit", abstract: "Watchdog limit in seconds for didEnterBackground.")
    static let transitionLimit = SecondsOption(
        flag: "--transition-limit", abstract: "Watchdog limit in seconds for other notifications and timers.")
    static let terminateLimit = SecondsOption(
        flag: "--terminate-limit", abstract: "Watchdog limit in seconds for willTerminate.")
    static let expirationHandlerLimit = SecondsOption(
        flag: "--expiration-handler-limit", abstract: "Watchdog limit in seconds for each expiration handler.")

    static let fetchLimit = SecondsOption(
        flag: "--fetch-limit",
        abstract: "Seconds a plugin has to call the completion of a background fetch or a silent push.")
    static let refreshTaskLimit = SecondsOption(
        flag: "--refresh-task-limit", abstract: "Seconds an app refresh task may run before it must be completed.")
    static let processingTaskLimit = SecondsOption(
        flag: "--processing-task-limit", abstract: "Seconds a processing task may run before it must be completed.")
    static let transferEventsLimit = SecondsOption(
        flag: "--transfer-events-limit",
        abstract: "Seconds the app stays awake for the completion of didFinishTransferEvents.")

    var help: ArgumentHelp { ArgumentHelp(abstract, valueName: "SECONDS") }

    /// The seconds `given` says; nil when the option was not given.
    func value(_ given: Profile.Seconds?) throws -> Double? {
        guard let given else { return nil }
        do throws(LifelineError) {
            return try given.value(at: flag)
        } catch {
            throw ValidationError(
                "The value '\(given.text)' is invalid for '\(flag) <SECONDS>': \(error.message)\n"
                    + "Help:  \(flag) <SECONDS>  \(abstract)")
        }
    }
}
