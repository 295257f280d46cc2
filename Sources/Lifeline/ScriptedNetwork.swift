/// `lifeline simulate`'s network: the scenario's `http` lines decide what every request gets, in
/// virtual time. Nothing here touches the real network.
///
/// On `send`, among the rules whose time has come, the first in file order that matches the
/// request decides: a status is a response after the rule's delay, `refuse` a connect failure after
/// its delay, `hang` no answer at all (the host's timeout ends the request). A request that no rule
/// matches is refused at once.
///
/// Threading: main executor only. The host's network session calls `send` from a job on the
/// executor, and every answer is a job scheduled on that executor, so runs are deterministic.
public final class ScriptedNetwork: HTTPTransport, @unchecked Sendable {
    /// The scenario's `http` lines, in file order.
    public let rules: [NetworkRule]
    private let executor: MainExecutor
    private let fileName: String

    /// - Parameter fileName: the scenario's name, for the messages that point at its lines.
    public init(rules: [NetworkRule], executor: MainExecutor, fileName: String = "the scenario") {
        self.rules = rules
        self.executor = executor
        self.fileName = fileName
    }

    /// The rule that decides `request` now: the first in file order whose time has come and that
    /// matches it. nil when none does.
    public func rule(for request: HTTPRequest) -> NetworkRule? {
        guard let url = HTTPURL(request.url) else { return nil }
        let now = executor.now
        return rules.first { $0.time <= now && $0.matches(method: request.method, url: url) }
    }

    public func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        let answer: (delay: Double, result: Result<HTTPResponse, HTTPFailure>)
        if let rule = rule(for: request) {
            let at = "\(fileName):\(rule.line)"
            switch rule.result {
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
                    let headers = [HTTPHeader("Content-Type", json ? "application/json" : "text/plain")]
                    answer = (delay, .success(HTTPResponse(status: status, headers: headers, body: bytes)))
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
