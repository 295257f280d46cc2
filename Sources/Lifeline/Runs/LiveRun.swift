import Dispatch
import Foundation

/// `lifeline run` as a library (SPEC 2.5): the plugins live on the real clock, with the state
/// dir's database, signals or `post` driving the lifecycle, and a crash report when a rule
/// terminates the app. The network is handed in, so the core needs no HTTP client; so are the
/// plugins, so it needs no Lua.
///
/// ```swift
/// let transport = AsyncHTTPTransport()  // LifelineHTTP
/// defer { transport.shutdown() }
/// var setup = RunSetup(plugins: try LuaPluginLoader.descriptors(in: "plugins"))
/// setup.stateDirectory = "/tmp/lifeline"
/// let run = LiveRun(setup: setup, transport: transport, transferTransport: transport)
/// let recorder = try run.run()  // until SIGTERM or SIGINT ends the app
/// exit(recorder.exitCode)
/// ```
///
/// While it runs, `lifeline ctl` drives it through `<state-dir>/control.sock` (`ControlSocket`).
///
/// Threading: `run` on the thread that is to be the main executor; `post` from any thread.
public final class LiveRun: @unchecked Sendable {
    /// Where a live run keeps its state when the setup names no state dir.
    public static var defaultStateDirectory: String { NSHomeDirectory() + "/.local/state/lifeline" }

    /// The setup, with the state dir filled in.
    public let setup: RunSetup
    /// The run's events and its report; live while the run goes on.
    public let recorder: Recorder
    /// Whether `run` maps the process's signals to steps, as `lifeline run` does (on by default):
    /// SIGUSR1 background, SIGUSR2 foreground, SIGHUP reloads the plugins, SIGTERM and SIGINT
    /// terminate, a second SIGINT kills, SIGQUIT force-quits. Each is echoed on stderr with what
    /// it does. Set before `run`.
    public var handlesSignals = true
    /// Whether the echo of a signal on stderr is bold. Set before `run`.
    public var colour = false
    /// Whether `run` listens on `<state-dir>/control.sock` for `lifeline ctl` (on by default): each
    /// connection sends one action as a scenario line writes it, and is answered `ok` or
    /// `error: MESSAGE` once the main executor has carried it out or refused it. Set before `run`.
    public var listensForControl = true
    /// How the run tells a service manager what it does (sd_notify): READY after the launch,
    /// RELOADING and READY around a reload, STOPPING at the end, WATCHDOG pets and STATUS lines
    /// from the main executor. `lifeline run` sets systemd's, `ServiceNotifier()`, which is nil
    /// unless `NOTIFY_SOCKET` is set; nil by default, so a run made by a library (a test under a
    /// service manager, say) never speaks for its process. Set before `run`.
    public var serviceNotifier: ServiceNotifier?
    /// Where the run is recorded as a scenario (`lifeline run --record`): its steps, and the HTTP
    /// answers plugins received. Set before `run`.
    public var recording: RunRecording?
    /// How long a `lifeline ctl` connection waits for the main executor to carry out its step
    /// before it is answered that the host did not answer. Set before `run`.
    public var controlTimeout: Double = 30
    /// Ends the process when a plugin's load overran the launch limit and cannot be stopped
    /// (Swift code, W3): a load failure, whose exit code is 65. By default it prints
    /// `lifeline: MESSAGE` on stderr and exits with the error's code. Set before `run`.
    public var onUnstoppableLoad: @Sendable (LifelineError) -> Never = { error in
        FileHandle.standardError.write(Data("lifeline: \(error.message)\n".utf8))
        exit(error.exitCode)
    }

    private let clock = MonotonicClock()
    private let transport: any HTTPTransport
    private let transferTransport: any TransferTransport
    /// Set once `run` has made the host; read on the main executor only.
    nonisolated(unsafe) private var host: LifelineHost?
    /// The control socket while the run listens; read by the paths that exit the process at once.
    private let listener = Locked<ControlListener?>(nil)
    private let replies = ControlReplies()

    /// - Parameters:
    ///   - transport: where plugins' HTTP requests go (`AsyncHTTPTransport` of LifelineHTTP for
    ///     the real network); by default, nowhere.
    ///   - transferTransport: where background transfers go; usually the same object.
    ///   - onEvent: called with each timeline event as it is recorded, from the thread recording it.
    public init(
        setup: RunSetup, transport: any HTTPTransport = NoNetworkTransport(),
        transferTransport: any TransferTransport = NoTransferTransport(),
        onEvent: (@Sendable (TimelineEvent) -> Void)? = nil
    ) {
        var setup = setup
        setup.stateDirectory = setup.stateDirectory ?? LiveRun.defaultStateDirectory
        self.setup = setup
        self.transport = transport
        self.transferTransport = transferTransport
        recorder = Recorder(
            profile: setup.profile, keepsTimeline: setup.reportPath != nil || setup.isDrawn, observer: onEvent)
    }

    /// Runs the app from launch until it ends or a rule terminates it, then writes the report
    /// (`setup.reportPath`) and, after a termination, a crash report. Returns the recorder; its
    /// `exitCode` is the CLI's. Throws when the state dir's database cannot be opened.
    ///
    /// The process ends here, without returning, in two cases: a handler overran that cannot be
    /// stopped (crash report and report written, exit 1), and a second SIGINT (report written,
    /// exit with the recorder's code).
    public func run() throws(LifelineError) -> Recorder {
        let setup = setup
        let recorder = recorder
        // A state dir serves one run at a time: claimed before its database is opened (a second
        // run is refused before it could race the first one's migrations), held to the end.
        let claim = try StateDatabase.claimForRun(stateDirectory: setup.stateDirectory!)
        defer { claim.release() }
        var configuration = try setup.hostConfiguration(
            loadFailurePolicy: .skip,
            onUnpreemptibleOverrun: { [onUnstoppableLoad, listener, replies, serviceNotifier] overrun in
                // W3: Swift code cannot be stopped; report now and end the process. The service
                // manager hears that the process is stopping, as at every other end.
                serviceNotifier?.stopping()
                LiveRun.endAtOnce(listener, replies)
                switch overrun {
                case .terminated(let termination, let recorder):
                    LiveRun.writeCrashReport(termination, recorder: recorder, setup: setup)
                    exit(1)
                case .loadFailed(let error):
                    onUnstoppableLoad(error)
                }
            })
        configuration.transport = recording.map { RecordingTransport(transport, recording: $0, clock: clock) } ?? transport
        configuration.transferTransport = transferTransport
        // Before the host exists: a state dir that another live run serves is refused first.
        let control = listensForControl
            ? try ControlListener(path: ControlSocket.path(stateDirectory: setup.stateDirectory!)) { [self] in
                answer($0)
            } : nil
        listener.withLock { $0 = control }
        let executor = MainExecutor(clock: clock)
        let host = LifelineHost(
            configuration: configuration, plugins: setup.plugins, executor: executor, recorder: recorder)
        self.host = host
        let signals = handlesSignals ? SignalSteps(
            clock: clock, perform: { [self] in echoAndPerform($0, $1) }, kill: { [self] in kill() }) : nil
        let notifier = serviceNotifier
        var heartbeat: ServiceNotifier.Heartbeat?
        executor.schedule(at: clock.now) { [recording] in
            let at = host.now
            if (try? host.perform(.launch)) != nil { recording?.step(.launch, at: at) }
            guard let notifier else { return }
            notifier.ready(status: LiveRun.status(host))
            // The pets come from a job of this executor: a handler that holds it holds them back.
            heartbeat = notifier.keepAlive(on: executor) { LiveRun.status(host) }
        }
        control?.start()
        executor.run(shouldStop: { host.isStopped || host.state == .ended }, afterJob: host.afterJob)
        notifier?.stopping(status: LiveRun.status(host))
        heartbeat?.stop()
        signals?.cancel()
        // Nothing runs on the main executor any more: a step still waiting will never be done.
        replies.end(with: LiveRun.endedReply)
        control?.close()
        listener.withLock { $0 = nil }
        host.shutdown()
        if let termination = recorder.termination {
            LiveRun.writeCrashReport(termination, recorder: recorder, setup: setup)
        } else {
            try setup.writeReport(recorder)
        }
        return recorder
    }

    /// Runs `body` with the host on the main executor, between two jobs, from any thread: how
    /// observers outside the host (the metrics page, the service manager's watchdog) read it
    /// without touching it from their own threads. Not run once the run has ended.
    public func onMainExecutor(_ body: @escaping @Sendable (LifelineHost) -> Void) {
        clock.post { [self] in if let host { body(host) } }
    }

    /// Asks for `step` from any thread, as a signal does (without the echo). A step the app's
    /// state does not allow is logged and ignored.
    public func post(_ step: Step) {
        clock.post { [self] in perform(step, refused: "post ignored: \(step.description)") }
    }

    /// Runs on the main executor. Returns why the step was not carried out (the profile lacks it,
    /// or the state forbids it), which is also logged as a warning that `refused` starts.
    @discardableResult
    private func perform(_ step: Step, refused: @autoclosure () -> String) -> String? {
        guard let host else { return "the app is not running" }
        let problem: String
        if let lack = host.profile.lacks(step) {
            problem = lack
        } else {
            do {
                let at = host.now
                try host.perform(step)
                recording?.step(step, at: at)
                return nil
            } catch {
                problem = error.description
            }
        }
        host.logger.warning("\(refused()), but \(problem)")
        return problem
    }

    /// The answer to one line a `lifeline ctl` sent: parsed off the main executor, carried out on
    /// it, waited for here (a connection's thread) at most `controlTimeout`.
    private func answer(_ line: String) -> String {
        let action = line.trimmingCharacters(in: .whitespaces)
        guard !action.isEmpty else { return "error: no action given; the actions are: \(Step.actionList)" }
        // The step is echoed on the operator's terminal: no escape sequence may ride along.
        if action.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || (0x7F..<0xA0).contains($0.value) }) {
            return "error: the action holds a control character"
        }
        let step: Step
        do {
            guard let parsed = try Step.parse(Substring(action)) else {
                return "error: unknown action '\(action)'; the actions are: \(Step.actionList)"
            }
            step = parsed
        } catch {
            return "error: \(error.message)"
        }
        guard let reply = replies.open() else { return LiveRun.endedReply }
        defer { replies.close(reply) }
        clock.post { [self] in
            // A step whose client was told it timed out before it began does not happen: a client
            // that tries again must not get it twice.
            guard reply.begin() else { return }
            reply.give(echoAndPerform("ctl", step).map { "error: \($0)" } ?? "ok")
        }
        if let answer = reply.wait(timeout: controlTimeout) { return answer }
        let waited = ControlSocket.seconds(controlTimeout)
        return reply.abandon()
            ? "error: the host did not answer within \(waited); the step was not carried out"
            : "error: the host did not answer within \(waited); the step is under way (a handler is still running)"
    }

    /// A signal's or a ctl's step, echoed on the timeline's clock with what it does now. Returns
    /// why it was not carried out. Runs on the main executor.
    @discardableResult
    private func echoAndPerform(_ signal: String, _ step: Step) -> String? {
        guard let host else { return "the app is not running" }
        let stamp = "[\(TimelineEvent.paddedSeconds(host.now.seconds))s]"
        if case .reload(let all) = step {
            // Echoed once done: the line says what the reload did, or why it changed nothing.
            let at = host.now
            serviceNotifier?.reloading(status: "reloading")
            let outcome = host.reload(all: all)
            serviceNotifier?.ready(status: LiveRun.status(host))
            // A refused reload changed nothing, so a replay has nothing to do.
            if outcome.failure == nil { recording?.step(step, at: at) }
            let what = outcome.failure == nil
                ? "reload (generation \(outcome.generation)): \(outcome.summary)" : "reload \(outcome.summary)"
            echo("[\(TimelineEvent.paddedSeconds(host.now.seconds))s] -- \(signal): \(what)")
            return outcome.failure
        }
        var what = step.description
        if step == .terminate && host.state == .suspended {
            what += " (the app is suspended: it ends without willTerminate, as on iOS)"
        }
        echo("\(stamp) -- \(signal): \(what)")
        return perform(
            step,
            refused: signal == "ctl" ? "ctl ignored: \(step.description)" : "signal ignored: \(signal) asks for \(step.description)")
    }

    /// The app's state as the service manager's status line shows it.
    private static func status(_ host: LifelineHost) -> String {
        ServiceNotifier.statusText(
            state: host.state.rawValue, backgroundTasks: host.activeTaskCount, generation: host.pluginGeneration)
    }

    /// A line on stderr about a signal's or a ctl's step, bold on a terminal.
    private func echo(_ line: String) {
        let line = TerminalText.safe(line, indent: "    ")
        FileHandle.standardError.write(Data((colour ? "\u{1B}[1m\(line)\u{1B}[0m\n" : line + "\n").utf8))
    }

    /// A second SIGINT ends the app at once, even while a handler is still running: no
    /// notification, nothing more runs.
    private func kill() {
        FileHandle.standardError.write(Data("-- SIGINT again: kill\nlifeline: killed\n".utf8))
        recording?.step(.kill, at: clock.now)
        serviceNotifier?.stopping()
        LiveRun.endAtOnce(listener, replies)
        try? setup.writeReport(recorder)
        exit(recorder.exitCode)
    }

    /// What a `lifeline ctl` client hears when the app ends before its step was carried out.
    static let endedReply = "error: the app ended before it carried out the step"

    /// Before the process exits without returning from `run`: the clients waiting for a step get
    /// their answer (`ctl` exits 65, as docs/ctl.md says), not a connection closed on them (70),
    /// and the socket file goes. Waits a moment for those replies to be written.
    private static func endAtOnce(_ listener: Locked<ControlListener?>, _ replies: ControlReplies) {
        replies.end(with: endedReply)
        let control = listener.withLock { $0 }
        control?.removeFile()
        control?.waitForReplies(timeout: 1)
    }

    /// Where a run's crash reports go: `<state-dir>/reports/`, each named
    /// `crash-<epoch-ms>-<kind>.json`.
    public static func crashReportsFolder(_ setup: RunSetup) -> String {
        (setup.stateDirectory ?? defaultStateDirectory) + "/reports"
    }

    /// The kind of termination a crash report's file name says; nil for any other file, and for
    /// a kind this version does not know.
    public static func crashReportKind(fileName name: String) -> Termination.Kind? {
        guard name.hasPrefix("crash-"), name.hasSuffix(".json") else { return nil }
        let stem = name.dropFirst("crash-".count).dropLast(".json".count)
        guard let dash = stem.firstIndex(of: "-"), stem[..<dash].allSatisfy(\.isNumber) else { return nil }
        return Termination.Kind(rawValue: String(stem[stem.index(after: dash)...]))
    }

    /// The crash report (SPEC 2.5): the termination object, in <state-dir>/reports/; then the
    /// report, when the setup asks for one.
    static func writeCrashReport(_ termination: Termination, recorder: Recorder, setup: RunSetup) {
        let folder = crashReportsFolder(setup)
        let millis = Int64(Date().timeIntervalSince1970 * 1000)
        let path = "\(folder)/crash-\(millis)-\(termination.kind.rawValue).json"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try RunOutput.write(RunOutput.text(of: termination.json), to: path)
            FileHandle.standardError.write(Data("lifeline: crash report written to \(path)\n".utf8))
        } catch {
            FileHandle.standardError.write(Data("lifeline: cannot write crash report to \(path): \(error)\n".utf8))
        }
        try? setup.writeReport(recorder)
    }
}

/// The answers that `lifeline ctl` connections wait for, so the run's end can answer the ones the
/// main executor will never reach.
private final class ControlReplies: Sendable {
    private let state = Locked<(ended: Bool, waiting: [ObjectIdentifier: ControlReply])>((false, [:]))

    /// A reply to wait for; nil once the run has ended.
    func open() -> ControlReply? {
        state.withLock { state in
            guard !state.ended else { return nil }
            let reply = ControlReply()
            state.waiting[ObjectIdentifier(reply)] = reply
            return reply
        }
    }

    func close(_ reply: ControlReply) { _ = state.withLock { $0.waiting.removeValue(forKey: ObjectIdentifier(reply)) } }

    /// Gives every reply still waiting `answer`, and every later one at once.
    func end(with answer: String) {
        let waiting = state.withLock { state in
            state.ended = true
            return Array(state.waiting.values)
        }
        for reply in waiting { reply.give(answer) }
    }
}

/// One answer, given once: by the main executor, or by the run's end, whichever comes first.
private final class ControlReply: Sendable {
    private let answer = Locked<String?>(nil)
    private let given = DispatchSemaphore(value: 0)
    /// The step's course: waiting for the main executor, begun there, or given up by its client.
    private enum Course { case waiting, begun, abandoned }
    private let course = Locked<Course>(.waiting)

    /// The main executor is about to carry the step out; false when its client gave up on it.
    func begin() -> Bool {
        course.withLock { course in
            guard course == .waiting else { return false }
            course = .begun
            return true
        }
    }

    /// The client gives up waiting; true when the step had not begun (and now never will).
    func abandon() -> Bool {
        course.withLock { course in
            guard course == .waiting else { return false }
            course = .abandoned
            return true
        }
    }

    func give(_ text: String) {
        let first = answer.withLock { answer in
            guard answer == nil else { return false }
            answer = text
            return true
        }
        if first { given.signal() }
    }

    /// The answer, or nil when none came within `timeout` seconds.
    func wait(timeout: Double) -> String? {
        guard given.wait(timeout: .now() + max(0, timeout)) == .success else { return nil }
        return answer.withLock { $0 }
    }
}

/// Maps signals to steps (SPEC 2.5) and posts them to the main executor. The second SIGINT does
/// not wait for the executor: a kill must work even while a handler is stuck.
private final class SignalSteps: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "lifeline.signals")
    private var interrupts = 0  // touched on `queue` only

    init(clock: MonotonicClock, perform: @escaping (String, Step) -> Void, kill: @escaping @Sendable () -> Void) {
        nonisolated(unsafe) let perform = perform
        let post: @Sendable (String, Step) -> Void = { signal, step in clock.post { perform(signal, step) } }
        let map: [(Int32, () -> Void)] = [
            (SIGUSR1, { post("SIGUSR1", .background) }),
            (SIGUSR2, { post("SIGUSR2", .foreground) }),
            (SIGHUP, { post("SIGHUP", .reload(all: false)) }),
            (SIGTERM, { post("SIGTERM", .terminate) }),
            (SIGQUIT, { post("SIGQUIT", .forceQuit) }),
            (SIGINT, { [unowned self] in
                interrupts += 1
                if interrupts == 1 { post("SIGINT", .terminate) } else { kill() }
            }),
        ]
        // A source listens only once the dispatch manager has registered it, which `resume` does
        // not wait for; the signal is ignored meanwhile, so one sent in that window was lost (seen
        // under load: a SIGUSR1 sent as soon as the launch was echoed). The launch waits for every
        // registration, so a signal sent after it is always heard.
        let registered = DispatchGroup()
        for (signo, handler) in map {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler(handler: handler)
            registered.enter()
            source.setRegistrationHandler { registered.leave() }
            source.resume()
            sources.append(source)
        }
        _ = registered.wait(timeout: .now() + 10)
    }

    func cancel() { for s in sources { s.cancel() } }
}
