import Foundation

/// `lifeline simulate`'s network: the scenario's `http` lines decide what every request gets, in
/// virtual time. Nothing here touches the real network.
///
/// On `send`, among the rules that match the request and whose time has come, the one with the
/// latest time decides, and among rules of that same time the first in file order: so a later
/// line takes over from an earlier one (a server that goes down at 30 s), and a specific line above
/// a catch-all of the same time still wins. A status is a response after the rule's delay,
/// `refuse` a connect failure after its delay, `hang` no answer at all (the host's timeout ends the
/// request). A request that no rule matches is refused at once.
///
/// A line with a sequence of answers counts the requests it decides, its own count apart from
/// every other line's: its n-th request gets its n-th answer, and the last answer repeats. A
/// later line that takes over starts at its own first answer; the earlier line's count is kept,
/// for the requests that only it matches. A request is counted when it is sent, so an answer
/// already under way is not changed by a takeover.
///
/// Threading: main executor only. The host's network session calls `send`, and the transfer
/// manager `transfer`, from jobs on the executor, and every answer is a job scheduled on that
/// executor, so runs (and the counts) are deterministic.
public final class ScriptedNetwork: HTTPTransport, @unchecked Sendable {
    /// The scenario's `http` lines, in file order.
    public let rules: [NetworkRule]
    private let executor: MainExecutor
    private let fileName: String
    /// How many requests each rule (by index in `rules`) has decided so far. Main executor only.
    private var decided: [Int]

    /// - Parameter fileName: the scenario's name, for the messages that point at its lines.
    public init(rules: [NetworkRule], executor: MainExecutor, fileName: String = "the scenario") {
        self.rules = rules
        self.executor = executor
        self.fileName = fileName
        self.decided = Array(repeating: 0, count: rules.count)
        self.hasOnceRules = rules.contains(where: \.once)
    }

    /// Whether any rule is `http once` (a recording's).
    private let hasOnceRules: Bool

    /// The bytes of a recorded answer's body file, relative to the scenario's folder; nil when it
    /// cannot be read.
    func recordedBody(_ file: String) -> [UInt8]? {
        let folder = (fileName as NSString).deletingLastPathComponent
        let path = file.hasPrefix("/") || folder.isEmpty ? file : folder + "/" + file
        return FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }

    /// The rule that decides `request` now: among those whose time has come and that match it, the
    /// latest; among those of the same time, the first in file order. nil when none matches.
    public func rule(for request: HTTPRequest) -> NetworkRule? {
        decidingIndex(for: request).map { rules[$0] }
    }

    /// The index in `rules` of `rule(for:)`.
    private func decidingIndex(for request: HTTPRequest) -> Int? {
        guard let url = HTTPURL(request.url) else { return nil }
        // A recorded answer first: the first unused one that matches, whatever its time, so a
        // replay gets the answers of its recording in order though its handlers took no time.
        if hasOnceRules {
            for (index, rule) in rules.enumerated() where rule.once && decided[index] == 0 {
                if rule.matches(method: request.method, url: url) { return index }
            }
        }
        let now = executor.now
        var best: Int?
        for (index, rule) in rules.enumerated() where rule.time <= now && !rule.once {
            // Strictly later only: a tie keeps the earlier line in the file.
            if let best, rules[best].time >= rule.time { continue }
            if rule.matches(method: request.method, url: url) { best = index }
        }
        return best
    }

    /// The rule that decides `request` and the answer it gives now, counting the request against
    /// that rule's sequence. nil when no rule matches.
    private func decide(_ request: HTTPRequest) -> (rule: NetworkRule, result: NetworkRule.Result)? {
        guard let index = decidingIndex(for: request) else { return nil }
        let result = rules[index].result(after: decided[index])
        decided[index] += 1
        return (rules[index], result)
    }

    public func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        let answer: (delay: Double, result: Result<HTTPResponse, HTTPFailure>)
        if let (rule, result) = decide(request) {
            let at = "\(fileName):\(rule.line)"
            switch result {
            case .hang:
                return NothingToCancel()
            case .refuse(let delay):
                answer = (delay, .failure(HTTPFailure(.connect, "connection refused (scripted at \(at))")))
            case .respond(let status, let body, let delay):
                let bytes = Array(body.utf8)
                if bytes.count > request.maximumBodyBytes {
                    answer = (
                        delay,
                        .failure(
                            HTTPFailure(
                                .tooLarge,
                                "the body scripted at \(at) is \(bytes.count) bytes, more than the request's "
                                    + "maximum of \(request.maximumBodyBytes)"))
                    )
                } else {
                    let json = body.hasPrefix("{") || body.hasPrefix("[")
                    let headers: HTTPFields = [.contentType: json ? "application/json" : "text/plain"]
                    answer = (delay, .success(HTTPResponse(status: status, headers: headers, body: bytes)))
                }
            case .recorded(let status, let recordedHeaders, let file, let delay):
                // Read once: a file's body is read where it is answered.
                let body = file.map(recordedBody)
                if let file, body == .some(nil) {
                    answer = (delay, .failure(HTTPFailure(.connect, "the body file '\(file)' scripted at \(at) cannot be read")))
                } else {
                    let bytes = body.flatMap { $0 } ?? []
                    var headers = HTTPFields()
                    for h in recordedHeaders {
                        if let name = HTTPField.Name(h.name) { headers.append(HTTPField(name: name, value: h.value)) }
                    }
                    answer = bytes.count > request.maximumBodyBytes
                        ? (delay, .failure(HTTPFailure(.tooLarge, "the body file '\(file ?? "")' scripted at \(at) is \(bytes.count) bytes, more than the request's maximum of \(request.maximumBodyBytes)")))
                        : (delay, .success(HTTPResponse(status: status, headers: headers, body: bytes)))
                }
            case .stream(let status, let size, let rate, let delay):
                // A plain request gets the whole body at once, when the last byte would arrive.
                let arrival = delay + (rate.map { Double(size) / $0 } ?? 0)
                if size > request.maximumBodyBytes {
                    answer = (
                        arrival,
                        .failure(
                            HTTPFailure(
                                .tooLarge,
                                "the body scripted at \(at) is \(size) bytes, more than the request's maximum of "
                                    + "\(request.maximumBodyBytes)"))
                    )
                } else {
                    let response = HTTPResponse(
                        status: status, headers: [.contentType: "application/octet-stream"],
                        body: [UInt8](repeating: 0, count: Int(size)))
                    answer = (arrival, .success(response))
                }
            }
        } else {
            answer = (
                0,
                .failure(
                    HTTPFailure(
                        .connect,
                        "connection refused: no http line in \(fileName) matches \(request.method) \(request.url) "
                            + "at \(executor.now)s; in simulate, the scenario's http lines decide what the network "
                            + "does, as in '0s http \(request.method) * -> 200'"))
            )
        }
        let result = answer.result
        let job = executor.schedule(at: executor.now.adding(seconds: answer.delay)) { completion(result) }
        return ScheduledAnswer(executor: UncheckedSendable(executor), job: job)
    }

    /// A scripted answer waiting on the executor; cancelling it cancels the job.
    private struct ScheduledAnswer: HTTPCancellable {
        let executor: UncheckedSendable<MainExecutor>
        let job: MainExecutor.JobID

        func cancel() { executor.value.cancel(job) }
    }
}

extension NetworkRule {
    /// Whether the rule matches a request for `method` to `url`. The target is matched against
    /// `host:port/path?query`, or `host/path?query` when it names no port; the scheme plays no part.
    public func matches(method: String, url: HTTPURL) -> Bool {
        if let ruleMethod = self.method, ruleMethod != method.uppercased() { return false }
        if target == "*" { return true }
        let host = url.host.contains(":") ? "[\(url.host)]" : url.host
        let text = targetHasPort ? "\(host):\(url.port)\(url.path)" : "\(host)\(url.path)"
        return Glob.matches(target, text)
    }
}

// MARK: - Transfers

extension ScriptedNetwork: TransferTransport {
    /// The validator a scripted resource carries: one per `http` line (every answer of a sequence
    /// serves the same resource), so a resume is answered with 206 only while the same line serves
    /// the URL; after a later line takes over, the whole body comes again.
    static func etag(_ rule: NetworkRule) -> String { "\"line-\(rule.line)\"" }

    /// How often a transfer with a rate reports its bytes, in virtual seconds.
    static let tick = 0.25

    /// A transfer served by the scenario's `http` lines, in virtual time, decided as `send` decides
    /// (each attempt is one request of the line's sequence): a status answers after
    /// the line's delay; a `size=` body arrives at its `rate`, in ticks of 0.25 s, as zero bytes
    /// written to the partial file. A resumed GET whose If-Range names the serving line's ETag gets
    /// a 206 for the rest; any other gets the whole body.
    public func transfer(
        _ attempt: TransferAttempt, report: @escaping @Sendable (TransferReport) -> Void,
        completion: @escaping @Sendable (TransferAttemptResult) -> Void
    ) -> any HTTPCancellable {
        let run = ScriptedTransfer(executor: executor)
        guard let (rule, result) = decide(attempt.request) else {
            let request = attempt.request
            run.after(0) {
                completion(
                    .failed(
                        HTTPFailure(
                            .connect,
                            "connection refused: no http line in \(self.fileName) matches \(request.method) "
                                + "\(request.url) at \(self.executor.now)s")))
            }
            return run
        }
        let at = "\(fileName):\(rule.line)"
        switch result {
        case .hang:
            break
        case .refuse(let delay):
            run.after(delay) { completion(.failed(HTTPFailure(.connect, "connection refused (scripted at \(at))"))) }
        case .respond(let status, let body, let delay):
            run.after(delay) {
                run.serve(attempt, rule: rule, status: status, body: .bytes(Array(body.utf8)), rate: nil, report, completion)
            }
        case .stream(let status, let size, let rate, let delay):
            run.after(delay) {
                run.serve(attempt, rule: rule, status: status, body: .zeros(size), rate: rate, report, completion)
            }
        case .recorded(let status, _, let file, let delay):
            let bytes = file.flatMap(recordedBody) ?? []
            run.after(delay) {
                run.serve(attempt, rule: rule, status: status, body: .bytes(bytes), rate: nil, report, completion)
            }
        }
        return run
    }
}

/// One scripted transfer under way: its next job on the executor, which `cancel` removes.
private final class ScriptedTransfer: HTTPCancellable, @unchecked Sendable {
    private let executor: MainExecutor
    private var job: MainExecutor.JobID?
    private var cancelled = false

    enum Body {
        case bytes([UInt8])
        case zeros(Int64)
        var count: Int64 {
            switch self {
            case .bytes(let b): return Int64(b.count)
            case .zeros(let n): return n
            }
        }
    }

    init(executor: MainExecutor) { self.executor = executor }

    func after(_ seconds: Double, _ body: @escaping () -> Void) {
        guard !cancelled else { return }
        job = executor.schedule(at: executor.now.adding(seconds: seconds)) { [self] in
            job = nil
            guard !cancelled else { return }
            body()
        }
    }

    func cancel() {
        cancelled = true
        if let job { executor.cancel(job) }
        job = nil
    }

    func serve(
        _ attempt: TransferAttempt, rule: NetworkRule, status: Int, body: Body, rate: Double?,
        _ report: @escaping @Sendable (TransferReport) -> Void,
        _ completion: @escaping @Sendable (TransferAttemptResult) -> Void
    ) {
        guard (200..<300).contains(status) else {
            return completion(.response(status: status, headers: [:], bytes: 0))
        }
        if attempt.kind == .upload {
            let size: Int64
            do throws(TransferError) {
                size = try attempt.uploadSize()
            } catch {
                return completion(.fileFailed(error.message))
            }
            let seconds = rate.map { Double(size) / $0 } ?? 0
            report(.progress(bytes: 0, total: size))
            return after(seconds) {
                report(.progress(bytes: size, total: size))
                completion(.response(status: status, headers: [:], bytes: size))
            }
        }
        let etag = ScriptedNetwork.etag(rule)
        let total = body.count
        let header = { (name: HTTPField.Name) in attempt.request.headers[values: name].first }
        var start: Int64 = 0
        var headers: HTTPFields = [.eTag: etag]
        var answer = status
        if let range = header(.range), header(.ifRange) == etag, range.hasPrefix("bytes="),
            let from = Int64(range.dropFirst(6).prefix { $0 != "-" }), from < total
        {
            start = from
            answer = 206
            headers.append(HTTPField(name: .contentRange, value: "bytes \(from)-\(total - 1)/\(total)"))
        }
        headers.append(HTTPField(name: .contentLength, value: String(total - start)))
        let file = DownloadFile(attempt)
        do throws(TransferError) {
            if try file.begin(status: answer, headers: headers) == .mismatch { return completion(.rangeMismatch) }
        } catch {
            return completion(.fileFailed(error.message))
        }
        var sent = start
        let step: Int64 = rate.map { max(1, Int64(saturating: $0 * ScriptedNetwork.tick)) } ?? (total - start)
        func next() {
            let count = min(step, total - sent)
            do throws(TransferError) {
                switch body {
                case .bytes(let bytes):
                    let slice = Array(bytes[Int(sent)..<Int(sent + count)])
                    var failure: TransferError?
                    slice.withUnsafeBytes { buffer in
                        do throws(TransferError) { try file.write(buffer) } catch { failure = error }
                    }
                    if let failure { throw failure }
                case .zeros:
                    try file.appendZeros(count)
                }
            } catch {
                file.close()
                return completion(.fileFailed(error.message))
            }
            sent += count
            report(.progress(bytes: sent, total: total))
            guard sent == total else { return after(ScriptedNetwork.tick, next) }
            completion(file.finish(sha256: attempt.sha256).result ?? .response(status: answer, headers: headers, bytes: total))
        }
        if total == start {
            return completion(
                file.finish(sha256: attempt.sha256).result ?? .response(status: answer, headers: headers, bytes: total))
        }
        // With a rate, each tick's bytes have arrived at the tick's end.
        if rate == nil { next() } else { after(ScriptedNetwork.tick, next) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
