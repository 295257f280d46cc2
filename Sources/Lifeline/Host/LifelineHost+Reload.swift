import Logging

/// What a reload did (SIGHUP, `lifeline ctl reload`, a scenario's `reload` line).
public struct ReloadOutcome: Sendable, Equatable {
    /// The plugins' generation after it: unchanged when the reload was refused or found nothing
    /// changed.
    public var generation: Int
    /// Plugins whose files changed, in name order: each got a new generation.
    public var changed: [String] = []
    /// Plugins that were not there before.
    public var added: [String] = []
    /// Plugins that are gone.
    public var removed: [String] = []
    /// How many plugins kept their state.
    public var unchanged = 0
    /// Plugins that passed the check but failed to load for real, and were skipped.
    public var skipped: [String] = []
    /// Why the reload changed nothing, with `file:line` where the plugin's error has one; nil when
    /// it was applied.
    public var failure: String?

    /// `sync changed, 4 unchanged`, as the run's echo of a reload says it.
    public var summary: String {
        if let failure { return "failed, nothing changed: \(failure)" }
        var parts: [String] = []
        if !changed.isEmpty { parts.append("\(changed.joined(separator: ", ")) changed") }
        if !added.isEmpty { parts.append("\(added.joined(separator: ", ")) added") }
        if !removed.isEmpty { parts.append("\(removed.joined(separator: ", ")) removed") }
        parts.append("\(unchanged) unchanged")
        if !skipped.isEmpty { parts.append("\(skipped.joined(separator: ", ")) skipped: failed to load") }
        return parts.joined(separator: ", ")
    }
}

extension LifelineHost {
    /// Loads the plugins again (`HostConfiguration.reloadPlugins`) and applies what changed, as
    /// nginx and OpenResty reload: check first, then apply, or change nothing.
    ///
    /// 1. Every plugin is loaded again in a fresh state, on a host of its own, and checked as
    ///    `lifeline check` does. If one fails, or two share a name, nothing changes.
    /// 2. A plugin whose fingerprint is the same keeps its state and hears nothing.
    /// 3. Each changed or removed plugin's generation ends like an expiring app: it hears no more
    ///    events, its timers are cancelled, its `willUnload` handlers run once, then its tasks get
    ///    their expiration handlers, with the expiration-handler limit as their time. What is left
    ///    then is ended (`unloaded`), and its state is closed. The app is not terminated for it.
    /// 4. Each changed or added plugin gets a new state, `didFinishLaunching`, and what brings a
    ///    fresh launch to the app's state now: `didBecomeActive` when it is active; a fresh budget
    ///    when it is in the background (a suspended app is woken first).
    ///
    /// What lives in the state dir, by plugin name, survives: stores, files, transfers, pending
    /// task requests. Runs on the main executor.
    ///
    /// - Parameter all: every plugin gets a new generation, changed or not (`reload all`): how a
    ///   scenario checks that a plugin recovers its state from its store.
    @discardableResult
    public func reload(all: Bool = false) -> ReloadOutcome {
        let fresh: [PluginDescriptor]
        do {
            fresh = try configuration.reloadPlugins?() ?? descriptors
        } catch {
            return refuseReload(error.message)
        }
        return reload(with: fresh, all: all)
    }

    func reload(with fresh: [PluginDescriptor], all: Bool) -> ReloadOutcome {
        var names: Set<String> = []
        for d in fresh where !names.insert(d.name).inserted {
            return refuseReload("two plugins are named '\(d.name)'")
        }
        let failures = checkForReload(fresh)
        if !failures.isEmpty { return refuseReload(failures.joined(separator: "\n")) }

        let before = Dictionary(descriptors.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let incoming = fresh.sorted { $0.name < $1.name }
        var prints: [String: String] = [:]
        for d in incoming { prints[d.name] = d.fingerprint?() }
        var outcome = ReloadOutcome(generation: pluginGeneration)
        var starting: [PluginDescriptor] = []
        // Without `reloadPlugins` the descriptors are the loaded ones, and no fingerprint was kept
        // at the start: only one without a fingerprint counts as changed.
        let sameDescriptors = configuration.reloadPlugins == nil
        for d in incoming {
            if before[d.name] != nil {
                // One that the launch or an earlier reload failed to load is loaded again, changed
                // or not: its files may be the same while what it read (its store) is not.
                let down = session.isRunning && session.plugin(named: d.name) == nil
                if all || down || prints[d.name] == nil
                    || (!sameDescriptors && prints[d.name] != fingerprints[d.name])
                {
                    outcome.changed.append(d.name)
                    starting.append(d)
                } else {
                    outcome.unchanged += 1
                }
            } else {
                outcome.added.append(d.name)
                starting.append(d)
            }
        }
        outcome.removed = descriptors.map(\.name).filter { !names.contains($0) }
        descriptors = incoming
        fingerprints = prints
        guard !starting.isEmpty || !outcome.removed.isEmpty else {
            recordReload(outcome)
            return outcome
        }
        pluginGeneration += 1
        outcome.generation = pluginGeneration
        recordReload(outcome)
        // Not running: the next launch loads the new plugins.
        guard session.isRunning else { return outcome }
        // A fresh budget (waking a suspended app gives one) before the old generations expire,
        // and one that keeps the marks of tasks already expiring (an earlier reload's), so each
        // retired task ends `expired: true` at its deadline and hears its handler once.
        if lifecycle.state == .suspended {
            resume(reason: "reload")
        } else if lifecycle.state == .background {
            parts.tasks.refreshBudget()
        }
        for name in outcome.changed + outcome.removed {
            if let ref = session.plugin(named: name) { retire(ref) }
            guard session.isRunning else { return outcome }
        }
        outcome.skipped = launchGeneration(starting)
        return outcome
    }

    private func refuseReload(_ reason: String) -> ReloadOutcome {
        var outcome = ReloadOutcome(generation: pluginGeneration)
        outcome.failure = reason
        logger.error("reload refused, nothing changed: \(reason)")
        recordReload(outcome)
        return outcome
    }

    private func recordReload(_ outcome: ReloadOutcome) {
        func list(_ names: [String]) -> JSONValue { .array(names.map { .string($0) }) }
        var fields: [(String, JSONValue)] = [
            ("generation", .int(Int64(outcome.generation))), ("result", .string(outcome.failure == nil ? "ok" : "failed")),
        ]
        if let failure = outcome.failure {
            fields.append(("reason", .string(failure)))
        } else {
            fields += [
                ("changed", list(outcome.changed)), ("added", list(outcome.added)), ("removed", list(outcome.removed)),
                ("unchanged", .int(Int64(outcome.unchanged))),
            ]
        }
        session.record(.reloaded, fields)
    }

    /// Each plugin loaded in a fresh state on a host of its own, as `lifeline check` does, with no
    /// network and a temporary store, so the check leaves no trace; the failures, one a plugin.
    private func checkForReload(_ plugins: [PluginDescriptor]) -> [String] {
        var check = HostConfiguration(profile: profile, watchdogScale: configuration.watchdogScale)
        check.stopGrace = configuration.stopGrace
        // Its log lines would repeat the load's that follows: the check says only what failed.
        check.logger = Logger(label: "lifeline.reload-check", factory: { _ in SwiftLogNoOpLogHandler() })
        check.pluginLogger = { _ in Logger(label: "lifeline.reload-check", factory: { _ in SwiftLogNoOpLogHandler() }) }
        return LifelineHost.check(configuration: check, plugins: plugins).compactMap { result in
            let named = "plugin '\(result.plugin.name)'"
            // Some failures name the plugin already ("plugin 'a' did not finish loading …").
            return result.failure.map { $0.hasPrefix(named) ? $0 : "\(named): \($0)" }
        }
    }

    /// Ends `ref`'s generation like an expiring app (see `reload`).
    private func retire(_ ref: PluginRef) {
        let slot = ref.slot
        let farewell = parts.subscriptions.subscriptions(to: .willUnload, plugin: slot)
        session.retire(ref)
        parts.timers.cancel(plugin: slot)
        let held = parts.tasks.activeIDs(of: ref.name)
        if !farewell.isEmpty {
            session.record(.willUnload, ("plugin", .string(ref.name)))
            parts.caller.deliver(
                LifecycleEvent(name: .willUnload, time: now.seconds, state: session.visibleState), to: farewell)
            guard session.isRunning else { return }
        }
        // Its handlers go after its last word: nothing else could be delivered meanwhile.
        parts.subscriptions.remove(plugin: slot)
        // Its queue delegates go too, and its operations that have not started never will.
        parts.queues.retire(ref)
        guard session.isRunning else { return }
        // Its scheduled tasks' handlers go too, so the new generation can register its own (the
        // requests stay, by name), and the scheduled tasks under way expire with its tasks.
        parts.system.retire(ref)
        guard session.isRunning else { return }
        parts.tasks.expire(held)
        guard session.isRunning else { return }
        let left = held.filter { parts.tasks.task($0) != nil }
        if left.isEmpty && !parts.system.holdsCompletions(ref) { return close(ref, ending: []) }
        // The host's job, not the app's: when its tasks end before the deadline, the app may
        // sleep, and an app job would wait for it to wake, the old state open meanwhile.
        executor.schedule(at: now.adding(seconds: profile.expirationHandlerLimit)) { [weak self] in
            self?.close(ref, ending: left)
        }
    }

    /// The end of a retired generation: the tasks it still holds are ended and reported, and its
    /// state is closed.
    private func close(_ ref: PluginRef, ending tasks: [Int]) {
        guard session.isCurrent(ref) else { return }
        var ended: [JSONValue] = []
        for id in tasks where parts.tasks.end(id) { ended.append(.int(Int64(id))) }
        if !ended.isEmpty {
            logger.warning(
                "plugin '\(ref.name)': \(ended.count) background task(s) of the unloaded generation still running; ended")
        }
        parts.system.dropCompletions(of: ref)
        session.record(.unloaded, ("plugin", .string(ref.name)), ("ended", .array(ended)))
        session.unload(ref)
        session.plugins[ref.slot].code.close()
        contexts[ref.slot].cancelSwiftTasks()
        parts.waits.abandon(plugin: ref.slot)
    }

    /// Loads the new generations into the running app and brings them to its state; the names
    /// of those that failed to load.
    private func launchGeneration(_ starting: [PluginDescriptor]) -> [String] {
        let state = lifecycle.state
        session.beginReloadLaunch()
        var slots: Set<Int> = []
        var skipped: [String] = []
        for descriptor in starting {
            guard session.isRunning else { return skipped }
            // What lives in the state dir survives, under the quotas its plugin.toml gives now.
            parts.stores.setQuotas(.init(store: descriptor.storeQuota, files: descriptor.filesQuota), for: descriptor.name)
            if let message = load(descriptor) {
                // It passed the check, but failed here (its code read the real store, where the
                // check's was empty): the old generation is gone already, so the run goes on
                // without it, as `run` skips a plugin that fails at its launch, and the next
                // reload loads it again.
                skip(descriptor, "skipped by the reload", message)
                skipped.append(descriptor.name)
            } else {
                slots.insert(session.plugins.count - 1)
                recorder.notePlugin(name: descriptor.name, kind: descriptor.kind.rawValue, status: "loaded")
            }
        }
        notify(slots, .didFinishLaunching, state: state == .active ? .inactive : state)
        session.finishLaunching()
        if state == .active { notify(slots, .didBecomeActive, state: .active) }
        if session.appRunning { session.show(state) }
        return skipped
    }

    /// Sends a lifecycle notification to the handlers of the plugins in `slots` only.
    private func notify(_ slots: Set<Int>, _ name: LifecycleEventName, state: AppState) {
        guard session.isRunning, !slots.isEmpty else { return }
        session.show(state)
        let list = parts.subscriptions.subscriptions(to: name).filter { slots.contains($0.plugin) }
        guard !list.isEmpty else { return }
        parts.caller.deliver(LifecycleEvent(name: name, time: now.seconds, state: state), to: list)
    }
}
