#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// `lifeline run --record FILE`: what happened to the app, written as a scenario that `lifeline
/// simulate` replays. Each step a signal or `lifeline ctl` carried out is a line at its offset
/// from the start (1 ms resolution), and each HTTP answer a plugin received is an `http once`
/// line: its status, its headers, its body in a file beside the scenario (`FILE.d/N.body`), and
/// the time it took; or `hang` and `refuse`.
///
/// Each line goes to the file in one `write` as it happens, so a run killed with SIGKILL leaves
/// every line up to the kill, and any prefix of the file is a scenario that parses. A file that a
/// log rotator copied and truncated starts again with the header and the steps that bring a
/// launch to the app's state then, so it parses too; a rotator that moves the file leaves the
/// run writing to the moved one. Nothing here is charged to a plugin or recorded in the run's
/// report.
///
/// Threading: any thread; lines are written under a lock, in the order they are given.
public final class RunRecording: @unchecked Sendable {
    public let path: String
    private let fd: Int32
    private let lock = NSLock()
    private var bodies = 0
    /// The body files' folder as the lines name it, relative to the scenario's folder.
    private let bodyFolderName: String
    private let bodyFolder: String
    private var madeBodyFolder = false
    private var failed = false
    /// The file held an earlier recording, which the first line written replaces.
    private var replacePending: Bool
    /// The header's text, written again after a truncation.
    private var header = ""
    /// The bytes this recording has written to the file since it began or was last truncated:
    /// a file found shorter was truncated under it.
    private var written: Int64 = 0
    /// The lifecycle as the recorded steps leave it, so that every step written is one the
    /// scenario's parser allows there.
    private var lifecycle = Lifecycle()

    /// Creates the file at `path` and writes its header: where it came from, then the profile the
    /// run used, as `profile` and `limit` lines (none for ios13 as it is), and a `task-policy`
    /// line unless the policy is the default, so the replay runs scheduled tasks when the live
    /// run did. A file that exists is replaced by the first line the run writes, not here: a run
    /// that cannot start (its state dir serves another run) leaves an earlier recording whole.
    public init(path: String, profile: Profile, taskPolicy: TaskPolicy = .earliest) throws(LifelineError) {
        self.path = path
        bodyFolderName = (path as NSString).lastPathComponent + ".d"
        bodyFolder = path + ".d"
        // Said at the start, not found at the first answer with a body, which would lose it; and
        // before the file is opened, so a refused recording leaves no file behind.
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: bodyFolder, isDirectory: &isFolder), !isFolder.boolValue {
            throw .internalError(
                "cannot write the recording's bodies in '\(bodyFolder)': it is not a folder; remove it, or record elsewhere")
        }
        var existing = stat()
        let replace = stat(path, &existing) == 0 && existing.st_size > 0
        replacePending = replace
        // O_APPEND: after a rotator's truncation, lines go to the new end, not past a hole.
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (replace ? 0 : O_TRUNC), 0o644)
        // Exit 70, as for any output file that cannot be written (--report, --html).
        guard fd >= 0 else {
            throw .internalError("cannot write the recording '\(path)': \(String(cString: strerror(errno)))")
        }
        let stamp = ISO8601DateFormatter().string(from: Date())
        header = "\(Self.headerStart) at \(stamp); replay it with lifeline simulate --scenario\n"
            + ScenarioText.lines(naming: profile).map { $0 + "\n" }.joined()
            + (taskPolicy == .earliest ? "" : "task-policy \(taskPolicy)\n")
        if !replace { write(header) }
    }

    /// How a recording's first line starts: the scenario parser forgives such a file a last line
    /// cut short.
    public static let headerStart = "# recorded by lifeline run"

    deinit { close(fd) }

    /// A step carried out at `time` since the start.
    ///
    /// The host accepts a few steps that a scenario's lifecycle would refuse there: after the
    /// system relaunched the app in the background (for a transfer's events, a fetch), `foreground`
    /// follows an ended app. Such a step is written after the `launch background` that stands for
    /// the relaunch; one that even that cannot explain is written as a comment.
    public func step(_ step: Step, at time: HostTime) {
        lock.lock()
        let before = lifecycle.state
        var text = "\(Self.time(time)) \(Self.text(of: step))\n"
        var attempt = lifecycle
        if (try? attempt.apply(step)) == nil {
            var relaunched = lifecycle
            if (try? relaunched.apply(.launchInBackground)) != nil, (try? relaunched.apply(step)) != nil {
                text = "\(Self.time(time)) \(Step.launchInBackground.description)\n" + text
                attempt = relaunched
            } else {
                text = "# \(text)"
                attempt = lifecycle
            }
        }
        lifecycle = attempt
        lock.unlock()
        write(text, from: before)
    }

    /// A step as a scenario line writes it. A `#` starts a comment anywhere on a line, and can be
    /// only in a push payload's JSON strings: there it is written `\u0023`, the same JSON.
    static func text(of step: Step) -> String {
        guard case .push(let payload) = step, payload.contains("#") else { return step.description }
        return Step.push(payload: payload.replacingOccurrences(of: "#", with: "\\u0023")).description
    }

    /// What a request sent at `time` got, `seconds` later.
    public enum Answer {
        case response(HTTPResponse)
        /// The connection was refused or failed.
        case refused
        /// No answer came before the request was given up (its timeout, its task's expiration, the
        /// run's end).
        case hang
    }

    /// An `http once` line for one request and its answer.
    public func http(_ request: HTTPRequest, sentAt time: HostTime, after seconds: Double, _ answer: Answer) {
        guard let url = HTTPURL(request.url) else { return }
        let host = url.host.contains(":") ? "[\(url.host)]" : url.host
        // The target as the scripted network matches it: host:port/path, the query included.
        let target = "\(host):\(url.port)\(url.path)".replacingOccurrences(of: " ", with: "%20")
            .replacingOccurrences(of: "#", with: "%23")
        let result: String
        switch answer {
        case .hang:
            result = ScenarioText.text(of: .hang)
        case .refused:
            result = ScenarioText.text(of: .refuse(delay: seconds))
        case .response(let response):
            var lost: String?
            var file: String?
            if !response.body.isEmpty {
                switch writeBody(response.body) {
                case .success(let name): file = name
                case .failure(let failure): lost = failure.reason
                }
            }
            let headers = response.headers.map { NetworkRule.RecordedHeader(name: $0.name.canonicalName, value: $0.value) }
            result = ScenarioText.text(of: .recorded(status: response.status, headers: headers, bodyFile: file, delay: seconds))
                + "  # \(response.body.count) bytes" + (lost.map { ", the body not written: \($0)" } ?? "")
        }
        write("\(Self.time(time)) http once \(request.method) \(target) -> \(result)\n")
    }

    /// Writes a body file; its name as a line gives it, or why it could not be written (said on
    /// stderr too, since the replay of that line would answer with no body).
    private func writeBody(_ bytes: [UInt8]) -> Result<String, BodyLost> {
        lock.lock()
        defer { lock.unlock() }
        if !madeBodyFolder {
            try? FileManager.default.createDirectory(atPath: bodyFolder, withIntermediateDirectories: true)
            madeBodyFolder = true
        }
        bodies += 1
        let name = "\(bodies).body"
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: bodyFolder + "/" + name))
        } catch {
            let reason = "cannot write '\(bodyFolder)/\(name)'"
            FileHandle.standardError.write(Data("lifeline: the recording lost a body: \(reason): \(error.localizedDescription)\n".utf8))
            return .failure(BodyLost(reason: reason))
        }
        return .success(bodyFolderName + "/" + name)
    }

    private struct BodyLost: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    /// One line, in one write: a kill cannot leave half of it. A file found shorter than what was
    /// written was truncated by a rotator: the header and the steps that bring a launch to the
    /// app's state go first, at 0 s, so the rest parses on its own.
    ///
    /// - Parameter state: the app's state the line starts from (a step's, before it); nil: now.
    private func write(_ text: String, from state: AppState? = nil) {
        lock.lock()
        defer { lock.unlock() }
        guard !failed else { return }
        var text = text
        var info = stat()
        if replacePending {
            replacePending = false
            guard ftruncate(fd, 0) == 0 else {
                failed = true
                FileHandle.standardError.write(
                    Data("lifeline: the recording '\(path)' stopped: \(String(cString: strerror(errno)))\n".utf8))
                return
            }
            text = header + text
        } else if written > 0, fstat(fd, &info) == 0, Int64(info.st_size) < written {
            written = 0
            text = header + Self.prefix(to: state ?? lifecycle.state).map { "0s \($0.description)\n" }.joined() + text
        }
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                failed = true
                FileHandle.standardError.write(
                    Data("lifeline: the recording '\(path)' stopped: \(String(cString: strerror(errno)))\n".utf8))
                return
            }
            done += n
        }
        written += Int64(bytes.count)
    }

    /// The steps that bring a fresh launch to `state`.
    static func prefix(to state: AppState) -> [Step] {
        switch state {
        case .notRunning, .ended: return []
        case .active: return [.launch]
        case .inactive: return [.launch, .resign]
        case .background, .suspended: return [.launchInBackground]
        }
    }

    /// `12.345s`, floored to the millisecond: a replay's step is never later than its record.
    static func time(_ time: HostTime) -> String {
        ScenarioText.time(max(0, time.nanoseconds / 1_000_000))
    }
}

/// A transport that passes every request on and records what it got (`RunRecording`).
public final class RecordingTransport: HTTPTransport {
    private let inner: any HTTPTransport
    private let recording: RunRecording
    private let clock: any HostClock

    public init(_ inner: any HTTPTransport, recording: RunRecording, clock: any HostClock) {
        self.inner = inner
        self.recording = recording
        self.clock = clock
    }

    public func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        let sent = clock.now
        let exchange = RecordedExchange(request: request, sent: sent, recording: recording, clock: clock)
        let wire = inner.send(request) { result in
            switch result {
            case .success(let response): exchange.finish(.response(response))
            case .failure(let failure) where failure.kind == .timeout: exchange.finish(.hang)
            case .failure: exchange.finish(.refused)
            }
            completion(result)
        }
        return RecordedCancel(wire: wire, exchange: exchange)
    }

    /// One request's line, written once: by its answer, or by its cancellation (a hang).
    private final class RecordedExchange: Sendable {
        let request: HTTPRequest
        let sent: HostTime
        let recording: RunRecording
        let clock: any HostClock
        private let done = Locked(false)

        init(request: HTTPRequest, sent: HostTime, recording: RunRecording, clock: any HostClock) {
            self.request = request
            self.sent = sent
            self.recording = recording
            self.clock = clock
        }

        func finish(_ answer: RunRecording.Answer) {
            guard done.withLock({ done in
                defer { done = true }
                return !done
            }) else { return }
            recording.http(request, sentAt: sent, after: clock.now.seconds - sent.seconds, answer)
        }
    }

    private struct RecordedCancel: HTTPCancellable {
        let wire: any HTTPCancellable
        let exchange: RecordedExchange
        func cancel() {
            exchange.finish(.hang)
            wire.cancel()
        }
    }
}
