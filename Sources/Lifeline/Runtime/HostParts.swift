import Logging

/// The host's components that a plugin's context reaches. A context never holds the host itself:
/// each of its calls goes to the one component that does that work.
struct HostParts {
    let session: AppSession
    let caller: GuardedCaller
    let subscriptions: SubscriptionTable
    let tasks: TaskRuntime
    let timers: TimerTable
    let waits: WaitTable
    let stores: StoreRegistry
    let queues: QueueRegistry
    let transfers: TransferEvents
    let slices: SwiftSlices
    let system: SystemWork
    /// Seconds since 1970 at the host's start.
    let epochAtStart: Double
    /// Makes each plugin's logger from its name.
    let pluginLogger: @Sendable (String) -> Logger
    /// The host's log level, which the plugins' loggers follow.
    let logLevel: Logger.Level
}
